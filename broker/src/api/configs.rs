//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topic configs
//! (broker configs are read-only: kaas takes them from flags).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as AlterResponse;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalAlterResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::log::config_defs::{self, ConfigDef, ConfigType, Effect};
use crate::log::topic_config::Change;
use crate::log::{topic, topic_config};

use super::{Api, code};

/// Kafka's ConfigResource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

/// Kafka's ConfigSource codes.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

/// Broker configs kaas fixes (no replication, one volume), as Kafka names
/// them: `(name, value, type, documentation)`.
const FIXED_BROKER_CONFIGS: &[(&str, &str, ConfigType, &str)] = &[
    (
        "default.replication.factor",
        "1",
        ConfigType::Int,
        "kaas keeps one copy of each partition on the shared volume; every topic reports replication factor 1.",
    ),
    (
        "delete.topic.enable",
        "true",
        ConfigType::Boolean,
        "Topics can always be deleted.",
    ),
    (
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT",
        ConfigType::String,
        "kaas serves plaintext only for now.",
    ),
    (
        "offsets.topic.replication.factor",
        "1",
        ConfigType::Int,
        "Committed offsets are files on the shared volume, not an internal topic.",
    ),
    (
        "transaction.state.log.min.isr",
        "1",
        ConfigType::Int,
        "kaas does not serve transactions yet.",
    ),
    (
        "transaction.state.log.replication.factor",
        "1",
        ConfigType::Int,
        "kaas does not serve transactions yet.",
    ),
];

/// What the caller asked to see of one resource.
struct Wanted {
    keys: Option<Vec<String>>,
    synonyms: bool,
    documentation: bool,
}

impl Wanted {
    fn includes(&self, name: &str) -> bool {
        self.keys
            .as_ref()
            .is_none_or(|k| k.iter().any(|k| k == name))
    }
}

#[allow(clippy::too_many_arguments)]
fn entry(
    w: &Wanted,
    name: &str,
    value: &str,
    source: i8,
    read_only: bool,
    kind: ConfigType,
    doc: &str,
    synonyms: Vec<DescribeConfigsSynonym>,
) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(name.to_owned()))
        .with_value(Some(StrBytes::from_string(value.to_owned())))
        .with_read_only(read_only)
        .with_config_source(source)
        .with_config_type(kind as i8)
        .with_synonyms(if w.synonyms { synonyms } else { Vec::new() })
        .with_documentation(
            w.documentation
                .then(|| StrBytes::from_string(doc.to_owned())),
        )
}

fn synonym(name: &str, value: &str, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(StrBytes::from_string(name.to_owned()))
        .with_value(Some(StrBytes::from_string(value.to_owned())))
        .with_source(source)
}

/// A topic config's documentation, with what it does in kaas.
fn topic_doc(d: &ConfigDef) -> String {
    match d.effect {
        Effect::Honoured => d.doc.to_owned(),
        Effect::None(why) => format!("{} Accepted and reported, no effect: {why}.", d.doc),
    }
}

