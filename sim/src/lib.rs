//! The kaas simulator: real broker code on madsim, a shared volume behind the
//! `Vfs` trait, and checks of what every run must satisfy.
//!
//! The simulation only exists in the `--cfg madsim` build. The ordinary build
//! of the `sim` binary re-runs itself through cargo with that flag and its own
//! target directory (see [`relaunch`]), so `cargo run -p sim -- --seed 7` works
//! without the caller setting RUSTFLAGS.

pub mod args;
#[cfg(madsim)]
pub mod checker;
#[cfg(madsim)]
pub mod cli;
#[cfg(madsim)]
pub mod client;
#[cfg(madsim)]
pub mod creators;
#[cfg(madsim)]
pub mod harness;
#[cfg(madsim)]
pub mod members;
#[cfg(madsim)]
pub mod nfs_hook;
#[cfg(not(madsim))]
pub mod relaunch;
#[cfg(madsim)]
pub mod scenario;
pub mod trace;
#[cfg(madsim)]
pub mod workload;
