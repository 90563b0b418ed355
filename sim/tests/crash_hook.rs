//! Killing (or restarting) a madsim node applies NFS crash semantics to its host.
#![cfg(madsim)]
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use madsim::runtime::{Handle, Runtime};
use sim::nfs_hook::NfsCrashHook;
use vfs::model::{Faults, ModelNfs, NfsConfig};
use vfs::{OpenOptions, Vfs, read_file};

/// A node writes without fsync and unlinks a file it holds open, then is
/// killed or restarted. Returns what another host then reads and the `.nfs`
/// files left on the server.
fn crash_writer(kill: bool) -> (Vec<u8>, Vec<String>) {
    let rt = Runtime::with_seed_and_config(3, madsim::Config::default());
    rt.add_simulator::<NfsCrashHook>();
    rt.block_on(async move {
        let config = NfsConfig {
            faults: Faults {
                crash_landed_probability: 0.0,
                ..Faults::default()
            },
            ..NfsConfig::default()
        };
        let nfs = ModelNfs::new(config, 1);
        let hook = madsim::plugin::simulator::<NfsCrashHook>();
        hook.attach(nfs.clone());
        let writer_nfs = nfs.clone();
        let node = Handle::current()
            .create_node()
            .name("writer")
            .init(move || {
                let host = writer_nfs.boot_host(7);
                async move {
                    let data = host
                        .open(Path::new("data"), OpenOptions::create_new())
                        .await;
                    let Ok(data) = data else {
                        return; // the restarted incarnation finds it already there
                    };
                    data.write_at(0, Bytes::from_static(b"unsynced"))
                        .await
                        .unwrap();
                    let held = host
                        .open(Path::new("held"), OpenOptions::create_new())
                        .await
                        .unwrap();
                    host.unlink(Path::new("held")).await.unwrap();
                    let _keep = (data, held);
                    std::future::pending::<()>().await;
                }
            })
            .build();
        hook.map(node.id(), 7);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(nfs.nfs_leftovers().len(), 1, "silly-renamed while held");
        if kill {
            Handle::current().kill(node.id());
        } else {
            Handle::current().restart(node.id());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let reader = nfs.host(8);
        let seen = read_file(&reader, Path::new("data")).await.unwrap();
        (seen, nfs.nfs_leftovers())
    })
}

#[test]
fn a_killed_node_loses_its_unflushed_writes_and_leaks_its_nfs_files() {
    let (data, leftovers) = crash_writer(true);
    assert!(data.is_empty(), "unsynced bytes survived a kill: {data:?}");
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
}

#[test]
fn a_restarted_node_is_treated_as_crashed() {
    let (data, leftovers) = crash_writer(false);
    assert!(
        data.is_empty(),
        "unsynced bytes survived a restart: {data:?}"
    );
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
}
