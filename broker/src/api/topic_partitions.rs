//! DescribeTopicPartitions (KIP-966, what newer admin clients use to
//! describe topics): Metadata's view of topics and leaders, sorted by
//! name, paginated by a cursor and a partition limit. Replicas and ISR are
//! the leader alone; there are no eligible leader replicas (one copy).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
};

use super::{Api, code, is_internal, lookup_error, name_of, topic_name, uuid_of};
use std::collections::BTreeMap;

use crate::log::topic;
use crate::log::topic::TopicMeta;

/// Kafka's `max.request.partition.size.limit`: a request asks for at most
/// this many partitions per response, whatever its own limit.
const PARTITION_LIMIT: usize = 2000;

impl Api {
    pub(super) async fn describe_topic_partitions(
        &self,
        r: DescribeTopicPartitionsRequest,
    ) -> DescribeTopicPartitionsResponse {
        let listed = !r.topics.is_empty();
        // Every topic's meta is read with the listing; asked-for names are
        // looked up one by one below.
        let mut known: BTreeMap<String, TopicMeta> = BTreeMap::new();
        let mut names: Vec<String> = if listed {
            r.topics
                .iter()
                .map(|t| name_of(&t.name).to_owned())
                .collect()
        } else {
            known = self
                .all_topic_metas()
                .await
                .into_iter()
                .map(|m| (m.name.clone(), m))
                .collect();
            known.keys().cloned().collect()
        };
        names.sort();
        names.dedup();
        let (from_topic, from_partition) = match &r.cursor {
            Some(c) => (
                Some(name_of(&c.topic_name).to_owned()),
                c.partition_index.max(0),
            ),
            None => (None, 0),
        };
        // Kafka refuses a cursor outside the topics asked for (every topic
        // answers INVALID_REQUEST); for "every topic", a cursor topic deleted
        // meanwhile is passed at its place in the order.
        if listed && from_topic.as_ref().is_some_and(|t| !names.contains(t)) {
            let topics = names
                .into_iter()
                .map(|n| {
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(topic_name(&n)))
                        .with_error_code(code(ResponseError::InvalidRequest))
                })
                .collect();
            return DescribeTopicPartitionsResponse::default().with_topics(topics);
        }
        let limit = usize::try_from(r.response_partition_limit)
            .ok()
            .filter(|l| *l > 0)
            .map_or(PARTITION_LIMIT, |l| l.min(PARTITION_LIMIT));
        let a = self.current();
        let mut left = limit;
        let mut topics = Vec::new();
        let mut next_cursor = None;
        for name in names
            .into_iter()
            .filter(|n| from_topic.as_ref().is_none_or(|t| n >= t))
        {
            let first = if from_topic.as_deref() == Some(name.as_str()) {
                from_partition as u32
            } else {
                0
            };
            let base = DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(&name)))
                .with_is_internal(is_internal(&name))
                .with_topic_authorized_operations(i32::MIN);
            let looked_up = match known.remove(&name) {
                Some(m) => Ok(Some(m)),
                None => topic::lookup(self.vfs.as_ref(), &name).await,
            };
            let meta = match looked_up {
                Ok(Some(m)) => m,
                Ok(None) => {
                    if listed {
                        topics.push(
                            base.with_error_code(code(ResponseError::UnknownTopicOrPartition)),
                        );
                    }
                    continue;
                }
                Err(e) => {
                    topics.push(base.with_error_code(lookup_error(&e)));
                    continue;
                }
            };
            if left == 0 {
                next_cursor = Some(Cursor::default().with_topic_name(topic_name(&name)));
                break;
            }
            let mut partitions = Vec::new();
            for p in first..meta.partitions {
                if left == 0 {
                    next_cursor = Some(
                        Cursor::default()
                            .with_topic_name(topic_name(&name))
                            .with_partition_index(p as i32),
                    );
                    break;
                }
                left -= 1;
                partitions.push(described_partition(a.as_ref(), &meta.id, p));
            }
            topics.push(
                base.with_topic_id(uuid_of(&meta))
                    .with_partitions(partitions),
            );
            if next_cursor.is_some() {
                break;
            }
        }
        DescribeTopicPartitionsResponse::default()
            .with_topics(topics)
            .with_next_cursor(next_cursor)
    }
}

/// One partition as the assignment `a` has it.
fn described_partition(
    a: Option<&crate::cluster::assignment::Assignment>,
    topic_id: &str,
    p: u32,
) -> DescribeTopicPartitionsResponsePartition {
    let part = DescribeTopicPartitionsResponsePartition::default().with_partition_index(p as i32);
    let offline = a.is_some_and(|a| a.is_offline(topic_id, p));
    match a.and_then(|a| a.leadership(topic_id, p)) {
        // Held offline by its leader: damaged files (Metadata too).
        Some(l) if offline => {
            let replica = BrokerId(l.leader as i32);
            part.with_error_code(code(ResponseError::LeaderNotAvailable))
                .with_leader_id(BrokerId(-1))
                .with_leader_epoch(l.leader_epoch as i32)
                .with_replica_nodes(vec![replica])
                .with_offline_replicas(vec![replica])
        }
        Some(l) => {
            let leader = BrokerId(l.leader as i32);
            part.with_leader_id(leader)
                .with_leader_epoch(l.leader_epoch as i32)
                .with_replica_nodes(vec![leader])
                .with_isr_nodes(vec![leader])
        }
        None => part
            .with_error_code(code(ResponseError::LeaderNotAvailable))
            .with_leader_id(BrokerId(-1))
            .with_leader_epoch(-1),
    }
}
