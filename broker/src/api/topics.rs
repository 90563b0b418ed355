//! CreateTopics and DeleteTopics.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::log::topic::{TopicError, TopicMeta};
use crate::log::topic_config::Overrides;
use crate::log::{topic, topic_config};

use super::{Api, code, is_internal, lookup_error, name_of, topic_name, uuid_of};

/// Kafka's limit on the partitions one CreateTopics or CreatePartitions
/// request may add (KAFKA-17870, KAFKA-19673): a client asking for two
/// billion would otherwise have the broker make directories until the
/// volume is full.
pub(super) const MAX_NEW_PARTITIONS_PER_REQUEST: i64 = 10_000;

/// Kafka's message for it, with the figures.
pub(super) fn excessive(requested: i64) -> String {
    format!(
        "Excessively large number of partitions per request: {requested} new partitions, \
         at most {MAX_NEW_PARTITIONS_PER_REQUEST}"
    )
}

impl Api {
    /// A CreatableTopic's partition count, -1 meaning the broker's default.
    fn partitions_of(&self, num_partitions: i32) -> i32 {
        if num_partitions == -1 {
            self.config.default_partitions as i32
        } else {
            num_partitions
        }
    }

    pub(super) async fn create_topics(
        &self,
        req: CreateTopicsRequest,
        version: i16,
    ) -> CreateTopicsResponse {
        let mut results = Vec::new();
        let mut created = Vec::new();
        let requested: i64 = req
            .topics
            .iter()
            .map(|t| self.partitions_of(t.num_partitions).max(0) as i64)
            .sum();
        let too_many = requested > MAX_NEW_PARTITIONS_PER_REQUEST;
        for t in req.topics {
            let name = name_of(&t.name).to_owned();
            let partitions = self.partitions_of(t.num_partitions);
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let result = if version >= 5 {
                result
                    .with_num_partitions(partitions)
                    .with_replication_factor(1)
            } else {
                result
            };
            let overrides: Overrides = t
                .configs
                .iter()
                .filter_map(|c| {
                    c.value
                        .as_ref()
                        .map(|v| (c.name.as_str().to_owned(), v.as_str().to_owned()))
                })
                .collect();
            let bad_config = overrides
                .iter()
                .find_map(|(k, v)| topic_config::validate(k, v).err());
            let error = if too_many {
                Some((ResponseError::PolicyViolation, excessive(requested)))
            } else if let Err(e) = topic::validate_name(&name) {
                Some((ResponseError::InvalidTopicException, e.to_string()))
            } else if is_internal(&name) {
                Some((
                    ResponseError::InvalidRequest,
                    format!(
                        "{name} is an internal topic of Kafka's; kaas keeps its content as files \
                         on the volume, and it cannot be created"
                    ),
                ))
            } else if partitions < 1 {
                Some((
                    ResponseError::InvalidPartitions,
                    format!("{partitions} partitions"),
                ))
            } else if let Some(why) = bad_config {
                Some((ResponseError::InvalidConfig, why))
            } else if t.replication_factor == 0 || t.replication_factor < -1 {
                Some((
                    ResponseError::InvalidReplicationFactor,
                    format!("replication factor {}", t.replication_factor),
                ))
            } else {
                None
            };
            let result = match error {
                Some((e, msg)) => result
                    .with_error_code(code(e))
                    .with_error_message(Some(StrBytes::from_string(msg))),
                None if req.validate_only => match topic::lookup(self.vfs.as_ref(), &name).await {
                    Ok(Some(_)) => exists(result, &name),
                    _ => result,
                },
                None => {
                    match topic::create_topic_with(
                        self.vfs.as_ref(),
                        &self.creator(),
                        &name,
                        partitions as u32,
                        &overrides,
                    )
                    .await
                    {
                        Ok(meta) => {
                            created.push((meta.id.clone(), meta.partitions));
                            if version >= 7 {
                                result.with_topic_id(uuid_of(&meta))
                            } else {
                                result
                            }
                        }
                        Err(TopicError::Exists(_)) => exists(result, &name),
                        Err(e) => result
                            .with_error_code(code(ResponseError::KafkaStorageError))
                            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                    }
                }
            };
            // As Kafka: what a failed topic would have had is unknown (-1).
            let result = if result.error_code != 0 {
                result.with_num_partitions(-1).with_replication_factor(-1)
            } else {
                result
            };
            results.push(result);
        }
        self.announce(&created);
        self.await_leaders_within(&created, req.timeout_ms).await;
        CreateTopicsResponse::default().with_topics(results)
    }

    pub(super) async fn delete_topics(
        &self,
        req: DeleteTopicsRequest,
        version: i16,
    ) -> DeleteTopicsResponse {
        let mut wanted: Vec<(Option<String>, Uuid)> = req
            .topic_names
            .iter()
            .map(|n| (Some(name_of(n).to_owned()), Uuid::nil()))
            .collect();
        wanted.extend(
            req.topics
                .iter()
                .map(|t| (t.name.as_ref().map(|n| name_of(n).to_owned()), t.topic_id)),
        );
        let mut results = Vec::new();
        for (name, id) in wanted {
            // A lookup that failed says nothing about the topic: the client
            // must retry, not conclude that it does not exist.
            let meta = match &name {
                Some(n) => topic::lookup(self.vfs.as_ref(), n)
                    .await
                    .map_err(|e| lookup_error(&e)),
                // By id: the topic's own directory, read fresh.
                None => self.meta_by_id(id).await,
            };
            let result = DeletableTopicResult::default()
                .with_name(name.as_deref().map(topic_name))
                .with_topic_id(id);
            let result = match meta {
                Err(c) => result.with_error_code(c),
                Ok(None) => result.with_error_code(if name.is_some() {
                    code(ResponseError::UnknownTopicOrPartition)
                } else {
                    code(ResponseError::UnknownTopicId)
                }),
                Ok(Some(m)) => match self.delete_and_reap(&m).await {
                    Ok(()) if version >= 6 => result
                        .with_name(Some(topic_name(&m.name)))
                        .with_topic_id(uuid_of(&m)),
                    Ok(()) => result.with_name(Some(topic_name(&m.name))),
                    Err(e) if version >= 5 => result
                        .with_error_code(code(ResponseError::KafkaStorageError))
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                    Err(_) => result.with_error_code(code(ResponseError::KafkaStorageError)),
                },
            };
            results.push(result);
        }
        DeleteTopicsResponse::default().with_responses(results)
    }

    /// Deletes a topic, then keeps removing its files in the background
    /// (for up to ten minutes; the controller's sweep does the rest).
    async fn delete_and_reap(&self, meta: &TopicMeta) -> std::io::Result<()> {
        let deleted = topic::delete_topic(self.vfs.as_ref(), meta).await;
        // Even a failed call may have renamed the topic to its tombstone
        // (the name's release is what failed, or a reply was lost); reaping
        // a tombstone that is not there is a no-op.
        let vfs = self.vfs.clone();
        let id = meta.id.clone();
        tokio::spawn(async move { topic::reap_tombstone(vfs.as_ref(), &id, 300).await });
        deleted
    }
}

fn exists(result: CreatableTopicResult, name: &str) -> CreatableTopicResult {
    result
        .with_error_code(code(ResponseError::TopicAlreadyExists))
        .with_error_message(Some(StrBytes::from_string(format!(
            "Topic '{name}' already exists."
        ))))
}
