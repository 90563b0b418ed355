//! One multi-host test per behaviour of ../shared/NFS-MODEL.md, each
//! asserting what a host can observe. Time is tokio's paused clock in the
//! production build and madsim's clock in the simulation build.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::{Instant, sleep};
use vfs::model::{Faults, ModelHost, ModelNfs, NfsConfig};
use vfs::{OpenOptions, Vfs, VfsFile, read_file};

fn p(s: &str) -> &Path {
    Path::new(s)
}

fn nfs(config: NfsConfig) -> ModelNfs {
    ModelNfs::new(config, 42)
}

fn faults(f: Faults) -> NfsConfig {
    NfsConfig {
        faults: f,
        ..NfsConfig::default()
    }
}

async fn create(host: &ModelHost, path: &str, data: &[u8]) {
    let f = host.open(p(path), OpenOptions::create_new()).await.unwrap();
    f.write_at(0, Bytes::copy_from_slice(data)).await.unwrap();
    f.close().await.unwrap();
}

async fn open_rw(host: &ModelHost, path: &str) -> Box<dyn VfsFile> {
    host.open(p(path), OpenOptions::write()).await.unwrap()
}

async fn kind<T>(f: impl std::future::Future<Output = std::io::Result<T>>) -> ErrorKind {
    match f.await {
        Ok(_) => panic!("the operation must fail"),
        Err(e) => e.kind(),
    }
}

fn page(byte: u8) -> Vec<u8> {
    vec![byte; 4096]
}

