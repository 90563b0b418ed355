//! The kaas broker: everything a broker process does, on top of `vfs`.
//!
//! All filesystem access goes through [`vfs::Vfs`]; all time, randomness,
//! tasks and sockets come from madsim / madsim-tokio, so the same code runs
//! in production and in the deterministic simulator.
//!
//! # Layout
//!
//! | module | what it is |
//! |---|---|
//! | [`node`] | one broker process: start-up checks, the follow loop, controlled shutdown |
//! | [`config`] | command-line flags, each also a `KAAS_*` variable |
//! | [`startup`] | the checks a broker makes before it joins (volume, broker id, advertised address) |
//! | [`layout`] | every path on the volume, with its single writer |
//! | [`stored`] | JSON metadata files in the checksummed envelope, replaced atomically |
//! | [`cluster`] | controller election, the assignment, placement, the cluster id, each broker's heartbeat file and the task that rewrites it |
//! | [`leaders`] | the partitions this broker leads: takeovers, step-downs, retention |
//! | [`log`] | the partition log: topics, staging, manifests, segments, fencing |
//! | [`groups`] | consumer group coordinators and their files |
//! | `slot_files` | the per-key files of a coordinator slot, shared by groups and transactions |
//! | [`txn`] | transaction coordinators: each transactional id's state in its slot, markers |
//! | [`txn_store`] | a transactional id's record on the volume and how a slot takeover loads it (shared by `groups::Slot` and `txn`) |
//! | [`peer`] | calls to another broker (transaction markers, AddPartitionsToTxn verification) |
//! | [`produce_order`] | the order a connection's pipelined produce requests to one partition are applied in |
//! | [`producer_ids`] | producer id blocks for idempotent producers |
//! | [`protocol`] | the Kafka wire protocol: frames, connections, API versions |
//! | [`api`] | the answers to Kafka requests, one file per API family |
//! | [`security`] | listeners, TLS, SASL, SCRAM credentials and ACLs on the volume |
//! | [`quota`] | client quotas: produce and fetch byte rates per user and client id, and throttling |
//! | `fuzz` | entry points of the fuzz targets in `fuzz/` (feature `fuzzing`, and the tests) |
//! | [`fsck`] | `kaas fsck`: reads the whole volume and reports (or repairs) what is wrong |
//! | [`mount_check`] | the data directory's NFS mount options, checked at start-up |
//! | [`metrics`] | the Prometheus metrics on the health listener |
//! | `process_metrics` | the `process_*` metrics from `/proc/self` (production build only) |
//! | [`health`] | `/livez` and `/readyz` for Kubernetes probes |
//! | [`clock`] | the wall clock, for record timestamps only |
//! | `historical` | the historical bugs' old code paths (simulation build only) |

pub mod api;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod fsck;
#[cfg(all(not(madsim), any(test, feature = "fuzzing")))]
pub mod fuzz;
pub mod groups;
pub mod health;
#[cfg(madsim)]
pub mod historical;
pub mod layout;
pub mod leaders;
pub mod log;
pub mod metrics;
pub mod mount_check;
pub mod node;
pub mod peer;
#[cfg(not(madsim))]
pub mod process_metrics;
pub mod produce_order;
pub mod producer_ids;
pub mod protocol;
pub mod quota;
pub mod security;
pub(crate) mod slot_files;
pub mod startup;
pub mod stored;
pub mod txn;
pub mod txn_store;
