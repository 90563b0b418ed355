//! The fault timeline: the seeded schedule, scripted and triggered faults,
//! and how each is applied and healed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use broker::clock::WallClock;
use madsim::rand::Rng;
use madsim::runtime::{Handle, NodeHandle};
use tokio::time::Instant;
use vfs::model::ModelNfs;

use crate::checker::failover::Outage;
use crate::swarm::FaultSet;
use crate::swarm::Pace;
use crate::trace::Trace;
use crate::twins::{Process, Twin, TwinMode, TwinStarter};

use super::Options;
use super::brokers::{Cluster, HEARTBEAT_SECS, TWIN_START_UP};
use crate::frozen::Frozen;

/// One scheduled fault: what, from when, for how long.
#[derive(Clone, Debug)]
pub struct Fault {
    pub at: Duration,
    pub lasts: Duration,
    pub kind: FaultKind,
    /// Armed at `at`, the fault waits for a broker's call to match.
    pub trigger: Option<Trigger>,
}

/// A fault placed at a point of a broker's work rather than at a time:
/// the first volume call (`"<op> <path>"`, see `ModelNfs::watch`) that
/// contains `on` after the fault is armed sets it off.
#[derive(Clone, Debug)]
pub struct Trigger {
    pub on: String,
    /// Whom the fault hits: the broker that made the call, or every other.
    pub others: bool,
    /// How long after the call.
    pub delay: Duration,
}

