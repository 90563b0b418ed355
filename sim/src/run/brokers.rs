//! The brokers' processes: each on a node of its own with its own wall
//! clock, twins started with an id that already runs, and which of them a
//! fault holds frozen or dead.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use broker::clock::WallClock;
use broker::config::Config;
use clap::Parser;
use madsim::rand::Rng;
use madsim::runtime::{Handle, NodeHandle};
use tokio::time::Instant;
use vfs::Vfs;
use vfs::model::ModelNfs;

use crate::fault_points::{self, PointStats};
use crate::nfs_hook::NfsCrashHook;
use crate::trace::Trace;
use crate::twins::{Process, TwinStarter};

use super::Options;
use crate::frozen::Frozen;

pub(crate) const HEARTBEAT_SECS: u64 = 2;
/// The shortest twin fault: a twin's start-up checks wait two heartbeat
/// intervals, on a volume that may be slow.
pub(crate) const TWIN_START_UP: Duration = Duration::from_secs(8);
/// NFS host ids of twin processes: this plus the broker id.
const TWIN_HOST: u32 = 2_000;

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
            crate::actors::logins::SASL_PORT
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
            crate::actors::next_members::SESSION.as_millis().to_string(),
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

/// The brokers of a run and what its faults need to reach them.
pub(crate) struct Cluster {
    pub handle: Handle,
    pub nfs: ModelNfs,
    pub trace: Trace,
    pub start: Instant,
    /// Each broker's wall clock.
    pub clocks: Vec<WallClock>,
    pub frozen: Frozen,
    pub point_stats: PointStats,
    pub processes: Vec<Process>,
    pub brokers: Vec<NodeHandle>,
    pub twin: TwinStarter,
}

impl Cluster {
    /// The volume and `opts.brokers` brokers on it; with `crash_hook`, a
    /// killed node's NFS client crashes the instant it dies.
    pub fn start(opts: &Options, crash_hook: bool) -> Self {
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
        let stamp = super::stamp(start);
        // Each broker's wall clock is off by its own skew (up to ten
        // minutes either way) when clock faults are on.
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
        let secured = opts.secured();
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
                    secured,
                    false,
                );
                if let Some(hook) = &hook {
                    hook.map(process.node.id(), id);
                }
                process
            })
            .collect();
        let brokers = processes.iter().map(|p| p.node.clone()).collect();
        let twin = twin_starter(&handle, &nfs, &clocks, &frozen, hook, opts);
        Self {
            handle,
            nfs,
            trace,
            start,
            clocks,
            frozen,
            point_stats: PointStats::default(),
            processes,
            brokers,
            twin,
        }
    }

    /// Before any broker runs (their first steps may reach a point). A run
    /// without point rates installs nothing (and makes no node for it), so
    /// it draws no extra randomness and keeps its digest.
    pub fn install_points(&self, opts: &Options) {
        if opts.points.active() {
            fault_points::install(
                &opts.points,
                fault_points::Targets {
                    brokers: self.brokers.iter().map(NodeHandle::id).collect(),
                    thawer: self.handle.create_node().name("fault-points").build(),
                    nfs: self.nfs.clone(),
                },
                self.start + opts.duration,
                self.trace.clone(),
                self.point_stats.clone(),
                self.frozen.clone(),
            );
        } else {
            vfs::fault_point::install(None);
        }
    }
}

/// Starts twins: one twin node per broker, restarted for each later twin
/// fault (its address stays taken by the killed node).
fn twin_starter(
    handle: &Handle,
    nfs: &ModelNfs,
    clocks: &[WallClock],
    frozen: &Frozen,
    hook: Option<Arc<NfsCrashHook>>,
    opts: &Options,
) -> TwinStarter {
    let (handle, nfs, clocks, frozen) =
        (handle.clone(), nfs.clone(), clocks.to_vec(), frozen.clone());
    let (block, security) = (opts.producer_id_block, opts.secured());
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
}
