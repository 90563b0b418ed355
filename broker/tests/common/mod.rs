//! Fixtures the broker's integration tests share: a prepared volume, a
//! topic on it, a partition led in an epoch, the live brokers of an
//! assignment, plain batches and Kafka strings. Each test binary includes
//! this module with `mod common;` and uses its own subset.
#![allow(dead_code)] // a subset per test binary, the rest unused there
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::time::Duration;

use broker::cluster::assignment::{Assignment, BrokerEntry, COORDINATOR_SLOTS};
use broker::cluster::placement::Leadership;
use broker::groups::{Coordinators, GroupConfig};
use broker::log::batch;
use broker::log::fence::{EpochClaims, LeadershipFence};
use broker::log::topic::{self, TopicMeta};
use broker::log::{LogConfig, LogError, PartitionLog};
use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use vfs::durable::ClaimToken;
use vfs::model::ModelNfs;
use vfs::{OpenOptions, Vfs};

/// Creates the volume's top-level directories and records its cluster id,
/// as the first broker starting on it does.
pub async fn prepared(vfs: &dyn Vfs) {
    broker::node::prepare_volume(vfs).await.unwrap();
    broker::cluster::identity::settle(vfs, 0, Some("0b7e9d4c00004000800000000000cafe"))
        .await
        .unwrap();
}

/// A prepared volume with topic `name` of `partitions` partitions on it.
pub async fn with_topic(vfs: &dyn Vfs, name: &str, partitions: u32) -> TopicMeta {
    prepared(vfs).await;
    topic::create_topic(vfs, name, partitions).await.unwrap()
}

/// Opens `partition` of `meta` as its leader in `epoch`, fenced by the
/// partition's epoch claims, as a broker's takeover does.
pub async fn lead(
    vfs: Arc<dyn Vfs>,
    meta: &TopicMeta,
    partition: u32,
    epoch: u32,
    config: LogConfig,
) -> Result<PartitionLog, LogError> {
    let dir = topic::partition_dir(&meta.id, partition);
    let fence: Arc<dyn LeadershipFence> = Arc::new(EpochClaims::new(vfs.clone(), dir.clone()));
    let token = ClaimToken::fresh(&format!("leader-{epoch}"));
    PartitionLog::open_as_leader(
        vfs,
        dir,
        (&meta.id, partition),
        epoch,
        &token,
        fence,
        config,
    )
    .await
}

/// The brokers of an assignment, by id, each in the given incarnation.
pub fn live(brokers: impl IntoIterator<Item = (u32, u64)>) -> BTreeMap<u32, BrokerEntry> {
    brokers
        .into_iter()
        .map(|(id, incarnation)| {
            let advertised = format!("b{id}:9092");
            (
                id,
                BrokerEntry {
                    advertised,
                    incarnation,
                    endpoints: Default::default(),
                },
            )
        })
        .collect()
}

/// A batch from a plain (not idempotent) producer, every record at `timestamp`.
/// Every (offset, value) readable from `from` on, 700 bytes a read (so
/// reads end inside segments and batches).
pub async fn read_all(log: &PartitionLog, from: i64) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let r = log.read(next, 700).await.unwrap();
        if r.records.is_empty() {
            return out;
        }
        let mut at = 0;
        while at < r.records.len() {
            let h = batch::parse(&r.records[at..]).expect("reads return whole, valid batches");
            let values = batch::decode_values(&r.records[at..at + h.size]).unwrap();
            for (i, v) in values.into_iter().enumerate() {
                let off = h.base_offset + i as i64;
                if off >= next {
                    out.push((off, v));
                }
            }
            next = h.next_offset();
            at += h.size;
        }
    }
}

/// The names in `dir` that `keep` accepts, sorted.
pub async fn names_in(vfs: &dyn Vfs, dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut names: Vec<String> = vfs
        .read_dir(dir)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| keep(n))
        .collect();
    names.sort();
    names
}

/// The segment files of the partition in `dir`, in offset order (their
/// names start with the zero-padded base offset).
pub async fn segment_files(vfs: &dyn Vfs, dir: &Path) -> Vec<PathBuf> {
    names_in(vfs, dir, |n| n.ends_with(".log"))
        .await
        .into_iter()
        .map(|n| dir.join(n))
        .collect()
}

/// Flips two bytes at `at` of the file at `path`, as a bad disk would.
pub async fn flip(vfs: &dyn Vfs, path: &Path, at: u64) {
    let f = vfs.open(path, OpenOptions::write()).await.unwrap();
    let old = f.read_at(at, 2).await.unwrap();
    f.write_at(at, Bytes::from(vec![old[0] ^ 0xff, old[1] ^ 0x0f]))
        .await
        .unwrap();
    f.fsync().await.unwrap();
    f.close().await.unwrap();
}

pub fn plain(timestamp: i64, values: &[&[u8]]) -> Bytes {
    batch::build((-1, -1, -1), timestamp, values)
}

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// Every slot led by `leader` in coordinator epoch `epoch`.
pub fn assignment(leader: u32, epoch: u32) -> Assignment {
    Assignment {
        controller_epoch: 1,
        version: u64::from(epoch),
        controller: leader,
        brokers: live((1..=3).map(|b| (b, 1))),
        coordinators: (0..COORDINATOR_SLOTS)
            .map(|slot| {
                (
                    slot,
                    Leadership {
                        leader,
                        leader_epoch: epoch,
                    },
                )
            })
            .collect(),
        ..Assignment::default()
    }
}

pub async fn coordinator(nfs: &ModelNfs, broker: u32) -> Coordinators {
    let vfs: Arc<dyn Vfs> = Arc::new(nfs.host(broker));
    prepared(vfs.as_ref()).await;
    let config = GroupConfig {
        initial_rebalance_delay: Duration::ZERO,
        ..GroupConfig::default()
    };
    Coordinators::new(vfs, broker, config)
}

/// Commits `offset` for group `g`, topic `t`, partition 0, as `member` of
/// `generation` (a member epoch for the consumer protocol), with
/// OffsetCommit `version`: the partition's error code.
pub async fn commit_at(
    c: &Coordinators,
    generation: i32,
    member: &str,
    offset: i64,
    version: i16,
) -> i16 {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ]);
    c.offset_commit(req, version, &Default::default())
        .await
        .topics[0]
        .partitions[0]
        .error_code
}
