//! The kaas simulator: real broker code on madsim, a shared volume behind the
//! `Vfs` trait, and checks of what every run must satisfy.
//!
//! The simulation only exists in the `--cfg madsim` build. The ordinary build
//! of the `sim` binary re-runs itself through cargo with that flag and its own
//! target directory (see [`relaunch`]), so `cargo run -p sim -- --seed 7` works
//! without the caller setting RUSTFLAGS.
//!
//! # Layout
//!
//! | module | what it is |
//! |---|---|
//! | `main.rs`, `cli` | the command line: one seed, sweeps, scenarios, determinism checks |
//! | [`args`] | the flags and fault kinds |
//! | [`relaunch`] | the ordinary build re-running itself as the simulation build |
//! | `run` | one seeded run: `brokers` (processes, clocks, twins, frozen brokers), `observer` (heartbeats, controllers), `timeline` (the faults), `liveness` (convergence, final reads, fsck), the report |
//! | `actors` | the clients, one kind per file behind the `Actor` trait, and the `Cast` of a run: producers, consumer, churning admin, classic and consumer-protocol members, creators, trimmer, compactor, producer-id racer, committer and lag reader, transactors and their reader, the final pipeliner, ACL and credential admins and probes, markers, movers, quota setters, the repairer, the final reader |
//! | `session` | a client's session: the Kafka requests the actors send, each recorded in the history |
//! | `history` | every operation and its outcome (`Event`), in order, and its line in the trace |
//! | `workload` | the topics and groups the actors share |
//! | `observers` | reads of the volume beside the run's own: one controller per epoch, the committer's and the consumer-protocol group's files, the partitions' manifests |
//! | `client` | a small Kafka client over simulated TCP |
//! | `checker` | judges the history against the final log, one named invariant per violation |
//! | `scenario` | scenario files (`scenarios/*.toml`) |
//! | [`swarm`] | the world each seed draws: which faults, how often, how hard |
//! | `nfs_hook` | crashes a killed node's NFS host |
//! | `twins` | a second process started with a broker id that already runs |
//! | `fault_points` | what a broker's fault point does when reached: hold the task, or crash the broker there |
//! | `frozen` | which brokers a fault holds frozen or dead, and since when |
//! | `hosts` | the model NFS host ids of the nodes that are not brokers |
//! | [`trace`] | the run's trace and its digest |

#[cfg(madsim)]
pub mod actors;
pub mod args;
#[cfg(madsim)]
pub mod checker;
#[cfg(madsim)]
pub mod cli;
#[cfg(madsim)]
pub mod client;
#[cfg(madsim)]
pub mod fault_points;
#[cfg(madsim)]
pub(crate) mod frozen;
#[cfg(madsim)]
pub mod history;
#[cfg(madsim)]
pub(crate) mod hosts;
#[cfg(madsim)]
pub mod nfs_hook;
#[cfg(madsim)]
pub(crate) mod observers;
#[cfg(not(madsim))]
pub mod relaunch;
#[cfg(madsim)]
pub mod run;
#[cfg(madsim)]
pub mod scenario;
#[cfg(madsim)]
pub mod session;
pub mod swarm;
pub mod trace;
#[cfg(madsim)]
pub mod twins;
#[cfg(madsim)]
pub mod workload;
