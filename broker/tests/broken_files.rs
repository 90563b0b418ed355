//! Broken files settle: an unreadable manifest or a segment the manifest
//! names that is gone holds the partition offline in its epoch (one error
//! state, no new epoch claimed again and again), fsck reports it, and the
//! partition comes back by itself once the file is restored.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::sync::Arc;
use std::time::Duration;

use broker::cluster::assignment::Assignment;
use broker::cluster::placement::Leadership;
use broker::fsck::{Severity, check};
use broker::leaders::Leaders;
use broker::log::{LogConfig, LogError, topic};
use bytes::Bytes;
use vfs::{MemVfs, Vfs};

mod common;
use common::{lead, live, names_in, plain, with_topic};

fn led_by_0(topic_id: &str, epoch: u32) -> Assignment {
    Assignment {
        controller_epoch: 1,
        version: u64::from(epoch),
        brokers: live([(0, 1)]),
        partitions: vec![(
            topic_id.to_owned(),
            0,
            Leadership {
                leader: 0,
                leader_epoch: epoch,
            },
        )],
        ..Assignment::default()
    }
}

fn errors(report: &broker::fsck::Report) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| format!("{}: {}", f.path, f.what))
        .collect()
}

/// The trial: `truncate -s 0 manifest-0000000001`, then the
/// broker leads the partition again.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn an_unreadable_manifest_holds_the_partition_offline_in_one_epoch() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let dir = topic::partition_dir(&meta.id, 0);
    let log = lead(vfs.clone(), &meta, 0, 1, LogConfig::default())
        .await
        .unwrap();
    for i in 0..10 {
        log.append(plain(i, &[b"v"])).await.unwrap();
    }
    log.close().await.unwrap();
    let manifest = dir.join("manifest-0000000001");
    let whole = vfs::read_file(vfs.as_ref(), &manifest).await.unwrap();
    vfs::durable::atomic_replace(vfs.as_ref(), &manifest, Bytes::new())
        .await
        .unwrap();

    let leaders = Arc::new(Leaders::new(vfs.clone(), 0, LogConfig::default()));
    let assigned = led_by_0(&meta.id, 2);
    for _ in 0..10 {
        leaders.sync(&assigned).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    assert!(leaders.get(&meta.id, 0).is_none());
    assert_eq!(leaders.offline(), vec![(meta.id.clone(), 0, 2)]);
    assert!(leaders.stuck().0.is_empty(), "a new epoch was asked for");
    assert_eq!(
        names_in(vfs.as_ref(), &dir, |n| n.starts_with("epoch-")).await,
        ["epoch-0000000001", "epoch-0000000002"],
        "epochs claimed again and again"
    );
    let why = leaders.offline_because(&meta.id, 0).unwrap();
    assert!(why.contains("manifest-0000000001"), "{why}");
    let report = check(vfs.as_ref()).await.unwrap();
    assert!(
        errors(&report)
            .iter()
            .any(|e| e.contains("manifest-0000000001")),
        "{}",
        report.human()
    );

    // Restored (from a backup, say): back within one retry, no epoch lost.
    vfs::durable::atomic_replace(vfs.as_ref(), &manifest, Bytes::from(whole))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(31)).await;
    leaders.sync(&assigned).await;
    let log = leaders.get(&meta.id, 0).expect("led again once restored");
    assert_eq!(log.high_watermark(), 10);
    assert!(leaders.offline().is_empty());
}

/// A sealed segment the manifest names is gone: the takeover refuses to
/// write a manifest that still counts on its bytes.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_missing_sealed_segment_is_unusable_not_papered_over() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    let dir = topic::partition_dir(&meta.id, 0);
    let small = LogConfig {
        segment_bytes: 1024,
        ..LogConfig::default()
    };
    let log = lead(vfs.clone(), &meta, 0, 1, small.clone()).await.unwrap();
    for i in 0..100 {
        log.append(plain(i, &[&[b'x'; 100][..]])).await.unwrap();
    }
    log.close().await.unwrap();
    let segments = names_in(vfs.as_ref(), &dir, |n| n.starts_with("0")).await;
    let gone = segments.iter().find(|n| n.ends_with(".log")).unwrap();
    vfs.unlink(&dir.join(gone)).await.unwrap();
    let manifests = names_in(vfs.as_ref(), &dir, |n| n.starts_with("manifest-")).await;

    let refused = lead(vfs.clone(), &meta, 0, 2, small).await;
    match refused {
        Err(LogError::Unusable(why)) => assert!(why.contains(gone.as_str()), "{why}"),
        other => panic!("took over a log with a segment missing: {:?}", other.err()),
    }
    assert_eq!(
        names_in(vfs.as_ref(), &dir, |n| n.starts_with("manifest-")).await,
        manifests,
        "a manifest was written over the missing segment"
    );
    let report = check(vfs.as_ref()).await.unwrap();
    assert!(
        errors(&report).iter().any(|e| e.contains(gone.as_str())),
        "{}",
        report.human()
    );
}
