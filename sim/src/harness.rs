//! One simulated run: brokers on their own nodes sharing one volume, an
//! observer that reads what they publish, a seeded fault, and the checks.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use broker::clock::WallClock;
use broker::config::Config;
use broker::heartbeat;
use clap::Parser;
use madsim::rand::Rng;
use madsim::runtime::{Handle, NodeHandle, Runtime};
use tokio::time::Instant;
use vfs::Vfs;
use vfs::model::{FaultStats, ModelNfs, NfsConfig};

use crate::args::{FAULT_KINDS, FaultSet};
use crate::checker::failover::Outage;
use crate::checker::{self, Invariant};
use crate::fault_points::{self, PointStats, Stats};
use crate::nfs_hook::NfsCrashHook;
use crate::swarm::{self, Pace, PointRates};
use crate::trace::Trace;
use crate::twins::{Process, Twin, TwinMode, TwinStarter};
use crate::workload::{self, Event, History, Session};

#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub brokers: u32,
    pub duration: Duration,
    /// The shared volume's behaviour and faults.
    pub nfs: NfsConfig,
    /// Fault kinds the timeline may use (see `args::FAULT_KINDS`).
    pub faults: FaultSet,
    /// Scripted faults (a scenario's timeline), on top of the seeded ones.
    pub scripted: Vec<Fault>,
    /// Historical bugs switched back on (`broker::historical`).
    pub reintroduce: Vec<String>,
    /// Whether the topic creators (`creators`) run.
    pub creators: bool,
    /// Whether the trimmer (`trimmer`) runs.
    pub trimmer: bool,
    /// Whether a client asks for producer ids all the time (`workload::id_racer`).
    pub id_racer: bool,
    /// Whether a client commits offsets all the time (`workload::committer`).
    pub committer: bool,
    /// Whether the members of a consumer-protocol group run (`next_members`).
    pub next_members: bool,
    /// Whether the transactional producers and the read_committed reader
    /// run (`transactor`).
    pub transactions: bool,
    /// Whether the idempotent producer and the trimmer wait for a produce
    /// answer as long as Kafka's producers do (`request.timeout.ms`, 30 s)
    /// rather than the simulator's 4 s: the answer of a leader frozen past
    /// its successor's takeover then still arrives, and is judged.
    pub patient_producers: bool,
    /// Producer ids per block a broker claims (`--producer-id-block`).
    pub producer_id_block: u32,
    /// Whether brokers enforce ACLs and the ACL admin and its probe run
    /// (`guard`).
    pub security: bool,
    /// Whether the admins moving partitions to named brokers run (`movers`).
    pub movers: bool,
    /// Whether the admins setting client quotas and, once the faults heal,
    /// the throttled client run (`quota_setters`).
    pub quotas: bool,
    /// Whether an operator runs `kaas fsck --repair` during the faults
    /// (`repairer`).
    pub repairer: bool,
    /// How the seeded timeline spaces its faults.
    pub pace: Pace,
    /// What fault points in the broker do when reached.
    pub points: PointRates,
    /// The swarm world this run was drawn from (`pinned` for a fixed mix).
    pub world: &'static str,
}

impl Options {
    /// The default run: `brokers` brokers on a hostile model NFS, every fault.
    pub fn new(seed: u64, brokers: u32, duration: Duration) -> Self {
        Self::with_faults(
            seed,
            brokers,
            duration,
            FAULT_KINDS.iter().copied().collect(),
        )
    }

    pub fn with_faults(seed: u64, brokers: u32, duration: Duration, faults: FaultSet) -> Self {
        let nfs = if faults.contains("nfs") {
            NfsConfig::hostile()
        } else {
            NfsConfig::default()
        };
        Self {
            seed,
            brokers,
            duration,
            nfs,
            faults,
            scripted: Vec::new(),
            reintroduce: Vec::new(),
            creators: true,
            trimmer: true,
            id_racer: true,
            committer: true,
            next_members: true,
            transactions: true,
            security: true,
            movers: true,
            quotas: true,
            repairer: true,
            patient_producers: true,
            producer_id_block: 3,
            pace: Pace::CLASSIC,
            points: PointRates::default(),
            world: "pinned",
        }
    }

    /// This run's world in one line (see `swarm::Profile::describe`).
    pub fn describe_world(&self) -> String {
        swarm::Profile {
            world: self.world,
            faults: self.faults.clone(),
            nfs: self.nfs.clone(),
            pace: self.pace.clone(),
            points: self.points.clone(),
        }
        .describe()
    }

    /// A run in the world `seed` draws (see `swarm`).
    pub fn swarm(seed: u64, brokers: u32, duration: Duration) -> Self {
        Self::in_world(swarm::draw(seed), seed, brokers, duration)
    }

    /// A run in `profile`'s world.
    pub fn in_world(profile: swarm::Profile, seed: u64, brokers: u32, duration: Duration) -> Self {
        // Where failover time is judged, nothing else moves leadership.
        let leaders_left_alone = profile.world == "power-loss";
        Self {
            movers: !leaders_left_alone,
            repairer: !leaders_left_alone,
            nfs: profile.nfs,
            pace: profile.pace,
            points: profile.points,
            world: profile.world,
            ..Self::with_faults(seed, brokers, duration, profile.faults)
        }
    }
}

