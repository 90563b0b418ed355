//! The broker's fault points and their families, and how a world aims at
//! them.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Every fault point in the broker and `vfs::durable` (a test checks this
/// list against the source).
pub const POINTS: &[&str] = &[
    "assignment.still-newest",
    "checkpoint.written",
    "claim.slot-created",
    "claim.slot-filled",
    "compaction.manifest-written",
    "compaction.planned",
    "compaction.segment-created",
    "compaction.segments-written",
    "create-partitions.staged",
    "create-topic.placed",
    "create-topic.staged",
    "delete-records.decided",
    "delete-records.manifest-written",
    "delete-topic.tombstoned",
    "election.next-chosen",
    "election.slot-created",
    "election.slot-filled",
    "flush.acknowledged",
    "flush.synced",
    "group-heartbeat.arrived",
    "group-load.adopted",
    "group-load.listed",
    "group-load.older-epoch-fenced",
    "group-load.read",
    "group-save.decided",
    "group-save.saved",
    "group-save.superseding",
    "group-save.written",
    "preferred-change.claimed",
    "preferred-change.read",
    "preferred-change.slot-created",
    "producer-ids.block-chosen",
    "quota-change.claimed",
    "quota-change.read",
    "quota-change.slot-created",
    "remove.children-removed",
    "replace.renamed",
    "replace.temp-durable",
    "replace.temp-written",
    "retention.decided",
    "retention.manifest-written",
    "retention.unlinked",
    "roll.indexes-written",
    "roll.segment-created",
    "security-change.claimed",
    "security-change.read",
    "security-change.slot-created",
    "takeover.decided",
    "takeover.epoch-claimed",
    "takeover.fenced",
    "takeover.manifest-written",
    "takeover.older-epoch-fenced",
    "takeover.segment-written",
    "takeover.tail-read",
    "txn-complete.markers-written",
    "txn-end.prepared",
    "txn-load.read",
    "txn-markers.collected",
    "txn-markers.sending",
    "txn-offsets.marker-applied",
    "txn-save.decided",
    "txn-save.written",
];

/// The steps of one durable protocol, as fault points: a world that aims
/// at a family holds or crashes brokers at several steps of the same kind
/// of change in one run (a coordinator frozen before its write while its
/// successor loads; two claimants of one controller epoch).
pub const FAMILIES: &[(&str, &[&str])] = &[
    (
        "election",
        &[
            "election.next-chosen",
            "election.slot-created",
            "election.slot-filled",
            "assignment.still-newest",
        ],
    ),
    (
        "producer-ids",
        &[
            "producer-ids.block-chosen",
            "claim.slot-created",
            "claim.slot-filled",
        ],
    ),
    (
        "groups",
        &[
            "group-heartbeat.arrived",
            "group-load.older-epoch-fenced",
            "group-load.listed",
            "group-load.read",
            "group-load.adopted",
            "group-save.decided",
            "group-save.written",
            "group-save.superseding",
            "group-save.saved",
        ],
    ),
    (
        "takeover",
        &[
            "takeover.decided",
            "takeover.epoch-claimed",
            "takeover.older-epoch-fenced",
            "takeover.fenced",
            "takeover.tail-read",
            "takeover.segment-written",
            "takeover.manifest-written",
        ],
    ),
    (
        "flush",
        &[
            "flush.synced",
            "flush.acknowledged",
            "checkpoint.written",
            "roll.segment-created",
            "roll.indexes-written",
        ],
    ),
    (
        "trim",
        &[
            "retention.decided",
            "retention.manifest-written",
            "retention.unlinked",
            "delete-records.decided",
            "delete-records.manifest-written",
        ],
    ),
    (
        "compaction",
        &[
            "compaction.planned",
            "compaction.segment-created",
            "compaction.segments-written",
            "compaction.manifest-written",
            "retention.unlinked",
            "roll.segment-created",
        ],
    ),
    (
        "transactions",
        &[
            "txn-load.read",
            "txn-save.decided",
            "txn-save.written",
            "txn-end.prepared",
            "txn-markers.collected",
            "txn-markers.sending",
            "txn-complete.markers-written",
            "txn-offsets.marker-applied",
            "flush.synced",
        ],
    ),
    (
        "security",
        &[
            "security-change.read",
            "security-change.slot-created",
            "security-change.claimed",
        ],
    ),
    (
        "reassignments",
        &[
            "preferred-change.read",
            "preferred-change.slot-created",
            "preferred-change.claimed",
            "assignment.still-newest",
            "takeover.decided",
            "takeover.epoch-claimed",
            "takeover.fenced",
        ],
    ),
    (
        "quotas",
        &[
            "quota-change.read",
            "quota-change.slot-created",
            "quota-change.claimed",
        ],
    ),
    (
        "topics",
        &[
            "create-topic.staged",
            "create-topic.placed",
            "create-partitions.staged",
            "delete-topic.tombstoned",
            "remove.children-removed",
        ],
    ),
];

