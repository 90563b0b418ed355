//! The observer: reads what the brokers publish on the volume while the
//! run goes on, and checks it as it goes (torn reads, heartbeats going
//! back, silent brokers, one controller per epoch).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use broker::cluster::heartbeat;
use madsim::runtime::NodeHandle;
use tokio::time::Instant;
use vfs::Vfs;

use crate::actors::Cast;
use crate::checker::{Invariant, Violations};
use crate::frozen::Frozen;
use crate::history::History;
use crate::trace::Trace;

use super::OBSERVER_HOST;
use super::brokers::{Cluster, HEARTBEAT_SECS};

const OBSERVE_EVERY: Duration = Duration::from_millis(700);

/// What the observer last saw of one broker.
struct Seen {
    incarnation: u64,
    sequence: u64,
    changed_at: Instant,
}

/// Reads every heartbeat periodically and checks: each read is a complete
/// file (no torn replace), a broker's sequence never goes back within an
/// incarnation, and no broker stays silent longer than a crash allows.
pub async fn observe(
    vfs: Arc<dyn Vfs>,
    brokers: u32,
    trace: Trace,
    violations: Violations,
    stamp: impl Fn() -> String,
) {
    observe_with_pauses(
        vfs,
        brokers,
        trace,
        violations,
        stamp,
        Frozen::default(),
        |_| Duration::ZERO,
    )
    .await
}

/// [`observe`], not counting the time a broker spends frozen by a fault,
/// nor the injected stalls its volume calls sat through (`stalled`: a
/// broker id's total so far; a start-up that meets four 8-second stalls is
/// slow, not stuck).
pub(crate) async fn observe_with_pauses(
    vfs: Arc<dyn Vfs>,
    brokers: u32,
    trace: Trace,
    violations: Violations,
    stamp: impl Fn() -> String,
    frozen: Frozen,
    stalled: impl Fn(u32) -> Duration,
) {
    let mut looks = Looks {
        seen: BTreeMap::new(),
        stall_marks: BTreeMap::new(),
        started: Instant::now(),
        reported_absent: BTreeSet::new(),
        retired: BTreeMap::new(),
        trace,
        violations,
        stamp,
        frozen,
        stalled,
    };
    let mut controllers = crate::observers::controllers::Controllers::new();
    let mut interval = tokio::time::interval(OBSERVE_EVERY);
    loop {
        interval.tick().await;
        controllers
            .look(vfs.as_ref(), &looks.violations, (looks.stamp)().trim())
            .await;
        let now = Instant::now();
        for id in 0..brokers {
            let stalled = (looks.stalled)(id);
            looks
                .stall_marks
                .entry(id)
                .or_default()
                .push((now, stalled));
            match heartbeat::read(vfs.as_ref(), id).await {
                Ok(hb) => looks.heartbeat(id, &hb, now),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => looks.absent(id, now),
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    looks.violations.push(
                        Invariant::TornRead
                            .says(format!("broker-{id} at {}: {e}", (looks.stamp)().trim())),
                    );
                }
                // EIO and friends: the volume said no this time; ask again later.
                Err(e) => looks.trace.record(format!(
                    "{} observe broker-{id} error {:?}",
                    (looks.stamp)(),
                    e.kind()
                )),
            }
        }
    }
}

/// Three missed heartbeats, and a stalled NFS server (5 s) on top, after
/// the broker last woke up from a pause, plus the two intervals a
/// restarted broker watches its old heartbeat before it writes its own
/// (`broker::cluster::id_claim::claim_id`).
const SILENCE_LIMIT: Duration = Duration::from_secs(HEARTBEAT_SECS * 3 + 14 + 2 * HEARTBEAT_SECS);

/// What the observer keeps from one look at the heartbeats to the next.
struct Looks<S, F> {
    seen: BTreeMap<u32, Seen>,
    /// Per broker id, the stall total at each look, to excuse a silence by
    /// the stalls since it began.
    stall_marks: BTreeMap<u32, Vec<(Instant, Duration)>>,
    started: Instant,
    reported_absent: BTreeSet<u32>,
    /// Per broker id: each incarnation the observer saw replaced, with the
    /// last sequence it saw of it.
    retired: BTreeMap<u32, BTreeMap<u64, u64>>,
    trace: Trace,
    violations: Violations,
    stamp: S,
    frozen: Frozen,
    stalled: F,
}

impl<S: Fn() -> String, F: Fn(u32) -> Duration> Looks<S, F> {
    /// The injected stalls broker `id` sat through since `since`.
    fn excused(&self, id: u32, since: Instant) -> Duration {
        let then = self
            .stall_marks
            .get(&id)
            .and_then(|m| m.iter().rev().find(|(t, _)| *t <= since))
            .map_or(Duration::ZERO, |(_, d)| *d);
        (self.stalled)(id).saturating_sub(then)
    }

