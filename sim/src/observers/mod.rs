//! Observers beside the run's own (`run::observer`): each reads the
//! volume as a new broker would while an actor works, and reports what no
//! client could see. One starts when the actor it watches is in the cast.

use std::sync::Arc;

use madsim::runtime::NodeHandle;

use crate::actors::Cast;
use crate::history::History;
use crate::run::brokers::Cluster;
use crate::run::{OBSERVER_HOST, Violations};

pub(crate) mod controllers;
pub(crate) mod group_files;
pub(crate) mod manifests;

/// Starts on `node` the observers of the actors in `cast`.
pub(crate) fn start(
    node: &NodeHandle,
    cast: &Cast,
    cluster: &Cluster,
    history: &History,
    violations: &Violations,
) {
    let volume = || Arc::new(cluster.nfs.host(OBSERVER_HOST));
    if cast.has("committer") {
        node.spawn(group_files::watch(volume(), history.clone(), cluster.start));
    }
    if cast.has("next-members") {
        node.spawn(group_files::watch_holders(
            volume(),
            history.clone(),
            cluster.start,
        ));
    }
    if cast.has("trimmer") {
        node.spawn(manifests::watch(
            volume(),
            cluster.nfs.clone(),
            violations.clone(),
            crate::run::stamp(cluster.start),
        ));
    }
}
