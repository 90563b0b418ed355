//! Topic deletion: tombstone, fencing, name release and the reaper, on the
//! model NFS with several hosts.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::path::Path;
use std::sync::Arc;

use broker::log::topic::{self, TopicMeta};
use broker::log::{LogConfig, LogError, PartitionLog};
use vfs::Vfs;
use vfs::model::{ModelNfs, NfsConfig};
use vfs::testkit::Interrupting;

mod common;
use common::{plain, with_topic};

async fn setup(vfs: &dyn Vfs) -> TopicMeta {
    with_topic(vfs, "events", 2).await
}

async fn lead(vfs: Arc<dyn Vfs>, meta: &TopicMeta, partition: u32) -> PartitionLog {
    common::lead(vfs, meta, partition, 1, LogConfig::default())
        .await
        .unwrap()
}

fn record() -> bytes::Bytes {
    plain(1, &[b"value"])
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn deleting_a_topic_fences_its_leaders_and_frees_its_name() {
    let nfs = ModelNfs::new(NfsConfig::default(), 1);
    let (a, b): (Arc<dyn Vfs>, Arc<dyn Vfs>) = (Arc::new(nfs.host(1)), Arc::new(nfs.host(2)));
    let meta = setup(a.as_ref()).await;
    let log = lead(a.clone(), &meta, 0).await;
    log.append(record()).await.unwrap();

    topic::delete_topic(b.as_ref(), &meta).await.unwrap();
    let late = log.append(record()).await;
    assert!(matches!(late, Err(LogError::Fenced(1))), "{late:?}");
    assert_eq!(topic::lookup(b.as_ref(), "events").await.unwrap(), None);

    let again = topic::create_topic(b.as_ref(), "events", 1).await.unwrap();
    assert_ne!(again.id, meta.id);
    let fresh = lead(b.clone(), &again, 0).await;
    assert_eq!(fresh.high_watermark(), 0, "a recreated topic starts empty");
    // Deleting twice is the same as once.
    topic::delete_topic(b.as_ref(), &meta).await.unwrap();
    assert_eq!(
        topic::lookup(b.as_ref(), "events").await.unwrap(),
        Some(again)
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn the_reaper_waits_for_open_handles_and_leaves_nothing_behind() {
    let nfs = ModelNfs::new(NfsConfig::default(), 2);
    let a: Arc<dyn Vfs> = Arc::new(nfs.host(1));
    let meta = setup(a.as_ref()).await;
    let log = lead(a.clone(), &meta, 0).await;
    log.append(record()).await.unwrap();
    log.read(0, 1024).await.unwrap(); // holds a read handle on the segment too

    // The host that still has the files open deletes and reaps: its NFS
    // client silly-renames them, so the tombstone cannot go yet.
    topic::delete_topic(a.as_ref(), &meta).await.unwrap();
    let pending = topic::reap_tombstones(a.as_ref()).await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert!(
        !nfs.nfs_leftovers().is_empty(),
        "open files became .nfs files"
    );

    // Once the handles are closed, the next pass finishes the job.
    log.close().await.unwrap();
    assert!(topic::reap_tombstones(a.as_ref()).await.unwrap().is_empty());
    assert!(nfs.nfs_leftovers().is_empty(), "{}", nfs.dump());
    let left: Vec<String> = a
        .read_dir(Path::new("topics"))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(left, ["names"], "{}", nfs.dump());
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn deletion_converges_after_an_interruption_at_every_step() {
    for budget in 0.. {
        let nfs = ModelNfs::new(NfsConfig::default(), budget as u64);
        let a: Arc<dyn Vfs> = Arc::new(nfs.host(1));
        let meta = setup(a.as_ref()).await;
        let cut = Interrupting::new(a.clone(), budget);
        let first = async {
            topic::delete_topic(&cut, &meta).await?;
            topic::reap_tombstones(&cut).await
        }
        .await;
        // Re-driving both steps reaches the end state.
        topic::delete_topic(a.as_ref(), &meta).await.unwrap();
        assert!(topic::reap_tombstones(a.as_ref()).await.unwrap().is_empty());
        assert_eq!(topic::lookup(a.as_ref(), "events").await.unwrap(), None);
        let again = topic::create_topic(a.as_ref(), "events", 1).await.unwrap();
        assert_ne!(again.id, meta.id);
        assert_eq!(
            nfs.dump().lines().filter(|l| l.contains(&meta.id)).count(),
            0,
            "budget {budget}"
        );
        if !cut.tripped() {
            assert!(first.unwrap().is_empty());
            break;
        }
    }
}
