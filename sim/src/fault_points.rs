//! What a fault point (`vfs::fault_point!`) does when a broker reaches it:
//! the hook the harness installs for a run whose world has point rates.
//!
//! Per reach, with the profile's rates: hold the calling task a little
//! (a slow step); hold it for seconds while the rest of its broker runs on
//! (its heartbeats go on); freeze the whole broker right there for longer
//! than a session timeout, so that a successor takes over and the broker
//! wakes up as a zombie in the middle of its volume change; crash the
//! broker right there; or (aimed points only) fail the broker's next volume
//! call with EIO, so the step after the point takes its error path.
//! A crash is a panic that madsim turns into a kill of the broker's node
//! (the broker nodes restart on it, 1 to 10 s later), so the NFS host
//! crashes with it (`nfs_hook`), exactly as a scheduled crash does.
//!
//! Points act only while the faults run (before the liveness phase), and
//! only on broker hosts. Each act goes into the trace, so a run replays.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::Rng;
use tokio::time::Instant;

use crate::frozen::Frozen;
use crate::swarm::{Failing, PointRates};
use crate::trace::Trace;

/// The panic message that crashes a broker node (`start_broker` restarts
/// nodes on it).
pub(crate) const CRASH: &str = "kaas-fault-point crash";

/// Most freezes one run takes outside the aimed-at points: each costs a
/// takeover of everything the broker leads.
const MAX_FREEZES: usize = 6;
/// Aimed-at points freeze brokers up to this many times in all (three
/// families of six steps, each aimed at twice, would otherwise keep every
/// broker frozen for most of a run). A frozen broker reaches no point, so
/// each broker takes about four in a minute at most anyway.
const MAX_AIMED_FREEZES: usize = 12;
/// Each aimed-at point acts (holds, crashes or freezes; an act skipped
/// because another broker is held counts too) this many times a run at
/// most.
const MAX_ACTS_PER_POINT: u32 = 3;

/// How often each point was reached and what the points did, per run.
#[derive(Clone, Default)]
pub struct PointStats(Arc<Mutex<Stats>>);

#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub reached: BTreeMap<&'static str, usize>,
    /// Reaches since the world's `aim_after_ms`, which aimed points count.
    pub aim_reached: BTreeMap<&'static str, usize>,
    /// Acts of each aimed-at point so far.
    pub aimed_acts: BTreeMap<&'static str, u32>,
    pub delays: usize,
    pub pauses: usize,
    pub freezes: usize,
    pub crashes: u32,
    /// Aimed acts that failed the broker's next volume call.
    pub fails: usize,
}

