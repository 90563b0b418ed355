//! Compaction on every backend: the newest value of every key survives,
//! offsets never move, a crash at any step of a pass loses nothing, and a
//! deposed leader's pass removes nothing its successor reads.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::collections::BTreeMap;
use std::sync::Arc;

use broker::log::partition::{CleanerLimits, CompactionConfig};
use broker::log::records::keyed_records;
use broker::log::{LogConfig, LogError, PartitionLog, batch};
use bytes::Bytes;
use vfs::model::{ModelNfs, NfsConfig};
use vfs::testkit::Interrupting;
use vfs::{MemVfs, OpenOptions, Vfs};

mod common;
use common::{lead, with_topic};

/// A backend's name, its volume, and what keeps a temporary directory.
type Backend = (&'static str, Arc<dyn Vfs>, Option<Box<dyn std::any::Any>>);

fn backends() -> Vec<Backend> {
    #[cfg_attr(madsim, allow(unused_mut))]
    let mut out: Vec<Backend> = vec![
        ("mem", Arc::new(MemVfs::new()), None),
        (
            "model",
            Arc::new(ModelNfs::new(NfsConfig::default(), 1).host(1)),
            None,
        ),
    ];
    #[cfg(not(madsim))]
    {
        let dir = tempfile::tempdir().unwrap();
        out.push((
            "posix",
            Arc::new(vfs::PosixVfs::open_volume(dir.path()).unwrap()),
            Some(Box::new(dir)),
        ));
    }
    out
}

fn compacting() -> LogConfig {
    LogConfig {
        segment_bytes: 1_500,
        segment_ms: None,
        index_interval_bytes: 200,
        checkpoint_bytes: 700,
        checkpoint_interval: std::time::Duration::from_secs(3600),
        retention_ms: None,
        retention_bytes: None,
        compaction: Some(CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: i64::MAX,
        }),
    }
}

/// A one-partition topic "table" on a fresh in-memory volume.
async fn fresh_topic() -> (Arc<dyn Vfs>, broker::log::topic::TopicMeta) {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "table", 1).await;
    (vfs, meta)
}

/// A compacting log whose active segment rolls `segment_ms` after it was
/// first seen written.
fn rolling(segment_ms: i64) -> LogConfig {
    LogConfig {
        segment_ms: Some(segment_ms),
        ..compacting()
    }
}

/// The `i`th write: key `k<i % 13>`, every 9th one a tombstone.
fn write(i: u32) -> (Vec<u8>, Option<Vec<u8>>) {
    let key = format!("k{:02}", i % 13).into_bytes();
    let value = (i % 9 != 8).then(|| format!("v{i:04}-{}", "x".repeat((i % 5) as usize * 10)));
    (key, value.map(String::into_bytes))
}

fn batch_of(i: u32, timestamp: i64) -> Bytes {
    let (k, v) = write(i);
    batch::build_keyed((-1, -1, -1), timestamp, &[(&k, v.as_deref())])
}

type Read = Vec<(i64, Option<Vec<u8>>, Option<Vec<u8>>)>;

/// Every record readable from the log start on, fetching from the offset
/// after the last one read (as a consumer does).
async fn read_all(log: &PartitionLog) -> Read {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    loop {
        let r = log.read(next, 400).await.unwrap();
        if r.records.is_empty() {
            return out;
        }
        let recs = keyed_records(&r.records).unwrap();
        let from = next;
        for rec in recs.into_iter().filter(|r| r.0 >= from) {
            next = rec.0 + 1;
            out.push(rec);
        }
    }
}

