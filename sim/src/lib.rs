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
//! | `harness` | one seeded run: brokers, clients, the fault timeline, liveness, end-of-run checks of the volume |
//! | `client` | a small Kafka client over simulated TCP |
//! | `workload` | producers, the consumer, the committer and the lag reader of its group, the churning admin, the producer-id racer, the final reader; the history |
//! | `members` | consumer group members (classic protocol) |
//! | `next_members` | members of a consumer-protocol group (KIP-848), for consumer-group-overlap |
//! | `pipeliner` | once the faults healed, a client pipelining transactional and plain produce requests as librdkafka does: every request answered within its timeout |
//! | `transactor` | transactional producers (commit, abort, abandon, offsets, fencing, KIP-360 epoch bumps, offsets for a group never added) and a read_committed reader |
//! | `guard` | an admin flipping an ACL on and off while a probe writes the topic it guards |
//! | `logins` | an admin switching a user's password while a probe logs in with one of them |
//! | `markers` | admins adding ACLs and users that must all be in the final documents |
//! | `repairer` | an operator running `kaas fsck --repair` against the live cluster |
//! | `quota_setters` | admins setting client quotas (AlterClientQuotas) and, once the faults heal, a client fetching and another producing past their quotas |
//! | `movers` | admins moving the workload topic's partitions to named brokers (AlterPartitionReassignments, ElectLeaders) |
//! | `trimmer` | writes a topic with small segments while retention and DeleteRecords trim it |
//! | `compactor` | overwrites and deletes a few keys of a compacted topic, some in transactions it commits, aborts or abandons, while its leader compacts it and the topic moves between brokers |
//! | `controllers` | the observer's check that each controller epoch has one controller, the claim's winner |
//! | `group_files` | the observer's look at the committer's group as a new coordinator would load it, for commit-not-durable |
//! | `manifests` | the observer's audit of partitions: their newest manifests name only segments on the volume, and every leader epoch below the newest manifest's has a claim |
//! | `creators` | admins creating, growing and deleting topics many at a time |
//! | `checker` | judges the history against the final log, one named invariant per violation |
//! | `scenario` | scenario files (`scenarios/*.toml`) |
//! | [`swarm`] | the world each seed draws: which faults, how often, how hard |
//! | `nfs_hook` | crashes a killed node's NFS host |
//! | `twins` | a second process started with a broker id that already runs |
//! | `fault_points` | what a broker's fault point does when reached: hold the task, or crash the broker there |
//! | [`trace`] | the run's trace and its digest |

pub mod args;
#[cfg(madsim)]
pub mod checker;
#[cfg(madsim)]
pub mod cli;
#[cfg(madsim)]
pub mod client;
#[cfg(madsim)]
pub(crate) mod compactor;
#[cfg(madsim)]
pub(crate) mod controllers;
#[cfg(madsim)]
pub mod creators;
#[cfg(madsim)]
pub mod fault_points;
#[cfg(madsim)]
pub(crate) mod group_files;
#[cfg(madsim)]
pub(crate) mod guard;
#[cfg(madsim)]
pub mod harness;
#[cfg(madsim)]
pub(crate) mod logins;
#[cfg(madsim)]
pub(crate) mod manifests;
#[cfg(madsim)]
pub(crate) mod markers;
#[cfg(madsim)]
pub mod members;
#[cfg(madsim)]
pub(crate) mod movers;
#[cfg(madsim)]
pub(crate) mod next_members;
#[cfg(madsim)]
pub mod nfs_hook;
#[cfg(madsim)]
pub mod pipeliner;
#[cfg(madsim)]
pub(crate) mod quota_setters;
#[cfg(not(madsim))]
pub mod relaunch;
#[cfg(madsim)]
pub(crate) mod repairer;
#[cfg(madsim)]
pub mod scenario;
pub mod swarm;
pub mod trace;
#[cfg(madsim)]
pub mod transactor;
#[cfg(madsim)]
pub mod trimmer;
#[cfg(madsim)]
pub mod twins;
#[cfg(madsim)]
pub mod workload;
