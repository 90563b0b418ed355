//! One simulated run: brokers on their own nodes sharing one volume
//! ([`brokers`]), an observer that reads what they publish
//! ([`observer`]), the client actors of the cast (`crate::actors`), the
//! fault timeline ([`timeline`]), then the liveness phase and the checks
//! ([`liveness`], `crate::checker`).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use madsim::runtime::{Handle, NodeHandle, Runtime};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use vfs::model::FaultStats;

use crate::actors::{Cast, Stage};
use crate::checker::{self, Invariant};
use crate::fault_points::{self, Stats};
use crate::history::{self, Event, History, Outcome};
use crate::nfs_hook::NfsCrashHook;
use crate::workload;

pub(crate) mod brokers;
pub(crate) mod liveness;
pub(crate) mod observer;
mod options;
pub(crate) mod timeline;

pub use crate::checker::Violations;
pub use observer::observe;
pub use options::{Options, Report};
pub use timeline::{Fault, FaultKind, Trigger};

use brokers::Cluster;
use liveness::Logs;
use timeline::Played;

/// The brokers' session timeout (kaas's default; not passed, so not set).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) use crate::hosts::OBSERVER_HOST;

/// The run's clock in the trace's format.
pub(crate) fn stamp(start: Instant) -> impl Fn() -> String + Copy + Send + Sync + 'static {
    move || format!("{:>9.3}s", start.elapsed().as_secs_f64())
}

/// Runs one seed on a thread of its own: std seeds a thread's `HashMap` keys
/// once, at its first use, and madsim can only make them derive from the
/// seed if that first use happens inside the new runtime.
#[allow(clippy::disallowed_types)] // outside the simulated world: it hosts one
pub fn run(opts: &Options) -> Report {
    let opts = opts.clone();
    let seed = opts.seed;
    let world = opts.describe_world();
    fault_points::quiet_planned_crashes();
    std::thread::Builder::new()
        .name(format!("sim-seed-{seed}"))
        .spawn(move || {
            broker::historical::reintroduce(&opts.reintroduce);
            let rt = Runtime::with_seed_and_config(opts.seed, madsim::Config::default());
            rt.add_simulator::<NfsCrashHook>();
            rt.block_on(simulate(opts, true))
        })
        .map_err(|e| format!("cannot start the simulation thread: {e}"))
        .and_then(|t| t.join().map_err(|payload| panic_message(payload.as_ref())))
        .unwrap_or_else(|why| Report {
            seed,
            world,
            digest: "-".to_owned(),
            events: 0,
            faults: 0,
            operations: 0,
            acked_writes: 0,
            fault_counts: BTreeMap::new(),
            checked: BTreeMap::new(),
            simulated: Duration::ZERO,
            nfs: FaultStats::default(),
            nfs_leftovers: 0,
            points: Stats::default(),
            violations: vec![format!("panic: {why}")],
            trace: Vec::new(),
        })
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}

/// One run inside the current madsim runtime. With `crash_hook`, the
/// [`NfsCrashHook`] plugin (registered by [`run`]) applies crash semantics
/// the instant a node is killed; without it, at the node's next boot.
pub async fn simulate(opts: Options, crash_hook: bool) -> Report {
    let cluster = Cluster::start(&opts, crash_hook);
    cluster.install_points(&opts);
    let violations = Violations::default();
    let observer = cluster.handle.create_node().name("observer").build();
    let stalls = cluster.nfs.clone();
    observer.spawn(observer::observe_with_pauses(
        Arc::new(cluster.nfs.host(OBSERVER_HOST)),
        opts.brokers,
        cluster.trace.clone(),
        violations.clone(),
        stamp(cluster.start),
        cluster.frozen.clone(),
        move |id| stalls.stalled(id),
    ));
    let history = History::default();
    observer::start_watchers(&observer, &opts.cast, &cluster, &history, &violations);
    let stage = Arc::new(Stage {
        brokers: opts.brokers,
        start: cluster.start,
        history: history.clone(),
        nfs: cluster.nfs.clone(),
        faults_end: opts.duration,
        patient: opts.patient_producers,
    });
    let (clients, tasks) = enter(&cluster.handle, &opts.cast, &stage);
    let played = timeline::play(&opts, &cluster, clients).await;

    // Liveness: with every fault healed and the clients done (their last
    // retries included), the cluster must converge.
    liveness::heal(&cluster, opts.duration, tasks).await;
    let converged = liveness::final_reads(&cluster, &opts.cast, &stage).await;
    // Deletions must finish within the same deadline.
    let deleted = liveness::deletions(&history);
    liveness::deletions_done(&cluster, &deleted, converged.deadline).await;
    liveness::final_states(&converged, &opts.cast, &stage).await;
    let events = history.events();
    for (at, e) in &events {
        cluster.trace.record(format!(
            "{:>9.3}s {}",
            at.as_secs_f64(),
            history::describe(e)
        ));
    }
    // Failover time, where nothing but the volume's own waits can slow it.
    if opts.failover_is_judged() {
        let (judged, found) = checker::failover::check(&events, &played.outages, SESSION_TIMEOUT);
        for _ in 0..judged {
            violations.checked(Invariant::FailoverSlow);
        }
        for v in found {
            violations.push(v);
        }
    }
    let mut found = violations.take();
    found.extend(checker::check(&events, &converged.logs));
    // Once more: a staging sweep may have begun since (the controller
    // sweeps a dead creator's staging a session timeout after it died),
    // and its reaping is under way.
    liveness::deletions_done(&cluster, &deleted, converged.deadline).await;
    found.extend(liveness::leftovers(&cluster.nfs, &deleted));
    // After the leftovers were looked at: the brokers keep working while
    // it reads.
    found.extend(liveness::fsck(&cluster, &converged.reader).await);
    let (audited, undurable) = checker::publications::check(&cluster.nfs);
    violations.checked_times(Invariant::UndurablePublication, audited as usize);
    found.extend(undurable);
    report(
        &opts,
        &cluster,
        &events,
        &converged.logs,
        &violations,
        found,
        played,
    )
}