#[derive(Clone, Debug)]
pub struct Report {
    pub seed: u64,
    /// The world the run was in (`Options::describe_world`).
    pub world: String,
    pub digest: String,
    pub events: usize,
    pub faults: usize,
    /// Client operations in the history, and how many writes were acknowledged.
    pub operations: usize,
    pub acked_writes: usize,
    /// Faults injected, by kind.
    pub fault_counts: BTreeMap<&'static str, usize>,
    /// Operations each invariant was checked against.
    pub checked: BTreeMap<Invariant, usize>,
    /// Simulated time the run took.
    pub simulated: Duration,
    /// What the model NFS injected.
    pub nfs: FaultStats,
    /// `.nfs` files left on the volume at the end.
    pub nfs_leftovers: usize,
    /// Fault points reached and what they did.
    pub points: Stats,
    pub violations: Vec<String>,
    pub trace: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

const HEARTBEAT_SECS: u64 = 2;
/// The brokers' session timeout (kaas's default; not passed, so not set).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The shortest twin fault: a twin's start-up checks wait two heartbeat
/// intervals, on a volume that may be slow.
const TWIN_START_UP: Duration = Duration::from_secs(8);
/// NFS host ids of twin processes: this plus the broker id.
const TWIN_HOST: u32 = 2_000;
const OBSERVE_EVERY: Duration = Duration::from_millis(700);

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

/// NFS host id of the observer (brokers use their broker id).
const OBSERVER_HOST: u32 = 1_000;

/// One run inside the current madsim runtime. With `crash_hook`, the
/// [`NfsCrashHook`] plugin (registered by [`run`]) applies crash semantics
/// the instant a node is killed; without it, at the node's next boot.
pub async fn simulate(opts: Options, crash_hook: bool) -> Report {
    let handle = Handle::current();
    let nfs = ModelNfs::new(opts.nfs.clone(), madsim::rand::random());
    // The historical sixth bug: files opened buffered, as before kaas
    // opened them with O_DIRECT on NFS (`PosixVfs::direct_io`).
    if broker::historical::on("delegation-stall") {
        nfs.set_direct_io(false);
    }
    let hook = crash_hook.then(madsim::plugin::simulator::<NfsCrashHook>);
    if let Some(hook) = &hook {
        hook.attach(nfs.clone());
    }
    let trace = Trace::default();
    let start = Instant::now();
    let stamp = move || format!("{:>9.3}s", start.elapsed().as_secs_f64());

    // Each broker's wall clock is off by its own skew (up to ten minutes
    // either way) when clock faults are on.
    let clocks: Vec<WallClock> = (0..opts.brokers)
        .map(|id| {
            let c = WallClock::default();
            if opts.faults.contains("clock") {
                let skew = madsim::rand::thread_rng().gen_range(-600_000..=600_000);
                c.jump(skew);
                trace.record(format!("{} clock broker-{id} skew {skew} ms", stamp()));
            }
            c
        })
        .collect();
    let frozen = Frozen::default();
    let point_stats = PointStats::default();
    let processes: Vec<Process> = (0..opts.brokers)
        .map(|id| {
            let clock = clocks[id as usize].clone();
            let process = start_broker(
                &handle,
                &nfs,
                id,
                clock,
                frozen.clone(),
                opts.producer_id_block,
                opts.security,
                false,
            );
            if let Some(hook) = &hook {
                hook.map(process.node.id(), id);
            }
            process
        })
        .collect();
    let brokers: Vec<NodeHandle> = processes.iter().map(|p| p.node.clone()).collect();
    let twin: TwinStarter = {
        let (handle, nfs, clocks, frozen) =
            (handle.clone(), nfs.clone(), clocks.clone(), frozen.clone());
        let (hook, block, security) = (hook.clone(), opts.producer_id_block, opts.security);
        // One twin node per broker, restarted for each later twin fault:
        // its address stays taken by the killed node.
        let started: std::sync::Mutex<BTreeMap<u32, Process>> = Default::default();
        Arc::new(move |id| {
            let mut started = started.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(twin) = started.get(&id) {
                handle.kill(twin.node.id());
                handle.restart(twin.node.id());
                return twin.clone();
            }
            let clock = clocks[id as usize].clone();
            let process = start_broker(
                &handle,
                &nfs,
                id,
                clock,
                frozen.clone(),
                block,
                security,
                true,
            );
            if let Some(hook) = &hook {
                hook.map(process.node.id(), TWIN_HOST + id);
            }
            started.insert(id, process.clone());
            process
        })
    };
    // Before any broker runs: their first steps may reach a point. A run
    // without point rates installs nothing (and makes no node for it), so
    // it draws no extra randomness and keeps its digest.
    if opts.points.active() {
        fault_points::install(
            &opts.points,
            fault_points::Targets {
                brokers: brokers.iter().map(NodeHandle::id).collect(),
                thawer: handle.create_node().name("fault-points").build(),
                nfs: nfs.clone(),
            },
            start + opts.duration,
            trace.clone(),
            point_stats.clone(),
            frozen.clone(),
        );
    } else {
        vfs::fault_point::install(None);
    }

    let violations = Violations::default();
    let observer = handle.create_node().name("observer").build();
    let stalls = nfs.clone();
    observer.spawn(observe_with_pauses(
        Arc::new(nfs.host(OBSERVER_HOST)),
        opts.brokers,
        trace.clone(),
        violations.clone(),
        stamp,
        frozen.clone(),
        move |id| stalls.stalled(id),
    ));
    let history = History::default();
    if opts.committer {
        observer.spawn(crate::group_files::watch(
            Arc::new(nfs.host(OBSERVER_HOST)),
            history.clone(),
            start,
        ));
    }
    if opts.next_members {
        observer.spawn(crate::group_files::watch_holders(
            Arc::new(nfs.host(OBSERVER_HOST)),
            history.clone(),
            start,
        ));
    }
    if opts.trimmer {
        observer.spawn(crate::manifests::watch(
            Arc::new(nfs.host(OBSERVER_HOST)),
            nfs.clone(),
            violations.clone(),
            stamp,
        ));
    }

    // The clients, each on a node of its own so links can be cut one by one.
    let faults_end = opts.duration;
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    for (i, role) in [
        "producer-0",
        "producer-1",
        "consumer-0",
        "admin-0",
        "member-0",
        "member-1",
        "creator-0",
        "creator-1",
        "trimmer-0",
        "compactor-0",
        "ids-0",
        "committer-0",
        "lag-reader-0",
        "next-member-0",
        "next-member-1",
        "transactor-0",
        "transactor-1",
        "txn-reader-0",
    ]
    .into_iter()
    .filter(|role| opts.creators || !role.starts_with("creator-"))
    .filter(|role| opts.trimmer || !role.starts_with("trimmer-") && !role.starts_with("compactor-"))
    .filter(|role| opts.id_racer || !role.starts_with("ids-"))
    .filter(|role| {
        opts.committer || !role.starts_with("committer-") && !role.starts_with("lag-reader-")
    })
    .filter(|role| opts.next_members || !role.starts_with("next-member-"))
    .filter(|role| {
        opts.transactions || !role.starts_with("transactor-") && !role.starts_with("txn-")
    })
    .enumerate()
    {
        let node = handle
            .create_node()
            .name(role)
            .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1 + i as u8)))
            .build();
        let mut session = Session::new(role, opts.brokers, start, history.clone());
        let volume = nfs.clone();
        session.volume_mark = Some(Arc::new(move || volume.mark()));
        let volume = nfs.clone();
        session.volume_errors = Some(Arc::new(move || {
            let s = volume.stats();
            s.eio + s.enospc + s.interrupts
        }));
        if opts.patient_producers && matches!(role, "producer-0" | "trimmer-0") {
            session.request_timeout = workload::KAFKA_REQUEST_TIMEOUT;
        }
        let task = node.spawn(async move {
            let mut session = session;
            // Until the faults end at most: a client that waited on past
            // them would keep the run from healing its volume (seed 167:
            // every client kept failing CreateTopics under an EIO storm).
            while !session
                .create_topic(workload::TOPIC, workload::PARTITIONS)
                .await
                && session.now() < faults_end
            {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            match role {
                "consumer-0" => workload::consumer(session, faults_end).await,
                "admin-0" => workload::admin(session, faults_end).await,
                "member-0" | "member-1" => crate::members::member(session, faults_end).await,
                "creator-0" => crate::creators::creator(session, 0, faults_end).await,
                "creator-1" => crate::creators::creator(session, 1, faults_end).await,
                "trimmer-0" => crate::trimmer::trimmer(session, faults_end).await,
                "compactor-0" => crate::compactor::compactor(session, faults_end).await,
                "ids-0" => workload::id_racer(session, faults_end).await,
                "committer-0" => workload::committer(session, faults_end).await,
                "lag-reader-0" => workload::lag_reader(session, faults_end).await,
                "next-member-0" | "next-member-1" => {
                    crate::next_members::next_member(session, faults_end).await
                }
                "transactor-0" => crate::transactor::transactor(session, 0, faults_end).await,
                "transactor-1" => crate::transactor::transactor(session, 1, faults_end).await,
                "txn-reader-0" => crate::transactor::txn_reader(session, faults_end).await,
                "producer-0" => workload::producer(session, faults_end, true).await,
                _ => workload::producer(session, faults_end, false).await,
            }
        });
        clients.push(node);
        tasks.push(task);
    }
    if opts.security {
        for (role, ip) in [
            ("acl-admin-0", crate::guard::ADMIN_IP),
            ("acl-probe-0", crate::guard::PROBE_IP),
            ("credential-admin-0", crate::logins::ADMIN_IP),
            ("login-probe-0", crate::logins::PROBE_IP),
            ("acl-marker-0", crate::markers::ACL_ADMIN_IP),
            ("credential-marker-0", crate::markers::CREDENTIAL_ADMIN_IP),
        ] {
            let node = handle.create_node().name(role).ip(IpAddr::V4(ip)).build();
            let session = Session::new(role, opts.brokers, start, history.clone());
            let volume: Arc<dyn Vfs> = Arc::new(nfs.host(OBSERVER_HOST));
            let task = node.spawn(async move {
                match role {
                    "acl-admin-0" => crate::guard::admin(session, volume, faults_end).await,
                    "acl-probe-0" => crate::guard::probe(session, faults_end).await,
                    "acl-marker-0" => {
                        crate::markers::admin(session, crate::markers::ACLS, faults_end).await;
                    }
                    "credential-marker-0" => {
                        let doc = crate::markers::CREDENTIALS;
                        crate::markers::admin(session, doc, faults_end).await;
                    }
                    "credential-admin-0" => {
                        crate::logins::admin(session, volume, faults_end).await;
                    }
                    _ => crate::logins::probe(session, faults_end).await,
                }
            });
            clients.push(node);
            tasks.push(task);
        }
    }

    if opts.movers {
        let node = handle
            .create_node()
            .name("mover-0")
            .ip(IpAddr::V4(crate::movers::ADMIN_IP))
            .build();
        let session = Session::new("mover-0", opts.brokers, start, history.clone());
        tasks.push(node.spawn(async move {
            let mut session = session;
            // Until the faults end at most: a client that waited on past
            // them would keep the run from healing its volume (seed 167:
            // every client kept failing CreateTopics under an EIO storm).
            while !session
                .create_topic(workload::TOPIC, workload::PARTITIONS)
                .await
                && session.now() < faults_end
            {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            crate::movers::admin(session, faults_end).await;
        }));
        clients.push(node);
    }

    if opts.quotas {
        let node = handle
            .create_node()
            .name("quota-setter-0")
            .ip(IpAddr::V4(crate::quota_setters::ADMIN_IP))
            .build();
        let session = Session::new("quota-setter-0", opts.brokers, start, history.clone());
        tasks.push(node.spawn(crate::quota_setters::admin(session, faults_end)));
        clients.push(node);
    }

    if opts.repairer {
        let volume: Arc<dyn Vfs> = Arc::new(nfs.host(crate::repairer::HOST));
        let node = handle
            .create_node()
            .name("repairer-0")
            .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 3, 9)))
            .build();
        let history = history.clone();
        tasks.push(node.spawn(crate::repairer::repairer(
            volume, history, start, faults_end,
        )));
        clients.push(node);
    }

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
    let fault_counts = Counts::default();
    let env = Arc::new(FaultEnv {
        handle: handle.clone(),
        nfs: nfs.clone(),
        clocks: clocks.clone(),
        brokers: brokers.clone(),
        clients: clients.clone(),
        trace: trace.clone(),
        counts: fault_counts.clone(),
        start,
        frozen,
        processes,
        twin,
        outages: Default::default(),
    });
    // Triggered steps wait for their call on their own, alongside the
    // timeline.
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
        tokio::time::sleep(f.at.saturating_sub(start.elapsed())).await;
        env.inject(f).await;
    }
    for t in triggered {
        let _ = t.await;
    }
    let fault_counts = fault_counts.take();

    // Liveness: with every fault healed and the clients done (their last
    // retries included), the cluster must converge.
    tokio::time::sleep(faults_end.saturating_sub(start.elapsed())).await;
    for t in tasks {
        let _ = t.await;
    }
    trace.record(format!("{} workload done", stamp()));
    // The volume heals too: its caches stay, its injected faults stop, and
    // it answers as a healthy server on the same network does, in 0.05 to
    // 0.5 ms a call (never at once: a broker's futures wait on it, and a
    // future that holds what others need while nobody polls it shows only
    // then).
    nfs.set_faults(vfs::model::Faults {
        latency_min_us: HEALED_LATENCY_US.0,
        latency_max_us: HEALED_LATENCY_US.1,
        ..vfs::model::Faults::default()
    });
    // A broker a fault point froze (8 to 20 s) may still be asleep: the
    // faults heal once it wakes up, not before (seed 211: a request sent
    // to a broker frozen 6 s past the workload's end went unanswered).
    while env.frozen.any_held() && start.elapsed() < faults_end + FREEZE_MAX {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reader = handle
        .create_node()
        .name("final-reader")
        .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 1)))
        .build();
    let session = Session::new("final-reader", opts.brokers, start, history.clone());
    let deadline = start.elapsed() + LIVENESS;
    let trimmed = opts
        .trimmer
        .then(|| Session::new("final-trim-reader", opts.brokers, start, history.clone()));
    // The compacted topic is read on a node of its own, alongside: a
    // trimmed topic that was never created keeps its reader waiting until
    // the deadline (seed 64).
    let compacted = opts.trimmer.then(|| {
        let s = Session::new("final-compact-reader", opts.brokers, start, history.clone());
        handle
            .create_node()
            .name("final-compact-reader")
            .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 7)))
            .build()
            .spawn(crate::compactor::final_read(s, deadline))
    });
    // The transactions' topic is read on a node of its own, alongside: a
    // read that cannot finish (a trimmed topic never created, say) must
    // not use up the deadline of the others.
    let transacted = opts.transactions.then(|| {
        let s = Session::new("final-txn-reader", opts.brokers, start, history.clone());
        handle
            .create_node()
            .name("final-txn-reader")
            .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 2)))
            .build()
            .spawn(crate::transactor::final_read(s, deadline))
    });
    // Requests pipelined as librdkafka sends them must all be answered:
    // sent on a node of its own, alongside.
    let pipelined = {
        let s = Session::new("final-pipeliner", opts.brokers, start, history.clone());
        handle
            .create_node()
            .name("final-pipeliner")
            .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 6)))
            .build()
            .spawn(crate::pipeliner::final_pipeliner(s, deadline))
    };
    // Every broker must apply every acknowledged ACL change once the
    // faults healed: asked on a node of its own, alongside.
    let acls_applied = opts.security.then(|| {
        let acked = history
            .events()
            .into_iter()
            .filter_map(|(_, e)| match e {
                Event::SecurityMarker {
                    doc: crate::markers::ACLS,
                    marker,
                    acked: true,
                    ..
                } => Some(marker),
                _ => None,
            })
            .collect();
        let s = Session::new("final-acl-reader", opts.brokers, start, history.clone());
        handle
            .create_node()
            .name("final-acl-reader")
            .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 3)))
            .build()
            .spawn(crate::markers::final_applied(s, acked, deadline))
    });
    // Clients over their quotas fetch and produce as fast as they can,
    // alongside.
    let throttled = opts.quotas.then(|| {
        let acked = |client: &str| {
            let entity = format!("client-id={client}");
            history.events().into_iter().any(|(_, e)| {
                matches!(
                    e,
                    Event::QuotaChange {
                        entity: ref named,
                        outcome: crate::movers::AdminOutcome::Acked,
                        ..
                    } if *named == entity
                )
            })
        };
        let client = |name: &str| Session::new(name, opts.brokers, start, history.clone());
        let fetcher = handle
            .create_node()
            .name("final-quota-fetcher")
            .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 4)))
            .build()
            .spawn(crate::quota_setters::throttled_fetcher(
                client(crate::quota_setters::THROTTLED),
                acked(crate::quota_setters::THROTTLED),
            ));
        let producer = handle
            .create_node()
            .name("final-quota-producer")
            .ip(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 5)))
            .build()
            .spawn(crate::quota_setters::throttled_producer(
                client(crate::quota_setters::THROTTLED_PRODUCER),
                acked(crate::quota_setters::THROTTLED_PRODUCER),
                deadline,
            ));
        (fetcher, producer)
    });
    let logs = reader
        .spawn(async move {
            let logs = workload::converge(session, deadline).await;
            if let Some(s) = trimmed {
                crate::trimmer::final_read(s, deadline).await;
            }
            logs
        })
        .await
        .unwrap_or_default();
    if let Some(c) = compacted {
        let _ = c.await;
    }
    if let Some(t) = transacted {
        let _ = t.await;
    }
    let _ = pipelined.await;
    if let Some(t) = acls_applied {
        let _ = t.await;
    }
    if let Some((fetcher, producer)) = throttled {
        let _ = fetcher.await;
        let _ = producer.await;
    }
    // Deletions must finish within the same deadline.
    let deleted: Vec<Deletion> = history
        .events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            Event::Deleted {
                topic_id,
                mark,
                acknowledged,
            } => Some((topic_id, mark, acknowledged)),
            _ => None,
        })
        .collect();
    while !leftovers(&nfs, &deleted).is_empty() && start.elapsed() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    if opts.security {
        let volume = nfs.host(OBSERVER_HOST);
        let versions = reader
            .spawn(async move { crate::guard::final_versions(&volume).await })
            .await
            .unwrap_or_default();
        history.record(start.elapsed(), Event::AclVersions { versions });
        let volume = nfs.host(OBSERVER_HOST);
        let versions = reader
            .spawn(async move { crate::logins::final_versions(&volume).await })
            .await
            .unwrap_or_default();
        history.record(start.elapsed(), Event::CredentialVersions { versions });
        for doc in [crate::markers::ACLS, crate::markers::CREDENTIALS] {
            let volume = nfs.host(OBSERVER_HOST);
            let found = reader
                .spawn(async move { crate::markers::final_markers(&volume, doc).await })
                .await
                .ok()
                .flatten()
                .map(|(v, m)| (v, m.into_iter().collect()));
            history.record(start.elapsed(), Event::SecurityMarkersFinal { doc, found });
        }
    }
    if opts.movers {
        let volume = nfs.host(OBSERVER_HOST);
        let found = reader
            .spawn(async move { crate::movers::final_state(&volume, start, deadline).await })
            .await
            .ok()
            .flatten();
        history.record(start.elapsed(), Event::ReassignFinal { found });
    }
    if opts.quotas {
        let volume = nfs.host(OBSERVER_HOST);
        let found = reader
            .spawn(async move { crate::quota_setters::final_state(&volume).await })
            .await
            .ok()
            .flatten();
        history.record(start.elapsed(), Event::QuotaFinal { found });
    }
    let events = history.events();
    for (at, e) in &events {
        trace.record(format!(
            "{:>9.3}s {}",
            at.as_secs_f64(),
            workload::describe(e)
        ));
    }
    // Failover time, where nothing but the volume's own waits can slow it.
    if opts.failover_is_judged() {
        let outages = env
            .outages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (judged, found) = checker::failover::check(&events, &outages, SESSION_TIMEOUT);
        for _ in 0..judged {
            violations.checked(Invariant::FailoverSlow);
        }
        for v in found {
            violations.push(v);
        }
    }
    let violations_found = violations.clone();
    let mut violations = violations.take();
    violations.extend(checker::check(&events, &logs));
    // Once more: a staging sweep may have begun since (the controller
    // sweeps a dead creator's staging a session timeout after it died),
    // and its reaping is under way.
    while !leftovers(&nfs, &deleted).is_empty() && start.elapsed() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    violations.extend(leftovers(&nfs, &deleted));
    // The volume as `kaas fsck` reads it, now that the cluster converged
    // (and after the leftovers were looked at: the brokers keep working
    // while it reads). Errors are damage; warnings and notices are states
    // a live cluster may be in, such as a segment being rolled.
    let volume = nfs.host(OBSERVER_HOST);
    let fsck = reader
        .spawn(async move { broker::fsck::check(&volume).await })
        .await;
    match fsck {
        Ok(Ok(report)) => violations.extend(
            report
                .findings
                .into_iter()
                .filter(|f| f.severity == broker::fsck::Severity::Error)
                .map(|f| Invariant::FsckClean.says(format!("{}: {}", f.path, f.what))),
        ),
        Ok(Err(e)) => violations.push(Invariant::FsckClean.says(format!("volume unreadable: {e}"))),
        Err(e) => violations.push(Invariant::FsckClean.says(format!("fsck did not finish: {e}"))),
    }
    let mut checked = checker::counts(&events, &logs);
    for (inv, n) in violations_found.checks() {
        *checked.entry(inv).or_default() += n;
    }
    *checked.entry(Invariant::FsckClean).or_default() += 1;
    let (acked, polls) = events.iter().fold((0, 0), |(a, p), (_, e)| match e {
        Event::Produce {
            outcome: workload::Outcome::Acked { .. },
            ..
        } => (a + 1, p),
        Event::Poll { .. } => (a, p + 1),
        _ => (a, p),
    });
    trace.record(format!(
        "{} workload operations={} acked-writes={acked} polls={polls} final-records={}",
        stamp(),
        events.len(),
        logs.values().map(Vec::len).sum::<usize>()
    ));
    for v in &violations {
        trace.record(format!("violation {v}"));
    }
    let stats = nfs.stats();
    trace.record(format!("nfs {stats:?}"));
    vfs::fault_point::install(None);
    let points = point_stats.take();
    Report {
        seed: opts.seed,
        world: opts.describe_world(),
        digest: trace.digest(),
        events: trace.len(),
        faults: faults.len(),
        operations: events.len(),
        acked_writes: acked,
        fault_counts,
        checked,
        simulated: start.elapsed(),
        nfs: stats,
        nfs_leftovers: nfs.nfs_leftovers().len(),
        points,
        violations,
        trace: trace.lines(),
    }
}

