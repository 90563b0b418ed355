//! Damage to the one copy: an acknowledged offset is never cut away by a
//! takeover nor handed out again once the volume vouches for it, a read
//! that meets a damaged batch is refused (CORRUPT_MESSAGE at the API), and
//! fsck names the first bad offset.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use broker::fsck::{Severity, check};
use broker::log::{LogConfig, LogError, topic};
use vfs::{MemVfs, OpenOptions, Vfs};

mod common;
use common::{flip, lead, plain, segment_files, with_topic};

async fn file_len(vfs: &dyn Vfs, path: &Path) -> u64 {
    let f = vfs.open(path, OpenOptions::read()).await.unwrap();
    let len = f.stat().await.unwrap().len;
    f.close().await.unwrap();
    len
}

/// 200 records acknowledged one at a time, then a clean close (the issue's
/// trial: stopped with SIGTERM); two bytes flipped in the middle of the
/// only, active segment; a new leader takes over.
#[tokio::test]
async fn damage_below_a_clean_shutdown_is_never_cut_nor_reused() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let dir = topic::partition_dir(&meta.id, 0);
    let log = lead(vfs.clone(), &meta, 0, 1, LogConfig::default())
        .await
        .unwrap();
    for i in 0..200 {
        log.append(plain(i, &[format!("record {i}").as_bytes()]))
            .await
            .unwrap();
    }
    log.close().await.unwrap();
    let segment = segment_files(vfs.as_ref(), &dir).await.remove(0);
    let middle = file_len(vfs.as_ref(), &segment).await / 2;
    flip(vfs.as_ref(), &segment, middle).await;

    let log = lead(vfs.clone(), &meta, 0, 2, LogConfig::default())
        .await
        .unwrap();
    assert_eq!(
        log.high_watermark(),
        200,
        "the takeover cut acknowledged records"
    );
    // The records before the damage read as before; the damaged batch is
    // refused, never skipped; the ones after it read again.
    assert!(!log.read(0, 1 << 20).await.unwrap().records.is_empty());
    let mut damaged = None;
    for o in 0..200 {
        if let Err(LogError::Damaged { .. }) = log.read(o, 1).await {
            damaged = Some(o);
            break;
        }
    }
    let bad = damaged.expect("no offset reads as damaged");
    assert!((50..150).contains(&bad), "damage found at offset {bad}");
    assert!(log.read(bad + 1, 1 << 20).await.is_ok());
    // New records get new offsets.
    let next = log.append(plain(1, &[b"after the damage"])).await.unwrap();
    assert_eq!(
        next.base_offset, 200,
        "an acknowledged offset handed out twice"
    );
    log.close().await.unwrap();

    let report = check(vfs.as_ref()).await.unwrap();
    let errors: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{}", report.human());
    assert!(
        errors[0].what.contains(&format!("first bad offset {bad}")),
        "{}",
        report.human()
    );
}

/// Without a clean shutdown, the checkpoint is at most the interval behind
/// the acknowledged end: a crash after records were acknowledged longer
/// ago than that leaves them vouched for.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn the_checkpoint_follows_acknowledged_records_within_its_interval() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let dir = topic::partition_dir(&meta.id, 0);
    let config = LogConfig {
        checkpoint_interval: Duration::from_millis(500),
        ..LogConfig::default()
    };
    let log = lead(vfs.clone(), &meta, 0, 1, config.clone())
        .await
        .unwrap();
    for i in 0..100 {
        log.append(plain(i, &[b"early"])).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    // The next acknowledged cycle writes the checkpoint.
    log.append(plain(100, &[b"late"])).await.unwrap();
    drop(log); // a crash: no close
    let segment = segment_files(vfs.as_ref(), &dir).await.remove(0);
    flip(
        vfs.as_ref(),
        &segment,
        file_len(vfs.as_ref(), &segment).await / 3,
    )
    .await;
    let log = lead(vfs.clone(), &meta, 0, 2, config).await.unwrap();
    assert_eq!(log.high_watermark(), 101, "acknowledged records were cut");
    log.close().await.unwrap();
}

/// A takeover after a crash seals the old segment at a checkpoint with
/// nothing before it; retention removes that empty segment without
/// counting it as records removed (no "retention removed segments" line
/// after every takeover).
#[tokio::test]
async fn an_empty_sealed_segment_is_not_counted_as_retention() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let log = lead(vfs.clone(), &meta, 0, 1, LogConfig::default())
        .await
        .unwrap();
    log.close().await.unwrap();
    let log = lead(vfs.clone(), &meta, 0, 2, LogConfig::default())
        .await
        .unwrap();
    assert_eq!(log.enforce_retention(0).await.unwrap(), 0);
    log.close().await.unwrap();
}
