//! The violations found while a run goes on (by the observers), and how
//! many checks each invariant got from them.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Invariant;

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
        self.checked_times(invariant, 1);
    }

    /// `n` more checks of `invariant`.
    pub fn checked_times(&self, invariant: Invariant, n: usize) {
        *self
            .checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(invariant)
            .or_default() += n;
    }

    pub fn checks(&self) -> BTreeMap<Invariant, usize> {
        self.checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