// ---- server state ---------------------------------------------------------

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn estale_on_the_next_uncached_read_after_another_host_unlinks() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&b, "f", &[page(1), page(2)].concat()).await;
    let fa = a.open(p("f"), OpenOptions::read()).await.unwrap();
    assert_eq!(
        fa.read_at(0, 10).await.unwrap()[0],
        1,
        "page 0 now cached on A"
    );
    b.unlink(p("f")).await.unwrap();
    // Cached page and fresh attributes: A still reads the old bytes.
    assert_eq!(fa.read_at(0, 10).await.unwrap()[0], 1);
    // An uncached page must go to the server, where the file is gone.
    assert_eq!(
        kind(fa.read_at(4096, 10)).await,
        ErrorKind::StaleNetworkFileHandle
    );
    // Once the attributes expire, even cached pages need the server.
    sleep(Duration::from_secs(4)).await;
    assert_eq!(
        kind(fa.read_at(0, 10)).await,
        ErrorKind::StaleNetworkFileHandle
    );
    assert_eq!(kind(fa.stat()).await, ErrorKind::StaleNetworkFileHandle);

    // A write is buffered, so its ESTALE surfaces at the latest at fsync.
    create(&b, "g", b"").await;
    let ga = open_rw(&a, "g").await;
    b.unlink(p("g")).await.unwrap();
    ga.write_at(0, Bytes::from(page(3))).await.unwrap();
    assert_eq!(kind(ga.fsync()).await, ErrorKind::StaleNetworkFileHandle);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn estale_when_another_host_renames_over_the_open_file() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "target", b"old").await;
    create(&a, "new", b"new").await;
    let fb = b.open(p("target"), OpenOptions::read()).await.unwrap();
    a.rename(p("new"), p("target")).await.unwrap();
    assert_eq!(
        kind(fb.read_at(0, 3)).await,
        ErrorKind::StaleNetworkFileHandle
    );
    assert_eq!(
        read_file(&b, p("target")).await.unwrap(),
        b"new",
        "open by path is fresh"
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn preserve_unlinked_keeps_an_open_file_readable_for_other_hosts() {
    let nfs = nfs(NfsConfig {
        preserve_unlinked: true,
        ..NfsConfig::default()
    });
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&b, "f", &[page(1), page(2)].concat()).await;
    let fa = a.open(p("f"), OpenOptions::read()).await.unwrap();
    b.unlink(p("f")).await.unwrap();
    assert_eq!(fa.read_at(4096, 1).await.unwrap()[0], 2);
    fa.close().await.unwrap();
    assert_eq!(nfs.used_bytes(), 0, "freed at the last close");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_server_restart_drops_written_but_uncommitted_data() {
    // Write-back after every operation, so A's write reaches the server unstable.
    let nfs = nfs(faults(Faults {
        writeback_probability: 1.0,
        ..Faults::default()
    }));
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "f", b"").await;
    let fa = open_rw(&a, "f").await;
    fa.write_at(0, Bytes::from(page(7))).await.unwrap();
    for _ in 0..20 {
        a.stat(p("f")).await.unwrap(); // operations give write-back its chances
    }
    assert_eq!(
        read_file(&b, p("f")).await.unwrap().len(),
        4096,
        "unstable data visible"
    );
    nfs.restart_server();
    assert_eq!(
        read_file(&b, p("f")).await.unwrap().len(),
        0,
        "dropped by the restart"
    );
    // A's client still has the page; its fsync sees the new verifier and resends.
    fa.fsync().await.unwrap();
    assert_eq!(read_file(&b, p("f")).await.unwrap(), page(7));
    nfs.restart_server();
    assert_eq!(
        read_file(&b, p("f")).await.unwrap(),
        page(7),
        "committed data survives"
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_restart_resends_every_span_a_page_was_sent_in_before_its_commit() {
    // Write-back after every operation: each small write reaches the server
    // unstable on its own, before the next one lands in the same page.
    let nfs = nfs(faults(Faults {
        writeback_probability: 1.0,
        ..Faults::default()
    }));
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "f", b"").await;
    let fa = open_rw(&a, "f").await;
    fa.write_at(0, Bytes::from_static(b"head")).await.unwrap();
    for _ in 0..20 {
        a.stat(p("f")).await.unwrap();
    }
    fa.write_at(4, Bytes::from_static(b"-and-body"))
        .await
        .unwrap();
    for _ in 0..20 {
        a.stat(p("f")).await.unwrap();
    }
    nfs.restart_server();
    fa.fsync().await.unwrap();
    nfs.restart_server();
    assert_eq!(
        read_file(&b, p("f")).await.unwrap(),
        b"head-and-body",
        "an fsync that returned made both writes durable"
    );
}

// ---- per-host caches ------------------------------------------------------

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn stat_answers_from_the_attribute_cache_until_it_expires() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "f", &[0; 10]).await;
    assert_eq!(a.stat(p("f")).await.unwrap().len, 10);
    let fb = open_rw(&b, "f").await;
    fb.write_at(10, Bytes::from_static(&[1; 10])).await.unwrap();
    fb.close().await.unwrap();
    assert_eq!(
        a.stat(p("f")).await.unwrap().len,
        10,
        "stale within acregmin"
    );
    sleep(Duration::from_millis(3_100)).await;
    assert_eq!(a.stat(p("f")).await.unwrap().len, 20);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn reads_through_an_open_handle_stop_at_the_cached_size() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "log", b"first").await;
    let fa = a.open(p("log"), OpenOptions::read()).await.unwrap();
    let fb = open_rw(&b, "log").await;
    fb.write_at(5, Bytes::from_static(b"second")).await.unwrap();
    fb.close().await.unwrap();
    assert_eq!(
        &fa.read_at(0, 100).await.unwrap()[..],
        b"first",
        "cached size"
    );
    assert_eq!(
        read_file(&a, p("log")).await.unwrap(),
        b"firstsecond",
        "fresh open"
    );
    sleep(Duration::from_secs(4)).await;
    assert_eq!(&fa.read_at(0, 100).await.unwrap()[..], b"firstsecond");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn an_old_handle_can_serve_a_mix_of_old_and_new_pages() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&b, "f", &[page(b'o'), page(b'o')].concat()).await;
    let fa = a.open(p("f"), OpenOptions::read()).await.unwrap();
    fa.read_at(0, 1).await.unwrap(); // caches page 0 only
    let fb = open_rw(&b, "f").await;
    fb.write_at(0, Bytes::from([page(b'n'), page(b'n')].concat()))
        .await
        .unwrap();
    fb.close().await.unwrap();
    let seen = fa.read_at(0, 8192).await.unwrap();
    assert_eq!(seen[0], b'o', "page 0 from the cache");
    assert_eq!(seen[4096], b'n', "page 1 fetched now");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_negative_lookup_hides_a_new_file_but_open_sees_it_whole() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    a.mkdir(p("d")).await.unwrap();
    assert_eq!(kind(a.stat(p("d/f"))).await, ErrorKind::NotFound);
    create(&b, "d/f", b"complete content").await;
    assert_eq!(
        kind(a.stat(p("d/f"))).await,
        ErrorKind::NotFound,
        "negative entry trusted"
    );
    assert_eq!(kind(a.unlink(p("d/f"))).await, ErrorKind::NotFound);
    assert_eq!(read_file(&a, p("d/f")).await.unwrap(), b"complete content");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_positive_lookup_and_attributes_outlive_a_removal_by_another_host() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "f", b"x").await;
    assert_eq!(a.stat(p("f")).await.unwrap().len, 1);
    b.unlink(p("f")).await.unwrap();
    assert_eq!(a.stat(p("f")).await.unwrap().len, 1, "still 'exists' for A");
    assert_eq!(
        kind(a.open(p("f"), OpenOptions::read())).await,
        ErrorKind::NotFound
    );
    sleep(Duration::from_secs(4)).await;
    assert_eq!(kind(a.stat(p("f"))).await, ErrorKind::NotFound);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn directory_listings_are_cached_until_the_directory_attributes_expire() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    a.mkdir(p("d")).await.unwrap();
    create(&a, "d/a", b"").await;
    let names = |v: Vec<vfs::DirEntry>| v.into_iter().map(|e| e.name).collect::<Vec<_>>();
    assert_eq!(names(a.read_dir(p("d")).await.unwrap()), ["a"]);
    create(&b, "d/b", b"").await;
    assert_eq!(
        names(a.read_dir(p("d")).await.unwrap()),
        ["a"],
        "stale listing"
    );
    assert_eq!(
        names(b.read_dir(p("d")).await.unwrap()),
        ["a", "b"],
        "own change seen"
    );
    sleep(Duration::from_secs(31)).await;
    assert_eq!(names(a.read_dir(p("d")).await.unwrap()), ["a", "b"]);
}

