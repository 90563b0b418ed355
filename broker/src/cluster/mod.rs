//! The cluster on one volume: controller election, the assignment, and
//! leader placement.
//!
//! ```text
//! cluster/controller-<epoch>     claim of controller epoch (exclusive create)
//! cluster/assignment-<epoch>     written only by that epoch's controller (atomic replace)
//! cluster/identity/id            the cluster id, decided once (see `identity`)
//! cluster/preferred-leaders-<n>  version n of the operator's preferred leaders (see `preferred`)
//! ```

pub mod announced;
pub mod assignment;
pub mod controller;
pub mod election;
pub mod heartbeat;
pub mod id_claim;
pub mod identity;
pub mod placement;
pub mod preferred;
