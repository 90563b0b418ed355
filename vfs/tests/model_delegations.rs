//! The model NFS's delegations, recalls and grace period (NFS-MODEL.md and
//! what ci/realnfs measured on Linux nfsd): a host that read a file
//! buffered and then lost power makes another host's rename over that
//! file, and that host's listing of the directory meanwhile, wait for the
//! dead host's lease; with O_DIRECT opens (what kaas does) nothing waits.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use vfs::model::{ModelHost, ModelNfs, NfsConfig};
use vfs::{OpenOptions, Vfs, read_file};

const LEASE: Duration = Duration::from_secs(90);

fn p(s: &str) -> &Path {
    Path::new(s)
}

async fn replace(host: &ModelHost, path: &str, data: &[u8]) {
    let tmp = format!("{path}.tmp");
    let f = host.open(p(&tmp), OpenOptions::create_new()).await.unwrap();
    f.write_at(0, Bytes::copy_from_slice(data)).await.unwrap();
    f.close().await.unwrap();
    host.rename(p(&tmp), p(path)).await.unwrap();
}

/// Host 1 reads `d/hb` and loses power; how long host 2's rename over it
/// takes, and how long its listing of `d` started during the rename takes.
async fn rename_after_power_loss(direct_io: bool) -> (Duration, Duration, usize) {
    let nfs = ModelNfs::new(NfsConfig::default(), 7);
    nfs.set_direct_io(direct_io);
    let (reader, writer) = (nfs.host(1), nfs.host(2));
    writer.mkdir(p("d")).await.unwrap();
    replace(&writer, "d/hb", b"1").await;
    assert_eq!(read_file(&reader, p("d/hb")).await.unwrap(), b"1");
    let held = nfs.delegations_held();
    nfs.crash_host(1);
    let began = Instant::now();
    let lister = {
        let writer = writer.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let t = Instant::now();
            writer.read_dir(p("d")).await.unwrap();
            t.elapsed()
        })
    };
    replace(&writer, "d/hb", b"2").await;
    let renamed = began.elapsed();
    let listed = lister.await.unwrap();
    assert_eq!(read_file(&writer, p("d/hb")).await.unwrap(), b"2");
    (renamed, listed, held)
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_dead_hosts_delegation_holds_a_rename_and_the_directory_for_its_lease() {
    let (renamed, listed, held) = rename_after_power_loss(false).await;
    assert_eq!(held, 1, "a buffered read gets a delegation");
    assert!(renamed >= LEASE, "the rename waited {renamed:?}");
    assert!(renamed < LEASE + Duration::from_secs(5), "{renamed:?}");
    assert!(
        listed >= LEASE - Duration::from_secs(2),
        "the listing waited behind the rename: {listed:?}"
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn direct_io_opens_get_no_delegation_and_nothing_waits() {
    let (renamed, listed, held) = rename_after_power_loss(true).await;
    assert_eq!(held, 0);
    assert!(renamed < Duration::from_secs(1), "{renamed:?}");
    assert!(listed < Duration::from_secs(1), "{listed:?}");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_live_holder_returns_its_delegation_at_once() {
    let nfs = ModelNfs::new(NfsConfig::default(), 7);
    nfs.set_direct_io(false);
    let (reader, writer) = (nfs.host(1), nfs.host(2));
    replace(&writer, "hb", b"1").await;
    read_file(&reader, p("hb")).await.unwrap();
    assert_eq!(nfs.delegations_held(), 1);
    let began = Instant::now();
    writer.unlink(p("hb")).await.unwrap();
    assert!(began.elapsed() < Duration::from_secs(1));
    assert_eq!(nfs.delegations_held(), 0, "recalled");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn the_grace_period_holds_opens_renames_and_removals_not_reads_of_open_files() {
    let grace = Duration::from_secs(30);
    let nfs = ModelNfs::new(
        NfsConfig {
            grace_ms: grace.as_millis() as u64,
            ..NfsConfig::default()
        },
        7,
    );
    let h = nfs.host(1);
    replace(&h, "a", b"x").await;
    let open = h.open(p("a"), OpenOptions::read()).await.unwrap();
    nfs.restart_server();
    let began = Instant::now();
    assert_eq!(&open.read_at(0, 1).await.unwrap()[..], b"x");
    h.read_dir(p("")).await.unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "reclaimed state reads on"
    );
    read_file(&h, p("a")).await.unwrap();
    let waited = began.elapsed();
    assert!(
        waited >= grace && waited < grace + Duration::from_secs(1),
        "{waited:?}"
    );
    let began = Instant::now();
    h.unlink(p("a")).await.unwrap();
    assert!(began.elapsed() < Duration::from_secs(1), "grace is over");
}
