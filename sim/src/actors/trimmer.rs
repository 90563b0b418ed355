//! A client that trims a live topic while it is written: small segments,
//! retention by size and by time (set with IncrementalAlterConfigs),
//! DeleteRecords now and then, and plain writes all along. This drives the
//! partition log's multi-step changes that the other clients never reach
//! (segment rolls, retention's manifest-then-unlink, DeleteRecords'
//! manifest write) and the topic config files.
//!
//! Its history (`Event::Trim*`) lets the checker hold the rules of a
//! trimmed log: a record below the log start offset may be gone, every
//! acknowledged record at or above it is served at its offset, and an
//! acknowledged DeleteRecords is never undone (the log start offset never
//! goes back below what it answered, in the final log or in any log start
//! a leader answers after it).

use std::time::Duration;

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DeleteRecordsRequest, IncrementalAlterConfigsRequest, ListOffsetsRequest,
    RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;

use crate::actors::{Actor, Play, Role, Stage};
use crate::history::Event;
use crate::session::Session;

pub const TRIM_TOPIC: &str = "trimmed";
pub const TRIM_PARTITIONS: i32 = 2;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// Writes and trims [`TRIM_TOPIC`] until `until`; [`final_read`] reads it
/// back once the faults healed.
pub async fn trimmer(mut s: Session, until: Duration) {
    while !s.create_topic(TRIM_TOPIC, TRIM_PARTITIONS).await {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if s.now() >= until {
            return;
        }
    }
    // Small segments so that rolls, checkpoints and retention happen every
    // few seconds.
    set_configs(&mut s, &[("segment.bytes", "600")], 20).await;
    let mut loose = false;
    let mut next_switch = s.now();
    let mut k = 0u64;
    while s.now() < until {
        if s.now() >= next_switch {
            // Retention alternates between tight (by size, about two
            // segments, and by time) and loose (most of the log stays), so
            // that DeleteRecords moves the log start by itself at times,
            // and a leader that took over under one setting sees segments
            // its predecessor judged under the other.
            let (bytes, ms) = if loose {
                ("1500", "20000")
            } else {
                ("30000", "600000")
            };
            if set_configs(
                &mut s,
                &[("retention.bytes", bytes), ("retention.ms", ms)],
                3,
            )
            .await
            {
                loose = !loose;
            }
            next_switch = s.now()
                + Duration::from_millis(madsim::rand::thread_rng().gen_range(3_000..12_000));
        }
        let partition = madsim::rand::thread_rng().gen_range(0..TRIM_PARTITIONS);
        let value = format!("trim-{partition}-{k}");
        k += 1;
        let batch =
            broker::log::batch::build((-1, -1, -1), broker::clock::now_ms(), &[value.as_bytes()]);
        if let Ok((0, offset, _)) = s.produce(TRIM_TOPIC, partition, batch).await {
            s.history.record(
                s.now(),
                Event::TrimProduced {
                    partition,
                    offset,
                    value,
                },
            );
        }
        if madsim::rand::thread_rng().gen_ratio(1, 4) {
            trim(&mut s, partition).await;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
}

/// The liveness phase's read of the trimmed topic: every partition from
/// its log start to its end, before `deadline`.
pub async fn final_read(mut s: Session, deadline: Duration) {
    for partition in 0..TRIM_PARTITIONS {
        while s.now() < deadline {
            if let Some((start, records)) = read_back(&mut s, partition).await {
                s.history.record(
                    s.now(),
                    Event::TrimFinal {
                        partition,
                        start,
                        records,
                    },
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Sets topic configs, each tried up to `tries` times; whether all were set.
async fn set_configs(s: &mut Session, configs: &[(&str, &str)], tries: u32) -> bool {
    'next: for (key, value) in configs {
        for _ in 0..tries {
            if s.alter_config(TRIM_TOPIC, key, value).await == Some(0) {
                continue 'next;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        return false;
    }
    true
}

/// The log start offset of `partition` as its leader answers it, recorded
/// with when it was asked.
async fn log_start(s: &mut Session, partition: i32) -> Option<i64> {
    let sent = s.now();
    let start = s.list_offset(TRIM_TOPIC, partition, -2).await?;
    s.history.record(
        s.now(),
        Event::TrimStart {
            partition,
            sent,
            start,
        },
    );
    Some(start)
}

/// DeleteRecords up to somewhere between the log start and the end of
/// `partition`, then a look at the log start it left.
async fn trim(s: &mut Session, partition: i32) {
    let Some(start) = log_start(s, partition).await else {
        return;
    };
    let Some(end) = s.list_offset(TRIM_TOPIC, partition, -1).await else {
        return;
    };
    if end <= start {
        return;
    }
    let offset = madsim::rand::thread_rng().gen_range(start..=end);
    if let Some((0, low_watermark)) = s.delete_records(TRIM_TOPIC, partition, offset).await {
        s.history.record(
            s.now(),
            Event::Trimmed {
                partition,
                asked: offset,
                low_watermark,
            },
        );
        // Asked until a leader answers: the broker that acknowledged may
        // have been deposed meanwhile (it refuses now), and a successor
        // that undid the DeleteRecords must be asked before its retention
        // moves the log start past the acknowledged one anyway.
        for _ in 0..10 {
            if log_start(s, partition).await.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// The whole readable log of `partition`: its log start offset, and every
/// record from there to the end, without gaps. `None` if that could not be
/// read this time.
async fn read_back(s: &mut Session, partition: i32) -> Option<(i64, Vec<(i64, String)>)> {
    let start = s.list_offset(TRIM_TOPIC, partition, -2).await?;
    let end = s.list_offset(TRIM_TOPIC, partition, -1).await?;
    let mut records = Vec::new();
    let mut next = start;
    while next < end {
        let (got, hw) = s.fetch(TRIM_TOPIC, partition, next).await?;
        if got.is_empty() {
            tracing::debug!(partition, start, end, next, hw, "trimmed read got nothing");
            return None;
        }
        for (offset, value, _) in got {
            if offset >= next {
                records.push((offset, value));
                next = offset + 1;
            }
        }
    }
    Some((start, records))
}

impl Session {
    /// ListOffsets at `timestamp` (-1 latest, -2 earliest) from the leader.
    pub(crate) async fn list_offset(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Option<i64> {
        let Some(to) = self.leader(topic, partition).await else {
            tracing::debug!(client = %self.name, topic, partition, "no leader known");
            return None;
        };
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(partition)
                            .with_timestamp(timestamp),
                    ]),
            ]);
        match self
            .client
            .call(to, ApiKey::ListOffsets, 5, RequestKind::ListOffsets(req))
            .await
        {
            Ok(ResponseKind::ListOffsets(r)) => {
                let p = r.topics.first()?.partitions.first()?;
                if p.error_code != 0 {
                    tracing::debug!(client = %self.name, topic, partition, timestamp, code = p.error_code, "list offsets refused");
                    self.forget(topic, partition);
                    return None;
                }
                Some(p.offset)
            }
            other => {
                tracing::debug!(client = %self.name, topic, partition, timestamp, ?other, "list offsets failed");
                self.forget(topic, partition);
                None
            }
        }
    }

    /// DeleteRecords below `offset`: `(error, low watermark)`, or `None`
    /// without an answer.
    pub(crate) async fn delete_records(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Option<(i16, i64)> {
        let to = self.leader(topic, partition).await?;
        let req = DeleteRecordsRequest::default()
            .with_topics(vec![
                DeleteRecordsTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(vec![
                        DeleteRecordsPartition::default()
                            .with_partition_index(partition)
                            .with_offset(offset),
                    ]),
            ])
            .with_timeout_ms(3000);
        match self
            .client
            .call_within(
                Duration::from_secs(30),
                to,
                ApiKey::DeleteRecords,
                2,
                RequestKind::DeleteRecords(req),
            )
            .await
        {
            Ok(ResponseKind::DeleteRecords(r)) => {
                let p = r.topics.first()?.partitions.first()?;
                if p.error_code != 0 {
                    self.forget(topic, partition);
                }
                Some((p.error_code, p.low_watermark))
            }
            _ => {
                self.forget(topic, partition);
                None
            }
        }
    }

    /// Sets one topic config with IncrementalAlterConfigs through any
    /// broker: the answer's error code, or `None` without one.
    pub(crate) async fn alter_config(
        &mut self,
        topic: &str,
        key: &str,
        value: &str,
    ) -> Option<i16> {
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s(topic))
                .with_configs(vec![
                    AlterableConfig::default()
                        .with_name(s(key))
                        .with_config_operation(0)
                        .with_value(Some(s(value))),
                ]),
        ]);
        let to = self.any_broker();
        match self
            .client
            .call(
                to,
                ApiKey::IncrementalAlterConfigs,
                1,
                RequestKind::IncrementalAlterConfigs(req),
            )
            .await
        {
            Ok(ResponseKind::IncrementalAlterConfigs(r)) => {
                Some(r.responses.first().map_or(-1, |r| r.error_code))
            }
            _ => None,
        }
    }
}

/// The trimmed topic's writer; the final reader reads the topic after the
/// workload's.
pub struct Trimmer;
pub static TRIMMER: Trimmer = Trimmer;

impl Actor for Trimmer {
    fn name(&self) -> &'static str {
        "trimmer"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("trimmer-0")]
    }

    fn play(&self, _role: &'static str, mut s: Session, stage: &Stage) -> Play {
        if stage.patient {
            s.request_timeout = crate::session::KAFKA_REQUEST_TIMEOUT;
        }
        Box::pin(trimmer(s, stage.faults_end))
    }

    fn after_converge(&self, stage: &Stage, deadline: Duration) -> Option<Play> {
        Some(Box::pin(final_read(
            stage.session("final-trim-reader"),
            deadline,
        )))
    }
}
