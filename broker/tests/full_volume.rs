//! A full volume: every append that cannot be written is refused at once
//! (KAFKA_STORAGE_ERROR at the API), the partition keeps its epoch and its
//! acknowledged records, reads go on, and appends resume by themselves
//! once space is back, at the next offset.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::sync::Arc;

use broker::log::{LogConfig, LogError};
use vfs::{MemVfs, Vfs};

mod common;
use common::{lead, plain, read_all, with_topic};

fn value(i: usize) -> Vec<u8> {
    format!("record {i:05} {}", "x".repeat(200)).into_bytes()
}

#[tokio::test]
async fn appends_on_a_full_volume_are_refused_and_resume_once_space_is_back() {
    let mem = MemVfs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(mem.clone());
    let meta = with_topic(vfs.as_ref(), "orders", 1).await;
    // Small segments, so that rolls (a new file, a manifest) meet the
    // full volume too, not only appends.
    let config = LogConfig {
        segment_bytes: 8 << 10,
        ..LogConfig::default()
    };
    let log = lead(vfs.clone(), &meta, 0, 1, config.clone())
        .await
        .unwrap();
    mem.set_capacity(mem.used_bytes() + (64 << 10));
    let mut acked = Vec::new();
    let mut refused = 0;
    for i in 0..2_000 {
        match log.append(plain(i as i64, &[&value(i)])).await {
            Ok(a) => acked.push((a.base_offset, i)),
            Err(LogError::VolumeFull(why)) => {
                assert!(
                    why.contains("StorageFull") || why.contains("space"),
                    "{why}"
                );
                refused += 1;
                if refused == 20 {
                    break;
                }
            }
            Err(e) => panic!("append {i}: {e}"),
        }
    }
    assert!(refused == 20 && acked.len() > 100, "{} acked", acked.len());
    assert!(log.volume_full());
    assert!(!log.has_stopped(), "a full volume stopped the log");
    // Reads of what is there go on.
    assert_eq!(log.high_watermark(), acked.len() as i64);
    let read = log.read(0, 1 << 20).await.unwrap();
    assert!(!read.records.is_empty());

    // Space is back: the next append takes the next offset.
    mem.set_capacity(u64::MAX);
    let next = log.append(plain(0, &[b"after"])).await.unwrap();
    assert_eq!(
        next.base_offset,
        acked.len() as i64,
        "an offset lost or reused"
    );
    assert!(!log.volume_full());
    log.close().await.unwrap();

    // A successor finds every acknowledged record where its answer said.
    let log = lead(vfs.clone(), &meta, 0, 2, config).await.unwrap();
    assert_eq!(log.high_watermark(), acked.len() as i64 + 1);
    let seen = read_all(&log, 0).await;
    assert_eq!(seen.len(), acked.len() + 1);
    for (o, i) in &acked {
        assert_eq!(
            seen[*o as usize],
            (*o, value(*i)),
            "acknowledged record {o}"
        );
    }
}
