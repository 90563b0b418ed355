//! `kaas fsck --repair --truncate-damaged`: on an operator's word, damaged
//! records are given up (and only those, from a segment's first bad batch
//! to its end), the leader that still serves the damage is fenced, the
//! next leader reads over the gap, and no offset is handed out again.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::sync::Arc;

use broker::fsck::{Severity, check, truncate_damaged};
use broker::log::{LogConfig, LogError, topic};
use vfs::{MemVfs, Vfs};

mod common;
use common::{flip, lead, plain, read_all, segment_files, with_topic};

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        ..LogConfig::default()
    }
}

fn problems(report: &broker::fsck::Report) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| f.severity != Severity::Notice)
        .map(|f| format!("{}: {}", f.path, f.what))
        .collect()
}

/// Damage in a sealed segment in the middle of the log, with the leader
/// still running: the repair gives up that segment from its bad batch
/// on, the running leader learns it is superseded at its next read of the
/// damage (and at its next write), and the next leader serves every other
/// record at its offset and goes on past the old end.
#[tokio::test]
async fn gives_up_a_damaged_segment_from_its_first_bad_batch_and_fences_the_leader() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let dir = topic::partition_dir(&meta.id, 0);
    let log = lead(vfs.clone(), &meta, 0, 1, small()).await.unwrap();
    for i in 0..100 {
        log.append(plain(
            i,
            &[format!("record {i:03} {}", "x".repeat(40)).as_bytes()],
        ))
        .await
        .unwrap();
    }
    let before = read_all(&log, 0).await;
    assert_eq!(before.len(), 100);
    let files = segment_files(vfs.as_ref(), &dir).await;
    assert!(files.len() >= 3, "{files:?}");
    // Into the second segment's third batch (each ~110 bytes).
    flip(vfs.as_ref(), &files[1], 300).await;
    let mut bad = None;
    for o in 0..100 {
        if let Err(LogError::Damaged { .. }) = log.read(o, 1).await {
            bad = Some(o);
            break;
        }
    }
    let bad = bad.expect("the damage reads as damage before the repair");

    let done = truncate_damaged(vfs.clone(), "orders-0").await.unwrap();
    assert_eq!(done.epoch, 2);
    assert_eq!(done.given_up.len(), 1, "{}", done.human());
    let g = &done.given_up[0];
    assert_eq!(g.from, bad);
    assert!(g.to > bad && g.to < 100, "{g:?}");
    assert!(
        done.human()
            .contains(&format!("GAVE UP offsets {}..{}", g.from, g.to))
    );

    // The leader of epoch 1 still names the damage: it is superseded.
    assert!(matches!(log.read(bad, 1).await, Err(LogError::Fenced(1))));
    assert!(log.has_stopped());
    assert!(log.append(plain(0, &[b"late"])).await.is_err());
    log.close().await.unwrap();

    let next = lead(vfs.clone(), &meta, 0, 3, small()).await.unwrap();
    let after = read_all(&next, 0).await;
    let expected: Vec<_> = before
        .iter()
        .filter(|(o, _)| *o < g.from || *o >= g.to)
        .cloned()
        .collect();
    assert_eq!(after, expected, "only the given-up offsets are gone");
    assert_eq!(next.high_watermark(), 100);
    let appended = next.append(plain(1, &[b"after the repair"])).await.unwrap();
    assert_eq!(appended.base_offset, 100, "an offset handed out again");
    next.close().await.unwrap();

    let report = check(vfs.as_ref()).await.unwrap();
    assert!(problems(&report).is_empty(), "{}", report.human());
    assert!(
        report.findings.iter().any(|f| f
            .what
            .contains(&format!("offsets {}..{} were given up", g.from, g.to))),
        "{}",
        report.human()
    );
}

