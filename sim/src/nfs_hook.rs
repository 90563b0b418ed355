//! Crash semantics for the model NFS when madsim kills a node.
//!
//! madsim tells every registered simulator plugin when it kills a node
//! (`reset_node`). This plugin maps nodes to model NFS hosts and crashes the
//! host there, so any code path that kills a node (fault schedules, scenario
//! scripts, tests) loses that host's unflushed writes at that instant and
//! leaves its `.nfs` files behind. A restart without a kill is covered too:
//! each broker node boots its host with `ModelNfs::boot_host`, which treats
//! a previous, used incarnation as crashed.

use std::collections::BTreeMap;
use std::sync::Mutex;

use madsim::Config;
use madsim::plugin::Simulator;
use madsim::rand::GlobalRng;
use madsim::task::NodeId;
use madsim::time::TimeHandle;
use vfs::model::ModelNfs;

#[derive(Default)]
pub struct NfsCrashHook {
    state: Mutex<Option<Attached>>,
}

struct Attached {
    nfs: ModelNfs,
    hosts: BTreeMap<NodeId, u32>,
}

impl NfsCrashHook {
    /// Applies crash semantics to `nfs` for the nodes mapped with [`Self::map`].
    pub fn attach(&self, nfs: ModelNfs) {
        *self.lock() = Some(Attached {
            nfs,
            hosts: BTreeMap::new(),
        });
    }

    /// Node `node` is NFS host `host`.
    pub fn map(&self, node: NodeId, host: u32) {
        if let Some(a) = self.lock().as_mut() {
            a.hosts.insert(node, host);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Attached>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Simulator for NfsCrashHook {
    fn new(_rand: &GlobalRng, _time: &TimeHandle, _config: &Config) -> Self {
        Self::default()
    }

    fn reset_node(&self, id: NodeId) {
        if let Some(a) = self.lock().as_ref() {
            if let Some(&host) = a.hosts.get(&id) {
                a.nfs.crash_host(host);
            }
        }
    }
}