// ---- dirty pages and write-back ---------------------------------------------

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn unflushed_writes_are_invisible_and_fsync_publishes_them() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "f", b"").await;
    let fa = open_rw(&a, "f").await;
    fa.write_at(0, Bytes::from_static(b"payload"))
        .await
        .unwrap();
    assert_eq!(
        &fa.read_at(0, 7).await.unwrap()[..],
        b"payload",
        "its own cache"
    );
    assert!(
        read_file(&b, p("f")).await.unwrap().is_empty(),
        "nothing reached the server"
    );
    fa.fsync().await.unwrap();
    assert_eq!(read_file(&b, p("f")).await.unwrap(), b"payload");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn write_back_shows_other_hosts_a_partial_write_with_holes() {
    const PAGES: usize = 8;
    let mut partial_seeds = 0;
    for seed in 0..20 {
        let nfs = ModelNfs::new(
            faults(Faults {
                writeback_probability: 0.3,
                ..Faults::default()
            }),
            seed,
        );
        let (a, b) = (nfs.host(1), nfs.host(2));
        create(&a, "f", b"").await;
        let fa = open_rw(&a, "f").await;
        let data: Vec<u8> = (0..PAGES).flat_map(|i| page(b'a' + i as u8)).collect();
        fa.write_at(0, Bytes::from(data)).await.unwrap();
        for _ in 0..4 {
            a.stat(p("f")).await.unwrap();
        }
        let seen = read_file(&b, p("f")).await.unwrap();
        let landed = seen
            .chunks(4096)
            .enumerate()
            .filter(|(i, chunk)| {
                let ours = chunk.iter().all(|&c| c == b'a' + *i as u8);
                let hole = chunk.iter().all(|&c| c == 0);
                assert!(
                    ours || hole,
                    "seed {seed}: page {i} is neither A's nor a hole"
                );
                ours
            })
            .count();
        if landed > 0 && landed < PAGES {
            partial_seeds += 1;
        }
        fa.fsync().await.unwrap();
        assert_eq!(read_file(&b, p("f")).await.unwrap().len(), PAGES * 4096);
    }
    assert!(
        partial_seeds >= 5,
        "partial write-back seen on {partial_seeds} of 20 seeds"
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn concurrent_appends_from_two_hosts_overwrite_each_other() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "log", b"").await;
    let (fa, fb) = (open_rw(&a, "log").await, open_rw(&b, "log").await);
    // Each "appends" at the end it knows of: its own cached size.
    let end_a = fa.stat().await.unwrap().len;
    let end_b = fb.stat().await.unwrap().len;
    fa.write_at(end_a, Bytes::from_static(b"AAAA"))
        .await
        .unwrap();
    fa.fsync().await.unwrap();
    fb.write_at(end_b, Bytes::from_static(b"BBBB"))
        .await
        .unwrap();
    fb.fsync().await.unwrap();
    assert_eq!(
        read_file(&a, p("log")).await.unwrap(),
        b"BBBB",
        "A's record was overwritten"
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_host_crash_loses_unflushed_pages_unless_they_landed() {
    for (landed, expect) in [(0.0, 0usize), (1.0, 4096)] {
        let nfs = nfs(faults(Faults {
            crash_landed_probability: landed,
            ..Faults::default()
        }));
        let (a, b) = (nfs.host(1), nfs.host(2));
        create(&a, "f", b"").await;
        let fa = open_rw(&a, "f").await;
        fa.write_at(0, Bytes::from(page(9))).await.unwrap();
        nfs.crash_host(1);
        assert_eq!(
            read_file(&b, p("f")).await.unwrap().len(),
            expect,
            "landed={landed}"
        );
        // The crashed incarnation's handle is dead; the host itself works again.
        assert_eq!(kind(fa.read_at(0, 1)).await, ErrorKind::Other);
        assert_eq!(read_file(&a, p("f")).await.unwrap().len(), expect);
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn rebooting_a_used_host_is_a_crash() {
    let nfs = nfs(NfsConfig::default());
    let a = nfs.boot_host(1);
    let fa = a.open(p("f"), OpenOptions::create_new()).await.unwrap();
    fa.write_at(0, Bytes::from_static(b"lost")).await.unwrap();
    let a = nfs.boot_host(1);
    assert!(read_file(&a, p("f")).await.unwrap().is_empty());
    assert_eq!(nfs.stats().crashes, 1);
    drop(fa); // a dead incarnation's handle closes nothing
    assert!(read_file(&a, p("f")).await.unwrap().is_empty());
}

// ---- silly-rename and ENOTEMPTY --------------------------------------------

fn silly(nfs: &ModelNfs) -> Vec<String> {
    nfs.nfs_leftovers()
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn unlinking_an_open_file_silly_renames_it_until_the_last_close() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    a.mkdir(p("topic")).await.unwrap();
    create(&a, "topic/seg", b"records").await;
    let f1 = a.open(p("topic/seg"), OpenOptions::read()).await.unwrap();
    let f2 = a.open(p("topic/seg"), OpenOptions::read()).await.unwrap();
    a.unlink(p("topic/seg")).await.unwrap();
    let leftovers = silly(&nfs);
    assert_eq!(leftovers.len(), 1);
    let name = leftovers[0].strip_prefix("topic/").unwrap().to_owned();
    assert!(
        name.starts_with(".nfs") && name.len() == 4 + 16 + 8,
        "{name}"
    );
    assert!(name[4..].chars().all(|c| c.is_ascii_hexdigit()), "{name}");
    // Reads still work on the host that holds it.
    assert_eq!(&f1.read_at(0, 7).await.unwrap()[..], b"records");
    assert_eq!(
        kind(a.rmdir(p("topic"))).await,
        ErrorKind::DirectoryNotEmpty
    );
    assert_eq!(
        kind(b.rmdir(p("topic"))).await,
        ErrorKind::DirectoryNotEmpty
    );
    let silly_path = format!("topic/{name}");
    assert_eq!(
        kind(a.unlink(p(&silly_path))).await,
        ErrorKind::ResourceBusy
    );
    f1.close().await.unwrap();
    assert_eq!(silly(&nfs).len(), 1, "one handle still open");
    f2.close().await.unwrap();
    assert!(silly(&nfs).is_empty(), "removed at the last close");
    a.rmdir(p("topic")).await.unwrap();
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_failed_delete_at_last_close_leaves_the_nfs_file_for_anyone_to_remove() {
    let nfs = nfs(NfsConfig::default());
    let a = nfs.host(1);
    a.mkdir(p("topic")).await.unwrap();
    a.mkdir(p("topic/0")).await.unwrap();
    create(&a, "topic/0/seg", b"records").await;
    let held = a.open(p("topic/0/seg"), OpenOptions::read()).await.unwrap();
    // Deleted as a topic is: renamed away, then reaped file by file (list,
    // unlink, rmdir) by the host that holds the segment open.
    a.rename(p("topic"), p("tomb")).await.unwrap();
    let reap = || async {
        for entry in a.read_dir(p("tomb/0")).await.unwrap() {
            let _ = a.unlink(&Path::new("tomb/0").join(&entry.name)).await;
        }
        kind(a.rmdir(p("tomb/0"))).await
    };
    assert_eq!(reap().await, ErrorKind::DirectoryNotEmpty);
    for _ in 0..3 {
        assert_eq!(reap().await, ErrorKind::DirectoryNotEmpty, "busy .nfs file");
    }
    let name = silly(&nfs)[0].clone();
    // Every call fails while the handle closes: the `.nfs` file stays.
    nfs.set_faults(Faults {
        eio_probability: 1.0,
        eio_applied_share: 0.0,
        ..Default::default()
    });
    let _ = held.close().await;
    nfs.set_faults(Faults::default());
    assert_eq!(silly(&nfs), vec![name.clone()]);
    assert_eq!(nfs.stats().leaked_silly, 1);
    // The host never saw it go, so it asks the server rather than a
    // negative cache entry, and the reaper reaches its end state.
    let _ = a.read_dir(p("tomb/0")).await.unwrap();
    a.unlink(p(&name)).await.unwrap();
    assert!(silly(&nfs).is_empty());
    a.rmdir(p("tomb/0")).await.unwrap();
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_silly_renamed_file_stays_forever_if_its_host_crashes() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    a.mkdir(p("topic")).await.unwrap();
    create(&a, "topic/seg", b"records").await;
    let _held = a.open(p("topic/seg"), OpenOptions::read()).await.unwrap();
    a.unlink(p("topic/seg")).await.unwrap();
    nfs.crash_host(1);
    sleep(Duration::from_secs(3600)).await;
    assert_eq!(silly(&nfs).len(), 1, "nobody will ever close it");
    assert_eq!(
        kind(b.rmdir(p("topic"))).await,
        ErrorKind::DirectoryNotEmpty
    );
    // Another host may remove it; converge-remove then reaches its end state.
    let gone = vfs::durable::converge_remove(&b, p("topic")).await.unwrap();
    assert!(gone.is_gone(), "{gone:?}");
    assert!(nfs.dump().is_empty(), "{}", nfs.dump());
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn renaming_over_a_target_open_on_this_host_leaves_a_window_without_it() {
    let nfs = nfs(faults(Faults {
        latency_min_us: 10_000,
        latency_max_us: 10_000,
        ..Faults::default()
    }));
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "meta", b"old").await;
    create(&a, "meta.tmp", b"new").await;
    let held = a.open(p("meta"), OpenOptions::read()).await.unwrap();
    let start = Instant::now();
    let renamer = {
        let a = a.clone();
        tokio::spawn(async move { a.rename(p("meta.tmp"), p("meta")).await })
    };
    // A's first step lands at +10 ms, its second at +20 ms; B's open at
    // +15 ms: 5 ms of margin either side (madsim's scheduling moves tasks
    // by a little, and 0.5 ms margins failed on some seeds).
    tokio::time::sleep_until(start + Duration::from_millis(5)).await;
    let during = b.open(p("meta"), OpenOptions::read()).await;
    assert_eq!(during.err().map(|e| e.kind()), Some(ErrorKind::NotFound));
    renamer.await.unwrap().unwrap();
    assert_eq!(read_file(&b, p("meta")).await.unwrap(), b"new");
    assert_eq!(&held.read_at(0, 3).await.unwrap()[..], b"old");
    assert_eq!(silly(&nfs).len(), 1, "the replaced file lives on as .nfs");
    held.close().await.unwrap();
    assert!(silly(&nfs).is_empty());
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn an_interrupted_two_step_rename_ends_after_its_first_step() {
    let nfs = nfs(faults(Faults {
        interrupt_probability: 1.0,
        ..Faults::default()
    }));
    let a = nfs.host(1);
    create(&a, "meta", b"old").await;
    create(&a, "meta.tmp", b"new").await;
    let _held = a.open(p("meta"), OpenOptions::read()).await.unwrap();
    let err = a.rename(p("meta.tmp"), p("meta")).await.unwrap_err();
    assert!(err.to_string().contains("EIO"), "{err}");
    assert_eq!(
        kind(a.stat(p("meta"))).await,
        ErrorKind::NotFound,
        "target moved aside"
    );
    assert_eq!(
        read_file(&a, p("meta.tmp")).await.unwrap(),
        b"new",
        "source untouched"
    );
    assert_eq!(nfs.stats().interrupts, 1);
}

// ---- retransmissions, EIO, ENOSPC, latency -----------------------------------

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn lost_replies_answer_eexist_to_the_creator_and_enoent_to_the_remover() {
    let nfs = nfs(faults(Faults {
        lost_reply_probability: 1.0,
        ..Faults::default()
    }));
    let (a, b) = (nfs.host(1), nfs.host(2));
    let created = a.open(p("claim"), OpenOptions::create_new()).await;
    assert_eq!(
        created.err().map(|e| e.kind()),
        Some(ErrorKind::AlreadyExists)
    );
    assert!(
        read_file(&b, p("claim")).await.unwrap().is_empty(),
        "yet A created it"
    );
    assert_eq!(kind(a.mkdir(p("d"))).await, ErrorKind::AlreadyExists);
    assert_eq!(b.stat(p("d")).await.unwrap().kind, vfs::FileKind::Dir);
    assert_eq!(
        kind(a.rename(p("claim"), p("renamed"))).await,
        ErrorKind::NotFound
    );
    assert!(
        read_file(&b, p("renamed")).await.is_ok(),
        "the rename happened"
    );
    assert_eq!(kind(a.unlink(p("renamed"))).await, ErrorKind::NotFound);
    assert_eq!(
        kind(b.open(p("renamed"), OpenOptions::read())).await,
        ErrorKind::NotFound
    );
    assert_eq!(kind(a.rmdir(p("d"))).await, ErrorKind::NotFound);
    assert_eq!(
        kind(b.open(p("d"), OpenOptions::read())).await,
        ErrorKind::NotFound
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn eio_fails_requests_with_a_clear_error() {
    let nfs = nfs(faults(Faults {
        eio_probability: 1.0,
        ..Faults::default()
    }));
    let a = nfs.host(1);
    let err = a.mkdir(p("d")).await.unwrap_err();
    assert!(
        err.to_string().contains("EIO") && err.to_string().contains("mkdir d"),
        "{err}"
    );
    assert!(nfs.stats().eio >= 1);
    // Healed: the same request goes through.
    nfs.set_faults(Faults::default());
    a.mkdir(p("d")).await.unwrap();
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_full_server_reports_enospc_at_fsync_and_keeps_what_it_had() {
    let nfs = nfs(faults(Faults {
        capacity_bytes: Some(100),
        ..Faults::default()
    }));
    let a = nfs.host(1);
    create(&a, "f", &[1; 60]).await;
    let f = open_rw(&a, "f").await;
    f.write_at(60, Bytes::from(vec![2; 60])).await.unwrap(); // buffered
    assert_eq!(kind(f.fsync()).await, ErrorKind::StorageFull);
    assert_eq!(read_file(&nfs.host(2), p("f")).await.unwrap(), vec![1; 60]);

    let nfs = self::nfs(faults(Faults {
        enospc_probability: 1.0,
        ..Faults::default()
    }));
    let a = nfs.host(1);
    let f = a.open(p("g"), OpenOptions::create_new()).await.unwrap();
    f.write_at(0, Bytes::from_static(b"x")).await.unwrap();
    assert_eq!(kind(f.close()).await, ErrorKind::StorageFull);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn latency_and_stalls_take_simulated_time() {
    let nfs = nfs(faults(Faults {
        latency_min_us: 2_000,
        latency_max_us: 2_000,
        ..Faults::default()
    }));
    let start = Instant::now();
    nfs.host(1).mkdir(p("d")).await.unwrap();
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(2) && took < Duration::from_millis(3),
        "{took:?}"
    );

    let nfs = self::nfs(faults(Faults {
        stall_probability: 1.0,
        stall_ms: 5_000,
        ..Faults::default()
    }));
    let start = Instant::now();
    nfs.host(1).mkdir(p("d")).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(5));
    assert_eq!(nfs.stats().stalls, 1);
}

// ---- determinism and inspection ---------------------------------------------

/// Temp, write, fsync, rename: `atomic_replace` without its random temp name.
async fn replace(h: &ModelHost, name: &str, data: Vec<u8>) -> std::io::Result<()> {
    let temp = format!("{name}.tmp");
    let f = h
        .open(
            p(&temp),
            OpenOptions::write().with_create(vfs::Create::IfMissing),
        )
        .await?;
    let written = async {
        f.write_at(0, Bytes::from(data)).await?;
        f.fsync().await
    }
    .await;
    f.close().await?;
    written?;
    h.rename(p(&temp), p(name)).await
}

async fn workload(nfs: &ModelNfs) -> Vec<String> {
    let hosts = [nfs.host(1), nfs.host(2), nfs.host(3)];
    let mut results = Vec::new();
    for i in 0..60u32 {
        let h = &hosts[(i % 3) as usize];
        let name = format!("f{}", i % 7);
        let r = match i % 5 {
            0 => replace(h, &name, vec![i as u8; 5000])
                .await
                .map(|_| "replaced".to_owned()),
            1 => read_file(h, p(&name))
                .await
                .map(|d| format!("read {}", d.len())),
            2 => h.unlink(p(&name)).await.map(|_| "unlinked".to_owned()),
            3 => h
                .read_dir(p(""))
                .await
                .map(|d| format!("listed {}", d.len())),
            _ => h.stat(p(&name)).await.map(|m| format!("size {}", m.len)),
        };
        results.push(format!("{i}: {:?}", r.map_err(|e| e.kind())));
        sleep(Duration::from_millis(700)).await;
    }
    results
}

fn hostile_traced() -> NfsConfig {
    NfsConfig {
        trace: true,
        ..NfsConfig::hostile()
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn the_same_seed_and_operations_give_the_same_results_and_trace() {
    let one = ModelNfs::new(hostile_traced(), 5);
    let two = ModelNfs::new(hostile_traced(), 5);
    let other = ModelNfs::new(hostile_traced(), 6);
    let (r1, r2, _) = tokio::join!(workload(&one), workload(&two), workload(&other));
    assert_eq!(r1, r2);
    assert_eq!(one.trace(), two.trace());
    assert_eq!(one.trace_digest(), two.trace_digest());
    assert_eq!(one.dump(), two.dump());
    assert_eq!(one.stats(), two.stats());
    assert!(!one.trace().is_empty());
    assert_ne!(one.trace_digest(), other.trace_digest(), "the seed matters");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn two_models_in_one_process_do_not_influence_each_other() {
    let alone = ModelNfs::new(hostile_traced(), 9);
    workload(&alone).await;
    let (x, y) = (
        ModelNfs::new(hostile_traced(), 9),
        ModelNfs::new(hostile_traced(), 9),
    );
    let (_, _) = tokio::join!(workload(&x), workload(&y));
    assert_eq!(x.trace_digest(), alone.trace_digest());
    assert_eq!(y.trace_digest(), alone.trace_digest());
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn the_trace_names_host_operation_path_and_result() {
    let nfs = ModelNfs::new(
        NfsConfig {
            trace: true,
            ..NfsConfig::default()
        },
        1,
    );
    let a = nfs.host(3);
    a.mkdir(p("d")).await.unwrap();
    let _ = a.rmdir(p("missing")).await;
    let trace = nfs.trace();
    assert!(trace[0].ends_with("h3 mkdir d -> ok"), "{trace:?}");
    assert!(
        trace[1].ends_with("h3 rmdir missing -> ENOENT"),
        "{trace:?}"
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn the_dump_lists_the_server_tree_in_name_order() {
    let nfs = nfs(NfsConfig::default());
    let a = nfs.host(1);
    a.mkdir(p("b")).await.unwrap();
    create(&a, "b/x", b"123").await;
    create(&a, "a", b"").await;
    let _held = a.open(p("b/x"), OpenOptions::read()).await.unwrap();
    a.unlink(p("b/x")).await.unwrap();
    let dump = nfs.dump();
    let lines: Vec<_> = dump.lines().collect();
    assert_eq!(lines[0], "a file 0");
    assert_eq!(lines[1], "b dir 0");
    assert!(
        lines[2].starts_with("b/.nfs") && lines[2].ends_with(" file 3"),
        "{dump}"
    );
    assert_eq!(nfs.nfs_leftovers().len(), 1);
}

// ---- hooks for scenarios ----------------------------------------------------

/// A watch fires on the first matching call after it was armed, names the
/// host that made it, and sees both names of a rename.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_watch_names_the_host_of_the_first_matching_call() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    a.mkdir(p("topics")).await.unwrap();
    create(&a, "topics/t1", b"x").await;
    let write = nfs.watch("write topics/*2");
    let rename = nfs.watch("rename topics/* -> topics/.tombstone-");
    create(&a, "topics/t1b", b"y").await;
    assert_eq!(nfs.watch_fired(write), None, "t1b does not match *2");
    create(&b, "topics/t2", b"z").await;
    assert_eq!(nfs.watch_fired(write), Some(2));
    create(&a, "topics/t22", b"z").await;
    assert_eq!(
        nfs.watch_fired(write),
        Some(2),
        "only the first call counts"
    );
    a.rename(p("topics/t1"), p("topics/t1c")).await.unwrap();
    assert_eq!(nfs.watch_fired(rename), None);
    a.rename(p("topics/t1c"), p("topics/.tombstone-t1"))
        .await
        .unwrap();
    assert_eq!(nfs.watch_fired(rename), Some(1));
}

/// Inodes made after a mark are told apart from older ones, even under an
/// older directory's name.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn files_created_after_a_mark_are_listed() {
    let nfs = nfs(NfsConfig::default());
    let a = nfs.host(1);
    a.mkdir(p("d")).await.unwrap();
    create(&a, "d/old", b"x").await;
    let mark = nfs.mark();
    assert!(nfs.created_since("d", mark).is_empty());
    create(&a, "d/new", b"y").await;
    assert_eq!(nfs.created_since("d", mark), vec!["d/new".to_owned()]);
    a.rename(p("d"), p("gone")).await.unwrap();
    a.mkdir(p("d")).await.unwrap();
    assert_eq!(nfs.created_since("d", mark), vec!["d".to_owned()]);
}

// ---- injected failures at a fault point -------------------------------------

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_failed_next_call_hits_only_that_host_and_only_once() {
    let nfs = nfs(NfsConfig::default());
    let (a, b) = (nfs.host(1), nfs.host(2));
    create(&a, "f", b"one").await;
    let f = open_rw(&a, "f").await;
    nfs.fail_next_call(1);
    // Another host's call is not the one that fails.
    assert_eq!(
        read_file(&b, p("f")).await.unwrap(),
        Bytes::from_static(b"one")
    );
    // A close never takes the failure (the handle would stay open)...
    f.close().await.unwrap();
    // ...the next call does, before it reaches the server...
    assert_eq!(kind(a.unlink(p("f"))).await, ErrorKind::Other);
    assert!(
        b.stat(p("f")).await.is_ok(),
        "the failed unlink was applied"
    );
    // ...and only that one.
    a.unlink(p("f")).await.unwrap();
    assert_eq!(nfs.stats().eio, 1);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn the_stable_length_counts_only_what_a_commit_or_close_made_durable() {
    let nfs = nfs(NfsConfig::default());
    let a = nfs.host(1);
    assert_eq!(nfs.stable_len("d/f"), None);
    a.mkdir(p("d")).await.unwrap();
    let f = a.open(p("d/f"), OpenOptions::create_new()).await.unwrap();
    f.write_at(0, Bytes::from_static(b"0123456789"))
        .await
        .unwrap();
    assert_eq!(
        nfs.stable_len("d/f"),
        Some(0),
        "a write alone commits nothing"
    );
    f.fsync().await.unwrap();
    assert_eq!(nfs.stable_len("d/f"), Some(10));
    f.write_at(10, Bytes::from_static(b"abc")).await.unwrap();
    assert_eq!(
        nfs.stable_len("d/f"),
        Some(10),
        "an append waits for its fsync"
    );
    f.close().await.unwrap();
    assert_eq!(nfs.stable_len("d/f"), Some(13), "a close commits");
    assert_eq!(nfs.stable_len("d"), None, "a directory has no data");
}