impl PointStats {
    fn lock(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn take(&self) -> Stats {
        self.lock().clone()
    }
}

/// Installs the hook for this run's thread (`vfs::fault_point::install(None)`
/// removes it).
/// The nodes a point acts on: the brokers (by broker id), and a node of
/// its own that wakes frozen brokers up (a frozen node runs nothing).
pub(crate) struct Targets {
    pub brokers: Vec<madsim::task::NodeId>,
    pub thawer: madsim::runtime::NodeHandle,
    /// The volume, whose next call from a broker a point may fail.
    pub nfs: vfs::model::ModelNfs,
}

pub(crate) fn install(
    rates: &PointRates,
    targets: Targets,
    until: Instant,
    trace: Trace,
    stats: PointStats,
    frozen: Frozen,
) {
    let rates = rates.clone();
    let start = Instant::now();
    let targets = Arc::new(targets);
    let aim_from = start + Duration::from_millis(rates.aim_after_ms);
    vfs::fault_point::install(Some(Arc::new(move |host, name| {
        let brokers = targets.brokers.len() as u32;
        let act = act(
            &rates,
            brokers,
            (aim_from, until),
            host,
            name,
            &stats,
            &frozen,
        );
        let (trace, stats, frozen) = (trace.clone(), stats.clone(), frozen.clone());
        let targets = targets.clone();
        Box::pin(async move {
            let at = format!("{:>9.3}s", start.elapsed().as_secs_f64());
            let broker = host.unwrap_or_default();
            match act {
                Act::Nothing => {}
                Act::FailNext { flushes } => {
                    stats.lock().fails += 1;
                    trace.record(format!(
                        "{at} point {name} fails the next call of broker-{broker}{}",
                        if flushes > 0 {
                            format!(" and its next {flushes} flushes")
                        } else {
                            String::new()
                        }
                    ));
                    targets.nfs.fail_next_call(broker);
                    if flushes > 0 {
                        targets.nfs.fail_next_flushes(broker, flushes);
                    }
                }
                Act::Delay(d) => {
                    stats.lock().delays += 1;
                    tokio::time::sleep(d).await;
                }
                Act::Pause(d) => {
                    stats.lock().pauses += 1;
                    trace.record(format!(
                        "{at} point {name} holds broker-{broker} {} ms",
                        d.as_millis()
                    ));
                    tokio::time::sleep(d).await;
                }
                Act::Freeze(d) => {
                    stats.lock().freezes += 1;
                    trace.record(format!(
                        "{at} point {name} freezes broker-{broker} {} ms",
                        d.as_millis()
                    ));
                    let node = targets.brokers[broker as usize];
                    frozen.set(broker, true);
                    let handle = madsim::runtime::Handle::current();
                    handle.pause(node);
                    let thawed = frozen.clone();
                    targets.thawer.spawn(async move {
                        tokio::time::sleep(d).await;
                        thawed.set(broker, false);
                        madsim::runtime::Handle::current().resume(node);
                    });
                    // Yield, so that the rest of the step runs only once
                    // the broker wakes up.
                    tokio::task::yield_now().await;
                }
                Act::Crash => {
                    trace.record(format!("{at} point {name} crashes broker-{broker}"));
                    // Silent until it boots again (`start_broker`).
                    frozen.crashed_at_point(broker);
                    panic!("{CRASH} of broker-{broker} at {name}");
                }
            }
        })
    })));
}

enum Act {
    Nothing,
    /// The broker's next volume call (the step after this point) fails
    /// with EIO before it reaches the server: the step's error path runs,
    /// and whatever the broker does next must leave the volume and its
    /// answers consistent. With `flushes`, the server also refuses that
    /// many of the broker's next flushes (an fsync and the close after it
    /// both fail, the pages stay unsent).
    FailNext {
        flushes: u32,
    },
    Delay(Duration),
    Pause(Duration),
    Freeze(Duration),
    Crash,
}

fn act(
    rates: &PointRates,
    brokers: u32,
    (aim_from, until): (Instant, Instant),
    host: Option<u32>,
    name: &'static str,
    stats: &PointStats,
    frozen: &Frozen,
) -> Act {
    if host.is_none_or(|h| h >= brokers) {
        return Act::Nothing;
    }
    let now = Instant::now();
    let reach = {
        let mut s = stats.lock();
        *s.reached.entry(name).or_default() += 1;
        if now >= aim_from {
            let n = s.aim_reached.entry(name).or_default();
            *n += 1;
            *n as u32
        } else {
            0
        }
    };
    if now >= until {
        return Act::Nothing;
    }
    let mut rng = madsim::rand::thread_rng();
    let aimed = reach > 0
        && rates.focus.iter().any(|(p, k)| {
            *p == name
                && match rates.failing {
                    Some(_) => reach % k == 0,
                    None => aimed_reach(reach, *k),
                }
        });
    if aimed {
        let mut s = stats.lock();
        // A busy point must not spend the run's freezes before the rare
        // steps of its family come round.
        let most = rates
            .failing
            .as_ref()
            .map_or(MAX_ACTS_PER_POINT, |f| f.max_acts);
        let acts = s.aimed_acts.entry(name).or_default();
        if *acts >= most {
            return Act::Nothing;
        }
        *acts += 1;
        let roll: f64 = rng.r#gen();
        if let Some(failing) = &rates.failing {
            return failing_act(failing, roll, &mut rng);
        }
        // A hold: this task waits while its broker runs on (heartbeats go
        // on, nobody takes over), so rivals that chose the same next step
        // line up behind it (two claimants of one controller epoch, one of
        // them stuck between its create and its fill).
        if roll < 0.25 {
            return Act::Pause(Duration::from_millis(rng.gen_range(1_000..8_000)));
        }
        // The step after the point fails: its error path runs (a fence
        // check that got no answer, a removal left half done).
        if roll < 0.45 {
            return Act::FailNext { flushes: 0 };
        }
        // One frozen or crashed broker at a time: with every broker frozen
        // nobody takes over, and the zombie wakes up to find nothing
        // changed.
        if frozen.any_held() {
            return Act::Nothing;
        }
        // A freeze more often than a crash: it makes a zombie that wakes
        // up in the middle of its change, the narrower window of the two.
        if roll < 0.65 && s.crashes < rates.max_crashes {
            s.crashes += 1;
            return Act::Crash;
        }
        if s.freezes >= MAX_AIMED_FREEZES {
            return Act::Nothing;
        }
        // Past a session timeout (10 s) and the follow loop, short of a
        // client's 30 s request timeout.
        return Act::Freeze(Duration::from_millis(rng.gen_range(12_000..25_000)));
    }
    if !rates.within.is_empty() && !rates.within.contains(&name) {
        return Act::Nothing;
    }
    let roll: f64 = rng.r#gen();
    // Outside the aimed points too, one broker held at a time.
    let held = frozen.any_held();
    if roll < rates.crash {
        let mut s = stats.lock();
        if s.crashes < rates.max_crashes && !held {
            s.crashes += 1;
            return Act::Crash;
        }
        return Act::Nothing;
    }
    if roll < rates.crash + rates.pause {
        // Half the holds freeze the whole broker past a session timeout
        // (10 s), so that a successor takes over meanwhile.
        if rng.gen_bool(0.5) && stats.lock().freezes < MAX_FREEZES && !held {
            let (min, max) = rates.freeze_ms.unwrap_or((8_000, 20_000));
            return Act::Freeze(Duration::from_millis(rng.gen_range(min..max)));
        }
        return Act::Pause(Duration::from_millis(rng.gen_range(1_000..8_000)));
    }
    if roll < rates.crash + rates.pause + rates.delay {
        return Act::Delay(Duration::from_millis(
            rng.gen_range(1..rates.delay_max_ms.max(2)),
        ));
    }
    Act::Nothing
}

/// An aimed act in a world of failing writes: the write fails, or it is
/// held while the broker's other tasks run on (a commit racing the next
/// one, a load racing a save).
fn failing_act(failing: &Failing, roll: f64, rng: &mut impl Rng) -> Act {
    if roll < failing.share {
        let flushes = if rng.gen_bool(0.5) { 2 } else { 0 };
        return Act::FailNext { flushes };
    }
    Act::Pause(Duration::from_millis(rng.gen_range(200..4_000)))
}

/// Whether the `reach`-th reach of a point aimed at with `k` acts: the
/// k-th, 2k-th, 4k-th, ... A rare step (an election, a DeleteRecords) is
/// hit at its first reaches, a busy one (a flush) again and again through
/// the run, ever less often, so that every phase of a run (boot, load,
/// a takeover storm) sees its zombies.
pub(crate) fn aimed_reach(reach: u32, k: u32) -> bool {
    k > 0 && reach % k == 0 && (reach / k).is_power_of_two()
}

/// A panic hook that stays quiet about fault-point crashes (they are
/// planned, and traced) and reports every other panic as before.
pub(crate) fn quiet_planned_crashes() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|m| m.starts_with(CRASH));
            if !planned {
                previous(info);
            }
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::aimed_reach;

    #[test]
    fn an_aimed_point_acts_at_k_2k_4k_and_so_on() {
        let acts: Vec<u32> = (1..=40).filter(|r| aimed_reach(*r, 3)).collect();
        assert_eq!(acts, vec![3, 6, 12, 24]);
        let acts: Vec<u32> = (1..=9).filter(|r| aimed_reach(*r, 1)).collect();
        assert_eq!(acts, vec![1, 2, 4, 8]);
        assert!(!aimed_reach(0, 1));
    }
}