/// Longer than any freeze a fault point starts lasts.
const FREEZE_MAX: Duration = Duration::from_secs(30);

/// Latency of every call of the healed volume, in microseconds.
const HEALED_LATENCY_US: (u64, u64) = (50, 500);

/// Simulated time the cluster gets to converge once faults healed.
const LIVENESS: Duration = Duration::from_secs(60);

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

impl Options {
    /// Whether failover time is judged (`failover-slow`): only where
    /// nothing else moves leadership or holds a broker up on purpose. The
    /// movers reassign partitions, the repairer takes them over in epochs
    /// of its own, fault points pause and crash brokers mid-step, and
    /// injected stalls hold volume calls for seconds; any of them may
    /// slow a failover for its own good reasons.
    pub fn failover_is_judged(&self) -> bool {
        !self.movers
            && !self.repairer
            && !self.points.active()
            && self.nfs.faults.stall_probability == 0.0
    }
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

/// Deletions must have converged once the cluster did: no tombstone of a
/// deleted topic is left on the server (read from the server's own tree,
/// so no client cache and no injected fault stands in the way).
/// A deletion the admin asked for: topic id, the volume's creation mark
/// before the request, and whether it was acknowledged.
type Deletion = (String, u64, bool);

fn leftovers(nfs: &ModelNfs, deleted: &[Deletion]) -> Vec<String> {
    let tree = nfs.dump();
    let paths: Vec<&str> = tree.lines().filter_map(|l| l.split(' ').next()).collect();
    let inside = |dir: &str| -> Vec<&str> {
        paths
            .iter()
            .filter_map(|q| q.strip_prefix(dir).and_then(|r| r.strip_prefix('/')))
            .collect()
    };
    let tombstones = paths.iter().filter(|p| {
        p.strip_prefix("topics/")
            .is_some_and(|rest| rest.starts_with(".tombstone-") && !rest.contains('/'))
    });
    // A deleted topic's own directory must be gone too (renamed away at
    // once, then reaped), not linger under its id, and nothing may create
    // it again.
    let mut recreated = Vec::new();
    let undeleted = deleted.iter().filter_map(|(id, mark, acknowledged)| {
        let dir = format!("topics/{id}");
        if !paths.contains(&dir.as_str()) {
            return None;
        }
        // The topic's own directory predates the request to delete it; one
        // made since was made again.
        if nfs.created_since(&dir, *mark).contains(&dir) {
            recreated.push(Invariant::DeletedPartitionRecreated.says(format!(
                "{dir} of a deleted topic was made again after its deletion was asked for; it holds {:?}",
                inside(&dir)
            )));
            None
        } else {
            // Only an acknowledged deletion must have happened.
            acknowledged.then_some(dir)
        }
    });
    tombstones
        .map(|p| {
            Invariant::DeletionLeftover.says(format!(
                "{p} was never reaped; it still holds {:?}",
                inside(p)
            ))
        })
        .chain(undeleted.map(|d| {
            Invariant::DeletionLeftover.says(format!(
                "{d} of a deleted topic is still there; it holds {:?}",
                inside(&d)
            ))
        }))
        .collect::<Vec<_>>()
        .into_iter()
        .chain(recreated)
        .collect()
}

/// Invariant violations found so far, shared by the checkers of a run,
/// and how many checks each invariant got from them.
#[derive(Clone, Default)]
pub struct Violations {
    found: Arc<std::sync::Mutex<Vec<String>>>,
    checked: Arc<std::sync::Mutex<BTreeMap<Invariant, usize>>>,
}

impl Violations {
    pub fn push(&self, v: String) {
        self.found.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    }

    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.found.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// One more check of `invariant`.
    pub fn checked(&self, invariant: Invariant) {
        *self
            .checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(invariant)
            .or_default() += 1;
    }

