//! The partition log on every backend: PosixVfs (production build), MemVfs
//! and the model NFS; crashes at every step, zombies, bounded recovery.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::path::{Path, PathBuf};
use std::sync::Arc;

use broker::log::batch;
use broker::log::fence::{EpochClaims, LeadershipFence};
use broker::log::topic;
use broker::log::{LogConfig, LogError, PartitionLog};
use bytes::Bytes;
use vfs::durable::ClaimToken;
use vfs::model::{ModelNfs, NfsConfig};
use vfs::testkit::{Counting, Interrupting};
use vfs::{MemVfs, OpenOptions, Vfs};

mod common;
use common::{lead, read_all, with_topic};

struct Backend {
    name: &'static str,
    vfs: Arc<dyn Vfs>,
    _guard: Option<Box<dyn std::any::Any>>,
}

fn backends() -> Vec<Backend> {
    #[cfg_attr(madsim, allow(unused_mut))]
    let mut out = vec![
        Backend {
            name: "mem",
            vfs: Arc::new(MemVfs::new()),
            _guard: None,
        },
        Backend {
            name: "model",
            vfs: Arc::new(ModelNfs::new(NfsConfig::default(), 1).host(1)),
            _guard: None,
        },
    ];
    #[cfg(not(madsim))]
    {
        let dir = tempfile::tempdir().unwrap();
        out.push(Backend {
            name: "posix",
            vfs: Arc::new(vfs::PosixVfs::open_volume(dir.path()).unwrap()),
            _guard: Some(Box::new(dir)),
        });
    }
    out
}

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 4_000,
        segment_ms: None,
        index_interval_bytes: 300,
        checkpoint_bytes: 1_500,
        checkpoint_interval: std::time::Duration::from_secs(3600),
        retention_ms: None,
        retention_bytes: None,
        compaction: None,
    }
}

fn record(i: u32) -> Bytes {
    let value = format!("record-{i:05}-{}", "x".repeat((i % 7) as usize * 20));
    batch::build((-1, -1, -1), 1_000 + i64::from(i), &[value.as_bytes()])
}

