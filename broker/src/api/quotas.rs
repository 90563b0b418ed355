//! DescribeClientQuotas and AlterClientQuotas (KIP-546), and the throttling
//! of produce and fetch by the quotas (`crate::quota`).
//!
//! kaas enforces `producer_byte_rate` and `consumer_byte_rate` for users,
//! client ids and both. Other quota keys (`request_percentage`,
//! `controller_mutation_rate`, `connection_creation_rate`) and `ip`
//! entities are refused with INVALID_REQUEST rather than stored and not
//! enforced.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_response::{
    EntityData as DescribedEntity, EntryData as DescribedEntry, ValueData,
};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, FetchResponse, ProduceRequest, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;

use super::{Api, code};
use crate::quota::{ClientQuotas, Entity, Kind, Name};
use crate::security::Session;
use crate::security::versioned::ChangeError;

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";

/// Keys Kafka knows that kaas does not enforce.
const UNENFORCED: &[&str] = &[
    "request_percentage",
    "controller_mutation_rate",
    "connection_creation_rate",
];

fn text(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

fn client_id(header: &RequestHeader) -> &str {
    header.client_id.as_ref().map_or("", |c| c.as_str())
}

fn invalid(why: impl Into<String>) -> (i16, Option<String>) {
    (code(ResponseError::InvalidRequest), Some(why.into()))
}

/// An entity as the wire names it: (type, name; `None` = the default).
fn entity_of<'a>(
    parts: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<Entity, (i16, Option<String>)> {
    let mut e = Entity::default();
    let mut any = false;
    for (kind, name) in parts {
        any = true;
        let slot = match kind {
            USER => &mut e.user,
            CLIENT_ID => &mut e.client_id,
            "ip" => {
                return Err(invalid(
                    "kaas does not enforce ip quotas (connection_creation_rate); it enforces \
                     producer_byte_rate and consumer_byte_rate for users and client ids",
                ));
            }
            other => return Err(invalid(format!("unknown entity type {other:?}"))),
        };
        if slot.is_some() {
            return Err(invalid(format!("entity type {kind:?} named twice")));
        }
        *slot = Some(Name::from_wire(name));
    }
    if !any {
        return Err(invalid("an entity names at least one entity type"));
    }
    Ok(e)
}

/// The wire form of an entity: its (type, name) pairs.
fn parts_of(e: &Entity) -> Vec<(&'static str, Option<&str>)> {
    let mut parts = Vec::new();
    if let Some(u) = &e.user {
        parts.push((USER, u.wire()));
    }
    if let Some(c) = &e.client_id {
        parts.push((CLIENT_ID, c.wire()));
    }
    parts
}

/// A quota value: a positive whole number of bytes per second.
fn rate_of(key: &str, value: f64) -> Result<u64, (i16, Option<String>)> {
    if !(value.is_finite() && value >= 1.0 && value.fract() == 0.0 && value <= 2f64.powi(53)) {
        return Err(invalid(format!(
            "{key} must be a whole number of bytes per second, at least 1 (got {value}); \
             remove the quota to lift it"
        )));
    }
    Ok(value as u64)
}

/// One entry of an AlterClientQuotas request, checked.
struct Change {
    entity: Entity,
    ops: Vec<(Kind, Option<u64>)>,
}

fn change_of(
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
) -> Result<Change, (i16, Option<String>)> {
    let entity = entity_of(
        entry
            .entity
            .iter()
            .map(|p| (p.entity_type.as_str(), p.entity_name.as_deref())),
    )?;
    let mut ops = Vec::new();
    for op in &entry.ops {
        let key = op.key.as_str();
        let Some(kind) = Kind::from_key(key) else {
            return Err(if UNENFORCED.contains(&key) {
                invalid(format!(
                    "kaas does not enforce {key}; it enforces producer_byte_rate and \
                     consumer_byte_rate"
                ))
            } else {
                invalid(format!("unknown quota key {key:?}"))
            });
        };
        if ops.iter().any(|(k, _)| *k == kind) {
            return Err(invalid(format!("{key} changed twice in one entry")));
        }
        let rate = if op.remove {
            None
        } else {
            Some(rate_of(key, op.value)?)
        };
        ops.push((kind, rate));
    }
    Ok(Change { entity, ops })
}

/// The edit found nothing to change.
struct Unchanged;

impl Api {
    /// Spends a produce request's record bytes from its client's quota;
    /// the throttle, in milliseconds, for its response (the connection is
    /// muted for as long).
    pub(super) fn charge_produce(
        &self,
        session: &mut Session,
        header: &RequestHeader,
        r: &ProduceRequest,
    ) -> i32 {
        let bytes: usize = r
            .topic_data
            .iter()
            .flat_map(|t| &t.partition_data)
            .filter_map(|p| p.records.as_ref().map(|r| r.len()))
            .sum();
        let user = &session.principal.name;
        let throttle = self
            .quotas
            .charge(Kind::Produce, user, client_id(header), bytes);
        self.throttled(session, Kind::Produce, throttle)
    }

    /// A fetch of a client still paying off its quota: answered at once
    /// with no records and the time left (as Kafka does), the connection
    /// muted for as long.
    pub(super) fn fetch_throttled(
        &self,
        session: &mut Session,
        header: &RequestHeader,
    ) -> Option<FetchResponse> {
        let user = &session.principal.name;
        let debt = self.quotas.debt(Kind::Fetch, user, client_id(header));
        if debt.is_zero() {
            return None;
        }
        let ms = self.throttled(session, Kind::Fetch, debt);
        Some(FetchResponse::default().with_throttle_time_ms(ms))
    }

    /// Spends a fetch response's record bytes from its client's quota and
    /// sets its throttle.
    pub(super) fn charge_fetch(
        &self,
        session: &mut Session,
        header: &RequestHeader,
        r: &mut FetchResponse,
    ) {
        let bytes: usize = r
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .filter_map(|p| p.records.as_ref().map(|r| r.len()))
            .sum();
        if bytes == 0 {
            return;
        }
        let user = &session.principal.name;
        let throttle = self
            .quotas
            .charge(Kind::Fetch, user, client_id(header), bytes);
        r.throttle_time_ms = self.throttled(session, Kind::Fetch, throttle);
    }

    fn throttled(&self, session: &mut Session, kind: Kind, throttle: Duration) -> i32 {
        if throttle.is_zero() {
            return 0;
        }
        self.metrics.throttled(kind.key(), throttle);
        session.mute_for(throttle);
        i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX)
    }

    pub(super) async fn describe_client_quotas(
        &self,
        r: DescribeClientQuotasRequest,
    ) -> DescribeClientQuotasResponse {
        // (type, name wanted: Some(None) = the default, None = any).
        let mut wanted: Vec<(&str, Option<Option<&str>>)> = Vec::new();
        for c in &r.components {
            let kind = c.entity_type.as_str();
            if ![USER, CLIENT_ID, "ip"].contains(&kind) {
                return refused(invalid(format!("unknown entity type {kind:?}")));
            }
            if wanted.iter().any(|(k, _)| *k == kind) {
                return refused(invalid(format!("entity type {kind:?} named twice")));
            }
            let name = match (c.match_type, c._match.as_deref()) {
                (0, Some(n)) => Some(Some(n)),
                (1, None) => Some(None),
                (2, None) => None,
                (t, m) => {
                    return refused(invalid(format!(
                        "match type {t} with match {m:?} (0: a name, 1: the default, 2: any)"
                    )));
                }
            };
            wanted.push((kind, name));
        }
        // Read fresh, so that a change just made on another broker shows.
        if let Err(e) = self.quotas.refresh().await {
            return refused((code(ResponseError::KafkaStorageError), Some(e.to_string())));
        }
        let (_, doc) = self.quotas.applied();
        let entries = doc
            .entries
            .iter()
            .filter(|(e, _)| {
                let parts = parts_of(e);
                (!r.strict || parts.len() == wanted.len())
                    && wanted.iter().all(|(kind, name)| {
                        parts
                            .iter()
                            .any(|(k, n)| k == kind && name.is_none_or(|want| want == *n))
                    })
            })
            .map(|(e, limits)| {
                DescribedEntry::default()
                    .with_entity(
                        parts_of(e)
                            .into_iter()
                            .map(|(k, n)| {
                                DescribedEntity::default()
                                    .with_entity_type(StrBytes::from_static_str(k))
                                    .with_entity_name(n.map(|n| StrBytes::from_string(n.into())))
                            })
                            .collect(),
                    )
                    .with_values(
                        Kind::ALL
                            .into_iter()
                            .filter_map(|k| {
                                limits.get(k).map(|v| {
                                    ValueData::default()
                                        .with_key(StrBytes::from_static_str(k.key()))
                                        .with_value(v as f64)
                                })
                            })
                            .collect(),
                    )
            })
            .collect();
        DescribeClientQuotasResponse::default().with_entries(Some(entries))
    }

    pub(super) async fn alter_client_quotas(
        &self,
        r: AlterClientQuotasRequest,
    ) -> AlterClientQuotasResponse {
        let checked: Vec<_> = r.entries.iter().map(change_of).collect();
        let changes: Vec<&Change> = checked.iter().filter_map(|c| c.as_ref().ok()).collect();
        let mut failed = None;
        if !r.validate_only && !changes.is_empty() {
            let edit = |doc: &mut ClientQuotas| {
                let before = doc.clone();
                for c in &changes {
                    for (kind, rate) in &c.ops {
                        doc.set(&c.entity, *kind, *rate);
                    }
                }
                if *doc == before {
                    Err(Unchanged)
                } else {
                    Ok(())
                }
            };
            match self.quotas.change(edit).await {
                Ok(_) | Err(ChangeError::Refused(Unchanged)) => {}
                Err(ChangeError::Volume(e)) => {
                    let (error, message) = super::document_not_changed("client quotas", &e);
                    failed = Some((error, Some(message)));
                }
            }
        }
        // The entities as asked, each with its outcome.
        let mut response = refused_alter(&r, 0);
        for (entry, outcome) in response.entries.iter_mut().zip(checked) {
            let (error, message) = match outcome {
                Err(refusal) => refusal,
                Ok(_) => failed.clone().unwrap_or((0, None)),
            };
            entry.error_code = error;
            entry.error_message = message.and_then(text);
        }
        response
    }
}

/// A DescribeClientQuotas request refused whole.
fn refused((error, message): (i16, Option<String>)) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default()
        .with_error_code(error)
        .with_error_message(message.and_then(text))
        .with_entries(None)
}

/// Both quota requests refused by the authorizer.
pub(crate) fn refused_describe(error: i16) -> DescribeClientQuotasResponse {
    refused((error, None))
}

pub(crate) fn refused_alter(r: &AlterClientQuotasRequest, error: i16) -> AlterClientQuotasResponse {
    crate::protocol::unsupported::alter_client_quotas_refused(r, error)
}