/// The points a world aims at, each at a reach drawn log-uniformly (the
/// first call of a rare step as likely as a late one of a busy step):
/// four times in five every step of one to four protocol families, early
/// (reach 1 to 8), else up to six points of any kind at reach 1 to 64.
pub(super) fn focus(rng: &mut ChaCha8Rng) -> Vec<(&'static str, u32)> {
    let log_uniform = |rng: &mut ChaCha8Rng, max_log2: f64| {
        (2f64.powf(rng.gen_range(0.0..max_log2)) as u32).max(1)
    };
    let mut points: Vec<(&'static str, u32)> = Vec::new();
    if rng.gen_bool(0.8) {
        let mut order: Vec<usize> = (0..FAMILIES.len()).collect();
        let n = rng.gen_range(1..=4);
        for i in 0..n {
            let j = rng.gen_range(i..order.len());
            order.swap(i, j);
            for p in FAMILIES[order[i]].1 {
                points.push((p, log_uniform(rng, 3.0)));
            }
        }
    } else {
        for _ in 0..rng.gen_range(1..=6) {
            points.push((
                POINTS[rng.gen_range(0..POINTS.len())],
                log_uniform(rng, 6.0),
            ));
        }
    }
    points.sort_unstable();
    points.dedup_by_key(|(p, _)| *p);
    points
}

/// The points right before a coordinator's or a controller's write to the
/// volume (or a step of the atomic replace every metadata file goes
/// through): a call failed after one of them is a failed durable write.
pub const WRITES: &[&str] = &[
    "claim.slot-created",
    "create-partitions.staged",
    "create-topic.staged",
    "delete-records.decided",
    "delete-topic.tombstoned",
    "group-heartbeat.arrived",
    "group-save.decided",
    "preferred-change.read",
    "preferred-change.slot-created",
    "producer-ids.block-chosen",
    "quota-change.read",
    "quota-change.slot-created",
    "replace.temp-durable",
    "replace.temp-written",
    "security-change.read",
    "security-change.slot-created",
    "txn-complete.markers-written",
    "txn-save.decided",
];

/// Three to eight of [`WRITES`], each acting at every k-th reach, k from 1 to
/// 8 drawn log-uniformly (`PointRates::failing`).
pub(super) fn coordinator_writes(rng: &mut ChaCha8Rng) -> Vec<(&'static str, u32)> {
    let mut order: Vec<&'static str> = WRITES.to_vec();
    let n = rng.gen_range(3..=8);
    let mut points = Vec::with_capacity(n);
    for i in 0..n {
        let j = rng.gen_range(i..order.len());
        order.swap(i, j);
        let k = (2f64.powf(rng.gen_range(0.0..3.0)) as u32).max(1);
        points.push((order[i], k));
    }
    points.sort_unstable();
    points
}

/// The steps of one family of [`FAMILIES`].
pub(super) fn family(name: &str) -> Vec<&'static str> {
    FAMILIES
        .iter()
        .filter(|(f, _)| *f == name)
        .flat_map(|(_, steps)| steps.iter().copied())
        .collect()
}

/// The transaction coordinator's own steps (the family without the
/// partition flush it shares with produce).
pub(super) fn transaction_steps() -> Vec<&'static str> {
    family("transactions")
        .into_iter()
        .filter(|p| p.starts_with("txn-"))
        .collect()
}

/// When reaches of aimed-at points start to count: most worlds aim at the
/// workload's steady state (2 to 30 s in), one in four at the cold start,
/// where every broker claims the first controller epoch and takes its
/// first partitions at once (a StatefulSet whose pods start in parallel):
/// the election's races are widest there.
pub(super) fn aim_after(rng: &mut ChaCha8Rng) -> u64 {
    if rng.gen_bool(0.25) {
        0
    } else {
        rng.gen_range(2_000..30_000)
    }
}