    pub fn checks(&self) -> BTreeMap<Invariant, usize> {
        self.checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Starts broker `id`'s process on a node of its own; a `twin` (see
/// `twins`) gets an address and an NFS host apart from the broker's.
#[allow(clippy::too_many_arguments)]
fn start_broker(
    handle: &Handle,
    nfs: &ModelNfs,
    id: u32,
    clock: WallClock,
    frozen: Frozen,
    producer_id_block: u32,
    security: bool,
    twin: bool,
) -> Process {
    let (net, host, name) = if twin {
        (9, TWIN_HOST + id, format!("broker-{id}-twin"))
    } else {
        (0, id, format!("broker-{id}"))
    };
    let ip = IpAddr::V4(Ipv4Addr::new(10, 0, net, 1 + id as u8));
    // ACLs enforced, everything no ACL names open (`guard`); logins with
    // the stored credentials on a SASL_PLAINTEXT listener (`logins`).
    let secured = [
        "--authorizer".to_owned(),
        "acl".to_owned(),
        "--allow-everyone-if-no-acl-found".to_owned(),
        "true".to_owned(),
        "--security-refresh-ms".to_owned(),
        "500".to_owned(),
        "--listeners".to_owned(),
        format!(
            "PLAINTEXT://{ip}:9092,SASL_PLAINTEXT://{ip}:{}",
            crate::logins::SASL_PORT
        ),
        "--inter-broker-listener-name".to_owned(),
        "PLAINTEXT".to_owned(),
    ];
    let acls = secured.into_iter().filter(|_| security);
    let config = Config::try_parse_from(
        [
            "kaas".to_owned(),
            "--broker-id".to_owned(),
            id.to_string(),
            "--listen".to_owned(),
            format!("{ip}:9092"),
            "--heartbeat-interval-secs".to_owned(),
            HEARTBEAT_SECS.to_string(),
            // No advertised-address self-check: nothing restarts a simulated
            // broker that exits, and the network faults cut brokers off their
            // own address too (the check has unit tests and ci/image.sh).
            "--advertised-check-secs".to_owned(),
            "0".to_owned(),
            "--producer-id-block".to_owned(),
            producer_id_block.to_string(),
            // Consumer-protocol members (`next_members`) heartbeat every
            // second; their session is `next_members::SESSION`.
            // A compaction round at most every second: the compacted
            // topic's passes fall while the faults run.
            "--log-cleaner-backoff-ms".to_owned(),
            "1000".to_owned(),
            "--group-consumer-heartbeat-interval-ms".to_owned(),
            "1000".to_owned(),
            "--group-consumer-session-timeout-ms".to_owned(),
            crate::next_members::SESSION.as_millis().to_string(),
        ]
        .into_iter()
        .chain(acls),
    )
    .expect("simulator builds a valid broker config");
    let config = Config {
        wall_clock: clock,
        ..config
    };
    let nfs = nfs.clone();
    let exited = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = exited.clone();
    let node = handle
        .create_node()
        .name(name)
        .ip(ip)
        .restart_on_panic_matching(fault_points::CRASH)
        .init(move || {
            if !twin {
                frozen.booted(id);
            }
            flag.store(false, std::sync::atomic::Ordering::SeqCst);
            let vfs: Arc<dyn Vfs> = Arc::new(nfs.boot_host(host));
            let config = config.clone();
            let flag = flag.clone();
            async move {
                if let Err(e) = broker::node::run(vfs, config, std::future::pending()).await {
                    tracing::error!(error = %e, "broker exited");
                }
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        })
        .build();
    Process { node, exited }
}

/// Which brokers the faults froze or killed, and when each last woke up or
/// restarted: their silence meanwhile is the fault's doing, not a liveness
/// failure.
#[derive(Clone, Default)]
pub(crate) struct Frozen(Arc<std::sync::Mutex<FrozenState>>);

#[derive(Default)]
struct FrozenState {
    /// Per broker: how many faults hold it frozen or dead now (a fault
    /// point's freeze can outlast a crash fault's start, and its thaw must
    /// not wake a broker the crash still holds), and since when it is
    /// held (or awake).
    awake: BTreeMap<u32, (u32, Instant)>,
    /// How many times each broker's node booted.
    boots: BTreeMap<u32, u64>,
    /// Brokers a fault point crashed that have not booted again: madsim
    /// restarts them itself, after a delay of its own choosing.
    restarting: std::collections::BTreeSet<u32>,
}

impl Frozen {
    fn lock(&self) -> std::sync::MutexGuard<'_, FrozenState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A broker node booted (its first start or a restart).
    fn booted(&self, broker: u32) {
        // A point crash's hold ends with its restart; a crash fault's ends
        // at its heal (`FaultEnv::inject`).
        if self.lock().restarting.remove(&broker) {
            self.set(broker, false);
        }
        *self.lock().boots.entry(broker).or_default() += 1;
    }

    /// How many times the broker's node booted so far.
    fn boots(&self, broker: u32) -> u64 {
        self.lock().boots.get(&broker).copied().unwrap_or(0)
    }

    /// A fault point crashed the broker; madsim boots it again later.
    pub(crate) fn crashed_at_point(&self, broker: u32) {
        self.set(broker, true);
        self.lock().restarting.insert(broker);
    }

    /// Whether madsim still owes the broker the restart of a point crash.
    fn restart_owed(&self, broker: u32) -> bool {
        self.lock().restarting.contains(&broker)
    }

    /// Whether a fault point holds any broker now: frozen, or crashed and
    /// not booted again yet.
    pub(crate) fn any_held(&self) -> bool {
        let s = self.lock();
        !s.restarting.is_empty() || s.awake.values().any(|(holds, _)| *holds > 0)
    }

    /// One more fault holds the broker (`true`), or one fewer (`false`).
    pub(crate) fn set(&self, broker: u32, frozen: bool) {
        let mut s = self.lock();
        let (holds, since) = s.awake.entry(broker).or_insert((0, Instant::now()));
        let was = *holds;
        *holds = if frozen {
            was + 1
        } else {
            was.saturating_sub(1)
        };
        if (was == 0) != (*holds == 0) {
            *since = Instant::now();
        }
    }

    /// `None` while frozen, else when it last woke up (if ever).
    fn awake_since(&self, broker: u32) -> Option<Option<Instant>> {
        match self.lock().awake.get(&broker) {
            Some((holds, _)) if *holds > 0 => None,
            Some((_, at)) => Some(Some(*at)),
            None => Some(None),
        }
    }
}

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
    let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
    // Per broker id, the stall total at each look, to excuse a silence by
    // the stalls since it began.
    let mut stall_marks: BTreeMap<u32, Vec<(Instant, Duration)>> = BTreeMap::new();
    let excused = |marks: &BTreeMap<u32, Vec<(Instant, Duration)>>, id: u32, since: Instant| {
        let then = marks
            .get(&id)
            .and_then(|m| m.iter().rev().find(|(t, _)| *t <= since))
            .map_or(Duration::ZERO, |(_, d)| *d);
        stalled(id).saturating_sub(then)
    };
    let started = Instant::now();
    let mut reported_absent = std::collections::BTreeSet::new();
    // Per broker id: each incarnation the observer saw replaced, with the
    // last sequence it saw of it.
    let mut retired: BTreeMap<u32, BTreeMap<u64, u64>> = BTreeMap::new();
    // Three missed heartbeats, and a stalled NFS server (5 s) on top, after
    // the broker last woke up from a pause, plus the two intervals a
    // restarted broker watches its old heartbeat before it writes its own
    // (`broker::cluster::id_claim::claim_id`).
    let silence_limit = Duration::from_secs(HEARTBEAT_SECS * 3 + 14 + 2 * HEARTBEAT_SECS);
    let mut controllers = crate::controllers::Controllers::new();
    let mut interval = tokio::time::interval(OBSERVE_EVERY);
    loop {
        interval.tick().await;
        controllers
            .look(vfs.as_ref(), &violations, stamp().trim())
            .await;
        let now = Instant::now();
        for id in 0..brokers {
            stall_marks.entry(id).or_default().push((now, stalled(id)));
            let hb = match heartbeat::read(vfs.as_ref(), id).await {
                Ok(hb) => hb,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // Not counting the time a fault held it frozen or dead.
                    let Some(woke) = frozen.awake_since(id) else {
                        continue;
                    };
                    let since = woke.map_or(started, |w| w.max(started));
                    let late = now.duration_since(since)
                        > silence_limit + excused(&stall_marks, id, since);
                    if late && !seen.contains_key(&id) && reported_absent.insert(id) {
                        violations.push(Invariant::Liveness.says(format!(
                            "broker-{id} never published a heartbeat (at {})",
                            stamp().trim()
                        )));
                    }
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    violations.push(
                        Invariant::TornRead.says(format!("broker-{id} at {}: {e}", stamp().trim())),
                    );
                    continue;
                }
                // EIO and friends: the volume said no this time; ask again later.
                Err(e) => {
                    trace.record(format!(
                        "{} observe broker-{id} error {:?}",
                        stamp(),
                        e.kind()
                    ));
                    continue;
                }
            };
            violations.checked(Invariant::TornRead);
            violations.checked(Invariant::HeartbeatRegressed);
            match seen.get_mut(&id) {
                Some(s) if s.incarnation == hb.incarnation && s.sequence == hb.sequence => {
                    let Some(woke) = frozen.awake_since(id) else {
                        continue; // frozen by a fault
                    };
                    let since = woke.map_or(s.changed_at, |w| w.max(s.changed_at));
                    if now.duration_since(since) > silence_limit + excused(&stall_marks, id, since)
                    {
                        violations.push(Invariant::Liveness.says(format!(
                            "broker-{id} silent since sequence {} (at {})",
                            s.sequence,
                            stamp().trim()
                        )));
                        s.changed_at = now;
                    }
                }
                Some(s) if s.incarnation == hb.incarnation && hb.sequence < s.sequence => {
                    violations.push(Invariant::HeartbeatRegressed.says(format!(
                        "broker-{id} {} -> {} (at {})",
                        s.sequence,
                        hb.sequence,
                        stamp().trim()
                    )));
                }
                _ => {
                    if let Some(s) = seen.get(&id).filter(|s| s.incarnation != hb.incarnation) {
                        let gone = retired.entry(id).or_default();
                        // The first replacement is the mark: a process that
                        // keeps publishing between a newer one's heartbeats
                        // would otherwise move it along.
                        gone.entry(s.incarnation).or_insert(s.sequence);
                        violations.checked(Invariant::IdShared);
                        if let Some(&last) = gone.get(&hb.incarnation)
                            && hb.sequence > last + 2
                        {
                            violations.push(Invariant::IdShared.says(format!(
                                "broker-{id} incarnation {:016x} published sequence {} after a \
                                 newer process replaced it at sequence {last} (at {})",
                                hb.incarnation,
                                hb.sequence,
                                stamp().trim()
                            )));
                        }
                    }
                    if seen
                        .get(&id)
                        .is_none_or(|s| s.incarnation != hb.incarnation)
                    {
                        trace.record(format!(
                            "{} observe broker-{id} incarnation {:016x}",
                            stamp(),
                            hb.incarnation
                        ));
                    }
                    trace.record(format!(
                        "{} observe broker-{id} sequence {}",
                        stamp(),
                        hb.sequence
                    ));
                    seen.insert(
                        id,
                        Seen {
                            incarnation: hb.incarnation,
                            sequence: hb.sequence,
                            changed_at: now,
                        },
                    );
                }
            }
        }
    }
}
