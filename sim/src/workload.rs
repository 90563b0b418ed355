//! The simulated Kafka clients: idempotent producers, a consumer that
//! commits its positions to the group coordinator, and an admin that
//! deletes and recreates a topic. Every operation and its outcome goes into
//! the shared history, which the checker judges at the end.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest,
    FindCoordinatorRequest, GroupId, InitProducerIdRequest, MetadataRequest, OffsetCommitRequest,
    OffsetFetchRequest, ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;
use tokio::time::Instant;

use crate::client::{CallError, Client};

pub const TOPIC: &str = "events";
pub(crate) const PARTITIONS: i32 = 3;
pub(crate) const CHURN_TOPIC: &str = "churn";
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// A produce request's answer: `(error, offset, broker)`, or why none came.
pub type ProduceAnswer = Result<(i16, i64, u32), CallError>;

/// The Produce version the simulator's clients send.
const PRODUCE_VERSION: i16 = 8;
/// Partitions of the churned topic: one per broker of a default run, so a
/// deletion touches every broker. Only partition 0 is written and read.
pub(crate) const CHURN_PARTITIONS: i32 = 3;
pub(crate) const GROUP: &str = "sim-group";
/// The committer's group (`committer`).
pub(crate) const COMMITTER_GROUP: &str = "sim-committer";

/// What became of a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged at this offset by this broker.
    Acked { offset: i64, broker: u32 },
    /// Definitely refused with this error code.
    Refused(i16),
    /// No answer: it may or may not be in the log.
    Unknown,
}