fn value(i: u32) -> Vec<u8> {
    batch::decode_values(&record(i)).unwrap().remove(0)
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn appends_read_back_across_segment_rolls() {
    for b in backends() {
        let meta = with_topic(b.vfs.as_ref(), "orders", 1).await;
        let log = lead(b.vfs.clone(), &meta, 0, 1, small()).await.unwrap();
        for i in 0..60 {
            let a = log.append(record(i)).await.unwrap();
            assert_eq!(a.base_offset, i64::from(i), "{}", b.name);
        }
        assert_eq!(log.high_watermark(), 60);
        let all = read_all(&log, 0).await;
        assert_eq!(all.len(), 60, "{}", b.name);
        for (i, (off, v)) in all.iter().enumerate() {
            assert_eq!((*off, v.clone()), (i as i64, value(i as u32)), "{}", b.name);
        }
        assert_eq!(
            read_all(&log, 37).await[0].0,
            37,
            "reads start at the asked offset"
        );
        assert!(matches!(
            log.read(61, 100).await,
            Err(LogError::OutOfRange { .. })
        ));
        let names: Vec<String> = b
            .vfs
            .read_dir(&topic::partition_dir(&meta.id, 0))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        let logs = names.iter().filter(|n| n.ends_with(".log")).count();
        let indexes = names.iter().filter(|n| n.ends_with(".index")).count();
        assert!(logs >= 3, "{}: rolled: {names:?}", b.name);
        assert_eq!(
            indexes,
            logs - 1,
            "{}: every sealed segment has an index",
            b.name
        );
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn concurrent_appends_share_fsyncs() {
    // A volume whose calls take time, as NFS calls do: while one flush
    // waits for its fsync, the next appends queue up behind it.
    let mut config = NfsConfig::default();
    config.faults.latency_min_us = 500;
    config.faults.latency_max_us = 1_000;
    let nfs = ModelNfs::new(config, 4);
    let counting = Arc::new(Counting::new(Arc::new(nfs.host(1))));
    let vfs: Arc<dyn Vfs> = counting.clone();
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let log = Arc::new(
        lead(vfs.clone(), &meta, 0, 1, LogConfig::default())
            .await
            .unwrap(),
    );
    counting.counts.reset();
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move { log.append(record(i)).await.unwrap() })
        })
        .collect();
    let mut offsets = Vec::new();
    for t in tasks {
        offsets.push(t.await.unwrap().base_offset);
    }
    offsets.sort();
    assert_eq!(
        offsets,
        (0..64).collect::<Vec<_>>(),
        "every append got its own offset"
    );
    let fsyncs = counting.counts.get(&counting.counts.fsyncs);
    assert!(fsyncs <= 8, "group commit: {fsyncs} fsyncs for 64 appends");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn opening_a_missing_or_foreign_partition_creates_nothing() {
    for b in backends() {
        let meta = with_topic(b.vfs.as_ref(), "orders", 1).await;
        let mut ghost = meta.clone();
        ghost.id = "00000000-0000-4000-8000-000000000000".into();
        let err = lead(b.vfs.clone(), &ghost, 0, 1, small())
            .await
            .err()
            .unwrap();
        assert!(
            matches!(&err, LogError::Io(e) if e.kind() == std::io::ErrorKind::NotFound),
            "{}: {err}",
            b.name
        );
        let gone = b.vfs.stat(&topic::topic_dir(&ghost.id)).await;
        assert!(
            gone.is_err(),
            "{}: opening must not create the partition",
            b.name
        );

        // The right directory, but another topic's id expected.
        let other = topic::create_topic(b.vfs.as_ref(), "payments", 1)
            .await
            .unwrap();
        let dir = topic::partition_dir(&meta.id, 0);
        let fence: Arc<dyn LeadershipFence> =
            Arc::new(EpochClaims::new(b.vfs.clone(), dir.clone()));
        let err = PartitionLog::open_as_leader(
            b.vfs.clone(),
            dir,
            (&other.id, 0),
            1,
            &ClaimToken::fresh("x"),
            fence,
            small(),
        )
        .await
        .err()
        .unwrap();
        assert!(
            err.to_string().contains("belongs to topic"),
            "{}: {err}",
            b.name
        );
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_recreated_topic_never_sees_the_old_files() {
    for b in backends() {
        let v = b.vfs.as_ref();
        let first = with_topic(v, "orders", 1).await;
        let log = lead(b.vfs.clone(), &first, 0, 1, small()).await.unwrap();
        log.append(record(1)).await.unwrap();
        log.close().await.unwrap();
        assert!(matches!(
            topic::create_topic(v, "orders", 1).await,
            Err(topic::TopicError::Exists(_))
        ));
        // What a delete does last: the name is released.
        broker::log::names::release(v, "orders", &first.id)
            .await
            .unwrap();
        let second = topic::create_topic(v, "orders", 1).await.unwrap();
        assert_ne!(first.id, second.id);
        assert_eq!(
            topic::lookup(v, "orders").await.unwrap(),
            Some(second.clone())
        );
        let log = lead(b.vfs.clone(), &second, 0, 1, small()).await.unwrap();
        assert_eq!(log.high_watermark(), 0, "{}: starts empty", b.name);
        assert!(read_all(&log, 0).await.is_empty());
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_takeover_keeps_every_acknowledged_batch_and_cuts_a_torn_tail() {
    for b in backends() {
        let meta = with_topic(b.vfs.as_ref(), "orders", 1).await;
        let dir = topic::partition_dir(&meta.id, 0);
        let first = lead(b.vfs.clone(), &meta, 0, 1, small()).await.unwrap();
        for i in 0..10 {
            first.append(record(i)).await.unwrap();
        }
        // A torn batch after the acknowledged ones: half of a valid batch.
        let seg = dir.join(broker::log::manifest::segment_file(0, 1, "log"));
        let f = b.vfs.open(&seg, OpenOptions::write()).await.unwrap();
        let end = f.stat().await.unwrap().len;
        let torn = record(999);
        f.write_at(end, torn.slice(..torn.len() / 2)).await.unwrap();
        f.fsync().await.unwrap();
        f.close().await.unwrap();
        drop(first); // crashed, never closed

        let second = lead(b.vfs.clone(), &meta, 0, 2, small()).await.unwrap();
        assert_eq!(second.high_watermark(), 10, "{}", b.name);
        assert_eq!(second.append(record(10)).await.unwrap().base_offset, 10);
        let all = read_all(&second, 0).await;
        let expected: Vec<_> = (0..11).map(|i| (i64::from(i), value(i))).collect();
        assert_eq!(all, expected, "{}", b.name);
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_corrupt_batch_in_the_tail_is_cut_with_everything_after_it() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let dir = topic::partition_dir(&meta.id, 0);
    let first = lead(vfs.clone(), &meta, 0, 1, LogConfig::default())
        .await
        .unwrap();
    let mut ends = Vec::new();
    for i in 0..6 {
        first.append(record(i)).await.unwrap();
        ends.push(record(i).len());
    }
    let seg = dir.join(broker::log::manifest::segment_file(0, 1, "log"));
    let f = vfs.open(&seg, OpenOptions::write()).await.unwrap();
    let fourth: usize = ends[..3].iter().sum();
    f.write_at(fourth as u64 + 40, Bytes::from_static(b"\xff"))
        .await
        .unwrap();
    f.close().await.unwrap();
    let second = lead(vfs.clone(), &meta, 0, 2, LogConfig::default())
        .await
        .unwrap();
    // Offsets 3.. were acknowledged, but their bytes are gone: bit rot, not a
    // fencing failure. The log cuts at the last valid batch instead of
    // serving a corrupt one.
    assert_eq!(second.high_watermark(), 3);
    assert_eq!(read_all(&second, 0).await.len(), 3);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn recovery_reads_only_the_unsealed_tail() {
    let counting = Arc::new(Counting::new(Arc::new(MemVfs::new())));
    let vfs: Arc<dyn Vfs> = counting.clone();
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let config = LogConfig {
        segment_bytes: 64 << 10,
        checkpoint_bytes: 8 << 10,
        ..LogConfig::default()
    };
    let first = lead(vfs.clone(), &meta, 0, 1, config.clone())
        .await
        .unwrap();
    let mut written = 0;
    let mut i = 0;
    while written < 1 << 20 {
        written += record(i).len();
        first.append(record(i)).await.unwrap();
        i += 1;
    }
    drop(first);
    counting.counts.reset();
    let second = lead(vfs.clone(), &meta, 0, 2, config.clone())
        .await
        .unwrap();
    let read = counting.counts.get(&counting.counts.bytes_read);
    assert!(
        read < 16 << 10,
        "a 1 MiB log with an 8 KiB checkpoint interval: the takeover read {read} bytes"
    );
    assert_eq!(second.high_watermark(), i64::from(i));
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_zombie_cannot_acknowledge_or_damage_after_a_takeover() {
    let nfs = ModelNfs::new(NfsConfig::default(), 3);
    let (a, b): (Arc<dyn Vfs>, Arc<dyn Vfs>) = (Arc::new(nfs.host(1)), Arc::new(nfs.host(2)));
    let meta = with_topic(a.as_ref(), "orders", 1).await;
    let zombie = lead(a.clone(), &meta, 0, 1, small()).await.unwrap();
    for i in 0..5 {
        zombie.append(record(i)).await.unwrap();
    }
    // Host 1 stalls; host 2 takes over and keeps writing.
    let leader = lead(b.clone(), &meta, 0, 2, small()).await.unwrap();
    for i in 5..8 {
        leader.append(record(i)).await.unwrap();
    }
    // The zombie wakes up: its write lands in its own segment, but it is
    // never acknowledged, and it never shows up for anyone.
    let late = zombie.append(record(666)).await;
    assert!(matches!(late, Err(LogError::Fenced(1))), "{late:?}");
    assert!(matches!(
        zombie.append(record(667)).await,
        Err(LogError::Fenced(1) | LogError::Failed(_))
    ));
    let expected: Vec<_> = (0..8).map(|i| (i64::from(i), value(i))).collect();
    assert_eq!(read_all(&leader, 0).await, expected);
    drop(leader);
    let third = lead(b.clone(), &meta, 0, 3, small()).await.unwrap();
    assert_eq!(
        read_all(&third, 0).await,
        expected,
        "a later takeover agrees"
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_zombie_cannot_acknowledge_a_delete_records_or_remove_segments_after_a_takeover() {
    let nfs = ModelNfs::new(NfsConfig::default(), 4);
    let (a, b): (Arc<dyn Vfs>, Arc<dyn Vfs>) = (Arc::new(nfs.host(1)), Arc::new(nfs.host(2)));
    let meta = with_topic(a.as_ref(), "orders", 1).await;
    let config = LogConfig {
        retention_bytes: Some(1),
        ..small()
    };
    let zombie = lead(a.clone(), &meta, 0, 1, config.clone()).await.unwrap();
    for i in 0..60 {
        zombie.append(record(i)).await.unwrap();
    }
    let leader = lead(b.clone(), &meta, 0, 2, small()).await.unwrap();
    let (start, end) = (leader.log_start_offset(), leader.high_watermark());
    // The zombie wakes up: a DeleteRecords it answered would be undone by
    // the new leader, which never reads the zombie's epoch again; its
    // retention would unlink segments the new leader still serves.
    let trimmed = zombie.delete_records(10).await;
    assert!(matches!(trimmed, Err(LogError::Fenced(1))), "{trimmed:?}");
    let _ = zombie.enforce_retention(0).await;
    assert_eq!(leader.log_start_offset(), start);
    let all = read_all(&leader, start).await;
    assert_eq!(all.len() as i64, end - start, "every record still served");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_deposed_leader_does_not_answer_the_log_start_it_remembers() {
    let nfs = ModelNfs::new(NfsConfig::default(), 4);
    let (a, b): (Arc<dyn Vfs>, Arc<dyn Vfs>) = (Arc::new(nfs.host(1)), Arc::new(nfs.host(2)));
    let meta = with_topic(a.as_ref(), "orders", 1).await;
    let zombie = lead(a.clone(), &meta, 0, 1, small()).await.unwrap();
    for i in 0..20 {
        zombie.append(record(i)).await.unwrap();
    }
    assert_eq!(zombie.confirmed_log_start_offset().await.unwrap(), 0);
    let leader = lead(b.clone(), &meta, 0, 2, small()).await.unwrap();
    assert_eq!(leader.delete_records(5).await.unwrap(), 5);
    // The old leader still remembers 0: answered, ListOffsets would take
    // the log start back below the acknowledged DeleteRecords.
    assert_eq!(zombie.log_start_offset(), 0);
    let start = zombie.confirmed_log_start_offset().await;
    assert!(matches!(start, Err(LogError::Fenced(1))), "{start:?}");
    assert_eq!(leader.confirmed_log_start_offset().await.unwrap(), 5);
}

/// A fence whose check fails (the volume answered EIO) while `down`.
struct Unanswered {
    inner: EpochClaims,
    down: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl LeadershipFence for Unanswered {
    async fn still_leader(&self, epoch: u32) -> std::io::Result<bool> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("EIO"));
        }
        self.inner.still_leader(epoch).await
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_manifest_write_whose_fence_check_fails_stops_the_log() {
    let mem: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(mem.as_ref(), "orders", 1).await;
    let dir = topic::partition_dir(&meta.id, 0);
    let fence = Arc::new(Unanswered {
        inner: EpochClaims::new(mem.clone(), dir.clone()),
        down: false.into(),
    });
    let log = PartitionLog::open_as_leader(
        mem.clone(),
        dir,
        (&meta.id, 0),
        1,
        &ClaimToken::fresh("leader-1"),
        fence.clone(),
        small(),
    )
    .await
    .unwrap();
    for i in 0..60 {
        log.append(record(i)).await.unwrap();
    }
    fence.down.store(true, std::sync::atomic::Ordering::SeqCst);
    // The manifest with log start 20 is written, its epoch unconfirmed:
    // answering 20 later while ListOffsets still said 0 split the answers.
    assert!(log.delete_records(20).await.is_err());
    fence.down.store(false, std::sync::atomic::Ordering::SeqCst);
    let again = log.delete_records(20).await;
    assert!(
        matches!(again, Err(LogError::Failed(_))),
        "an unconfirmed manifest write stops the log: {again:?}"
    );
    let next = lead(mem.clone(), &meta, 0, 2, small()).await.unwrap();
    assert_eq!(next.log_start_offset(), 20, "the next epoch reads it back");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_zombie_racing_the_takeover_never_splits_the_log() {
    for seed in 0..20 {
        let nfs = ModelNfs::new(NfsConfig::hostile_without_errors(), seed);
        let (a, b): (Arc<dyn Vfs>, Arc<dyn Vfs>) = (Arc::new(nfs.host(1)), Arc::new(nfs.host(2)));
        let meta = with_topic(a.as_ref(), "orders", 1).await;
        let zombie = Arc::new(lead(a.clone(), &meta, 0, 1, small()).await.unwrap());
        let writer = {
            let zombie = zombie.clone();
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0..40 {
                    match zombie.append(record(i)).await {
                        Ok(x) => acked.push((x.base_offset, i)),
                        Err(_) => break,
                    }
                    tokio::task::yield_now().await;
                }
                acked
            })
        };
        tokio::task::yield_now().await;
        let leader = lead(b.clone(), &meta, 0, 2, small()).await.unwrap();
        let mut acked = writer.await.unwrap();
        for i in 100..105 {
            acked.push((leader.append(record(i)).await.unwrap().base_offset, i));
        }
        let log = read_all(&leader, 0).await;
        for (off, i) in &acked {
            let found = log.iter().find(|(o, _)| o == off).map(|(_, v)| v.clone());
            assert_eq!(
                found,
                Some(value(*i)),
                "seed {seed}: acknowledged record at {off}"
            );
        }
        let offsets: Vec<_> = log.iter().map(|(o, _)| *o).collect();
        assert_eq!(
            offsets,
            (0..offsets.len() as i64).collect::<Vec<_>>(),
            "seed {seed}: dense"
        );
    }
}

/// Crash after every possible number of volume operations during takeover,
/// appends, rolls and retention (on the model, a host crash that also
/// loses unflushed pages); the next leader must hold every acknowledged
/// record and serve no torn batch.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_crash_at_every_step_loses_no_acknowledged_record() {
    for backend in ["model", "mem", "posix"] {
        if cfg!(madsim) && backend == "posix" {
            continue;
        }
        let mut budgets = 0;
        for budget in 0.. {
            budgets += 1;
            let tripped = crash_once(backend, budget).await;
            if !tripped {
                break;
            }
        }
        assert!(budgets > 100, "{backend}: only {budgets} crash points");
    }
}

/// One run cut after `budget` operations; returns whether it was cut.
async fn crash_once(backend: &str, budget: usize) -> bool {
    let nfs = ModelNfs::new(NfsConfig::default(), budget as u64);
    let mut _dir: Option<Box<dyn std::any::Any>> = None;
    let (a, b): (Arc<dyn Vfs>, Arc<dyn Vfs>) = match backend {
        "model" => (Arc::new(nfs.host(1)), Arc::new(nfs.host(2))),
        "mem" => {
            let m = MemVfs::new();
            (Arc::new(m.clone()), Arc::new(m))
        }
        _ => {
            #[cfg(not(madsim))]
            {
                let d = tempfile::tempdir().unwrap();
                let p = vfs::PosixVfs::open_volume(d.path()).unwrap();
                _dir = Some(Box::new(d));
                (Arc::new(p.clone()), Arc::new(p))
            }
            #[cfg(madsim)]
            unreachable!("no POSIX volume in the simulation build")
        }
    };
    let meta = with_topic(a.as_ref(), "orders", 1).await;
    let cut = Arc::new(Interrupting::new(a.clone(), budget));
    let mut acked = Vec::new();
    let config = LogConfig {
        retention_bytes: Some(6_000),
        ..small()
    };
    let log = lead(cut.clone(), &meta, 0, 1, config.clone()).await.ok();
    if let Some(log) = &log {
        for i in 0..40 {
            match log.append(record(i)).await {
                Ok(x) => acked.push((x.base_offset, i)),
                Err(_) => break,
            }
            if i % 10 == 9 {
                let _ = log.enforce_retention(0).await;
            }
        }
    }
    let tripped = cut.tripped();
    // Crash first: dropping the log afterwards closes nothing on a dead host.
    nfs.crash_host(1);
    drop(log);
    let next = lead(b.clone(), &meta, 0, 2, config).await.unwrap();
    let start = next.log_start_offset();
    let log = read_all(&next, start).await;
    for (off, i) in acked.iter().filter(|(o, _)| *o >= start) {
        let found = log.iter().find(|(o, _)| o == off).map(|(_, v)| v.clone());
        assert_eq!(
            found,
            Some(value(*i)),
            "{backend}, budget {budget}: record at {off}"
        );
    }
    if !tripped {
        assert_eq!(acked.len(), 40, "{backend}");
    }
    tripped
}

/// A volume whose first `n` unlinks fail with EBUSY.
struct BusyUnlinks {
    inner: Arc<dyn Vfs>,
    left: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl Vfs for BusyUnlinks {
    async fn open(&self, p: &Path, o: OpenOptions) -> std::io::Result<Box<dyn vfs::VfsFile>> {
        self.inner.open(p, o).await
    }
    async fn stat(&self, p: &Path) -> std::io::Result<vfs::Metadata> {
        self.inner.stat(p).await
    }
    async fn rename(&self, f: &Path, t: &Path) -> std::io::Result<()> {
        self.inner.rename(f, t).await
    }
    async fn unlink(&self, p: &Path) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        if self
            .left
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                "busy",
            ));
        }
        self.inner.unlink(p).await
    }
    async fn mkdir(&self, p: &Path) -> std::io::Result<()> {
        self.inner.mkdir(p).await
    }
    async fn rmdir(&self, p: &Path) -> std::io::Result<()> {
        self.inner.rmdir(p).await
    }
    async fn read_dir(&self, p: &Path) -> std::io::Result<Vec<vfs::DirEntry>> {
        self.inner.read_dir(p).await
    }
    async fn sync_dir(&self, p: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(p).await
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_failed_unlink_is_redriven_by_the_next_retention_pass() {
    let mem = MemVfs::new();
    let meta = with_topic(&mem, "orders", 1).await;
    let busy = Arc::new(BusyUnlinks {
        inner: Arc::new(mem.clone()),
        left: 0.into(),
    });
    let config = LogConfig {
        retention_bytes: Some(5_000),
        ..small()
    };
    let log = lead(busy.clone(), &meta, 0, 1, config).await.unwrap();
    for i in 0..80 {
        log.append(record(i)).await.unwrap();
    }
    busy.left.store(2, std::sync::atomic::Ordering::SeqCst);
    assert!(log.enforce_retention(0).await.unwrap() > 0);
    assert_eq!(
        log.pending_deletes(),
        2,
        "two unlinks failed and are remembered"
    );
    let dir = topic::partition_dir(&meta.id, 0);
    let count = || async {
        mem.read_dir(&dir)
            .await
            .unwrap()
            .iter()
            .filter(|e| broker::log::manifest::parse_segment_file(&e.name).is_some())
            .count()
    };
    let before = count().await;
    log.enforce_retention(0).await.unwrap();
    assert_eq!(log.pending_deletes(), 0);
    assert_eq!(count().await, before - 2, "the next pass removed them");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn retention_removes_old_segments_manifest_first_and_redrives_unlinks() {
    for b in backends() {
        let meta = with_topic(b.vfs.as_ref(), "orders", 1).await;
        let dir: PathBuf = topic::partition_dir(&meta.id, 0);
        let config = LogConfig {
            retention_bytes: Some(5_000),
            ..small()
        };
        let log = lead(b.vfs.clone(), &meta, 0, 1, config.clone())
            .await
            .unwrap();
        for i in 0..80 {
            log.append(record(i)).await.unwrap();
        }
        let removed = log.enforce_retention(0).await.unwrap();
        assert!(removed > 0, "{}", b.name);
        let start = log.log_start_offset();
        assert!(start > 0);
        assert!(matches!(
            log.read(0, 100).await,
            Err(LogError::OutOfRange { .. })
        ));
        assert_eq!(read_all(&log, start).await.len() as i64, 80 - start);
        let listed = b.vfs.read_dir(&dir).await.unwrap();
        for e in &listed {
            if let Some((id, _)) = broker::log::manifest::parse_segment_file(&e.name) {
                assert!(
                    id.base_offset >= start,
                    "{}: {} left behind",
                    b.name,
                    e.name
                );
            }
        }
        // Retention by time: everything sealed is older than "now".
        let timed = LogConfig {
            retention_ms: Some(1),
            ..small()
        };
        drop(log);
        let log = lead(b.vfs.clone(), &meta, 0, 2, timed).await.unwrap();
        log.enforce_retention(i64::MAX / 2).await.unwrap();
        assert_eq!(
            log.log_start_offset(),
            80,
            "{}: only the empty active segment is left",
            b.name
        );
        assert_eq!(log.pending_deletes(), 0);
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn compressed_batches_pass_through_byte_for_byte() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let log = lead(vfs.clone(), &meta, 0, 1, small()).await.unwrap();
    let mut stored = Vec::new();
    for codec in 1..=4u8 {
        // A batch flagged gzip/snappy/lz4/zstd whose record bytes kaas cannot
        // (and must not try to) decode: only the CRC has to hold.
        let mut b = record(u32::from(codec)).to_vec();
        b[22] = codec;
        let tail = b.len() - 10;
        b[tail..].copy_from_slice(b"\x00opaque\xffz\x01");
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let at = log
            .append(Bytes::from(b.clone()))
            .await
            .unwrap()
            .base_offset;
        batch::stamp(&mut b, at, 1);
        stored.push(b);
    }
    let r = log.read(0, 1 << 20).await.unwrap();
    assert_eq!(r.records.to_vec(), stored.concat());
}

/// An idempotent producer's retries are answered with their first offsets
/// and not appended again, also by the next leader (producer state comes
/// from the checkpoint and the scanned tail); gaps and stale epochs are refused.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn idempotent_retries_are_not_appended_twice_across_a_takeover() {
    for b in backends() {
        let meta = with_topic(b.vfs.as_ref(), "orders", 1).await;
        let log = lead(b.vfs.clone(), &meta, 0, 1, small()).await.unwrap();
        let batch = |epoch: i16, seq: i32| {
            batch::build((42, epoch, seq), 5, &[b"a".as_slice(), b"b".as_slice()])
        };
        log.append(record(0)).await.unwrap();
        let first = log.append(batch(0, 0)).await.unwrap();
        assert_eq!((first.base_offset, first.last_offset), (1, 2), "{}", b.name);
        let retry = log.append(batch(0, 0)).await.unwrap();
        assert_eq!(
            retry, first,
            "{}: a retry gets the original offsets",
            b.name
        );
        assert_eq!(
            log.high_watermark(),
            3,
            "{}: nothing appended twice",
            b.name
        );
        assert!(matches!(
            log.append(batch(0, 5)).await,
            Err(LogError::OutOfOrderSequence)
        ));
        // Two in flight at once are checked against each other.
        let (a, c) = tokio::join!(log.append(batch(0, 2)), log.append(batch(0, 4)));
        assert_eq!(a.unwrap().base_offset, 3, "{}", b.name);
        assert_eq!(c.unwrap().base_offset, 5, "{}", b.name);
        drop(log);

        let next = lead(b.vfs.clone(), &meta, 0, 2, small()).await.unwrap();
        let again = next.append(batch(0, 2)).await.unwrap();
        assert_eq!(
            again.base_offset, 3,
            "{}: the new leader knows the retry",
            b.name
        );
        assert!(matches!(
            next.append(batch(0, 9)).await,
            Err(LogError::OutOfOrderSequence)
        ));
        next.append(batch(1, 0)).await.unwrap();
        assert!(matches!(
            next.append(batch(0, 6)).await,
            Err(LogError::InvalidProducerEpoch)
        ));
        assert_eq!(next.high_watermark(), 9, "{}", b.name);
        let values = read_all(&next, 0).await;
        assert_eq!(values.len(), 9, "{}", b.name);
    }
}

/// A batch flagged compressed (codec 1) whose records kaas cannot decode.
fn opaque_compressed(timestamps: &[i64]) -> Bytes {
    let values: Vec<(i64, &[u8])> = timestamps.iter().map(|t| (*t, &b"v"[..])).collect();
    let mut b = batch::build_timed((-1, -1, -1), &values).to_vec();
    b[22] = 1;
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn max_timestamp_finds_the_first_record_with_the_largest_timestamp() {
    for b in backends() {
        let meta = with_topic(b.vfs.as_ref(), "orders", 1).await;
        let log = lead(b.vfs.clone(), &meta, 0, 1, small()).await.unwrap();
        assert_eq!(log.offset_of_max_timestamp().await.unwrap(), None, "empty");
        // Offsets 0-2, the largest timestamp in the middle record; 3-4 tie it.
        let first = batch::build_timed((-1, -1, -1), &[(10, b"a"), (50_000, b"b"), (20, b"c")]);
        log.append(first).await.unwrap();
        log.append(batch::build_timed(
            (-1, -1, -1),
            &[(30, b"d"), (50_000, b"e")],
        ))
        .await
        .unwrap();
        // Enough older records after them to roll a few segments.
        for i in 0..60 {
            log.append(record(i)).await.unwrap();
        }
        let found = log.offset_of_max_timestamp().await.unwrap().unwrap();
        assert_eq!(
            (found.offset, found.timestamp, found.leader_epoch),
            (1, 50_000, 1),
            "{}: the first of the two records at the largest timestamp",
            b.name
        );
        drop(log);

        // A new leader sees the same answer from sealed segments, and a
        // larger timestamp in its own active segment beats it.
        let log = lead(b.vfs.clone(), &meta, 0, 2, small()).await.unwrap();
        let again = log.offset_of_max_timestamp().await.unwrap().unwrap();
        assert_eq!((again.offset, again.leader_epoch), (found.offset, 1));
        let at = log
            .append(batch::build_timed(
                (-1, -1, -1),
                &[(55_000, b"x"), (70_000, b"y"), (70_000, b"z")],
            ))
            .await
            .unwrap()
            .base_offset;
        let newest = log.offset_of_max_timestamp().await.unwrap().unwrap();
        assert_eq!(
            (newest.offset, newest.timestamp, newest.leader_epoch),
            (at + 1, 70_000, 2),
            "{}",
            b.name
        );
        // A compressed batch answers with its last offset, as Kafka does.
        let last = log
            .append(opaque_compressed(&[90_000, 80_000, 85_000]))
            .await
            .unwrap()
            .last_offset;
        let compressed = log.offset_of_max_timestamp().await.unwrap().unwrap();
        assert_eq!((compressed.offset, compressed.timestamp), (last, 90_000));
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn offset_for_timestamp_finds_the_first_record_at_or_after_it() {
    for b in backends() {
        let meta = with_topic(b.vfs.as_ref(), "orders", 1).await;
        let log = lead(b.vfs.clone(), &meta, 0, 1, small()).await.unwrap();
        assert_eq!(log.offset_for_timestamp(0).await.unwrap(), None, "empty");
        log.append(batch::build_timed(
            (-1, -1, -1),
            &[(10, b"a"), (50, b"b"), (20, b"c")],
        ))
        .await
        .unwrap();
        for i in 0..60 {
            log.append(record(i)).await.unwrap();
        }
        let at = |ts| {
            let log = &log;
            async move {
                log.offset_for_timestamp(ts)
                    .await
                    .unwrap()
                    .map(|f| (f.offset, f.timestamp))
            }
        };
        assert_eq!(at(0).await, Some((0, 10)));
        assert_eq!(at(11).await, Some((1, 50)), "{}", b.name);
        assert_eq!(at(1_030).await, Some((33, 1_030)), "{}", b.name);
        assert_eq!(at(1_059).await, Some((62, 1_059)), "{}", b.name);
        assert_eq!(at(1_060).await, None, "{}", b.name);
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn epoch_end_offsets_follow_the_takeovers() {
    for b in backends() {
        let meta = with_topic(b.vfs.as_ref(), "orders", 1).await;
        let log = lead(b.vfs.clone(), &meta, 0, 1, small()).await.unwrap();
        assert_eq!(log.epoch_end_offset(1), (1, 0), "nothing written yet");
        // Epoch 1 writes 0-39 over several segments.
        for i in 0..40 {
            log.append(record(i)).await.unwrap();
        }
        assert_eq!(log.epoch_end_offset(1), (1, 40), "current: the log end");
        drop(log);
        // Epoch 2 takes over and writes nothing; epoch 4 writes 40-44.
        drop(lead(b.vfs.clone(), &meta, 0, 2, small()).await.unwrap());
        let log = lead(b.vfs.clone(), &meta, 0, 4, small()).await.unwrap();
        assert_eq!(log.epoch_end_offset(4), (4, 40));
        for i in 40..45 {
            log.append(record(i)).await.unwrap();
        }
        let name = b.name;
        assert_eq!(log.epoch_end_offset(1), (1, 40), "{name}");
        assert_eq!(log.epoch_end_offset(2), (1, 40), "{name}: 2 wrote nothing");
        assert_eq!(log.epoch_end_offset(3), (1, 40), "{name}: 3 never led");
        assert_eq!(log.epoch_end_offset(4), (4, 45), "{name}");
        assert_eq!(log.epoch_end_offset(5), (-1, -1), "{name}: future");
        assert_eq!(log.epoch_end_offset(-1), (-1, -1), "{name}: undefined");
        // Every batch carries the epoch the boundaries say it belongs to.
        let mut at = 0;
        while at < 45 {
            let r = log.read(at, 1).await.unwrap();
            let h = batch::parse(&r.records).unwrap();
            let expected = if h.base_offset < 40 { 1 } else { 4 };
            assert_eq!(h.leader_epoch, expected, "{name}: offset {}", h.base_offset);
            at = h.next_offset();
        }
        // Records deleted up to 42: epoch 1 is gone, 4 starts at the log start.
        log.delete_records(42).await.unwrap();
        assert_eq!(log.epoch_end_offset(1), (1, 42), "{name}");
        assert_eq!(log.epoch_end_offset(4), (4, 45), "{name}");
    }
}

/// A new leader does not seal the previous leader's tail in place: those
/// bytes may have reached the NFS server without being committed (written,
/// never fsynced, then the writer crashed), and a server restart drops
/// them. The takeover copies them into its own segment and commits them, so
/// every offset below its high watermark stays readable.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn an_uncommitted_tail_is_adopted_not_sealed_in_place() {
    use vfs::model::Faults;
    let config = NfsConfig {
        faults: Faults {
            writeback_probability: 1.0,
            ..Faults::default()
        },
        ..NfsConfig::default()
    };
    let nfs = ModelNfs::new(config, 3);
    let a: Arc<dyn Vfs> = Arc::new(nfs.host(1));
    let b: Arc<dyn Vfs> = Arc::new(nfs.host(2));
    let meta = with_topic(a.as_ref(), "orders", 1).await;
    let first = lead(a.clone(), &meta, 0, 1, small()).await.unwrap();
    for i in 0..3 {
        first.append(record(i)).await.unwrap();
    }
    // The leader of epoch 1 writes one more batch and dies before its
    // fsync; memory pressure had already sent the pages, unstable.
    let dir = topic::partition_dir(&meta.id, 0);
    let segment = dir.join(broker::log::manifest::segment_file(0, 1, "log"));
    let f = a.open(&segment, OpenOptions::write()).await.unwrap();
    let end = f.stat().await.unwrap().len;
    let mut tail = record(3).to_vec();
    batch::stamp(&mut tail, 3, 1);
    f.write_at(end, Bytes::from(tail)).await.unwrap();
    // Any operation may trigger write-back; go on until the server has it.
    for _ in 0..100 {
        let _ = a.stat(Path::new("topics")).await;
        let seen = vfs::read_file(b.as_ref(), &segment).await.unwrap();
        if seen.len() as u64 > end {
            break;
        }
    }
    // Crashed before anything closed (a close would commit).
    nfs.crash_host(1);
    drop((first, f));

    let second = lead(b.clone(), &meta, 0, 2, small()).await.unwrap();
    assert_eq!(second.high_watermark(), 4, "the tail is adopted");
    nfs.restart_server(); // drops what was never committed
    let values: Vec<Vec<u8>> = read_all(&second, 0)
        .await
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(values, (0..4).map(value).collect::<Vec<_>>());
    second.append(record(4)).await.unwrap();
    drop(second);
    // And the next leader still reads all of it.
    let third = lead(b, &meta, 0, 3, small()).await.unwrap();
    assert_eq!(read_all(&third, 0).await.len(), 5);
}

/// A broker that takes over an epoch it already led (its own claim, its
/// own manifest) would walk down from the epoch below and replace that
/// manifest without what it acknowledged (seed 84 before `step_down_from`;
/// torn-assignment reintroduced). It is refused, and the next epoch
/// finds every acknowledged record.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn an_epoch_already_led_here_is_not_taken_over_again() {
    for b in backends() {
        let meta = with_topic(b.vfs.as_ref(), "orders", 1).await;
        let dir = topic::partition_dir(&meta.id, 0);
        let open = |epoch: u32, token: ClaimToken| {
            let (vfs, dir, id) = (b.vfs.clone(), dir.clone(), meta.id.clone());
            async move {
                let fence: Arc<dyn LeadershipFence> =
                    Arc::new(EpochClaims::new(vfs.clone(), dir.clone()));
                PartitionLog::open_as_leader(vfs, dir, (&id, 0), epoch, &token, fence, small())
                    .await
            }
        };
        let token = ClaimToken::fresh("broker-1");
        let first = open(2, token.clone()).await.unwrap();
        for i in 0..5 {
            first.append(record(i)).await.unwrap();
        }
        // Dropped without closing, as a log a failed pass stepped down from.
        drop(first);
        let again = open(2, token).await.err().unwrap();
        assert!(
            again.to_string().contains("led by this broker before"),
            "{}: {again}",
            b.name
        );
        let next = open(3, ClaimToken::fresh("broker-2")).await.unwrap();
        let read = read_all(&next, 0).await;
        assert_eq!(read.len(), 5, "{}", b.name);
        assert_eq!(read[4].1, value(4), "{}", b.name);
    }
}