/// What a completed pass promises: every record read is the one written
/// at its offset, in offset order; each key's newest acknowledged record
/// is there; and below `cleaned_until` no key appears twice.
fn check(read: &Read, acked: &BTreeMap<i64, u32>, cleaned_until: i64, what: &str) {
    let mut last = -1;
    for (o, k, v) in read {
        assert!(*o > last, "{what}: offsets out of order at {o}");
        last = *o;
        if let Some(i) = acked.get(o) {
            assert_eq!((k.clone(), v.clone()), {
                let (k, v) = write(*i);
                (Some(k), v)
            });
        }
    }
    let mut newest: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for (o, i) in acked {
        newest.insert(write(*i).0, *o);
    }
    for (k, o) in &newest {
        assert!(
            read.iter().any(|r| r.0 == *o),
            "{what}: the newest record of {} (offset {o}) is gone",
            String::from_utf8_lossy(k)
        );
    }
    let mut seen = BTreeMap::new();
    for (o, k, _) in read.iter().filter(|r| r.0 < cleaned_until) {
        if let Some(prev) = seen.insert(k.clone(), *o) {
            panic!("{what}: key {k:?} at {prev} and {o}, both below {cleaned_until}");
        }
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_pass_keeps_the_newest_record_of_every_key_at_its_offset() {
    for (name, vfs, _guard) in backends() {
        let meta = with_topic(vfs.as_ref(), "table", 1).await;
        let log = lead(vfs.clone(), &meta, 0, 1, compacting()).await.unwrap();
        let mut acked = BTreeMap::new();
        for i in 0..300 {
            let a = log.append(batch_of(i, 1_000 + i64::from(i))).await.unwrap();
            acked.insert(a.base_offset, i);
        }
        let size_before = log.size_bytes();
        let done = log
            .compact(10_000, &CleanerLimits::default())
            .await
            .unwrap()
            .expect("a pass runs: everything sealed is dirty");
        assert!(done.records_kept < done.records_read, "{name}: {done:?}");
        assert!(done.bytes_written < done.bytes_read, "{name}: {done:?}");
        assert!(log.size_bytes() < size_before, "{name}");
        let read = read_all(&log).await;
        check(&read, &acked, done.cleaned_until, name);
        // Offsets do not move: the log start and end are where they were.
        assert_eq!((log.log_start_offset(), log.high_watermark()), (0, 300));
        // A fetch at an offset the pass removed answers the next record.
        let gone = (0..done.cleaned_until)
            .find(|o| !read.iter().any(|r| r.0 == *o))
            .unwrap();
        let r = log.read(gone, 100).await.unwrap();
        let first = keyed_records(&r.records)
            .unwrap()
            .into_iter()
            .find(|r| r.0 >= gone)
            .unwrap();
        assert_eq!(
            first.0,
            read.iter().find(|r| r.0 > gone).unwrap().0,
            "{name}"
        );
        // Nothing is left to do until more of the log is dirty.
        assert_eq!(
            log.compact(10_000, &CleanerLimits::default())
                .await
                .unwrap(),
            None
        );
        // A new leader reads the same log, and no file of the old segments
        // remains.
        drop(log);
        let next = lead(vfs.clone(), &meta, 0, 2, compacting()).await.unwrap();
        assert_eq!(read_all(&next).await, read, "{name}: after a takeover");
        let dir = broker::log::topic::partition_dir(&meta.id, 0);
        let files = common::names_in(vfs.as_ref(), &dir, |n| n.ends_with(".log")).await;
        for f in &files {
            let (id, _) = broker::log::manifest::parse_segment_file(f).unwrap();
            assert!(
                id.cleaned.is_some() || id.base_offset >= done.cleaned_until,
                "{name}: {f} outlived its pass ({files:?})"
            );
        }
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn tombstones_go_delete_retention_after_the_pass_that_kept_them() {
    let (vfs, meta) = fresh_topic().await;
    let mut config = compacting();
    if let Some(c) = &mut config.compaction {
        c.delete_retention_ms = 5_000;
    }
    let log = lead(vfs.clone(), &meta, 0, 1, config).await.unwrap();
    let mut acked = BTreeMap::new();
    // Producer timestamps far in the past: they do not count.
    for i in 0..200 {
        let a = log.append(batch_of(i, 1)).await.unwrap();
        acked.insert(a.base_offset, i);
    }
    let tombstones =
        |r: &Read, below: i64| r.iter().filter(|r| r.2.is_none() && r.0 < below).count();
    let first = log
        .compact(10_000, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.delete_horizon, Some(15_000), "{first:?}");
    let read = read_all(&log).await;
    let kept = tombstones(&read, first.cleaned_until);
    assert!(kept > 0, "{read:?}");
    check(&read, &acked, first.cleaned_until, "first pass");
    // Nothing dirty and the horizon not reached: no pass.
    assert_eq!(
        log.compact(14_999, &CleanerLimits::default())
            .await
            .unwrap(),
        None
    );
    // At the horizon a pass is due though nothing is dirty, and the
    // tombstones the first pass kept go, with their keys.
    let second = log
        .compact(15_000, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    let read = read_all(&log).await;
    assert_eq!(tombstones(&read, first.cleaned_until), 0, "{second:?}");
    assert_eq!(second.delete_horizon, None);
    let keys: std::collections::BTreeSet<_> = read.iter().map(|r| r.1.clone()).collect();
    assert_eq!(keys.len(), 13 - kept, "deleted keys are gone: {keys:?}");
    // Later tombstones wait for their own pass's horizon.
    for i in 200..400 {
        log.append(batch_of(i, 1)).await.unwrap();
    }
    let third = log
        .compact(20_000, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(third.delete_horizon, Some(25_000), "{third:?}");
    assert!(tombstones(&read_all(&log).await, third.cleaned_until) > 0);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_small_offset_map_cleans_in_several_passes() {
    let (vfs, meta) = fresh_topic().await;
    let log = lead(vfs.clone(), &meta, 0, 1, compacting()).await.unwrap();
    let mut acked = BTreeMap::new();
    for i in 0..300 {
        let a = log.append(batch_of(i, 1_000)).await.unwrap();
        acked.insert(a.base_offset, i);
    }
    // Room for 5 keys of the 13.
    let tiny = CleanerLimits {
        dedupe_buffer_bytes: 5 * 64,
        io_bytes_per_second: None,
    };
    let mut ends = Vec::new();
    while let Some(done) = log.compact(10_000, &tiny).await.unwrap() {
        assert!(done.keys <= 5, "{done:?}");
        ends.push(done.cleaned_until);
        assert!(ends.len() < 200, "no progress: {ends:?}");
    }
    assert!(
        ends.len() > 1 && ends.windows(2).all(|w| w[0] < w[1]),
        "{ends:?}"
    );
    check(
        &read_all(&log).await,
        &acked,
        *ends.last().unwrap(),
        "tiny map",
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn the_io_rate_paces_a_pass() {
    let (vfs, meta) = fresh_topic().await;
    let log = lead(vfs.clone(), &meta, 0, 1, compacting()).await.unwrap();
    for i in 0..300 {
        log.append(batch_of(i, 1_000)).await.unwrap();
    }
    let slow = CleanerLimits {
        dedupe_buffer_bytes: 1 << 20,
        io_bytes_per_second: Some(10_000),
    };
    let started = tokio::time::Instant::now();
    let done = log.compact(10_000, &slow).await.unwrap().unwrap();
    let took = started.elapsed().as_secs_f64();
    // Read twice (map, then copy) and written once.
    let least = (done.bytes_read + done.bytes_written) as f64 / 10_000.0;
    assert!(took >= least * 0.9, "{took} s for {done:?}");
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_deposed_leaders_pass_removes_nothing_its_successor_reads() {
    let nfs = ModelNfs::new(NfsConfig::default(), 3);
    let (a, b): (Arc<dyn Vfs>, Arc<dyn Vfs>) = (Arc::new(nfs.host(1)), Arc::new(nfs.host(2)));
    let meta = with_topic(a.as_ref(), "table", 1).await;
    let old = lead(a.clone(), &meta, 0, 1, compacting()).await.unwrap();
    let mut acked = BTreeMap::new();
    for i in 0..300 {
        let x = old.append(batch_of(i, 1_000)).await.unwrap();
        acked.insert(x.base_offset, i);
    }
    // The successor takes over before the old leader's pass swaps.
    let new = lead(b.clone(), &meta, 0, 2, compacting()).await.unwrap();
    let err = old
        .compact(10_000, &CleanerLimits::default())
        .await
        .unwrap_err();
    assert!(matches!(err, LogError::Fenced(1)), "{err}");
    let read = read_all(&new).await;
    check(&read, &acked, 0, "successor");
    assert_eq!(read.len(), 300, "the successor's log is whole");
    // Its own pass then compacts.
    let done = new
        .compact(10_000, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    check(
        &read_all(&new).await,
        &acked,
        done.cleaned_until,
        "successor's pass",
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_crash_at_every_step_of_a_pass_loses_no_newest_record() {
    let mut budgets = 0;
    for budget in 0.. {
        budgets += 1;
        if !crash_once(budget).await {
            break;
        }
    }
    assert!(budgets > 30, "only {budgets} crash points");
}

/// Appends, then compacts twice on a volume cut after `budget` calls of
/// the pass; a new leader on another host must read every newest record.
async fn crash_once(budget: usize) -> bool {
    let nfs = ModelNfs::new(NfsConfig::default(), budget as u64);
    let (a, b): (Arc<dyn Vfs>, Arc<dyn Vfs>) = (Arc::new(nfs.host(1)), Arc::new(nfs.host(2)));
    let meta = with_topic(a.as_ref(), "table", 1).await;
    let log = lead(a.clone(), &meta, 0, 1, compacting()).await.unwrap();
    let mut acked = BTreeMap::new();
    for i in 0..200 {
        let x = log.append(batch_of(i, 1_000)).await.unwrap();
        acked.insert(x.base_offset, i);
    }
    drop(log);
    let cut = Arc::new(Interrupting::new(a.clone(), budget));
    let log = lead(cut.clone(), &meta, 0, 2, compacting()).await;
    let mut cleaned = 0;
    if let Ok(log) = &log {
        for i in 200..260 {
            match log.append(batch_of(i, 1_000)).await {
                Ok(x) => {
                    acked.insert(x.base_offset, i);
                }
                Err(_) => break,
            }
            if i % 30 == 29 {
                if let Ok(Some(d)) = log.compact(10_000, &CleanerLimits::default()).await {
                    cleaned = d.cleaned_until;
                }
            }
        }
    }
    let tripped = cut.tripped();
    nfs.crash_host(1);
    drop(log);
    let next = lead(b.clone(), &meta, 0, 3, compacting()).await.unwrap();
    let read = read_all(&next).await;
    check(&read, &acked, cleaned, &format!("budget {budget}"));
    // And the new leader's own pass completes the job.
    if let Some(d) = next
        .compact(10_000, &CleanerLimits::default())
        .await
        .unwrap()
    {
        check(&read_all(&next).await, &acked, d.cleaned_until, "after");
    }
    tripped
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn an_active_segment_rolls_at_segment_ms_and_becomes_cleanable() {
    let (vfs, meta) = fresh_topic().await;
    let config = LogConfig {
        segment_bytes: 1 << 20,
        ..rolling(1_000)
    };
    let log = lead(vfs.clone(), &meta, 0, 1, config).await.unwrap();
    // Empty: nothing to roll, however old.
    assert!(!log.roll_if_due(0).await.unwrap());
    assert!(!log.roll_if_due(5_000).await.unwrap());
    for i in 0..30 {
        log.append(batch_of(i, 1_000)).await.unwrap();
    }
    // Nothing sealed yet: the active segment is never compacted.
    assert_eq!(
        log.compact(6_000, &CleanerLimits::default()).await.unwrap(),
        None
    );
    assert!(
        !log.roll_if_due(6_000).await.unwrap(),
        "first seen written now"
    );
    assert!(!log.roll_if_due(6_900).await.unwrap());
    assert!(log.roll_if_due(7_000).await.unwrap());
    let done = log
        .compact(7_000, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((done.cleaned_until, done.keys), (30, 13));
    let read = read_all(&log).await;
    // One record per key; keys 0 and 4 were last written as tombstones,
    // which stay for delete.retention.ms.
    assert_eq!(read.len(), 13);
    assert_eq!(read.iter().filter(|r| r.2.is_none()).count(), 2);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_cleaned_segment_shorter_than_its_manifest_says_is_an_error_not_a_gap() {
    let (vfs, meta) = fresh_topic().await;
    let log = lead(vfs.clone(), &meta, 0, 1, compacting()).await.unwrap();
    for i in 0..300 {
        log.append(batch_of(i, 1_000 + i64::from(i))).await.unwrap();
    }
    let done = log
        .compact(10_000, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    assert!(done.cleaned_until > 0);
    drop(log);
    // A power cut took the cleaned segments' pages after the manifest
    // named them (their fsync was skipped, or the disk lied).
    let dir = broker::log::topic::partition_dir(&meta.id, 0);
    let mut torn = 0;
    for e in vfs.read_dir(&dir).await.unwrap() {
        let Some((id, _)) = broker::log::manifest::parse_segment_file(&e.name) else {
            continue;
        };
        if id.cleaned.is_some() && e.name.ends_with(".log") {
            let f = vfs
                .open(&dir.join(&e.name), OpenOptions::write().with_truncate())
                .await
                .unwrap();
            f.close().await.unwrap();
            torn += 1;
        }
    }
    assert!(torn > 0);
    let next = lead(vfs.clone(), &meta, 0, 2, compacting()).await.unwrap();
    let r = next.read(0, 1 << 20).await;
    assert!(
        r.is_err(),
        "the records the manifest vouches for are missing, not compacted away: {:?}",
        r.map(|r| r.records.len())
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_clock_stepped_back_does_not_hold_the_roll_by_age() {
    let (vfs, meta) = fresh_topic().await;
    let config = LogConfig {
        segment_bytes: 1 << 20,
        ..rolling(1_000)
    };
    let log = lead(vfs.clone(), &meta, 0, 1, config).await.unwrap();
    log.append(batch_of(0, 1_000)).await.unwrap();
    // First seen written while the broker's clock ran 45 minutes ahead,
    // then the clock stepped back.
    assert!(!log.roll_if_due(2_705_000).await.unwrap());
    assert!(!log.roll_if_due(10_000).await.unwrap());
    assert!(!log.roll_if_due(10_900).await.unwrap());
    assert!(
        log.roll_if_due(11_000).await.unwrap(),
        "segment.ms after the step back, not 45 minutes"
    );
}

/// A batch flagged gzip-compressed (its records are not readable as such,
/// as the pass sees any compressed batch): `key=value`.
fn opaque_compressed(key: &[u8], value: &[u8]) -> Bytes {
    let mut b = batch::build_keyed((-1, -1, -1), 1, &[(key, Some(value))]).to_vec();
    b[22] = 1;
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

fn one(key: &[u8], value: Option<&[u8]>) -> Bytes {
    batch::build_keyed((-1, -1, -1), 1, &[(key, value)])
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_tombstone_after_a_compressed_batch_outlives_its_horizon() {
    let (vfs, meta) = fresh_topic().await;
    let config = rolling(1);
    let log = lead(vfs.clone(), &meta, 0, 1, config).await.unwrap();
    log.append(opaque_compressed(b"k", b"old")).await.unwrap();
    log.append(one(b"k", None)).await.unwrap();
    log.roll_if_due(0).await.unwrap();
    assert!(log.roll_if_due(10).await.unwrap());
    let first = log
        .compact(100, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.compressed_batches, 1);
    // Past any horizon: the tombstone must stay, or the compressed
    // batch's older value of its key would be read as the newest.
    log.set_limits(|c| {
        if let Some(c) = &mut c.compaction {
            c.delete_retention_ms = 0;
        }
    });
    for now in [200, i64::MAX / 2] {
        let _ = log.compact(now, &CleanerLimits::default()).await.unwrap();
        let r = log.read(0, 1 << 20).await.unwrap();
        let mut at = 0;
        let mut batches = 0;
        while at < r.records.len() {
            at += batch::parse(&r.records[at..]).unwrap().size;
            batches += 1;
        }
        assert_eq!(batches, 2, "both batches stay at {now}");
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_read_in_the_gap_at_the_end_of_the_log_answers_nothing() {
    let (vfs, meta) = fresh_topic().await;
    let mut config = rolling(1);
    if let Some(c) = &mut config.compaction {
        c.delete_retention_ms = 0;
    }
    let log = lead(vfs.clone(), &meta, 0, 1, config).await.unwrap();
    log.append(one(b"k", Some(b"v"))).await.unwrap();
    log.append(one(b"k", None)).await.unwrap();
    log.roll_if_due(0).await.unwrap();
    assert!(log.roll_if_due(10).await.unwrap());
    // The first pass keeps the tombstone and sets its horizon; the
    // second removes it: nothing is left, the log still ends at 2.
    log.compact(100, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    log.compact(100, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(log.high_watermark(), 2);
    for from in [0, 1] {
        assert!(log.read(from, 1 << 20).await.unwrap().records.is_empty());
        assert!(
            log.read_committed(from, 1 << 20)
                .await
                .unwrap()
                .records
                .is_empty()
        );
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn an_idempotent_producer_is_known_after_compaction_removed_its_batches() {
    let (vfs, meta) = fresh_topic().await;
    let config = rolling(1);
    let log = lead(vfs.clone(), &meta, 0, 1, config.clone())
        .await
        .unwrap();
    let batch = |seq: i32, key: &[u8]| batch::build_keyed((42, 0, seq), 5, &[(key, Some(b"v"))]);
    let first = log.append(batch(0, b"k")).await.unwrap();
    let last = log.append(batch(1, b"k")).await.unwrap();
    log.roll_if_due(0).await.unwrap();
    assert!(log.roll_if_due(10).await.unwrap());
    let done = log
        .compact(100, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.records_kept, 1, "the first batch is gone: {done:?}");
    // A fetch at the removed batch's offset gets the kept one.
    let r = log.read(first.base_offset, 1 << 20).await.unwrap();
    assert_eq!(
        batch::parse(&r.records).unwrap().base_offset,
        last.base_offset
    );
    drop(log);
    // A new leader still knows the producer's last sequence: a retry of
    // the last batch gets its offsets, an old sequence is refused.
    let next = lead(vfs.clone(), &meta, 0, 2, config).await.unwrap();
    assert_eq!(next.append(batch(1, b"k")).await.unwrap(), last);
    assert!(matches!(
        next.append(batch(5, b"k")).await,
        Err(LogError::OutOfOrderSequence)
    ));
    assert_eq!(next.append(batch(2, b"k")).await.unwrap().base_offset, 2);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn compressed_batches_are_compacted_and_stay_compressed_with_their_codec() {
    for codec in 1..=4i16 {
        let (vfs, meta) = fresh_topic().await;
        let config = rolling(1);
        let log = lead(vfs.clone(), &meta, 0, 1, config).await.unwrap();
        let mut acked = BTreeMap::new();
        for b in 0..30u32 {
            let writes: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                (b * 10..b * 10 + 10).map(write).collect();
            let records: Vec<(&[u8], Option<&[u8]>)> = writes
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect();
            let plain = batch::build_keyed((-1, -1, -1), 1, &records);
            let a = log
                .append(broker::log::records::compressed(&plain, codec).unwrap())
                .await
                .unwrap();
            for (i, o) in (b * 10..).zip(a.base_offset..=a.last_offset) {
                acked.insert(o, i);
            }
        }
        log.roll_if_due(0).await.unwrap();
        log.roll_if_due(10).await.unwrap();
        let done = log
            .compact(100, &CleanerLimits::default())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            done.compressed_batches, 0,
            "codec {codec}: every batch read: {done:?}"
        );
        assert!(
            done.records_kept < done.records_read / 5,
            "codec {codec}: {done:?}"
        );
        let read = read_all(&log).await;
        check(&read, &acked, done.cleaned_until, &format!("codec {codec}"));
        let r = log.read(0, 1 << 20).await.unwrap();
        let mut at = 0;
        while at < r.records.len() {
            let h = batch::parse(&r.records[at..]).unwrap();
            assert_eq!(h.attributes & 7, codec, "kept batches keep their codec");
            at += h.size;
        }
    }
}

/// A transactional producer's batch of keyed records.
fn transactional(producer: (i64, i16, i32), records: &[(&[u8], Option<&[u8]>)]) -> Bytes {
    let mut b = batch::build_keyed(producer, 1, records).to_vec();
    b[22] |= 0x10;
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn aborted_data_goes_and_markers_go_once_their_transaction_is_gone() {
    let (vfs, meta) = fresh_topic().await;
    let mut config = rolling(1);
    if let Some(c) = &mut config.compaction {
        c.delete_retention_ms = 1_000;
    }
    let log = lead(vfs.clone(), &meta, 0, 1, config).await.unwrap();
    let commit = batch::build_marker((7, 0), batch::Marker::Commit, 0, 1);
    let abort = batch::build_marker((7, 0), batch::Marker::Abort, 0, 1);
    log.verified(7, 0);
    log.append(transactional(
        (7, 0, 0),
        &[(b"a", Some(b"t1")), (b"b", Some(b"t1"))],
    ))
    .await
    .unwrap();
    log.append(commit).await.unwrap(); // offset 2
    log.verified(7, 0);
    log.append(transactional((7, 0, 2), &[(b"c", Some(b"aborted"))]))
        .await
        .unwrap();
    log.append(abort).await.unwrap(); // offset 4
    log.append(one(b"a", Some(b"plain"))).await.unwrap();
    log.append(one(b"b", Some(b"plain"))).await.unwrap();
    log.verified(7, 0);
    log.append(transactional((7, 0, 3), &[(b"d", Some(b"t2"))]))
        .await
        .unwrap();
    log.append(batch::build_marker((7, 0), batch::Marker::Commit, 0, 1))
        .await
        .unwrap(); // offset 8
    assert_eq!(log.producers().await.aborted.len(), 1);
    log.roll_if_due(0).await.unwrap();
    assert!(log.roll_if_due(10).await.unwrap());
    let first = log
        .compact(100, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    assert!(first.markers_removed.is_empty(), "{first:?}");
    assert_eq!(
        first.delete_horizon,
        Some(1_100),
        "markers wait for their horizon"
    );
    let second = log
        .compact(1_100, &CleanerLimits::default())
        .await
        .unwrap()
        .unwrap();
    // The first commit's data was overwritten and the aborted data went:
    // both their markers go; the last transaction's data stays, and so
    // does its marker.
    assert_eq!(second.markers_removed, [(7, 2), (7, 4)], "{second:?}");
    assert!(
        log.producers().await.aborted.is_empty(),
        "its aborted range went with it"
    );
    let read = keyed_records(&log.read_committed(0, 1 << 20).await.unwrap().records).unwrap();
    let values: Vec<_> = read.iter().map(|r| (r.0, r.2.clone().unwrap())).collect();
    assert_eq!(
        values,
        [
            (5, b"plain".to_vec()),
            (6, b"plain".to_vec()),
            (7, b"t2".to_vec())
        ]
    );
    let r = log.read(0, 1 << 20).await.unwrap();
    let mut markers = Vec::new();
    let mut at = 0;
    while at < r.records.len() {
        let h = batch::parse(&r.records[at..]).unwrap();
        if h.control.is_some() {
            markers.push(h.base_offset);
        }
        at += h.size;
    }
    assert_eq!(markers, [8]);
}
