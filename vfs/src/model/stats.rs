//! Counts of what the model injected, for reports and snapshots.

use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FaultStats {
    pub writebacks: u64,
    pub lost_replies: u64,
    pub eio: u64,
    pub enospc: u64,
    pub interrupts: u64,
    pub stalls: u64,
    pub crashes: u64,
    pub server_restarts: u64,
    /// `.nfs` files whose removal at last close failed.
    pub leaked_silly: u64,
}
