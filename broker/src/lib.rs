//! The kaas broker: everything a broker process does, on top of `vfs`.
//!
//! All filesystem access goes through [`vfs::Vfs`]; all time, randomness,
//! tasks and sockets come from madsim / madsim-tokio, so the same code runs
//! in production and in the deterministic simulator.

pub mod api;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod groups;
pub mod health;
pub mod heartbeat;
#[cfg(madsim)]
pub mod historical;
pub mod layout;
pub mod leaders;
pub mod log;
pub mod node;
pub mod producer_ids;
pub mod protocol;
pub mod startup;
pub mod stored;
