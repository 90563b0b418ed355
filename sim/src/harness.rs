//! One simulated run: brokers on their own nodes sharing one volume, an
//! observer that reads what they publish, a seeded fault, and the checks.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use broker::config::Config;
use broker::heartbeat;
use clap::Parser;
use madsim::rand::Rng;
use madsim::runtime::{Handle, NodeHandle, Runtime};
use tokio::time::Instant;
use vfs::Vfs;
use vfs::model::{FaultStats, ModelNfs, NfsConfig};

use crate::nfs_hook::NfsCrashHook;
use crate::trace::Trace;

#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub brokers: u32,
    pub duration: Duration,
    /// The shared volume's behaviour and faults.
    pub nfs: NfsConfig,
}

impl Options {
    /// The default run: `brokers` brokers on a hostile model NFS.
    pub fn new(seed: u64, brokers: u32, duration: Duration) -> Self {
        Self {
            seed,
            brokers,
            duration,
            nfs: NfsConfig::hostile(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Report {
    pub seed: u64,
    pub digest: String,
    pub events: usize,
    pub faults: usize,
    /// What the model NFS injected.
    pub nfs: FaultStats,
    /// `.nfs` files left on the volume at the end.
    pub nfs_leftovers: usize,
    pub violations: Vec<String>,
    pub trace: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

const HEARTBEAT_SECS: u64 = 2;
const OBSERVE_EVERY: Duration = Duration::from_millis(700);

/// Runs one seed on a thread of its own: std seeds a thread's `HashMap` keys
/// once, at its first use, and madsim can only make them derive from the
/// seed if that first use happens inside the new runtime.
pub fn run(opts: &Options) -> Report {
    let opts = opts.clone();
    let seed = opts.seed;
    std::thread::Builder::new()
        .name(format!("sim-seed-{seed}"))
        .spawn(move || {
            let rt = Runtime::with_seed_and_config(opts.seed, madsim::Config::default());
            rt.add_simulator::<NfsCrashHook>();
            rt.block_on(simulate(opts, true))
        })
        .map_err(|e| format!("cannot start the simulation thread: {e}"))
        .and_then(|t| t.join().map_err(|payload| panic_message(payload.as_ref())))
        .unwrap_or_else(|why| Report {
            seed,
            digest: "-".to_owned(),
            events: 0,
            faults: 0,
            nfs: FaultStats::default(),
            nfs_leftovers: 0,
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
    let hook = crash_hook.then(madsim::plugin::simulator::<NfsCrashHook>);
    if let Some(hook) = &hook {
        hook.attach(nfs.clone());
    }
    let trace = Trace::default();
    let start = Instant::now();
    let stamp = move || format!("{:>9.3}s", start.elapsed().as_secs_f64());

    let brokers: Vec<NodeHandle> = (0..opts.brokers)
        .map(|id| {
            let node = start_broker(&handle, &nfs, id);
            if let Some(hook) = &hook {
                hook.map(node.id(), id);
            }
            node
        })
        .collect();

    let violations = Violations::default();
    let observer = handle.create_node().name("observer").build();
    observer.spawn(observe(
        Arc::new(nfs.host(OBSERVER_HOST)),
        opts.brokers,
        trace.clone(),
        violations.clone(),
        stamp,
    ));

    // One seeded crash and restart, so recovery paths run in every seed.
    let mut rng = madsim::rand::thread_rng();
    let total = opts.duration.as_millis() as u64;
    let crash_at = Duration::from_millis(rng.gen_range(total / 5..total / 2));
    let down_for = Duration::from_millis(rng.gen_range(1_000..8_000));
    let victim = rng.gen_range(0..opts.brokers) as usize;
    tokio::time::sleep(crash_at).await;
    trace.record(format!("{} fault crash broker-{victim}", stamp()));
    handle.kill(brokers[victim].id());
    tokio::time::sleep(down_for).await;
    trace.record(format!("{} fault restart broker-{victim}", stamp()));
    handle.restart(brokers[victim].id());

    tokio::time::sleep(opts.duration.saturating_sub(start.elapsed())).await;
    let violations = violations.take();
    for v in &violations {
        trace.record(format!("violation {v}"));
    }
    let stats = nfs.stats();
    trace.record(format!("nfs {stats:?}"));
    Report {
        seed: opts.seed,
        digest: trace.digest(),
        events: trace.len(),
        faults: 2,
        nfs: stats,
        nfs_leftovers: nfs.nfs_leftovers().len(),
        violations,
        trace: trace.lines(),
    }
}

/// Invariant violations found so far, shared by the checkers of a run.
#[derive(Clone, Default)]
pub struct Violations(Arc<std::sync::Mutex<Vec<String>>>);

impl Violations {
    pub fn push(&self, v: String) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    }

    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

fn start_broker(handle: &Handle, nfs: &ModelNfs, id: u32) -> NodeHandle {
    let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + id as u8));
    let config = Config::try_parse_from([
        "kaas".to_owned(),
        "--broker-id".to_owned(),
        id.to_string(),
        "--listen".to_owned(),
        format!("{ip}:9092"),
        "--heartbeat-interval-secs".to_owned(),
        HEARTBEAT_SECS.to_string(),
    ])
    .expect("simulator builds a valid broker config");
    let nfs = nfs.clone();
    handle
        .create_node()
        .name(format!("broker-{id}"))
        .ip(ip)
        .init(move || {
            let vfs: Arc<dyn Vfs> = Arc::new(nfs.boot_host(id));
            let config = config.clone();
            async move {
                if let Err(e) = broker::node::run(vfs, config, std::future::pending()).await {
                    tracing::error!(error = %e, "broker exited");
                }
            }
        })
        .build()
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
    let mut seen: BTreeMap<u32, Seen> = BTreeMap::new();
    let started = Instant::now();
    let mut reported_absent = std::collections::BTreeSet::new();
    let silence_limit = Duration::from_secs(HEARTBEAT_SECS * 3 + 8);
    let mut interval = tokio::time::interval(OBSERVE_EVERY);
    loop {
        interval.tick().await;
        let now = Instant::now();
        for id in 0..brokers {
            let hb = match heartbeat::read(vfs.as_ref(), id).await {
                Ok(hb) => hb,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let late = now.duration_since(started) > silence_limit;
                    if late && !seen.contains_key(&id) && reported_absent.insert(id) {
                        violations.push(format!(
                            "{} liveness broker-{id} never published a heartbeat",
                            stamp()
                        ));
                    }
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    violations.push(format!("{} torn-read broker-{id}: {e}", stamp()));
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
            match seen.get_mut(&id) {
                Some(s) if s.incarnation == hb.incarnation && s.sequence == hb.sequence => {
                    if now.duration_since(s.changed_at) > silence_limit {
                        violations.push(format!(
                            "{} liveness broker-{id} silent since sequence {}",
                            stamp(),
                            s.sequence
                        ));
                        s.changed_at = now;
                    }
                }
                Some(s) if s.incarnation == hb.incarnation && hb.sequence < s.sequence => {
                    violations.push(format!(
                        "{} heartbeat-regressed broker-{id} {} -> {}",
                        stamp(),
                        s.sequence,
                        hb.sequence
                    ));
                }
                _ => {
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
