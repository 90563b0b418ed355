//! Scenario files (`scenarios/<name>.toml`): a seed, the cluster shape, a
//! scripted fault timeline on top of the seeded one, the model NFS's
//! settings, and the invariant the scenario's historical bug breaks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use vfs::model::NfsConfig;

use crate::actors::Cast;
use crate::run::{Fault, FaultKind, Options, Trigger};
use crate::swarm::{FAULT_KINDS, FaultSet};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub seed: u64,
    pub brokers: u32,
    /// Simulated seconds of workload and faults.
    pub duration: u64,
    /// Seeded fault kinds on top of the timeline (see `--faults`).
    pub faults: Vec<String>,
    /// The invariant the historical bug breaks, as the checker names it.
    pub invariant: String,
    /// Invariants that break as direct consequences of the same fault (an
    /// overwritten record is also read two ways); with the bug, the run
    /// must report `invariant` and nothing outside these.
    #[serde(default)]
    pub consequences: Vec<String>,
    #[serde(default)]
    pub timeline: Vec<Step>,
    /// The model NFS, used as given (caches and faults) instead of the
    /// default one `faults` picks.
    #[serde(default)]
    pub nfs: Option<NfsConfig>,
    /// Whether the two topic creators run (`actors::creators`); on unless a
    /// scenario's timeline must hit one particular kind of call that their
    /// topics would make too.
    #[serde(default = "yes")]
    pub creators: bool,
    /// Whether the trimmer runs (`actors::trimmer` and `actors::compactor`); off unless asked for, so
    /// the scenarios written before it replay as they were recorded.
    #[serde(default)]
    pub trimmer: bool,
}

fn yes() -> bool {
    true
}

/// One scripted fault.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Seconds after the start (with `on`: when the step is armed).
    pub at: f64,
    /// crash, pause, isolate or nfs-restart.
    pub fault: String,
    #[serde(default)]
    pub broker: usize,
    /// Seconds until it heals.
    pub lasts: f64,
    /// Sets the fault off at the first volume call after `at` that
    /// contains this text (`"<op> <path>"`, e.g. `"write cluster/"`, or
    /// `"rename <from> -> <to>"`) instead of at `at`; `broker` is then
    /// ignored and `target` says whom it hits.
    #[serde(default)]
    pub on: Option<String>,
    /// With `on`: `caller` (the broker that made the call; the default) or
    /// `others` (every other broker).
    #[serde(default)]
    pub target: Option<String>,
    /// With `on`: seconds between the call and the fault.
    #[serde(default)]
    pub delay: f64,
}

/// Where scenarios live: `scenarios/` at the workspace root.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// Loads a scenario by name (from [`dir`]) or by path.
pub fn load(name_or_path: &str) -> Result<Scenario, String> {
    let path = if name_or_path.ends_with(".toml") || name_or_path.contains('/') {
        PathBuf::from(name_or_path)
    } else {
        dir().join(format!("{name_or_path}.toml"))
    };
    #[allow(clippy::disallowed_methods)] // the simulator's input, not a volume
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
    let s: Scenario =
        toml::from_str(&text).map_err(|e| format!("scenario {}: {e}", path.display()))?;
    s.validate()
        .map_err(|e| format!("scenario {}: {e}", path.display()))?;
    Ok(s)
}

impl Scenario {
    /// Whether a run's violations are this scenario's bug being caught:
    /// nothing outside the invariant and its consequences, and the
    /// invariant itself (`strict`, the scenario's own seed) or at least one
    /// of them (nearby seeds, where the same damage may show only as a
    /// consequence: an overwrite by identical records is no lost write,
    /// but two brokers acknowledged them in one epoch).
    pub fn caught(&self, violations: &[String], strict: bool) -> bool {
        let name = |v: &String| v.split(' ').next().unwrap_or("").to_owned();
        let ours = |v: &String| name(v) == self.invariant || self.consequences.contains(&name(v));
        let named = violations.iter().any(|v| name(v) == self.invariant);
        !violations.is_empty() && violations.iter().all(ours) && (named || !strict)
    }