/// Faults injected so far, by kind (shared by the concurrent injectors).
#[derive(Clone, Default)]
struct Counts(Arc<std::sync::Mutex<BTreeMap<&'static str, usize>>>);

impl Counts {
    fn add(&self, kind: &'static str) {
        *self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(kind)
            .or_default() += 1;
    }

    fn take(&self) -> BTreeMap<&'static str, usize> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// What injecting a fault needs.
struct FaultEnv {
    handle: Handle,
    nfs: ModelNfs,
    clocks: Vec<WallClock>,
    brokers: Vec<NodeHandle>,
    clients: Vec<NodeHandle>,
    trace: Trace,
    counts: Counts,
    start: Instant,
    frozen: Frozen,
    /// The brokers' processes, to see whether one stopped itself.
    processes: Vec<Process>,
    twin: TwinStarter,
    /// Every fault injected, for the failover-time check.
    outages: Arc<std::sync::Mutex<Vec<Outage>>>,
}

impl FaultEnv {
    fn stamp(&self) -> String {
        format!("{:>9.3}s", self.start.elapsed().as_secs_f64())
    }

    /// Applies `f`, waits `f.lasts`, heals it.
    async fn inject(&self, f: &Fault) {
        self.trace
            .record(format!("{} fault {}", self.stamp(), f.describe()));
        self.counts.add(f.kind.name());
        self.outages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Outage {
                at: self.start.elapsed(),
                healed: self.start.elapsed() + f.lasts,
                kind: f.kind.name(),
                broker: f.kind.broker().map(|b| b as u32),
            });
        if let FaultKind::Twin { broker, mode } = f.kind {
            let stamp = || self.stamp();
            let twin = Twin {
                handle: &self.handle,
                broker: broker as u32,
                original: &self.processes[broker],
                start: &self.twin,
                frozen: &self.frozen,
                trace: &self.trace,
                stamp: &stamp,
                lasts: f.lasts,
                notice: Duration::from_secs(3 * HEARTBEAT_SECS),
            };
            twin.inject(mode).await;
            return;
        }
        let apply_all = |on| {
            apply(
                &self.handle,
                &self.nfs,
                &self.clocks,
                &self.brokers,
                &self.clients,
                f,
                on,
            )
        };
        // A paused or killed broker is silent by the fault's doing.
        if let FaultKind::Pause(b) | FaultKind::Crash(b) = f.kind {
            self.frozen.set(b as u32, true);
        }
        let boots = match f.kind {
            FaultKind::Crash(b) => self.frozen.boots(b as u32),
            _ => 0,
        };
        apply_all(true);
        tokio::time::sleep(f.lasts).await;
        self.trace
            .record(format!("{} heal {}", self.stamp(), f.describe()));
        let mut heal = true;
        if let FaultKind::Crash(b) = f.kind {
            // A fault point's crash may have restarted the node meanwhile:
            // then this restart crashes that process first (a restart
            // without a kill would leave its sockets bound). If madsim still
            // owes the node the restart of a point crash, that restart is
            // this one too: a second would boot a process beside it.
            if self.frozen.restart_owed(b as u32) {
                heal = false;
            } else if self.frozen.boots(b as u32) != boots {
                self.handle.kill(self.brokers[b].id());
            }
        }
        if heal {
            apply_all(false);
        }
        if let FaultKind::Pause(b) | FaultKind::Crash(b) = f.kind {
            self.frozen.set(b as u32, false);
        }
    }

    /// Arms `f`'s watch at `f.at` and injects `f` on the broker(s) its
    /// trigger names once a call matches; gives up at `end`.
    async fn run_triggered(&self, f: Fault, end: Duration) {
        let Some(trigger) = f.trigger.clone() else {
            return;
        };
        tokio::time::sleep(f.at.saturating_sub(self.start.elapsed())).await;
        let watch = self.nfs.watch(&trigger.on);
        self.trace.record(format!(
            "{} armed {} on {:?}",
            self.stamp(),
            f.describe(),
            trigger.on
        ));
        let caller = loop {
            if let Some(host) = self.nfs.watch_fired(watch) {
                break host as usize;
            }
            if self.start.elapsed() >= end {
                self.trace
                    .record(format!("{} never triggered {:?}", self.stamp(), trigger.on));
                return;
            }
            // Finer than any volume call's latency in a scenario, so the
            // fault lands before the caller's next call does.
            tokio::time::sleep(Duration::from_micros(200)).await;
        };
        if caller >= self.brokers.len() {
            return; // the observer's or a client's host
        }
        self.trace.record(format!(
            "{} triggered by broker-{caller}: {:?}",
            self.stamp(),
            trigger.on
        ));
        tokio::time::sleep(trigger.delay).await;
        let targets: Vec<usize> = if trigger.others {
            (0..self.brokers.len()).filter(|&b| b != caller).collect()
        } else {
            vec![caller]
        };
        let hits: Vec<Fault> = targets
            .into_iter()
            .map(|b| Fault {
                kind: f.kind.on_broker(b),
                trigger: None,
                ..f.clone()
            })
            .collect();
        futures_join_all(hits.iter().map(|h| self.inject(h))).await;
    }
}

/// Runs the futures concurrently on this task and waits for all.
async fn futures_join_all<F: std::future::Future<Output = ()>>(futs: impl Iterator<Item = F>) {
    let mut set: Vec<std::pin::Pin<Box<F>>> = futs.map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        set.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if set.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

#[derive(Clone, Debug)]
pub enum FaultKind {
    /// Kill the broker's node (its NFS client crashes with it), restart it after.
    Crash(usize),
    /// Freeze the broker's node: it wakes up as a zombie.
    Pause(usize),
    /// Cut the broker off the network; its volume stays reachable.
    Isolate(usize),
    /// Cut one client off one broker.
    CutLink { client: usize, broker: usize },
    /// Restart the NFS server: unstable writes not yet committed are lost
    /// (clients resend them after the write verifier changes).
    NfsRestart,
    /// Step a broker's wall clock by this many ms; NTP steps it back after.
    ClockJump { broker: usize, ms: i64 },
    /// Start a second process with the broker's id (see `twins`).
    Twin { broker: usize, mode: TwinMode },
    /// The volume fills up: the server takes `slack` more bytes, then
    /// answers ENOSPC (EDQUOT with `quota`) to every write that grows a
    /// file, until the heal (an operator grows or frees the volume).
    Full { slack: u64, quota: bool },
}

impl FaultKind {
    /// The broker the fault hits, if it hits one.
    pub(crate) fn broker(&self) -> Option<usize> {
        match self {
            FaultKind::Crash(b) | FaultKind::Pause(b) | FaultKind::Isolate(b) => Some(*b),
            FaultKind::CutLink { broker, .. }
            | FaultKind::ClockJump { broker, .. }
            | FaultKind::Twin { broker, .. } => Some(*broker),
            FaultKind::Full { .. } | FaultKind::NfsRestart => None,
        }
    }

    /// The same fault aimed at broker `b`.
    pub(crate) fn on_broker(&self, b: usize) -> FaultKind {
        match self {
            FaultKind::Crash(_) => FaultKind::Crash(b),
            FaultKind::Pause(_) => FaultKind::Pause(b),
            FaultKind::Isolate(_) => FaultKind::Isolate(b),
            FaultKind::CutLink { client, .. } => FaultKind::CutLink {
                client: *client,
                broker: b,
            },
            FaultKind::ClockJump { ms, .. } => FaultKind::ClockJump { broker: b, ms: *ms },
            FaultKind::Twin { mode, .. } => FaultKind::Twin {
                broker: b,
                mode: *mode,
            },
            FaultKind::Full { slack, quota } => FaultKind::Full {
                slack: *slack,
                quota: *quota,
            },
            FaultKind::NfsRestart => FaultKind::NfsRestart,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Crash(_) => "crash",
            FaultKind::Pause(_) => "pause",
            FaultKind::Isolate(_) => "isolate",
            FaultKind::CutLink { .. } => "cut",
            FaultKind::NfsRestart => "nfs-restart",
            FaultKind::ClockJump { .. } => "clock",
            FaultKind::Twin { .. } => "twin",
            FaultKind::Full { .. } => "full",
        }
    }
}

impl Fault {
    pub fn describe(&self) -> String {
        match self.kind {
            FaultKind::Crash(b) => format!("crash broker-{b}"),
            FaultKind::Pause(b) => format!("pause broker-{b}"),
            FaultKind::Isolate(b) => format!("isolate broker-{b}"),
            FaultKind::CutLink { client, broker } => format!("cut client-{client} broker-{broker}"),
            FaultKind::NfsRestart => "nfs-restart".to_owned(),
            FaultKind::ClockJump { broker, ms } => format!("clock broker-{broker} jumps {ms} ms"),
            FaultKind::Twin { broker, mode } => format!("twin broker-{broker} {}", mode.name()),
            FaultKind::Full { slack, quota } => format!(
                "full volume after {slack} more bytes ({})",
                if quota { "EDQUOT" } else { "ENOSPC" }
            ),
        }
    }
}

/// The seeded fault timeline: one after another, each healed before the
/// next, all over before `end`. With crashes enabled, the first fault is a
/// crash so recovery runs in every seed.
pub(crate) fn schedule(
    rng: &mut impl Rng,
    enabled: &FaultSet,
    pace: &Pace,
    brokers: u32,
    clients: usize,
    end: Duration,
) -> Vec<Fault> {
    let kinds: Vec<&str> = [
        "crash",
        "pause",
        "isolate",
        "cut",
        "nfs-restart",
        "clock",
        "twin",
        "full",
    ]
    .into_iter()
    .filter(|k| enabled.contains(k))
    .collect();
    let mut out = Vec::new();
    if kinds.is_empty() {
        return out;
    }
    let mut t = Duration::from_millis(rng.gen_range(3_000..8_000));
    while t + Duration::from_secs(10) < end {
        let broker = rng.gen_range(0..brokers) as usize;
        let pick = if out.is_empty() && kinds.contains(&"crash") {
            "crash"
        } else {
            kinds[rng.gen_range(0..kinds.len())]
        };
        let kind = match pick {
            "crash" => FaultKind::Crash(broker),
            "pause" => FaultKind::Pause(broker),
            "isolate" => FaultKind::Isolate(broker),
            "cut" => FaultKind::CutLink {
                client: rng.gen_range(0..clients),
                broker,
            },
            "clock" => {
                let ms = rng.gen_range(60_000..3_600_000);
                FaultKind::ClockJump {
                    broker,
                    ms: if rng.gen_bool(0.5) { ms } else { -ms },
                }
            }
            "twin" => FaultKind::Twin {
                broker,
                mode: TwinMode::ALL[rng.gen_range(0..TwinMode::ALL.len())],
            },
            "full" => FaultKind::Full {
                slack: rng.gen_range(0..(256 << 10)),
                quota: rng.gen_bool(0.3),
            },
            _ => FaultKind::NfsRestart,
        };
        let (min, max) = match (&kind, pace.pause_ms) {
            (FaultKind::Pause(_), Some(range)) => range,
            _ => pace.lasts_ms,
        };
        let mut lasts = Duration::from_millis(rng.gen_range(min..max));
        if let FaultKind::Twin { .. } = kind {
            lasts = lasts.max(TWIN_START_UP);
        }
        out.push(Fault {
            at: t,
            lasts,
            kind,
            trigger: None,
        });
        t += lasts + Duration::from_millis(rng.gen_range(pace.gap_ms.0..pace.gap_ms.1));
    }
    out
}

fn apply(
    handle: &Handle,
    nfs: &ModelNfs,
    clocks: &[WallClock],
    brokers: &[NodeHandle],
    clients: &[NodeHandle],
    f: &Fault,
    on: bool,
) {
    let net = madsim::net::NetSim::current();
    match f.kind {
        FaultKind::NfsRestart if on => nfs.restart_server(),
        FaultKind::NfsRestart => {}
        FaultKind::ClockJump { broker, ms } => clocks[broker].jump(if on { ms } else { -ms }),
        // Started and healed by `twins::Twin::inject`.
        FaultKind::Twin { .. } => {}
        FaultKind::Full { slack, quota } if on => {
            nfs.set_capacity(Some(nfs.used_bytes() + slack), quota)
        }
        FaultKind::Full { .. } => nfs.set_capacity(None, false),
        FaultKind::Crash(b) if on => handle.kill(brokers[b].id()),
        FaultKind::Crash(b) => handle.restart(brokers[b].id()),
        FaultKind::Pause(b) if on => handle.pause(brokers[b].id()),
        FaultKind::Pause(b) => handle.resume(brokers[b].id()),
        FaultKind::Isolate(b) if on => net.clog_node(brokers[b].id()),
        FaultKind::Isolate(b) => net.unclog_node(brokers[b].id()),
        FaultKind::CutLink { client, broker } => {
            let (c, b) = (clients[client].id(), brokers[broker].id());
            if on {
                net.clog_link(c, b);
                net.clog_link(b, c);
            } else {
                net.unclog_link(c, b);
                net.unclog_link(b, c);
            }
        }
    }
}

/// What the timeline did.
pub(crate) struct Played {
    /// Faults of the timeline (triggered ones not counted).
    pub faults: usize,
    /// Faults injected, by kind.
    pub counts: BTreeMap<&'static str, usize>,
    /// Every fault injected, for the failover-time check.
    pub outages: Vec<Outage>,
}

/// Draws the seeded timeline, adds the scripted faults, and injects each
/// in turn (triggered ones wait for their call alongside) until the last
/// one healed.
pub(crate) async fn play(opts: &Options, cluster: &Cluster, clients: Vec<NodeHandle>) -> Played {
    let faults_end = opts.duration;
    let mut faults = schedule(
        &mut madsim::rand::thread_rng(),
        &opts.faults,
        &opts.pace,
        opts.brokers,
        clients.len(),
        faults_end,
    );
    faults.extend(
        opts.scripted
            .iter()
            .filter(|f| f.trigger.is_none())
            .cloned(),
    );
    faults.sort_by_key(|f| f.at);
    let counts = Counts::default();
    let env = Arc::new(FaultEnv {
        handle: cluster.handle.clone(),
        nfs: cluster.nfs.clone(),
        clocks: cluster.clocks.clone(),
        brokers: cluster.brokers.clone(),
        clients,
        trace: cluster.trace.clone(),
        counts: counts.clone(),
        start: cluster.start,
        frozen: cluster.frozen.clone(),
        processes: cluster.processes.clone(),
        twin: cluster.twin.clone(),
        outages: Default::default(),
    });
    let triggered: Vec<_> = opts
        .scripted
        .iter()
        .filter(|f| f.trigger.is_some())
        .cloned()
        .map(|f| {
            let env = env.clone();
            tokio::spawn(async move { env.run_triggered(f, faults_end).await })
        })
        .collect();
    for f in &faults {
        tokio::time::sleep(f.at.saturating_sub(cluster.start.elapsed())).await;
        env.inject(f).await;
    }
    for t in triggered {
        let _ = t.await;
    }
    let outages = env
        .outages
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Played {
        faults: faults.len(),
        counts: counts.take(),
        outages,
    }
}
