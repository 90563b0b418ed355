//! Scenario files (`scenarios/<name>.toml`): a seed, the cluster shape, a
//! scripted fault timeline on top of the seeded one, the model NFS's
//! settings, and the invariant the scenario's historical bug breaks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use vfs::model::NfsConfig;

use crate::args::{FAULT_KINDS, FaultSet};
use crate::harness::{Fault, FaultKind, Options};

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
}

/// One scripted fault.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Seconds after the start.
    pub at: f64,
    /// crash, pause, isolate or nfs-restart.
    pub fault: String,
    #[serde(default)]
    pub broker: usize,
    /// Seconds until it heals.
    pub lasts: f64,
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
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read scenario {}: {e}", path.display()))?;
    let s: Scenario =
        toml::from_str(&text).map_err(|e| format!("scenario {}: {e}", path.display()))?;
    s.validate()
        .map_err(|e| format!("scenario {}: {e}", path.display()))?;
    Ok(s)
}

impl Scenario {
    /// Whether a run's violations are this scenario's bug being caught.
    pub fn caught(&self, violations: &[String]) -> bool {
        let name = |v: &String| v.split(' ').next().unwrap_or("").to_owned();
        violations.iter().any(|v| name(v) == self.invariant)
            && violations
                .iter()
                .all(|v| name(v) == self.invariant || self.consequences.contains(&name(v)))
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
            })
            .collect();
        opts.reintroduce = reintroduce.to_vec();
        opts
    }
}
