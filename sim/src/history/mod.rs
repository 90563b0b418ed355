//! The history of a run: every client operation and its outcome, and what
//! the observers and the final reads found, in order. The checker judges
//! it against the final log.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod describe;

pub use describe::describe;

/// A record of the compacted topic as written and read: key and value
/// (`None`: a tombstone).
pub type Written = (String, Option<String>);

/// The volume after the run: the workload topic's preferred brokers
/// (partition -> broker), and the partitions a live preferred broker did
/// not lead (partition, preferred, leader).
pub type FinalState = (BTreeMap<i32, u32>, Vec<(i32, u32, Option<u32>)>);

/// What became of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdminOutcome {
    /// Acknowledged: the document holds it (or a later change).
    Acked,
    /// Refused with this code: nothing changed.
    Refused(i16),
    /// No answer, or one that cannot say (timed out, storage error): it
    /// may land, even after later requests.
    Unknown,
}

impl AdminOutcome {
    /// What the error code of a change's answer says (`None`: no answer).
    /// `also_done` are refusals that change nothing and are as definite as
    /// an acknowledgement.
    pub(crate) fn of(code: Option<i16>, also_done: &[i16]) -> Self {
        match code {
            Some(0) => AdminOutcome::Acked,
            Some(c) if also_done.contains(&c) => AdminOutcome::Acked,
            // REQUEST_TIMED_OUT (7), KAFKA_STORAGE_ERROR (56): may land.
            Some(7) | Some(56) | None => AdminOutcome::Unknown,
            Some(c) => AdminOutcome::Refused(c),
        }
    }
}

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
        records: Vec<(i64, Written)>,
    },
    /// A transaction of the compactor, before its batch of `records` is
    /// sent to `partition`.
    CompactTxnSent {
        label: String,
        partition: i32,
        records: Vec<Written>,
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
    /// A transactional id as a new coordinator would load it, read by the
    /// observer from `sent` on: the producer its file holds (`None`: no
    /// file), the coordinator epoch of that file and the slot's newest
    /// claimed epoch.
    TxnOnVolume {
        transactional_id: String,
        sent: Duration,
        producer: Option<(i64, i16)>,
        file_epoch: Option<u32>,
        newest_epoch: u32,
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
        outcome: AdminOutcome,
    },
    /// After the run: the workload topic's preferred brokers on the volume,
    /// and the partitions a live preferred broker did not lead by the
    /// liveness deadline (`None`: unreadable).
    ReassignFinal { found: Option<FinalState> },
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
        outcome: AdminOutcome,
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
        records: Vec<(i64, Written)>,
        settled: bool,
    },
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
