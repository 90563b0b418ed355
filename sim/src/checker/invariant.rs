//! The invariants a run is judged by. A violation is one line that starts
//! with its invariant's name, then says what happened (`Invariant::says`),
//! so scenarios and sweeps can count violations by invariant.

use std::fmt;

macro_rules! invariants {
    ($($variant:ident = $name:literal: $doc:literal,)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        pub enum Invariant {
            $(#[doc = $doc] $variant,)*
        }

        impl Invariant {
            /// Every invariant, in the order sweep summaries list them.
            pub const ALL: &[Invariant] = &[$(Invariant::$variant,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(Invariant::$variant => $name,)*
                }
            }
        }
    };
}

invariants! {
    LostWrite = "lost-write": "An acknowledged write is in the final log at the offset its answer named.",
    Duplicate = "duplicate": "A value an idempotent producer sent is in the log once.",
    SplitBrain = "split-brain": "Plain writes of one leader epoch are acknowledged by one broker.",
    InconsistentOffsets = "inconsistent-offsets": "Every read of an offset returns the same record, the final log's.",
    NonmonotonicPoll = "nonmonotonic-poll": "A fetch never returns records before the offset it asked for.",
    PollSkip = "poll-skip": "A fetch and the final log have no gaps.",
    EpochRegression = "epoch-regression": "A broker never answers an older leader epoch of a partition than it answered before.",
    CommittedOffsetRegression = "committed-offset-regression": "OffsetFetch never returns less than an acknowledged commit.",
    CommitNotDurable = "commit-not-durable": "Every acknowledged commit is in the group file a new coordinator would load.",
    ServedNotDurable = "served-not-durable": "An offset an OffsetFetch returned is in the file a new coordinator would load from then on, unless a commit of the offset found there came after it: a coordinator serves no commit it failed to store.",
    TxnStateNotDurable = "txn-state-not-durable": "The file a new coordinator would load for a transactional id holds the producer id of every InitProducerId answered before it was read, at that answer's epoch or a newer one: no coordinator forgets or rolls back a producer it handed out.",
    GroupExclusivity = "group-exclusivity": "One member owns a partition in a generation.",
    HoldingNotDurable = "holding-not-durable": "A partition a consumer-protocol member holds since before the observer began to read is that member's in the group file a new coordinator would load.",
    ConsumerGroupOverlap = "consumer-group-overlap": "A partition of a consumer-protocol group (KIP-848) is held by one member at a time: from the answer that gave it until the member let go of it or its session lapsed.",
    RecreatedTopicNotEmpty = "recreated-topic-not-empty": "A recreated topic starts empty.",
    ReadFromDeletedTopic = "read-from-deleted-topic": "Nothing is read from a topic after its deletion.",
    CreateFailed = "create-failed": "A create or grow only fails for the volume's reasons.",
    DeletionLeftover = "deletion-leftover": "A deleted topic's files are reaped once the cluster converged.",
    DeletedPartitionRecreated = "deleted-partition-recreated": "Nothing makes a deleted topic's directory again.",
    TrimmedWriteLost = "trimmed-write-lost": "On a trimmed log, every acknowledged record at or above the log start offset is served at its offset.",
    DeleteRecordsUndone = "delete-records-undone": "The log start offset never goes back below what an acknowledged DeleteRecords answered.",
    CompactedWriteLost = "compacted-write-lost": "On a compacted log, every record read is one that was written (at the offset its answer named), and the newest acknowledged record of each key, or a newer write of that key, is readable.",
    CompactionUnfinished = "compaction-unfinished": "Once faults heal and writes stop, the leader's compaction passes leave each key of a compacted topic once in its log within the liveness phase.",
    MissingSegment = "missing-segment": "The newest manifest of a partition names only segment files that are on the volume.",
    UndurableManifest = "undurable-manifest": "A manifest vouches only for bytes the NFS server has committed: sealed segments to their end, the active one to its checkpoint.",
    UndurablePublication = "undurable-publication": "A rename makes a name visible only once every byte it shows (the file, or each file in a directory renamed into place) is committed at the NFS server: the contract's first rule, for every file it publishes (tombstones of deletions aside).",
    EpochGap = "epoch-gap": "Every leader epoch up to a partition's newest manifest has a claim file, so an old leader's fence check is complete.",
    OneController = "one-controller": "A controller epoch's assignment is written only by the broker that won that epoch's claim.",
    ProducerIdReused = "producer-id-reused": "InitProducerId never hands out one producer id twice.",
    Liveness = "liveness": "Every partition is readable and writable, every broker heartbeats, and a client pipelining transactions finishes them, once faults heal.",
    TornRead = "torn-read": "A reader never sees a half-replaced file.",
    HeartbeatRegressed = "heartbeat-regressed": "A broker's heartbeat sequence never goes back within an incarnation.",
    AbortedRead = "aborted-read": "A read_committed reader never reads a record of a transaction that did not commit.",
    UncommittedRead = "uncommitted-read": "A read_committed reader reads a transaction's records only after its commit was asked for.",
    TornTransaction = "torn-transaction": "A transaction is read whole or not at all, and each of its records once.",
    LostCommit = "lost-commit": "Every acknowledged write of an acknowledged commit is read once the cluster converged.",
    AbortedOffsets = "aborted-offsets": "Offsets sent to a transaction take effect only if it commits, and those of an acknowledged commit (or newer ones) do.",
    UnjoinedWrite = "unjoined-write": "A transactional write to a partition, or an offset commit for a group, that did not join its transaction is refused (KIP-890) and never takes effect.",
    FencedWrite = "fenced-write": "No write or commit of a producer epoch is acknowledged once a newer epoch of its transactional id was handed out.",
    AclRegression = "acl-regression": "A broker that refused a write under ACL version v never accepts one later unless a version after v that allows it was begun before: no broker goes back to an older ACL set.",
    CredentialRegression = "credential-regression": "A broker that refused a password under credentials version v never accepts it later unless a version after v that accepts it was begun before: no broker goes back to older credentials.",
    SecurityChangeLost = "security-change-lost": "Every acknowledged ACL or credential change is in the newest complete version of its document: no acknowledged change is written over.",
    ReassignmentLost = "reassignment-lost": "The preferred broker of a partition on the volume after the run is the one its last acknowledged reassignment named, or one a request that may still have landed named: no acknowledged reassignment is written over.",
    ReassignmentUnhonoured = "reassignment-unhonoured": "Once faults heal, every partition whose preferred broker is live is led by it.",
    QuotaChangeLost = "quota-change-lost": "Each client quota on the volume after the run is the one its last acknowledged AlterClientQuotas set, or one a request that may still have landed set: no acknowledged change is written over.",
    QuotaExceeded = "quota-exceeded": "Once faults heal, no broker sends a client more fetched bytes than its consumer_byte_rate allows over 10 s (plus one second's burst and one response per connection), however the client ignores its throttle.",
    AclUnapplied = "acl-unapplied": "Once faults heal, every broker applies every acknowledged ACL change (answers DescribeAcls with it) within 15 s.",
    NewTopicUnwritable = "new-topic-unwritable": "Once faults heal, a topic created through any broker takes writes within LEADERS_WAIT (5 s) of its CreateTopics answer, plus one controller failover (10 s, if the faults left the controller dead): the controller learns of it from its creator's heartbeat, not only from its own listing of the topics, which an NFS client may serve from its cache for a minute.",
    FsckClean = "fsck-clean": "Once the cluster converged, `kaas fsck` finds no damage on the volume: no lost or short segment, no epoch without its claim, no unreadable manifest or topic meta.",
    RequestUnanswered = "request-unanswered": "Once faults heal, every request of a client that pipelines as librdkafka does (a transaction's produce requests several in flight on one connection, commits, aborts, plain produce requests) is answered within its timeout.",
    SpuriousFence = "spurious-fence": "A transactional id's only producer, bumping its own epoch (KIP-360) or claiming the one its timed-out transaction was aborted under (KIP-588), is never fenced.",
    NothingGivenUp = "nothing-given-up": "On a volume nothing damaged, `kaas fsck --repair --truncate-damaged` gives nothing up: damage it finds there is a tail still being written or a stale read taken for damage, and acknowledged records given up.",
    IdShared = "id-shared": "One process runs as a broker id at a time: once a newer process of an id published its heartbeat, an older one publishes again at most the heartbeat it was writing (two more sequences at most, for the ones the observer missed).",
    FailoverSlow = "failover-slow": "Once a broker's host loses power, with no other fault in the way and no injected stall of the volume, every partition it led takes writes again within the session timeout + 5 s.",
}

impl Invariant {
    /// A violation of this invariant: its name, then `detail`.
    pub fn says(self, detail: impl fmt::Display) -> String {
        format!("{} {detail}", self.name())
    }

    /// The invariant a violation names (its first word), if it is one.
    pub fn of(violation: &str) -> Option<Invariant> {
        let word = violation.split(' ').next()?;
        Invariant::ALL.iter().copied().find(|i| i.name() == word)
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
