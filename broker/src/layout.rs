//! Where things live on the shared volume, and who writes each of them.
//!
//! ```text
//! <volume>/
//!   brokers/<id>        heartbeat of broker <id>; written only by that broker
//!   cluster/            controller claims and assignments (see `cluster`)
//!   topics/             topics by id, their names and tombstones (see `log`)
//!   producers/          producer id blocks, one claim each (see `producer_ids`)
//!   groups/<slot>/      consumer groups of a coordinator slot (see `groups`)
//! ```
//! Later layers add their directories here, each with its single writer.

use std::path::{Path, PathBuf};

pub const BROKERS_DIR: &str = "brokers";

/// The top-level directories every broker expects. Creating them is safe to
/// race: `mkdir` is atomic and `AlreadyExists` is the same end state.
pub const TOP_LEVEL: &[&str] = &[
    BROKERS_DIR,
    "cluster",
    "topics",
    "topics/names",
    "producers",
    "groups",
];

pub fn heartbeat(broker_id: u32) -> PathBuf {
    Path::new(BROKERS_DIR).join(broker_id.to_string())
}