#[derive(Clone, Debug)]
pub enum Event {
    Produce {
        client: String,
        /// Idempotent producers' retries are deduplicated by the broker;
        /// plain producers' retries may legitimately duplicate.
        idempotent: bool,
        partition: i32,
        value: String,
        outcome: Outcome,
    },
    /// A consumer fetched from `from` and got these records.
    Poll {
        client: String,
        partition: i32,
        from: i64,
        got: Vec<(i64, String)>,
    },
    Commit {
        group: String,
        partition: i32,
        offset: i64,
        acked: bool,
    },
    /// What OffsetFetch returned, asked for at `sent` (the event's own
    /// time is when the answer arrived).
    Committed {
        group: String,
        partition: i32,
        offset: i64,
        sent: Duration,
    },
    /// The committed offsets of `group` in the file a new coordinator
    /// would load (`broker::groups::audit`), read by the observer from
    /// `sent` on (the event's own time is when the read ended); -1 for a
    /// partition the file has no offset for, or for every partition when
    /// the group has no file.
    GroupOnVolume {
        group: String,
        sent: Duration,
        offsets: Vec<(i32, i64)>,
        /// The coordinator epoch of the file read (`None`: no file), and
        /// the slot's newest claimed epoch.
        file_epoch: Option<u32>,
        newest_epoch: u32,
    },
    /// What a consumer-protocol member holds from now on: exactly
    /// `partitions`, until its next `Holds` or until `until` (the send time
    /// of its last answered heartbeat plus the session timeout), whichever
    /// comes first.
    Holds {
        member: String,
        partitions: Vec<i32>,
        until: Duration,
    },
    /// Who holds which partition of the consumer-protocol group in the
    /// file a new coordinator would load (the partitions each member was
    /// given or has not let go of), read by the observer from `sent` on.
    HoldersOnVolume {
        sent: Duration,
        holders: Vec<(String, Vec<i32>)>,
    },
    /// A group member's assignment for one generation.
    Assigned {
        member: String,
        generation: i32,
        partitions: Vec<i32>,
    },
    /// The admin read the recreated topic of incarnation `incarnation`.
    ChurnRead {
        incarnation: u32,
        values: Vec<String>,
        /// Values of earlier incarnations that a produce attempt sent
        /// without getting an answer: a broker that was frozen or cut off
        /// may take such a request late, and a produce by name then
        /// belongs to whichever topic has the name by then (Kafka's rule
        /// too; seed 555 of the long sweep: `churn-1-0`, sent to a broker
        /// frozen for 34 s, landed in incarnation 2).
        in_doubt: Vec<String>,
    },
    /// The admin's deletion of the topic with this id was acknowledged
    /// (`acknowledged`), or an attempt got no answer and a retry found the
    /// topic gone (the deletion probably happened; not counted as a fact);
    /// `mark` is the volume's creation mark (`ModelNfs::mark`) taken before
    /// the deletion was first asked for: an inode numbered at or above it
    /// is younger than the request.
    Deleted {
        topic_id: String,
        mark: u64,
        acknowledged: bool,
    },
    /// A Metadata answer of `broker`: `(partition, leader, leader epoch)`
    /// of the topic with id `topic_id`, asked for at `sent` (the event's
    /// own time is when the answer arrived).
    Metadata {
        client: String,
        sent: Duration,
        broker: u32,
        topic_id: String,
        partitions: Vec<(i32, i32, i32)>,
    },
    /// The admin fetched the topic after its deletion was acknowledged.
    DeletedRead {
        incarnation: u32,
        values: Vec<String>,
    },
    /// One topic of a CreateTopics request (`grow: false`) or of a
    /// CreatePartitions request (`grow: true`) sent to `broker` at `sent`
    /// with others: its error code and message, `None` without an answer;
    /// `volume_errors` is how many I/O errors the volume injected between
    /// sending and the answer.
    Admin {
        client: String,
        topic: String,
        grow: bool,
        broker: u32,
        sent: Duration,
        answer: Option<(i16, String)>,
        volume_errors: u64,
    },
    /// An InitProducerId answer of `broker` (no transactional id): the
    /// producer id it handed out.
    ProducerId {
        client: String,
        broker: u32,
        id: i64,
    },
    /// A write to the trimmed topic acknowledged at `offset`.
    TrimProduced {
        partition: i32,
        offset: i64,
        value: String,
    },
    /// An acknowledged DeleteRecords of the trimmed topic: the log start
    /// offset it answered.
    Trimmed {
        partition: i32,
        asked: i64,
        low_watermark: i64,
    },
    /// The trimmed topic's log start offset as a leader answered it, to a
    /// ListOffsets sent at `sent`.
    TrimStart {
        partition: i32,
        sent: Duration,
        start: i64,
    },
    /// A write to the compacted topic, before it is sent (it may land
    /// even without an answer).
    CompactSent {
        partition: i32,
        key: String,
        value: Option<String>,
    },
    /// A write to the compacted topic acknowledged at `offset` (sent at
    /// `sent`).
    CompactProduced {
        partition: i32,
        sent: Duration,
        offset: i64,
        key: String,
        value: Option<String>,
    },
    /// The compacted topic's partition read whole (read_committed) while
    /// the writes went on, from `started` to the event's time.
    CompactRead {
        partition: i32,
        started: Duration,
        records: Vec<(i64, crate::compactor::Written)>,
    },
    /// A transaction of the compactor, before its batch of `records` is
    /// sent to `partition`.
    CompactTxnSent {
        label: String,
        partition: i32,
        records: Vec<crate::compactor::Written>,
    },
    /// That batch acknowledged, its first record at `offset`.
    CompactTxnProduced { label: String, offset: i64 },
    /// The compactor's EndTxn for transaction `label` (none is sent when
    /// the batch was not acknowledged or the transaction is abandoned).
    CompactTxnEnd {
        label: String,
        commit: bool,
        outcome: Outcome,
    },
    /// A transactional producer's InitProducerId answer.
    TxnInit {
        client: String,
        transactional_id: String,
        /// The producer it bumped (KIP-360), or none for a new producer.
        from: Option<(i64, i16)>,
        producer: (i64, i16),
    },
    /// PRODUCER_FENCED to a producer's bump of its own epoch (KIP-360);
    /// `own`: the id has no other producer and no unanswered
    /// InitProducerId of its client that could have fenced it.
    TxnBumpFenced {
        client: String,
        transactional_id: String,
        producer: (i64, i16),
        own: bool,
    },
    /// A write of transaction `label` (sent at `sent`, as `producer`);
    /// `joined`: to a partition added to the transaction (else a
    /// misbehaving client's, which KIP-890 says must be refused).
    TxnWrite {
        client: String,
        label: String,
        joined: bool,
        partition: i32,
        value: String,
        sent: Duration,
        producer: (i64, i16),
        outcome: Outcome,
    },
    /// EndTxn of transaction `label`, sent at `sent`; `offsets` are the
    /// `(partition, offset)` of the transaction group it sent to the
    /// transaction.
    TxnEnd {
        client: String,
        label: String,
        commit: bool,
        sent: Duration,
        producer: (i64, i16),
        offsets: Vec<(i32, i64)>,
        outcome: Outcome,
    },
    /// A read_committed fetch of the transactions' topic from `from`.
    TxnPoll {
        partition: i32,
        from: i64,
        got: Vec<(i64, String)>,
    },
    /// The transactions' topic read whole read_committed once every
    /// transaction ended.
    TxnFinal {
        partition: i32,
        records: Vec<(i64, String)>,
    },
    /// The transaction group's committed offsets once every transaction
    /// ended.
    TxnOffsetsFinal { offsets: Vec<(i32, i64)> },
    /// What the final pipeliner (`pipeliner`) sent once the faults healed:
    /// how many requests, which of them timed out, and how many of the
    /// transactions it wanted it finished.
    FinalRequests {
        client: String,
        sent: u64,
        timed_out: Vec<String>,
        transactions: u32,
        wanted: u32,
    },
    /// A misbehaving client's TxnOffsetCommit, in transaction `label`, for
    /// a group no transaction added: its error code (`None`: no answer).
    TxnRogueOffsets {
        client: String,
        label: String,
        code: Option<i16>,
    },
    /// That group's committed offsets once every transaction ended.
    TxnRogueFinal { offsets: Vec<(i32, i64)> },
    /// The ACL admin (`guard`) changed the ACLs: added the DENY (`deny`) or
    /// the ALLOW / removed the DENY; `top` is the newest ACL version on the
    /// volume once the change ended (acknowledged or not).
    AclChange {
        deny: bool,
        start: Duration,
        acked: bool,
        top: Option<u64>,
        /// When `top` was read: no version above it existed then.
        read_at: Duration,
    },
    /// The ACL versions on the volume after the run: whether each denies
    /// the probe (`None`: no complete claim, never applied by anyone;
    /// `Some(None)`: unreadable, taken as allowing).
    AclVersions {
        versions: Vec<(u64, Option<Option<bool>>)>,
    },
    /// A broker answered the probe's write to the guarded topic: accepted,
    /// or refused under ACL `version`.
    AclProbe {
        broker: u32,
        sent: Duration,
        allowed: bool,
        version: Option<u64>,
    },
    /// The credentials admin (`logins`) set the probed user's password:
    /// to the one the probe logs in with (`probed`) or to the other one;
    /// `top` as in `AclChange`.
    CredentialChange {
        probed: bool,
        start: Duration,
        acked: bool,
        top: Option<u64>,
        read_at: Duration,
    },
    /// The credentials versions on the volume after the run: whether each
    /// refuses the probe's password (`None` and `Some(None)` as in
    /// `AclVersions`).
    CredentialVersions {
        versions: Vec<(u64, Option<Option<bool>>)>,
    },
    /// A broker answered the probe's login: accepted, or refused under
    /// credentials `version`.
    LoginProbe {
        broker: u32,
        sent: Duration,
        accepted: bool,
        version: Option<u64>,
    },
    /// A marker admin (`markers`) added marker `marker` to the security
    /// document `doc`; `acked` if the broker acknowledged it.
    SecurityMarker {
        doc: &'static str,
        marker: u64,
        start: Duration,
        acked: bool,
    },
    /// Once the faults healed, broker `broker` listed every acknowledged
    /// marker ACL (`missing` empty) `after_heal`, or had not by the
    /// liveness deadline (`missing`: those it lacked; `None`: no answer).
    AclsApplied {
        broker: u32,
        after_heal: Duration,
        missing: Option<Vec<u64>>,
    },
    /// The markers in the newest complete version of `doc` after the run
    /// (`None`: unreadable).
    SecurityMarkersFinal {
        doc: &'static str,
        found: Option<(u64, Vec<u64>)>,
    },
    /// A mover (`movers`) asked for `partition` to be led by `broker`
    /// (`None`: cancelled its preferred broker).
    Reassign {
        partition: i32,
        broker: Option<u32>,
        sent: Duration,
        outcome: crate::movers::AdminOutcome,
    },
    /// After the run: the workload topic's preferred brokers on the volume,
    /// and the partitions a live preferred broker did not lead by the
    /// liveness deadline (`None`: unreadable).
    ReassignFinal {
        found: Option<crate::movers::FinalState>,
    },
    /// `kaas fsck --repair` (`repairer`) removed these paths; `pending`
    /// removals it could not make yet.
    Repaired {
        removed: Vec<String>,
        pending: usize,
    },
    /// `kaas fsck --repair --truncate-damaged` (`repairer`) took
    /// `partition` over in `epoch` and gave up these offset ranges.
    Truncated {
        partition: String,
        epoch: u32,
        given_up: Vec<(i64, i64)>,
    },
    /// A quota admin (`quota_setters`) set (`Some`) or removed (`None`)
    /// quota `key` of `entity`.
    QuotaChange {
        entity: String,
        key: &'static str,
        rate: Option<u64>,
        sent: Duration,
        outcome: crate::movers::AdminOutcome,
    },
    /// After the run: every quota in the newest complete version of the
    /// document, by (entity, key) (`None`: unreadable).
    QuotaFinal {
        found: Option<BTreeMap<(String, &'static str), u64>>,
    },
    /// Once faults healed: a fetch answer to the throttled client from
    /// `broker`, carrying `bytes` of records.
    QuotaFetched { broker: u32, bytes: usize },
    /// The throttled client fetched from `from` to `to` with a
    /// consumer_byte_rate of `rate` in force since before `from`.
    QuotaWindow {
        from: Duration,
        to: Duration,
        rate: u64,
    },
    /// The throttled producer (`quota_setters`) wrote one record of
    /// `batch_bytes` per request from `from` to `to`, with a
    /// producer_byte_rate of `rate` in force since before `from`: its log
    /// holds `appended` records afterwards. `leaders` brokers answered it
    /// and `unanswered` requests went unanswered (each may still have been
    /// appended, on a connection the client then gave up).
    QuotaProduced {
        from: Duration,
        to: Duration,
        rate: u64,
        batch_bytes: usize,
        appended: usize,
        leaders: usize,
        unanswered: usize,
    },
    /// A topic created once the faults healed (the throttled producer's):
    /// its CreateTopics was answered at `answered`, and the first write to
    /// it was accepted at `writable`, by a client that began to write
    /// `settle` after it sent the request and retried every 200 ms.
    NewTopicWritable {
        topic: String,
        answered: Duration,
        writable: Duration,
        settle: Duration,
    },
    /// The trimmed topic's partition read whole once the faults healed:
    /// its log start offset and every record from there.
    TrimFinal {
        partition: i32,
        start: i64,
        records: Vec<(i64, String)>,
    },
    /// The compacted topic's partition read whole once the faults healed:
    /// every record from its log start, and whether each key was in it
    /// once (else the deadline came first).
    CompactFinal {
        partition: i32,
        records: Vec<(i64, crate::compactor::Written)>,
        settled: bool,
    },
}

/// One line of the trace for an event.
pub fn describe(e: &Event) -> String {
    match e {
        Event::Produce {
            client,
            partition,
            value,
            outcome,
            ..
        } => format!("{client} produce {partition} {value} -> {outcome:?}"),
        Event::Poll {
            client,
            partition,
            from,
            got,
        } => format!(
            "{client} poll {partition}@{from} -> {} records{}",
            got.len(),
            got.last()
                .map_or(String::new(), |(o, _)| format!(" up to {o}"))
        ),
        Event::Commit {
            group,
            partition,
            offset,
            acked,
        } => format!(
            "commit {group} {partition}@{offset} -> {}",
            if *acked { "ok" } else { "failed" }
        ),
        Event::Committed {
            group,
            partition,
            offset,
            ..
        } => format!("offset-fetch {group} {partition} -> {offset}"),
        Event::Assigned {
            member,
            generation,
            partitions,
        } => format!("{member} generation {generation} owns {partitions:?}"),
        Event::HoldersOnVolume { holders, .. } => {
            format!("next-group holders on the volume: {holders:?}")
        }
        Event::Holds {
            member,
            partitions,
            until,
        } => format!(
            "next-group member {member} holds {partitions:?} until {:.3}s",
            until.as_secs_f64()
        ),
        Event::ChurnRead {
            incarnation,
            values,
            ..
        } => format!("admin read churn#{incarnation} -> {} records", values.len()),
        Event::DeletedRead {
            incarnation,
            values,
        } => format!(
            "admin read deleted churn#{incarnation} -> {} records",
            values.len()
        ),
        Event::Deleted {
            topic_id,
            acknowledged: true,
            ..
        } => format!("admin deleted topic {topic_id}"),
        Event::Deleted { topic_id, .. } => {
            format!("admin deleted topic {topic_id} (in doubt: no answer, then gone)")
        }
        Event::Metadata {
            client,
            broker,
            topic_id,
            partitions,
            ..
        } => format!("{client} metadata broker-{broker} {topic_id} {partitions:?}"),
        Event::Admin {
            client,
            topic,
            grow,
            broker,
            answer,
            ..
        } => format!(
            "{client} {} {topic} via broker-{broker} -> {}",
            if *grow { "grow" } else { "create" },
            answer
                .as_ref()
                .map_or("no answer".to_owned(), |(c, m)| format!("{c} {m}"))
        ),
        Event::GroupOnVolume {
            group,
            offsets,
            file_epoch,
            newest_epoch,
            ..
        } => format!(
            "group {group} on the volume: {offsets:?} in the file of epoch {file_epoch:?} (newest claim {newest_epoch})"
        ),
        Event::ProducerId { client, broker, id } => {
            format!("{client} init-producer-id broker-{broker} -> {id}")
        }
        Event::TrimProduced {
            partition,
            offset,
            value,
        } => format!("trimmer produced {value} at {partition}/{offset}"),
        Event::Trimmed {
            partition,
            asked,
            low_watermark,
        } => format!(
            "trimmer deleted records of {partition} below {asked}: log start {low_watermark}"
        ),
        Event::TrimStart {
            partition, start, ..
        } => format!("trimmer saw log start {start} of {partition}"),
        Event::CompactSent {
            partition,
            key,
            value,
        } => format!("compactor sends {key}={value:?} to {partition}"),
        Event::CompactProduced {
            partition,
            offset,
            key,
            value,
            ..
        } => format!("compactor produced {key}={value:?} at {partition}/{offset}"),
        Event::CompactRead {
            partition,
            started,
            records,
        } => format!(
            "compactor read {partition} whole from {:.3}s: {} records",
            started.as_secs_f64(),
            records.len()
        ),
        Event::CompactTxnSent {
            label,
            partition,
            records,
        } => format!("compactor transaction {label} sends {records:?} to {partition}"),
        Event::CompactTxnProduced { label, offset } => {
            format!("compactor transaction {label} written at {offset}")
        }
        Event::CompactTxnEnd {
            label,
            commit,
            outcome,
        } => format!(
            "compactor transaction {label} {} -> {outcome:?}",
            if *commit { "commit" } else { "abort" }
        ),
        Event::TxnInit {
            client,
            transactional_id,
            from: None,
            producer,
        } => format!("{client} init {transactional_id} -> producer {producer:?}"),
        Event::TxnInit {
            client,
            transactional_id,
            from: Some(from),
            producer,
        } => format!("{client} bump {transactional_id} {from:?} -> producer {producer:?}"),
        Event::TxnBumpFenced {
            client,
            transactional_id,
            producer,
            own,
        } => format!(
            "{client} bump of {transactional_id} as {producer:?} -> PRODUCER_FENCED (only producer: {own})"
        ),
        Event::TxnWrite {
            client,
            label,
            value,
            producer,
            outcome,
            ..
        } => format!("{client} txn {label} write {value} as {producer:?} -> {outcome:?}"),
        Event::TxnEnd {
            client,
            label,
            commit,
            offsets,
            outcome,
            ..
        } => format!(
            "{client} txn {label} {} (offsets {offsets:?}) -> {outcome:?}",
            if *commit { "commit" } else { "abort" }
        ),
        Event::TxnPoll {
            partition,
            from,
            got,
        } => format!(
            "txn-reader poll {partition}@{from} -> {:?}",
            got.iter()
                .map(|(o, v)| format!("{o}:{v}"))
                .collect::<Vec<_>>()
        ),
        Event::TxnFinal { partition, records } => {
            format!("txn final read of {partition}: {} records", records.len())
        }
        Event::TxnOffsetsFinal { offsets } => format!("txn group offsets at the end: {offsets:?}"),
        Event::FinalRequests {
            client,
            sent,
            timed_out,
            transactions,
            wanted,
        } => format!(
            "{client} sent {sent} requests pipelined, {} unanswered {timed_out:?}, finished {transactions} of {wanted} transactions",
            timed_out.len()
        ),
        Event::TxnRogueOffsets {
            client,
            label,
            code,
        } => format!("{client} txn {label} offsets for a group never added -> {code:?}"),
        Event::AclVersions { versions } => format!("acl-versions {versions:?}"),
        Event::AclChange {
            deny,
            start,
            acked,
            top,
            ..
        } => format!(
            "acl-change {} began {:.3}s acked={acked} newest-version={top:?}",
            if *deny { "deny" } else { "allow" },
            start.as_secs_f64()
        ),
        Event::AclProbe {
            broker,
            sent,
            allowed,
            version,
        } => format!(
            "acl-probe broker={broker} sent {:.3}s allowed={allowed} version={version:?}",
            sent.as_secs_f64()
        ),
        Event::CredentialVersions { versions } => format!("credential-versions {versions:?}"),
        Event::CredentialChange {
            probed,
            start,
            acked,
            top,
            ..
        } => format!(
            "credential-change to the {} password began {:.3}s acked={acked} newest-version={top:?}",
            if *probed { "probed" } else { "other" },
            start.as_secs_f64()
        ),
        Event::LoginProbe {
            broker,
            sent,
            accepted,
            version,
        } => format!(
            "login-probe broker={broker} sent {:.3}s accepted={accepted} version={version:?}",
            sent.as_secs_f64()
        ),
        Event::Reassign {
            partition,
            broker,
            sent,
            outcome,
        } => format!(
            "reassign {TOPIC}/{partition} to {broker:?} sent {:.3}s {outcome:?}",
            sent.as_secs_f64()
        ),
        Event::ReassignFinal { found } => format!("reassign-final {found:?}"),
        Event::QuotaChange {
            entity,
            key,
            rate,
            sent,
            outcome,
        } => format!(
            "quota {entity} {key}={rate:?} sent {:.3}s {outcome:?}",
            sent.as_secs_f64()
        ),
        Event::QuotaFinal { found } => format!("quota-final {found:?}"),
        Event::Repaired { removed, pending } => {
            format!("repaired removed={removed:?} pending={pending}")
        }
        Event::Truncated {
            partition,
            epoch,
            given_up,
        } => format!("truncate-damaged {partition} epoch={epoch} given-up={given_up:?}"),
        Event::QuotaFetched { broker, bytes } => {
            format!("quota-fetched broker={broker} bytes={bytes}")
        }
        Event::QuotaProduced {
            from,
            to,
            rate,
            batch_bytes,
            appended,
            leaders,
            unanswered,
        } => format!(
            "quota-produced {:.3}s..{:.3}s rate={rate} batch={batch_bytes} appended={appended} \
             leaders={leaders} unanswered={unanswered}",
            from.as_secs_f64(),
            to.as_secs_f64()
        ),
        Event::NewTopicWritable {
            topic,
            answered,
            writable,
            settle,
        } => format!(
            "new-topic-writable {topic} answered={:.3}s writable={:.3}s settle={:.3}s",
            answered.as_secs_f64(),
            writable.as_secs_f64(),
            settle.as_secs_f64()
        ),
        Event::QuotaWindow { from, to, rate } => format!(
            "quota-window {:.3}s..{:.3}s rate={rate}",
            from.as_secs_f64(),
            to.as_secs_f64()
        ),
        Event::SecurityMarker {
            doc,
            marker,
            start,
            acked,
        } => format!(
            "security-marker {doc} {marker} began {:.3}s acked={acked}",
            start.as_secs_f64()
        ),
        Event::AclsApplied {
            broker,
            after_heal,
            missing,
        } => format!(
            "acls-applied broker={broker} {:.3}s after the faults healed, missing {missing:?}",
            after_heal.as_secs_f64()
        ),
        Event::SecurityMarkersFinal { doc, found } => match found {
            Some((version, markers)) => {
                format!("security-markers-final {doc} version {version}: {markers:?}")
            }
            None => format!("security-markers-final {doc} unreadable"),
        },
        Event::TxnRogueFinal { offsets } => {
            format!("never-added group's offsets at the end: {offsets:?}")
        }
        Event::TrimFinal {
            partition,
            start,
            records,
        } => format!(
            "trimmer read {partition} whole: log start {start}, {} records",
            records.len()
        ),
        Event::CompactFinal {
            partition,
            records,
            settled,
        } => format!(
            "compactor read {partition} whole: {} records{}",
            records.len(),
            if *settled {
                ", each key once"
            } else {
                ", some keys more than once"
            }
        ),
    }
}

/// Everything the clients did, in order, with simulated timestamps.
#[derive(Clone, Default)]
pub struct History(Arc<Mutex<Vec<(Duration, Event)>>>);

impl History {
    pub fn record(&self, at: Duration, e: Event) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((at, e));
    }