    fn validate(&self) -> Result<(), String> {
        for f in &self.faults {
            if !FAULT_KINDS.contains(&f.as_str()) {
                return Err(format!("unknown fault {f:?}"));
            }
        }
        for step in &self.timeline {
            if !["crash", "pause", "isolate", "nfs-restart"].contains(&step.fault.as_str()) {
                return Err(format!("unknown timeline fault {:?}", step.fault));
            }
            match (&step.on, step.target.as_deref()) {
                (_, None | Some("caller")) => {}
                (Some(_), Some("others")) => {}
                (None, Some(t)) => {
                    return Err(format!("timeline target {t:?} needs `on`"));
                }
                (_, Some(t)) => return Err(format!("unknown timeline target {t:?}")),
            }
            if step.broker >= self.brokers as usize {
                return Err(format!(
                    "timeline names broker {} of {}",
                    step.broker, self.brokers
                ));
            }
        }
        if let Some(nfs) = &self.nfs {
            nfs.validate().map_err(|e| format!("nfs: {e}"))?;
        }
        Ok(())
    }

    /// The run of this scenario with `seed` (its own, or a nearby one).
    pub fn options(&self, seed: u64, reintroduce: &[String]) -> Options {
        let faults: FaultSet = FAULT_KINDS
            .iter()
            .copied()
            .filter(|k| self.faults.iter().any(|f| f == k))
            .collect();
        let mut opts = Options::with_faults(
            seed,
            self.brokers,
            Duration::from_secs(self.duration),
            faults,
        );
        if let Some(nfs) = &self.nfs {
            opts.nfs = nfs.clone();
        }
        // Written before the producer-id racer, the committer, patient
        // producers and tiny id blocks: they replay as they were recorded.
        let mut cast = vec!["producers", "consumer", "admin", "members", "pipeliner"];
        if self.creators {
            cast.push("creators");
        }
        if self.trimmer {
            cast.extend(["trimmer", "compactor"]);
        }
        opts.cast = Cast::everyone().only(&cast);
        opts.patient_producers = false;
        opts.producer_id_block = 1000;
        opts.scripted = self
            .timeline
            .iter()
            .map(|s| Fault {
                at: Duration::from_secs_f64(s.at),
                lasts: Duration::from_secs_f64(s.lasts),
                kind: match s.fault.as_str() {
                    "crash" => FaultKind::Crash(s.broker),
                    "pause" => FaultKind::Pause(s.broker),
                    "isolate" => FaultKind::Isolate(s.broker),
                    _ => FaultKind::NfsRestart,
                },
                trigger: s.on.as_ref().map(|on| Trigger {
                    on: on.clone(),
                    others: s.target.as_deref() == Some("others"),
                    delay: Duration::from_secs_f64(s.delay),
                }),
            })
            .collect();
        opts.reintroduce = reintroduce.to_vec();
        opts
    }
}

/// Every scenario of the suite (`scenarios/*.toml`), by name.
pub fn all() -> Result<Vec<Scenario>, String> {
    #[allow(clippy::disallowed_methods)] // the simulator's input, not a volume
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .map_err(|e| format!("cannot list {}: {e}", dir().display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".toml").map(str::to_owned))
        .collect();
    names.sort();
    names.iter().map(|n| load(n)).collect()
}

/// What a run of a scenario did, in a few stable lines: its verdict and
/// digest, the faults injected (by the timeline and by the model NFS) and
/// each invariant it reported, with how often. The regression suite keeps
/// one per scenario and way (today's code, bug reintroduced) as a snapshot.
pub fn summary(report: &crate::run::Report) -> String {
    let mut out = format!(
        "seed: {}\nverdict: {}\ndigest: {}\n",
        report.seed,
        if report.passed() { "PASS" } else { "FAIL" },
        report.digest
    );
    let faults: Vec<String> = report
        .fault_counts
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    out.push_str(&format!("injected: {}\n", faults.join(" ")));
    let n = &report.nfs;
    out.push_str(&format!(
        "nfs: writebacks={} lost-replies={} eio={} enospc={} interrupts={} stalls={} crashes={} server-restarts={}\n",
        n.writebacks, n.lost_replies, n.eio, n.enospc, n.interrupts, n.stalls, n.crashes, n.server_restarts
    ));
    let mut by_name: std::collections::BTreeMap<&str, usize> = Default::default();
    for v in &report.violations {
        *by_name
            .entry(v.split(' ').next().unwrap_or(""))
            .or_default() += 1;
    }
    if by_name.is_empty() {
        out.push_str("violations: none\n");
    } else {
        out.push_str("violations:\n");
        for (name, count) in by_name {
            out.push_str(&format!("  {name}: {count}\n"));
        }
    }
    out
}
