//! DescribeLogDirs: every broker has one log directory, the shared volume
//! (its data directory), and reports the partitions it leads there, with
//! their sizes. In Kafka a broker lists its replicas; a kaas partition has
//! exactly one copy, on the volume, written by its leader, so the leader is
//! the one that lists it (offset lag 0) and the other brokers do not. The
//! volume's size and free bytes are the filesystem's, as the leader's host
//! sees them.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Api;

impl Api {
    pub(super) async fn describe_log_dirs(
        &self,
        r: DescribeLogDirsRequest,
    ) -> DescribeLogDirsResponse {
        // `None`: every partition; else topic name -> partitions asked for.
        let wanted: Option<BTreeMap<String, Vec<i32>>> = r.topics.map(|ts| {
            ts.into_iter()
                .map(|t| (t.topic.0.to_string(), t.partitions))
                .collect()
        });
        let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
        let mut names: BTreeMap<String, Option<String>> = BTreeMap::new();
        for ((id, partition), log) in self.leaders.led() {
            // A topic deleted meanwhile (no meta) is not listed.
            let Some(name) = self.memo_name_by_id(&mut names, &id).await else {
                continue;
            };
            let asked = wanted.as_ref().is_none_or(|w| {
                w.get(&name)
                    .is_some_and(|ps| ps.contains(&(partition as i32)))
            });
            if !asked {
                continue;
            }
            topics.entry(name).or_default().push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(partition as i32)
                    .with_partition_size(i64::try_from(log.size_bytes()).unwrap_or(i64::MAX))
                    .with_offset_lag(0)
                    .with_is_future_key(false),
            );
        }
        let (total, usable) = match self.vfs.space().await {
            Ok(Some(s)) => (
                i64::try_from(s.total_bytes).unwrap_or(i64::MAX),
                i64::try_from(s.available_bytes).unwrap_or(i64::MAX),
            ),
            // -1: unknown, as Kafka answers for a directory it cannot stat.
            Ok(None) | Err(_) => (-1, -1),
        };
        let result = DescribeLogDirsResult::default()
            .with_log_dir(StrBytes::from_string(self.config.log_dir.clone()))
            .with_total_bytes(total)
            .with_usable_bytes(usable)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        DescribeLogDirsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(name)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        DescribeLogDirsResponse::default().with_results(vec![result])
    }
}