    pub fn events(&self) -> Vec<(Duration, Event)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A client plus what it knows of the cluster.
pub struct Session {
    pub client: Client,
    brokers: u32,
    leaders: BTreeMap<(String, i32), u32>,
    coordinator: Option<u32>,
    /// The consumer group this session commits for.
    pub group: String,
    start: Instant,
    pub history: History,
    pub name: String,
    /// Reads the volume's creation mark (`ModelNfs::mark`), for events
    /// that later checks of the volume compare against.
    pub volume_mark: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
    /// How many I/O errors the volume has injected so far (EIO, ENOSPC,
    /// interrupted renames): an admin request that failed while this grew
    /// may have failed for that reason.
    pub volume_errors: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
    /// How long a produce or an OffsetFetch waits for its answer.
    pub request_timeout: Duration,
    /// How long an OffsetCommit waits for its answer.
    pub commit_timeout: Duration,
    /// The OffsetCommit version: 9 for consumer-protocol members (KIP-848).
    pub commit_version: i16,
    /// The transactional id its produce requests carry (`transactor`).
    pub transactional_id: Option<String>,
}

/// Kafka clients' default `request.timeout.ms`.
pub(crate) const KAFKA_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Decodes the records of a fetched record set from `from` on.
pub fn records(set: &[u8], from: i64) -> Vec<(i64, String, i32)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < set.len() {
        let h = match broker::log::batch::parse(&set[at..]) {
            Ok(h) => h,
            Err(e) => {
                // A partial batch at the end of a size-limited fetch is
                // normal; anything else is worth a line.
                tracing::debug!(at, len = set.len(), error = %e, head = ?&set[at..set.len().min(at + 24)], "unparsable batch in a fetch");
                break;
            }
        };
        if at + h.size > set.len() {
            break;
        }
        if let Some(values) = broker::log::batch::decode_values(&set[at..at + h.size]) {
            for (i, v) in values.into_iter().enumerate() {
                let offset = h.base_offset + i as i64;
                if offset >= from {
                    out.push((
                        offset,
                        String::from_utf8_lossy(&v).into_owned(),
                        h.leader_epoch,
                    ));
                }
            }
        }
        at += h.size;
    }
    out
}