/// The damaged batch is in the active segment, below its checkpoint, and
/// the leader acknowledged more past the checkpoint: that tail is kept,
/// as by any takeover; only the damaged segment's part from the bad
/// batch to the checkpoint is given up.
#[tokio::test]
async fn damage_in_the_active_segment_keeps_the_tail_past_the_checkpoint() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let dir = topic::partition_dir(&meta.id, 0);
    let log = lead(vfs.clone(), &meta, 0, 1, LogConfig::default())
        .await
        .unwrap();
    for i in 0..50 {
        log.append(plain(i, &[format!("record {i}").as_bytes()]))
            .await
            .unwrap();
    }
    log.checkpoint().await.unwrap();
    for i in 50..60 {
        log.append(plain(i, &[format!("record {i}").as_bytes()]))
            .await
            .unwrap();
    }
    let files = segment_files(vfs.as_ref(), &dir).await;
    assert_eq!(files.len(), 1);
    flip(vfs.as_ref(), &files[0], 200).await;

    let done = truncate_damaged(vfs.clone(), "orders-0").await.unwrap();
    assert_eq!(done.given_up.len(), 1, "{}", done.human());
    let g = &done.given_up[0];
    assert_eq!(g.to, 50, "given up to the checkpoint: {g:?}");
    assert!(g.from > 0 && g.from < 10, "{g:?}");
    drop(log);

    let next = lead(vfs.clone(), &meta, 0, 3, LogConfig::default())
        .await
        .unwrap();
    let offsets: Vec<i64> = read_all(&next, 0).await.iter().map(|(o, _)| *o).collect();
    let expected: Vec<i64> = (0..g.from).chain(50..60).collect();
    assert_eq!(offsets, expected);
    assert_eq!(next.high_watermark(), 60);
}

/// A sealed segment is gone: without the repair the partition is held
/// offline; with it, the segment's offsets are given up and the partition
/// serves the rest.
#[tokio::test]
async fn a_missing_segment_is_replaced_by_an_empty_one() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let dir = topic::partition_dir(&meta.id, 0);
    let log = lead(vfs.clone(), &meta, 0, 1, small()).await.unwrap();
    for i in 0..100 {
        log.append(plain(i, &[&[b'x'; 100][..]])).await.unwrap();
    }
    log.close().await.unwrap();
    let files = segment_files(vfs.as_ref(), &dir).await;
    vfs.unlink(&files[1]).await.unwrap();
    assert!(matches!(
        lead(vfs.clone(), &meta, 0, 2, small()).await,
        Err(LogError::Unusable(_))
    ));

    let done = truncate_damaged(vfs.clone(), "orders-0").await.unwrap();
    assert_eq!(done.epoch, 3);
    assert_eq!(done.given_up.len(), 1, "{}", done.human());
    let g = done.given_up[0].clone();
    assert_eq!(g.position, 0);
    let next = lead(vfs.clone(), &meta, 0, 4, small()).await.unwrap();
    let offsets: Vec<i64> = read_all(&next, 0).await.iter().map(|(o, _)| *o).collect();
    let expected: Vec<i64> = (0..g.from).chain(g.to..100).collect();
    assert_eq!(offsets, expected);
    next.close().await.unwrap();
    let report = check(vfs.as_ref()).await.unwrap();
    assert!(problems(&report).is_empty(), "{}", report.human());

    // Run again: nothing left to give up.
    let again = truncate_damaged(vfs.clone(), "orders-0").await.unwrap();
    assert!(again.given_up.is_empty(), "{}", again.human());
}

/// A healthy partition loses nothing, including what its leader
/// acknowledged past its last checkpoint; a bad name is refused.
#[tokio::test]
async fn a_healthy_partition_gives_up_nothing() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 2).await;
    let log = lead(vfs.clone(), &meta, 1, 1, LogConfig::default())
        .await
        .unwrap();
    for i in 0..30 {
        log.append(plain(i, &[b"v"])).await.unwrap();
    }
    let done = truncate_damaged(vfs.clone(), "orders-1").await.unwrap();
    assert!(done.given_up.is_empty());
    assert!(
        log.append(plain(0, &[b"late"])).await.is_err(),
        "not fenced"
    );
    drop(log);
    let next = lead(vfs.clone(), &meta, 1, 3, LogConfig::default())
        .await
        .unwrap();
    assert_eq!(read_all(&next, 0).await.len(), 30);
    for bad in ["orders-2", "orders", "nope-0", "-0"] {
        assert!(
            truncate_damaged(vfs.clone(), bad).await.is_err(),
            "{bad} accepted"
        );
    }
}
