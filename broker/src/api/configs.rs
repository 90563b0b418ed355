//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topic configs
//! (broker configs are read-only).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as AlterResponse;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalAlterResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::log::{topic, topic_config};

use super::{Api, code};

/// Kafka's ConfigResource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

impl Api {
    pub(super) async fn describe_configs(
        &self,
        req: DescribeConfigsRequest,
    ) -> DescribeConfigsResponse {
        let mut results = Vec::new();
        for r in req.resources {
            let name = r.resource_name.as_str().to_owned();
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let result = match r.resource_type {
                TOPIC => match topic::lookup(self.vfs.as_ref(), &name).await {
                    Ok(Some(meta)) => match topic_config::read(self.vfs.as_ref(), &meta.id).await {
                        Ok((_, overrides)) => {
                            let wanted = r.configuration_keys.as_ref().map(|keys| {
                                keys.iter()
                                    .map(|k| k.as_str().to_owned())
                                    .collect::<Vec<_>>()
                            });
                            let configs = topic_config::effective(&overrides)
                                .into_iter()
                                .filter(|(k, _, _)| wanted.as_ref().is_none_or(|w| w.contains(k)))
                                .map(|(k, v, default)| {
                                    DescribeConfigsResourceResult::default()
                                        .with_name(StrBytes::from_string(k))
                                        .with_value(Some(StrBytes::from_string(v)))
                                        .with_config_source(if default { 5 } else { 1 })
                                })
                                .collect();
                            result.with_configs(configs)
                        }
                        Err(_) => result.with_error_code(code(ResponseError::KafkaStorageError)),
                    },
                    Ok(None) => {
                        result.with_error_code(code(ResponseError::UnknownTopicOrPartition))
                    }
                    Err(_) => result.with_error_code(code(ResponseError::KafkaStorageError)),
                },
                // Broker configs: none are settable; an empty list is the truth.
                BROKER => result,
                _ => result.with_error_code(code(ResponseError::InvalidRequest)),
            };
            results.push(result);
        }
        DescribeConfigsResponse::default().with_results(results)
    }

    /// Validates and stores a config change of one topic; `Err` is the code
    /// and message to answer.
    async fn alter_topic(
        &self,
        name: &str,
        changes: Vec<(String, Option<String>)>,
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
        for (k, v) in &changes {
            if let Some(v) = v {
                topic_config::validate(k, v)
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
            for (k, v) in &changes {
                match v {
                    Some(v) => o.insert(k.clone(), v.clone()),
                    None => o.remove(k),
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
        changes: Vec<(String, Option<String>)>,
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
                .map(|c| match c.config_operation {
                    0 => Ok((
                        c.name.as_str().to_owned(),
                        c.value.as_ref().map(|v| v.as_str().to_owned()),
                    )),
                    1 => Ok((c.name.as_str().to_owned(), None)),
                    op => Err(format!(
                        "operation {op} on {} is not supported",
                        c.name.as_str()
                    )),
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
                        c.value.as_ref().map(|v| v.as_str().to_owned()),
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