impl Session {
    pub fn new(name: &str, brokers: u32, start: Instant, history: History) -> Self {
        Self {
            client: Client::new(name),
            brokers,
            leaders: BTreeMap::new(),
            coordinator: None,
            group: GROUP.to_owned(),
            start,
            history,
            name: name.to_owned(),
            volume_mark: None,
            volume_errors: None,
            request_timeout: crate::client::CALL_TIMEOUT,
            commit_timeout: COMMIT_TIMEOUT,
            commit_version: 7,
            transactional_id: None,
        }
    }

    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// A second client of the same cluster and history, for a role that
    /// sends requests in parallel.
    pub(crate) fn twin(&self, name: &str) -> Session {
        Session::new(name, self.brokers, self.start, self.history.clone())
    }

    pub(crate) fn brokers(&self) -> u32 {
        self.brokers
    }

    pub(crate) fn any_broker(&self) -> u32 {
        madsim::rand::thread_rng().gen_range(0..self.brokers)
    }

    /// Refreshes the leaders of `topic` from any broker.
    pub async fn refresh(&mut self, topic: &str) {
        let to = self.any_broker();
        let req = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(TopicName(s(topic)))),
            ]))
            .with_allow_auto_topic_creation(false);
        let sent = self.now();
        if let Ok(ResponseKind::Metadata(m)) = self
            .client
            .call(to, ApiKey::Metadata, 12, RequestKind::Metadata(req))
            .await
        {
            for t in m.topics {
                if t.error_code == 0 && !t.topic_id.is_nil() {
                    self.history.record(
                        self.now(),
                        Event::Metadata {
                            client: self.name.clone(),
                            sent,
                            broker: to,
                            topic_id: t.topic_id.to_string(),
                            partitions: t
                                .partitions
                                .iter()
                                .map(|p| (p.partition_index, p.leader_id.0, p.leader_epoch))
                                .collect(),
                        },
                    );
                }
                for p in t.partitions {
                    if p.error_code == 0 && p.leader_id.0 >= 0 {
                        self.leaders
                            .insert((topic.to_owned(), p.partition_index), p.leader_id.0 as u32);
                    } else {
                        self.leaders.remove(&(topic.to_owned(), p.partition_index));
                    }
                }
            }
        }
    }

    pub(crate) async fn leader(&mut self, topic: &str, partition: i32) -> Option<u32> {
        if !self.leaders.contains_key(&(topic.to_owned(), partition)) {
            self.refresh(topic).await;
        }
        self.leaders.get(&(topic.to_owned(), partition)).copied()
    }

    pub(crate) fn forget(&mut self, topic: &str, partition: i32) {
        self.leaders.remove(&(topic.to_owned(), partition));
    }

    pub async fn create_topic(&mut self, topic: &str, partitions: i32) -> bool {
        self.create_topic_id(topic, partitions).await.is_some()
    }

    /// Creates a topic: `Some(id)` once it exists (the id is empty when it
    /// existed already), `None` when that is not known.
    pub(crate) async fn create_topic_id(&mut self, topic: &str, partitions: i32) -> Option<String> {
        let req = CreateTopicsRequest::default()
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_num_partitions(partitions)
                    .with_replication_factor(1),
            ])
            .with_timeout_ms(create_timeout_ms());
        let to = self.any_broker();
        match self
            .client
            .call(to, ApiKey::CreateTopics, 7, RequestKind::CreateTopics(req))
            .await
        {
            Ok(ResponseKind::CreateTopics(r)) => match r.topics.first() {
                Some(t) if t.error_code == 0 => Some(t.topic_id.to_string()),
                // TOPIC_ALREADY_EXISTS is as good.
                Some(t) if t.error_code == 36 => Some(String::new()),
                _ => None,
            },
            Ok(other) => {
                tracing::debug!(client = %self.name, ?other, "unexpected CreateTopics answer");
                None
            }
            Err(e) => {
                tracing::debug!(client = %self.name, error = %e.what, "CreateTopics");
                None
            }
        }
    }

    /// Deletes a topic: the error code of the answer (0 on success), or
    /// `None` without an answer.
    async fn delete_topic(&mut self, topic: &str) -> Option<i16> {
        let req = DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(s(topic))])
            .with_timeout_ms(5000);
        let to = self.any_broker();
        match self
            .client
            .call(to, ApiKey::DeleteTopics, 4, RequestKind::DeleteTopics(req))
            .await
        {
            Ok(ResponseKind::DeleteTopics(r)) => Some(
                r.responses
                    .iter()
                    .map(|t| t.error_code)
                    .find(|&c| c != 0)
                    .unwrap_or(0),
            ),
            _ => None,
        }
    }

    /// One produce request of `batch` to the partition's leader:
    /// `Ok((error, offset, broker))` or `Err` when there was no answer.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        batch: Bytes,
    ) -> Result<(i16, i64, u32), ()> {
        let Some(to) = self.leader(topic, partition).await else {
            return Ok((5, -1, 0)); // LEADER_NOT_AVAILABLE
        };
        let req = self.produce_request(topic, partition, batch);
        let answer = self
            .client
            .call_within(
                self.request_timeout,
                to,
                ApiKey::Produce,
                PRODUCE_VERSION,
                RequestKind::Produce(req),
            )
            .await;
        self.produce_answer(topic, partition, to, answer)
            .map_err(|_| ())
    }

    /// One produce request per batch of `batches` (partition, batch),
    /// pipelined as librdkafka sends them: every request to one leader is
    /// sent on its connection before any answer is read (leaders one after
    /// another). The answers, in the order of `batches`:
    /// `Ok((error, offset, broker))`, or why there was none.
    pub async fn produce_pipelined(
        &mut self,
        topic: &str,
        batches: Vec<(i32, Bytes)>,
    ) -> Vec<ProduceAnswer> {
        let mut answers: Vec<Option<ProduceAnswer>> = (0..batches.len()).map(|_| None).collect();
        let mut by_leader: BTreeMap<u32, Vec<(usize, i32, Bytes)>> = BTreeMap::new();
        for (k, (partition, batch)) in batches.into_iter().enumerate() {
            match self.leader(topic, partition).await {
                Some(to) => by_leader.entry(to).or_default().push((k, partition, batch)),
                None => answers[k] = Some(Ok((5, -1, 0))), // LEADER_NOT_AVAILABLE
            }
        }
        for (to, sent) in by_leader {
            let requests = sent
                .iter()
                .map(|(_, partition, batch)| {
                    let req = self.produce_request(topic, *partition, batch.clone());
                    (ApiKey::Produce, PRODUCE_VERSION, RequestKind::Produce(req))
                })
                .collect();
            let got = self
                .client
                .call_pipelined(self.request_timeout, to, requests)
                .await;
            for ((k, partition, _), answer) in sent.into_iter().zip(got) {
                answers[k] = Some(self.produce_answer(topic, partition, to, answer));
            }
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(CallError::failed("not sent"))))
            .collect()
    }

    fn produce_request(&self, topic: &str, partition: i32, batch: Bytes) -> ProduceRequest {
        ProduceRequest::default()
            .with_transactional_id(
                self.transactional_id
                    .as_deref()
                    .map(|t| kafka_protocol::messages::TransactionalId(s(t))),
            )
            .with_acks(-1)
            .with_timeout_ms(3000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(s(topic)))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(Some(batch)),
                    ]),
            ])
    }

    /// A produce answer as `(error, offset, broker)`; the leader is
    /// forgotten after an error or no answer.
    fn produce_answer(
        &mut self,
        topic: &str,
        partition: i32,
        to: u32,
        answer: Result<ResponseKind, CallError>,
    ) -> ProduceAnswer {
        let (code, offset) = match answer {
            Ok(ResponseKind::Produce(r)) => r
                .responses
                .first()
                .and_then(|t| t.partition_responses.first())
                .map(|p| (p.error_code, p.base_offset))
                .unwrap_or((-1, -1)),
            Ok(_) => (-1, -1),
            Err(e) => {
                self.forget(topic, partition);
                return Err(e);
            }
        };
        if code != 0 {
            self.forget(topic, partition);
        }
        Ok((code, offset, to))
    }

    /// Fetches from `from`: the records and the high watermark, or `None`.
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        from: i64,
    ) -> Option<(Vec<(i64, String, i32)>, i64)> {
        let p = self.fetch_partition(topic, partition, from, 0).await?;
        let set = p.records.clone().unwrap_or_default();
        Some((records(&set, from), p.high_watermark))
    }

    /// One Fetch of `partition` from `from` at `isolation` (0:
    /// read_uncommitted, 1: read_committed) from its leader: the
    /// partition's answer, `None` without one or on an error (the leader
    /// is looked up again next time).
    pub(crate) async fn fetch_partition(
        &mut self,
        topic: &str,
        partition: i32,
        from: i64,
        isolation: i8,
    ) -> Option<PartitionData> {
        let Some(to) = self.leader(topic, partition).await else {
            tracing::debug!(client = %self.name, topic, partition, "no leader known");
            return None;
        };
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_isolation_level(isolation)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(TopicName(s(topic)))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(from)
                            .with_partition_max_bytes(256 << 10),
                    ]),
            ]);
        match self
            .client
            .call(to, ApiKey::Fetch, 11, RequestKind::Fetch(req))
            .await
        {
            Ok(ResponseKind::Fetch(r)) => {
                let p = r
                    .responses
                    .into_iter()
                    .next()?
                    .partitions
                    .into_iter()
                    .next()?;
                if p.error_code != 0 {
                    tracing::debug!(client = %self.name, topic, partition, from, code = p.error_code, "fetch refused");
                    self.forget(topic, partition);
                    return None;
                }
                Some(p)
            }
            other => {
                tracing::debug!(client = %self.name, topic, partition, from, ?other, "fetch failed");
                self.forget(topic, partition);
                None
            }
        }
    }

    pub async fn coordinator(&mut self) -> Option<u32> {
        if self.coordinator.is_none() {
            let req = FindCoordinatorRequest::default().with_key(s(&self.group));
            let to = self.any_broker();
            if let Ok(ResponseKind::FindCoordinator(r)) = self
                .client
                .call(
                    to,
                    ApiKey::FindCoordinator,
                    3,
                    RequestKind::FindCoordinator(req),
                )
                .await
            {
                if r.error_code == 0 && r.node_id.0 >= 0 {
                    self.coordinator = Some(r.node_id.0 as u32);
                }
            }
        }
        self.coordinator
    }

    /// Forgets the coordinator, so the next call looks it up again.
    pub(crate) fn lost_coordinator(&mut self) {
        self.coordinator = None;
    }

    /// Commits `offset` for `partition`, as `member` of `generation`
    /// (manual assignment: generation -1, no member); the attempt and its
    /// outcome are recorded in the history.
    pub async fn commit(
        &mut self,
        partition: i32,
        offset: i64,
        generation: i32,
        member: &str,
    ) -> bool {
        let acked = match self.coordinator().await {
            Some(to) => {
                self.send_commit(to, partition, offset, generation, member)
                    .await
            }
            // Never sent, yet recorded as in doubt like one without an
            // answer (more lenient than it needs to be).
            None => false,
        };
        self.history.record(
            self.now(),
            Event::Commit {
                group: self.group.clone(),
                partition,
                offset,
                acked,
            },
        );
        acked
    }

    async fn send_commit(
        &mut self,
        to: u32,
        partition: i32,
        offset: i64,
        generation: i32,
        member: &str,
    ) -> bool {
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(&self.group)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(s(member))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(partition)
                            .with_committed_offset(offset),
                    ]),
            ]);
        // As long as a Kafka client waits (request.timeout.ms): the answer
        // of a coordinator frozen past its successor's takeover still comes.
        let ok = match self
            .client
            .call_within(
                self.commit_timeout,
                to,
                ApiKey::OffsetCommit,
                self.commit_version,
                RequestKind::OffsetCommit(req),
            )
            .await
        {
            Ok(ResponseKind::OffsetCommit(r)) => r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.error_code == 0),
            _ => false,
        };
        if !ok {
            self.coordinator = None;
        }
        ok
    }

    /// The committed offset of `partition` (-1 for none), if the
    /// coordinator answered; recorded in the history.
    pub async fn committed(&mut self, partition: i32) -> Option<i64> {
        let sent = self.now();
        let to = self.coordinator().await?;
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(s(&self.group)))
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partition_indexes(vec![partition]),
            ]));
        match self
            .client
            .call_within(
                self.request_timeout,
                to,
                ApiKey::OffsetFetch,
                7,
                RequestKind::OffsetFetch(req),
            )
            .await
        {
            Ok(ResponseKind::OffsetFetch(r)) if r.error_code == 0 => {
                let p = r.topics.first()?.partitions.first()?;
                let offset = (p.error_code == 0).then_some(p.committed_offset)?;
                self.history.record(
                    self.now(),
                    Event::Committed {
                        group: self.group.clone(),
                        partition,
                        offset,
                        sent,
                    },
                );
                Some(offset)
            }
            _ => {
                self.coordinator = None;
                None
            }
        }
    }

    pub(crate) async fn init_producer_id(&mut self) -> (i64, i16) {
        loop {
            let to = self.any_broker();
            let req = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                .with_producer_epoch(-1);
            match self
                .client
                .call(
                    to,
                    ApiKey::InitProducerId,
                    3,
                    RequestKind::InitProducerId(req),
                )
                .await
            {
                Ok(ResponseKind::InitProducerId(r)) if r.error_code == 0 => {
                    self.history.record(
                        self.now(),
                        Event::ProducerId {
                            client: self.name.clone(),
                            broker: to,
                            id: r.producer_id.0,
                        },
                    );
                    return (r.producer_id.0, r.producer_epoch);
                }
                other => tracing::debug!(client = %self.name, ?other, "InitProducerId"),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Retriable produce errors: the client refreshes metadata and retries the
/// same batch (same sequence number).
fn retriable(code: i16) -> bool {
    // NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
    // REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, NOT_ENOUGH_REPLICAS.
    matches!(code, 6 | 5 | 3 | 7 | 56 | 19)
}

/// A producer writing unique values until `until`, idempotent or plain
/// (no producer id: retries may duplicate, as in Kafka). As librdkafka, it
/// sends a few produce requests at a time, all in flight at once on each
/// leader's connection (an idempotent producer's batches to one partition
/// with consecutive sequences), and retries the unanswered ones alone, in
/// order.
pub async fn producer(mut s: Session, until: Duration, idempotent: bool) {
    let (mut pid, mut epoch) = if idempotent {
        s.init_producer_id().await
    } else {
        (-1, -1)
    };
    let mut seq: BTreeMap<i32, i32> = BTreeMap::new();
    let mut n = 0u64;
    while s.now() < until {
        let burst = madsim::rand::thread_rng().gen_range(1..=4u64);
        let mut sent = Vec::new();
        for k in n..n + burst {
            let partition = (k % PARTITIONS as u64) as i32;
            let value = format!("{}-{k}", s.name);
            let sequence = if idempotent {
                let next = seq.entry(partition).or_insert(0);
                let this = *next;
                *next = this.wrapping_add(1);
                this
            } else {
                -1
            };
            let batch = broker::log::batch::build(
                (pid, epoch, sequence),
                broker::clock::now_ms(),
                &[value.as_bytes()],
            );
            sent.push((partition, value, sequence, batch));
        }
        n += burst;
        let answers = s
            .produce_pipelined(
                TOPIC,
                sent.iter().map(|(p, _, _, b)| (*p, b.clone())).collect(),
            )
            .await;
        let mut restart = false;
        for ((partition, value, sequence, batch), answer) in sent.into_iter().zip(answers) {
            let outcome = match answer {
                Ok((0, offset, broker)) => Outcome::Acked { offset, broker },
                Ok((code, _, _)) if !retriable(code) => Outcome::Refused(code),
                _ => produce_until_answered(&mut s, partition, batch, until).await,
            };
            if let Outcome::Acked { offset, broker } = outcome {
                tracing::debug!(client = %s.name, partition, offset, broker, pid, epoch, sequence, "acked");
            } else {
                restart = idempotent;
            }
            s.history.record(
                s.now(),
                Event::Produce {
                    client: s.name.clone(),
                    idempotent,
                    partition,
                    value,
                    outcome,
                },
            );
        }
        if restart {
            // A batch's fate is unknown or it was refused: start over as a
            // new producer so later values never depend on it.
            (pid, epoch) = s.init_producer_id().await;
            seq.clear();
        }
        let pause = madsim::rand::thread_rng().gen_range(10..150);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Sends `batch` alone until it is acknowledged or refused, or retries stop
/// a while after the workload ends (so the liveness phase judges a quiet
/// cluster).
async fn produce_until_answered(
    s: &mut Session,
    partition: i32,
    batch: Bytes,
    until: Duration,
) -> Outcome {
    while s.now() < until + Duration::from_secs(15) {
        match s.produce(TOPIC, partition, batch.clone()).await {
            Ok((0, offset, broker)) => return Outcome::Acked { offset, broker },
            Ok((code, _, _)) if retriable(code) => {
                tracing::debug!(client = %s.name, partition, code, "produce retriable error");
            }
            Ok((code, _, _)) => return Outcome::Refused(code),
            Err(()) => tracing::debug!(client = %s.name, partition, "produce: no answer"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Outcome::Unknown
}

/// Asks random brokers for producer ids until `until`, quickly enough that
/// brokers claim id blocks all the time and race each other for them
/// (the simulator's blocks are tiny).
pub(crate) async fn id_racer(mut s: Session, until: Duration) {
    while s.now() < until {
        s.init_producer_id().await;
        let pause = madsim::rand::thread_rng().gen_range(20..300);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Commits offsets for a group of its own every few tens of milliseconds,
/// as a stream processor with a short commit interval does, so that many
/// commits are in flight whenever a coordinator freezes, crashes or moves.
/// Offsets grow with every commit; after a failed one it reads the
/// committed offsets back (the coordinator may have moved). Each commit
/// waits for its answer as long as Kafka clients do (the late answer of a
/// coordinator frozen past its successor's takeover is judged) or, half
/// the time, only the simulator's few seconds, as a client with a short
/// `request.timeout.ms` does: it moves on to the successor and commits
/// there while the frozen coordinator still holds older offsets, which
/// [`lag_reader`] may then be answered from.
pub(crate) async fn committer(mut s: Session, until: Duration) {
    s.group = COMMITTER_GROUP.to_owned();
    let mut next: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let mut read_back = false;
    while s.now() < until {
        s.commit_timeout = if madsim::rand::thread_rng().gen_bool(0.5) {
            COMMIT_TIMEOUT
        } else {
            crate::client::CALL_TIMEOUT
        };
        let partition = madsim::rand::thread_rng().gen_range(0..PARTITIONS);
        let offset = next[&partition] + madsim::rand::thread_rng().gen_range(1..5);
        next.insert(partition, offset);
        let acked = s.commit(partition, offset, -1, "").await;
        if read_back || !acked || madsim::rand::thread_rng().gen_ratio(1, 10) {
            read_back = !acked;
            for p in 0..PARTITIONS {
                read_back |= s.committed(p).await.is_none();
            }
        }
        let pause = madsim::rand::thread_rng().gen_range(20..120);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Reads the committer's offsets all the time, as a lag exporter does, and
/// keeps asking the coordinator it knows through a run of failed calls
/// before it looks the coordinator up again (a client whose coordinator
/// cache is slow to notice a move). So a request it sends to a frozen
/// coordinator after the successor acknowledged newer commits is answered
/// when the old coordinator wakes up, before it learns it was deposed:
/// from its memory, unless it confirms its epoch first.
pub(crate) async fn lag_reader(mut s: Session, until: Duration) {
    /// Failed calls in a row before the coordinator is looked up again.
    const STICKY: u32 = 8;
    s.group = COMMITTER_GROUP.to_owned();
    let mut failed = 0;
    while s.now() < until {
        let partition = madsim::rand::thread_rng().gen_range(0..PARTITIONS);
        let known = s.coordinator;
        if s.committed(partition).await.is_some() {
            failed = 0;
        } else {
            failed += 1;
            if failed < STICKY {
                s.coordinator = known;
            } else {
                failed = 0;
            }
        }
        let pause = madsim::rand::thread_rng().gen_range(50..300);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// A consumer reading every partition in order, committing its positions,
/// and now and then "restarting": resuming from the committed offsets.
pub async fn consumer(mut s: Session, until: Duration) {
    let mut pos: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let mut polls = 0u64;
    let mut restart = false;
    while s.now() < until {
        for partition in 0..PARTITIONS {
            let from = pos[&partition];
            if let Some((got, _)) = s.fetch(TOPIC, partition, from).await {
                if let Some(last) = got.last() {
                    pos.insert(partition, last.0 + 1);
                }
                s.history.record(
                    s.now(),
                    Event::Poll {
                        client: s.name.clone(),
                        partition,
                        from,
                        got: got.into_iter().map(|(o, v, _)| (o, v)).collect(),
                    },
                );
            }
            polls += 1;
            if polls % 4 == 0 {
                let offset = pos[&partition];
                restart |= !s.commit(partition, offset, -1, "").await;
            }
        }
        // Now and then, and whenever a commit failed (the coordinator may
        // have moved), it restarts from the committed offsets.
        if restart || madsim::rand::thread_rng().gen_ratio(1, 15) {
            restart = false;
            for partition in 0..PARTITIONS {
                if let Some(offset) = s.committed(partition).await {
                    pos.insert(partition, offset.max(0));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Deletes and recreates a topic over and over; each incarnation's values
/// carry its number, and what is read right after a recreate must all be
/// of that incarnation.
pub(crate) async fn admin(mut s: Session, until: Duration) {
    let mut incarnation = 0u32;
    let mut unanswered: Vec<String> = Vec::new();
    while s.now() < until {
        let Some(topic_id) = s.create_topic_id(CHURN_TOPIC, CHURN_PARTITIONS).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        incarnation += 1;
        s.refresh(CHURN_TOPIC).await;
        for k in 0..3 {
            let value = format!("churn-{incarnation}-{k}");
            let batch = broker::log::batch::build(
                (-1, -1, -1),
                broker::clock::now_ms(),
                &[value.as_bytes()],
            );
            for _ in 0..10 {
                match s.produce(CHURN_TOPIC, 0, batch.clone()).await {
                    Ok((0, _, _)) => break,
                    Err(()) if !unanswered.contains(&value) => unanswered.push(value.clone()),
                    _ => {}
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
        if let Some((got, _)) = s.fetch(CHURN_TOPIC, 0, 0).await {
            s.history.record(
                s.now(),
                Event::ChurnRead {
                    incarnation,
                    values: got.into_iter().map(|(_, v, _)| v).collect(),
                    in_doubt: unanswered
                        .iter()
                        .filter(|v| !v.starts_with(&format!("churn-{incarnation}-")))
                        .cloned()
                        .collect(),
                },
            );
        }
        let mut deleted = false;
        let mut gone = false;
        let mut in_doubt = false;
        let mark = s.volume_mark.as_ref().map_or(0, |m| m());
        while s.now() < until && !deleted && !gone {
            let answer = s.delete_topic(CHURN_TOPIC).await;
            deleted = answer == Some(0);
            // Only this client deletes the topic: gone after an attempt of
            // ours that got no answer, that attempt probably went through.
            gone = in_doubt && answer == Some(UNKNOWN_TOPIC_OR_PARTITION);
            in_doubt |= answer.is_none();
            if !deleted && !gone {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        if (deleted || gone) && !topic_id.is_empty() {
            s.history.record(
                s.now(),
                Event::Deleted {
                    topic_id: topic_id.clone(),
                    mark,
                    acknowledged: deleted,
                },
            );
        }
        if deleted {
            // Acknowledged deleted: nobody may serve its records any more.
            let values = match s.fetch(CHURN_TOPIC, 0, 0).await {
                Some((got, _)) => got.into_iter().map(|(_, v, _)| v).collect(),
                None => Vec::new(),
            };
            s.history.record(
                s.now(),
                Event::DeletedRead {
                    incarnation,
                    values,
                },
            );
        }
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
}

/// The liveness phase's reader: every partition fully read from its
/// current leader, and one more write acknowledged, before `deadline`.
/// Returns the final log of each partition that converged:
/// `(offset, value, leader epoch)`.
pub async fn converge(
    mut s: Session,
    deadline: Duration,
) -> BTreeMap<i32, Vec<(i64, String, i32)>> {
    let mut logs = BTreeMap::new();
    // The sentinels come from an idempotent producer, two batches per
    // partition: a broker whose sequence checks refuse a producer's second
    // batch takes no idempotent write at all, and that must show here
    // (refused writes are never acknowledged, so no other rule judges them).
    let producer = tokio::time::timeout(deadline.saturating_sub(s.now()), s.init_producer_id())
        .await
        .ok();
    for partition in 0..PARTITIONS {
        let mut acked = 0;
        let mut end = -1;
        while s.now() < deadline {
            if acked < 2 {
                let sentinel = format!("final-{partition}-{acked}");
                let (pid, epoch) = producer.unwrap_or((-1, -1));
                let seq = if producer.is_some() { acked } else { -1 };
                let batch = broker::log::batch::build(
                    (pid, epoch, seq),
                    broker::clock::now_ms(),
                    &[sentinel.as_bytes()],
                );
                match s.produce(TOPIC, partition, batch).await {
                    Ok((0, offset, _)) => {
                        acked += 1;
                        end = offset;
                    }
                    other => {
                        tracing::debug!(partition, ?other, "final write not acknowledged yet");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
                continue;
            }
            let mut log = Vec::new();
            let mut next = 0;
            while next <= end && s.now() < deadline {
                match s.fetch(TOPIC, partition, next).await {
                    Some((got, _)) if !got.is_empty() => {
                        next = got.last().map_or(next, |r| r.0 + 1);
                        log.extend(got);
                    }
                    Some((_, hw)) => {
                        tracing::debug!(partition, next, end, hw, "final read got nothing");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    None => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
            if next > end {
                // Sentinels stay: they are ordinary writes of the log, and
                // the offsets of the final read must have no gaps.
                logs.insert(partition, log);
                break;
            }
        }
    }
    logs
}

/// CreateTopics' timeout as clients send it: some wait for the new topic's
/// leaders (the Java admin, kafka-python), some do not (confluent-kafka's
/// default operation timeout is 0), and the broker answers at once then.
pub(crate) fn create_timeout_ms() -> i32 {
    if madsim::rand::thread_rng().gen_bool(0.5) {
        5000
    } else {
        0
    }
}
