//! Which brokers a fault holds frozen or dead, shared by the fault
//! timeline, the fault points, the twins and the observer.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::time::Instant;

/// Which brokers the faults froze or killed, and when each last woke up or
/// restarted: their silence meanwhile is the fault's doing, not a liveness
/// failure.
#[derive(Clone, Default)]
pub struct Frozen(Arc<std::sync::Mutex<FrozenState>>);

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
    pub(crate) fn booted(&self, broker: u32) {
        // A point crash's hold ends with its restart; a crash fault's ends
        // at its heal (`FaultEnv::inject`).
        if self.lock().restarting.remove(&broker) {
            self.set(broker, false);
        }
        *self.lock().boots.entry(broker).or_default() += 1;
    }

    /// How many times the broker's node booted so far.
    pub(crate) fn boots(&self, broker: u32) -> u64 {
        self.lock().boots.get(&broker).copied().unwrap_or(0)
    }

    /// A fault point crashed the broker; madsim boots it again later.
    pub(crate) fn crashed_at_point(&self, broker: u32) {
        self.set(broker, true);
        self.lock().restarting.insert(broker);
    }

    /// Whether madsim still owes the broker the restart of a point crash.
    pub(crate) fn restart_owed(&self, broker: u32) -> bool {
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
    pub(crate) fn awake_since(&self, broker: u32) -> Option<Option<Instant>> {
        match self.lock().awake.get(&broker) {
            Some((holds, _)) if *holds > 0 => None,
            Some((_, at)) => Some(Some(*at)),
            None => Some(None),
        }
    }
}