/// Starts each actor's nodes, in the cast's order, each on a node of its
/// own so links can be cut one by one.
fn enter(
    handle: &Handle,
    cast: &Cast,
    stage: &Arc<Stage>,
) -> (Vec<NodeHandle>, Vec<JoinHandle<()>>) {
    let (mut nodes, mut tasks) = (Vec::new(), Vec::new());
    let mut next = 0;
    for actor in cast.iter() {
        for role in actor.roles() {
            let ip = role.ip.unwrap_or_else(|| {
                next += 1;
                Ipv4Addr::new(10, 0, 1, next)
            });
            let node = handle
                .create_node()
                .name(role.name)
                .ip(IpAddr::V4(ip))
                .build();
            let mut session = stage.session(role.name);
            if role.sees_volume {
                let volume = stage.nfs.clone();
                session.volume_mark = Some(Arc::new(move || volume.mark()));
                let volume = stage.nfs.clone();
                session.volume_errors = Some(Arc::new(move || {
                    let s = volume.stats();
                    s.eio + s.enospc + s.interrupts
                }));
            }
            let (stage, name, creates_topic) = (stage.clone(), role.name, role.creates_topic);
            tasks.push(node.spawn(async move {
                let mut session = session;
                // Until the faults end at most: a client that waited on
                // past them would keep the run from healing its volume
                // (seed 167: every client kept failing CreateTopics under
                // an EIO storm).
                while creates_topic
                    && !session
                        .create_topic(workload::TOPIC, workload::PARTITIONS)
                        .await
                    && session.now() < stage.faults_end
                {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                actor.play(name, session, &stage).await;
            }));
            nodes.push(node);
        }
    }
    (nodes, tasks)
}

/// The run's report: what was checked and found, and the trace's digest.
fn report(
    opts: &Options,
    cluster: &Cluster,
    events: &[(Duration, Event)],
    logs: &Logs,
    violations: &Violations,
    found: Vec<String>,
    played: Played,
) -> Report {
    let trace = &cluster.trace;
    let mut checked = checker::counts(events, logs);
    for (inv, n) in violations.checks() {
        *checked.entry(inv).or_default() += n;
    }
    *checked.entry(Invariant::FsckClean).or_default() += 1;
    let (acked, polls) = events.iter().fold((0, 0), |(a, p), (_, e)| match e {
        Event::Produce {
            outcome: Outcome::Acked { .. },
            ..
        } => (a + 1, p),
        Event::Poll { .. } => (a, p + 1),
        _ => (a, p),
    });
    trace.record(format!(
        "{} workload operations={} acked-writes={acked} polls={polls} final-records={}",
        stamp(cluster.start)(),
        events.len(),
        logs.values().map(Vec::len).sum::<usize>()
    ));
    for v in &found {
        trace.record(format!("violation {v}"));
    }
    let stats = cluster.nfs.stats();
    trace.record(format!("nfs {stats:?}"));
    vfs::fault_point::install(None);
    Report {
        seed: opts.seed,
        world: opts.describe_world(),
        digest: trace.digest(),
        events: trace.len(),
        faults: played.faults,
        operations: events.len(),
        acked_writes: acked,
        fault_counts: played.counts,
        checked,
        simulated: cluster.start.elapsed(),
        nfs: stats,
        nfs_leftovers: cluster.nfs.nfs_leftovers().len(),
        points: cluster.point_stats.take(),
        violations: found,
        trace: trace.lines(),
    }
}