    /// Broker `id` has no heartbeat file (yet).
    fn absent(&mut self, id: u32, now: Instant) {
        // Not counting the time a fault held it frozen or dead.
        let Some(woke) = self.frozen.awake_since(id) else {
            return;
        };
        let since = woke.map_or(self.started, |w| w.max(self.started));
        let late = now.duration_since(since) > SILENCE_LIMIT + self.excused(id, since);
        if late && !self.seen.contains_key(&id) && self.reported_absent.insert(id) {
            self.violations.push(Invariant::Liveness.says(format!(
                "broker-{id} never published a heartbeat (at {})",
                (self.stamp)().trim()
            )));
        }
    }

    /// Broker `id`'s heartbeat as read now.
    fn heartbeat(&mut self, id: u32, hb: &heartbeat::Heartbeat, now: Instant) {
        self.violations.checked(Invariant::TornRead);
        self.violations.checked(Invariant::HeartbeatRegressed);
        match self.seen.get(&id) {
            Some(s) if s.incarnation == hb.incarnation && s.sequence == hb.sequence => {
                self.unchanged(id, now);
            }
            Some(s) if s.incarnation == hb.incarnation && hb.sequence < s.sequence => {
                self.violations
                    .push(Invariant::HeartbeatRegressed.says(format!(
                        "broker-{id} {} -> {} (at {})",
                        s.sequence,
                        hb.sequence,
                        (self.stamp)().trim()
                    )));
            }
            _ => self.moved_on(id, hb, now),
        }
    }

    /// Broker `id`'s heartbeat is as the last look found it: silent too
    /// long, unless a fault holds it.
    fn unchanged(&mut self, id: u32, now: Instant) {
        let Some(woke) = self.frozen.awake_since(id) else {
            return; // frozen by a fault
        };
        let Some(changed_at) = self.seen.get(&id).map(|s| s.changed_at) else {
            return;
        };
        let since = woke.map_or(changed_at, |w| w.max(changed_at));
        if now.duration_since(since) > SILENCE_LIMIT + self.excused(id, since) {
            let stamp = (self.stamp)();
            if let Some(s) = self.seen.get_mut(&id) {
                self.violations.push(Invariant::Liveness.says(format!(
                    "broker-{id} silent since sequence {} (at {})",
                    s.sequence,
                    stamp.trim()
                )));
                s.changed_at = now;
            }
        }
    }

    /// Broker `id` published a newer heartbeat, or a new incarnation did.
    fn moved_on(&mut self, id: u32, hb: &heartbeat::Heartbeat, now: Instant) {
        if let Some(s) = self
            .seen
            .get(&id)
            .filter(|s| s.incarnation != hb.incarnation)
        {
            let gone = self.retired.entry(id).or_default();
            // The first replacement is the mark: a process that keeps
            // publishing between a newer one's heartbeats would otherwise
            // move it along.
            gone.entry(s.incarnation).or_insert(s.sequence);
            self.violations.checked(Invariant::IdShared);
            if let Some(&last) = gone.get(&hb.incarnation)
                && hb.sequence > last + 2
            {
                self.violations.push(Invariant::IdShared.says(format!(
                    "broker-{id} incarnation {:016x} published sequence {} after a \
                     newer process replaced it at sequence {last} (at {})",
                    hb.incarnation,
                    hb.sequence,
                    (self.stamp)().trim()
                )));
            }
        }
        if self
            .seen
            .get(&id)
            .is_none_or(|s| s.incarnation != hb.incarnation)
        {
            self.trace.record(format!(
                "{} observe broker-{id} incarnation {:016x}",
                (self.stamp)(),
                hb.incarnation
            ));
        }
        self.trace.record(format!(
            "{} observe broker-{id} sequence {}",
            (self.stamp)(),
            hb.sequence
        ));
        self.seen.insert(
            id,
            Seen {
                incarnation: hb.incarnation,
                sequence: hb.sequence,
                changed_at: now,
            },
        );
    }
}

/// Starts on `node` the observers (`crate::observers`) of the actors in
/// `cast`: each reads the volume as a new broker would while its actor
/// works.
pub(crate) fn start_watchers(
    node: &NodeHandle,
    cast: &Cast,
    cluster: &Cluster,
    history: &History,
    violations: &Violations,
) {
    let volume = || Arc::new(cluster.nfs.host(OBSERVER_HOST));
    if cast.has("committer") {
        node.spawn(crate::observers::group_files::watch(
            volume(),
            history.clone(),
            cluster.start,
        ));
    }
    if cast.has("next-members") {
        node.spawn(crate::observers::group_files::watch_holders(
            volume(),
            history.clone(),
            cluster.start,
        ));
    }
    if cast.has("transactors") {
        node.spawn(crate::observers::group_files::watch_txns(
            volume(),
            history.clone(),
            cluster.start,
        ));
    }
    if cast.has("trimmer") {
        node.spawn(crate::observers::manifests::watch(
            volume(),
            cluster.nfs.clone(),
            violations.clone(),
            super::stamp(cluster.start),
        ));
    }
}