impl Api {
    pub(super) async fn describe_configs(
        &self,
        req: DescribeConfigsRequest,
    ) -> DescribeConfigsResponse {
        let mut results = Vec::new();
        for r in req.resources {
            let name = r.resource_name.as_str().to_owned();
            let wanted = Wanted {
                keys: r
                    .configuration_keys
                    .as_ref()
                    .map(|keys| keys.iter().map(|k| k.as_str().to_owned()).collect()),
                synonyms: req.include_synonyms,
                documentation: req.include_documentation,
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let result = match r.resource_type {
                TOPIC => match self.topic_configs(&name, &wanted).await {
                    Ok(configs) => result.with_configs(configs),
                    Err((c, why)) => result
                        .with_error_code(c)
                        .with_error_message(Some(StrBytes::from_string(why))),
                },
                BROKER if self.is_this_broker(&name) => {
                    result.with_configs(self.broker_configs(&wanted))
                }
                BROKER => result
                    .with_error_code(code(ResponseError::InvalidRequest))
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "this is broker {}; ask broker {name} for its configs",
                        self.config.broker_id
                    )))),
                _ => result
                    .with_error_code(code(ResponseError::InvalidRequest))
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "config resource type {} is not served by kaas",
                        r.resource_type
                    )))),
            };
            results.push(result);
        }
        DescribeConfigsResponse::default().with_results(results)
    }

    /// An empty name is the cluster-wide default, which kaas answers with
    /// this broker's view (they agree: brokers cannot be configured apart
    /// but for their id and addresses).
    fn is_this_broker(&self, name: &str) -> bool {
        name.is_empty()
            || name
                .parse::<u32>()
                .is_ok_and(|b| b == self.config.broker_id)
    }

    async fn topic_configs(
        &self,
        name: &str,
        w: &Wanted,
    ) -> Result<Vec<DescribeConfigsResourceResult>, (i16, String)> {
        let meta = match topic::lookup(self.vfs.as_ref(), name).await {
            Ok(Some(meta)) => meta,
            Ok(None) => {
                return Err((
                    code(ResponseError::UnknownTopicOrPartition),
                    format!("no topic {name}"),
                ));
            }
            Err(e) => return Err((code(ResponseError::KafkaStorageError), e.to_string())),
        };
        let (_, overrides) = topic_config::read(self.vfs.as_ref(), &meta.id)
            .await
            .map_err(|e| (code(ResponseError::KafkaStorageError), e.to_string()))?;
        Ok(topic_config::effective(&overrides)
            .into_iter()
            .filter(|(d, _, _)| w.includes(d.name))
            .map(|(d, value, default)| {
                let mut synonyms = Vec::new();
                if !default {
                    synonyms.push(synonym(d.name, &value, DYNAMIC_TOPIC_CONFIG));
                }
                if let Some(b) = d.broker_synonym {
                    synonyms.push(synonym(b, d.default, DEFAULT_CONFIG));
                }
                let source = if default {
                    DEFAULT_CONFIG
                } else {
                    DYNAMIC_TOPIC_CONFIG
                };
                entry(
                    w,
                    d.name,
                    &value,
                    source,
                    false,
                    d.kind,
                    &topic_doc(d),
                    synonyms,
                )
            })
            .collect())
    }

    /// This broker's configs: its flags under Kafka's names, what kaas
    /// fixes, and the broker defaults of every topic config. All read-only
    /// (kaas takes its settings from flags and variables).
    fn broker_configs(&self, w: &Wanted) -> Vec<DescribeConfigsResourceResult> {
        let mut out: Vec<(String, String, i8, ConfigType, String)> = Vec::new();
        for c in &self.config.broker_configs {
            let source = if c.explicit {
                STATIC_BROKER_CONFIG
            } else {
                DEFAULT_CONFIG
            };
            let kind = match c.value.as_str() {
                "true" | "false" => ConfigType::Boolean,
                v if v.parse::<i64>().is_ok() => ConfigType::Int,
                _ => ConfigType::String,
            };
            out.push((
                c.name.clone(),
                c.value.clone(),
                source,
                kind,
                "Set by a kaas flag or KAAS_* variable (kaas --help).".into(),
            ));
        }
        for (name, value, kind, doc) in FIXED_BROKER_CONFIGS {
            out.push((
                (*name).into(),
                (*value).into(),
                DEFAULT_CONFIG,
                *kind,
                (*doc).into(),
            ));
        }
        for d in config_defs::TOPIC_CONFIGS {
            if let Some(b) = d.broker_synonym {
                if !out.iter().any(|(n, ..)| n == b) {
                    out.push((
                        b.into(),
                        d.default.into(),
                        DEFAULT_CONFIG,
                        d.kind,
                        format!("The default of topic config {}. {}", d.name, topic_doc(d)),
                    ));
                }
            }
        }
        // Kafka's hours form of the retention default, which tools read too.
        out.push((
            "log.retention.hours".into(),
            "168".into(),
            DEFAULT_CONFIG,
            ConfigType::Int,
            "log.retention.ms in hours.".into(),
        ));
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.into_iter()
            .filter(|(name, ..)| w.includes(name))
            .map(|(name, value, source, kind, doc)| {
                let synonyms = vec![synonym(&name, &value, source)];
                entry(w, &name, &value, source, true, kind, &doc, synonyms)
            })
            .collect()
    }

    /// Validates and stores a config change of one topic; `Err` is the code
    /// and message to answer.
    async fn alter_topic(
        &self,
        name: &str,
        changes: Vec<(String, Change)>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), (i16, String)> {
        let meta = match topic::lookup(self.vfs.as_ref(), name).await {
            Ok(Some(m)) => m,
            Ok(None) => {
                return Err((
                    code(ResponseError::UnknownTopicOrPartition),
                    format!("no topic {name}"),
                ));
            }
            Err(e) => return Err((code(ResponseError::KafkaStorageError), e.to_string())),
        };
        // APPEND and SUBTRACT are judged on the current overrides; the
        // update below applies them again to whatever version it replaces.
        let current = if changes.iter().any(|(_, c)| !matches!(c, Change::Set(_))) {
            topic_config::read(self.vfs.as_ref(), &meta.id)
                .await
                .map(|(_, o)| o)
                .map_err(|e| (code(ResponseError::KafkaStorageError), e.to_string()))?
        } else {
            Default::default()
        };
        for (k, c) in &changes {
            let v = topic_config::changed_value(&current, k, c)
                .map_err(|why| (code(ResponseError::InvalidConfig), why))?;
            if let Some(v) = v {
                topic_config::validate(k, &v)
                    .map_err(|why| (code(ResponseError::InvalidConfig), why))?;
            }
        }
        if validate_only {
            return Ok(());
        }
        topic_config::update(self.vfs.as_ref(), &meta.id, |o| {
            if replace_all {
                o.clear();
            }
            for (k, c) in &changes {
                match topic_config::changed_value(o, k, c) {
                    Ok(Some(v)) => o.insert(k.clone(), v),
                    Ok(None) => o.remove(k),
                    Err(_) => None,
                };
            }
        })
        .await
        .map(|_| ())
        .map_err(|e| (code(ResponseError::KafkaStorageError), e.to_string()))
    }

    /// Alters one config resource of either AlterConfigs flavour: only
    /// topics have settable configs.
    async fn alter_resource(
        &self,
        name: &StrBytes,
        resource_type: i8,
        changes: Vec<(String, Change)>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), (i16, String)> {
        if resource_type != TOPIC {
            return Err((
                code(ResponseError::InvalidRequest),
                "only topic configs can be altered".into(),
            ));
        }
        self.alter_topic(name.as_str(), changes, replace_all, validate_only)
            .await
    }

    pub(super) async fn incremental_alter_configs(
        &self,
        req: IncrementalAlterConfigsRequest,
    ) -> IncrementalAlterConfigsResponse {
        let mut responses = Vec::new();
        for r in req.resources {
            let mut response = IncrementalAlterResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let changes: Result<Vec<_>, String> = r
                .configs
                .iter()
                .map(|c| {
                    let value = || c.value.as_ref().map(|v| v.as_str().to_owned());
                    (c.name.as_str().to_owned(), c.config_operation, value())
                })
                .map(|(name, op, value)| match op {
                    0 => Ok((name, Change::Set(value))),
                    1 => Ok((name, Change::Set(None))),
                    2 => Ok((name, Change::Append(value.unwrap_or_default()))),
                    3 => Ok((name, Change::Subtract(value.unwrap_or_default()))),
                    op => Err(format!("operation {op} on {name} is not one of Kafka's")),
                })
                .collect();
            let outcome = match changes {
                Err(why) => Err((code(ResponseError::InvalidRequest), why)),
                Ok(changes) => {
                    self.alter_resource(
                        &r.resource_name,
                        r.resource_type,
                        changes,
                        false,
                        req.validate_only,
                    )
                    .await
                }
            };
            if let Err((c, why)) = outcome {
                response = response
                    .with_error_code(c)
                    .with_error_message(Some(StrBytes::from_string(why)));
            }
            responses.push(response);
        }
        IncrementalAlterConfigsResponse::default().with_responses(responses)
    }

    pub(super) async fn alter_configs(&self, req: AlterConfigsRequest) -> AlterConfigsResponse {
        let mut responses = Vec::new();
        for r in req.resources {
            let mut response = AlterResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let changes = r
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.as_str().to_owned(),
                        Change::Set(c.value.as_ref().map(|v| v.as_str().to_owned())),
                    )
                })
                .collect();
            let outcome = self
                .alter_resource(
                    &r.resource_name,
                    r.resource_type,
                    changes,
                    true,
                    req.validate_only,
                )
                .await;
            if let Err((c, why)) = outcome {
                response = response
                    .with_error_code(c)
                    .with_error_message(Some(StrBytes::from_string(why)));
            }
            responses.push(response);
        }
        AlterConfigsResponse::default().with_responses(responses)
    }
}
