//! `kaas fsck` on volumes written by the broker's own code and then
//! damaged on purpose: each kind of damage is found, named and graded,
//! and a clean volume passes.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::path::Path;
use std::sync::Arc;

use broker::fsck::{Severity, check};
use broker::log::{LogConfig, topic};
use bytes::Bytes;
use vfs::{MemVfs, OpenOptions, Vfs};

mod common;
use common::{lead, names_in, plain, with_topic};

/// A volume with topic `orders` (2 partitions), partition 0 led in epoch
/// 1 then 2, with records in two segments; returns the partition's dir.
async fn written(vfs: &Arc<dyn Vfs>) -> std::path::PathBuf {
    let meta = with_topic(vfs.as_ref(), "orders", 2).await;
    let config = LogConfig {
        segment_bytes: 200,
        ..LogConfig::default()
    };
    let log = lead(vfs.clone(), &meta, 0, 1, config.clone())
        .await
        .unwrap();
    for i in 0..6 {
        log.append(plain(i, &[b"some value of a record"]))
            .await
            .unwrap();
    }
    log.close().await.unwrap();
    let log = lead(vfs.clone(), &meta, 0, 2, config).await.unwrap();
    log.append(plain(9, &[b"after the takeover"]))
        .await
        .unwrap();
    log.close().await.unwrap();
    let log = lead(vfs.clone(), &meta, 1, 1, LogConfig::default())
        .await
        .unwrap();
    log.close().await.unwrap();
    topic::partition_dir(&meta.id, 0)
}

fn findings(report: &broker::fsck::Report, severity: Severity) -> Vec<(String, String)> {
    report
        .findings
        .iter()
        .filter(|f| f.severity == severity)
        .map(|f| (f.path.clone(), f.what.clone()))
        .collect()
}

async fn write(vfs: &dyn Vfs, path: &Path, data: &'static [u8]) {
    let f = vfs
        .open(
            path,
            OpenOptions::write()
                .with_create(vfs::Create::IfMissing)
                .with_truncate(),
        )
        .await
        .unwrap();
    f.write_at(0, Bytes::from_static(data)).await.unwrap();
    f.fsync().await.unwrap();
    f.close().await.unwrap();
}

#[tokio::test]
async fn a_directory_without_a_cluster_id_is_no_kaas_volume() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    broker::node::prepare_volume(vfs.as_ref()).await.unwrap();
    let e = check(vfs.as_ref()).await.unwrap_err();
    assert!(e.to_string().contains("not a kaas volume"), "{e}");
}

#[tokio::test]
async fn a_volume_the_broker_wrote_is_clean() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    written(&vfs).await;
    let report = check(vfs.as_ref()).await.unwrap();
    assert!(!report.has_problems(), "{}", report.human());
    assert_eq!((report.topics, report.partitions), (1, 2));
    assert!(report.files > 10, "{}", report.human());
}

#[tokio::test]
async fn lost_and_short_segments_and_missing_claims_are_errors() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let dir = written(&vfs).await;
    let segments = names_in(vfs.as_ref(), &dir, |n| n.ends_with(".log")).await;
    assert!(segments.len() >= 2, "{segments:?}");
    vfs.unlink(&dir.join(&segments[0])).await.unwrap();
    write(vfs.as_ref(), &dir.join(&segments[1]), b"short").await;
    vfs.unlink(&dir.join("epoch-0000000001")).await.unwrap();
    let report = check(vfs.as_ref()).await.unwrap();
    let errors = findings(&report, Severity::Error);
    let about = |needle: &str| {
        errors
            .iter()
            .filter(|(p, w)| p.contains(needle) || w.contains(needle))
            .count()
    };
    assert_eq!(about(&segments[0]), 1, "{}", report.human());
    // Every finding about a partition names its topic, as operators do.
    assert!(
        report
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .all(|f| f.topic.as_deref() == Some("orders")),
        "{:?}",
        report.findings
    );
    assert!(
        report.human().contains("(topic orders)"),
        "{}",
        report.human()
    );
    assert!(
        errors
            .iter()
            .any(|(p, w)| p.ends_with(&segments[1]) && w.contains("5 bytes")),
        "{}",
        report.human()
    );
    assert!(
        errors
            .iter()
            .any(|(_, w)| w.contains("epochs [1] have no claim")),
        "{}",
        report.human()
    );
    assert!(report.has_problems());
}

#[tokio::test]
async fn strays_are_warnings_and_pending_cleanups_notices() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let dir = written(&vfs).await;
    write(
        vfs.as_ref(),
        &dir.join("00000000000000000500-0000000001.log"),
        b"x",
    )
    .await;
    write(vfs.as_ref(), &dir.join(".manifest.tmp-12ab"), b"x").await;
    write(vfs.as_ref(), &dir.join(".nfs00000000000000010000001"), b"x").await;
    vfs.mkdir(Path::new("topics/.tombstone-dead"))
        .await
        .unwrap();
    let report = check(vfs.as_ref()).await.unwrap();
    assert!(
        findings(&report, Severity::Error).is_empty(),
        "{}",
        report.human()
    );
    let warnings = findings(&report, Severity::Warning);
    assert_eq!(warnings.len(), 1, "{}", report.human());
    assert!(
        warnings[0]
            .0
            .ends_with("00000000000000000500-0000000001.log")
    );
    let notices = findings(&report, Severity::Notice);
    for needle in [".manifest.tmp-12ab", ".nfs0000", ".tombstone-dead"] {
        assert!(
            notices.iter().any(|(p, _)| p.contains(needle)),
            "{needle}: {}",
            report.human()
        );
    }
    assert!(report.has_problems(), "a stray segment is a problem");
}

#[tokio::test]
async fn a_torn_manifest_and_a_topic_without_meta_are_errors() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let dir = written(&vfs).await;
    write(
        vfs.as_ref(),
        &dir.join("manifest-0000000002"),
        b"not an envelope",
    )
    .await;
    vfs.mkdir(Path::new("topics/0b7e9d4c-0000-4000-8000-000000000000"))
        .await
        .unwrap();
    let report = check(vfs.as_ref()).await.unwrap();
    let errors = findings(&report, Severity::Error);
    assert!(
        errors
            .iter()
            .any(|(p, w)| p == &dir.display().to_string() && w.contains("manifest unreadable")),
        "{}",
        report.human()
    );
    assert!(
        errors
            .iter()
            .any(|(p, w)| p.contains("0b7e9d4c") && w.contains("without its meta")),
        "{}",
        report.human()
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["findings"][0]["severity"]
            .as_str()
            .map(|s| s == "error" || s == "warning" || s == "notice"),
        Some(true)
    );
}

/// A sealed JSON file, as the broker's metadata writer leaves it.
async fn sealed(vfs: &dyn Vfs, path: &Path, kind: &str, json: serde_json::Value) {
    let bytes = vfs::durable::seal(kind, &serde_json::to_vec(&json).unwrap());
    vfs::durable::atomic_replace(vfs, path, bytes)
        .await
        .unwrap();
}

#[tokio::test]
async fn group_transaction_and_claim_files_are_checked() {
    use broker::groups::store;
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    written(&vfs).await;
    let v = vfs.as_ref();
    vfs.mkdir(Path::new("groups/003")).await.unwrap();
    let group = |id: &str| {
        serde_json::json!({
            "group_id": id, "deleted": false, "generation": 1, "protocol_type": null,
            "protocol": null, "leader": null, "members": [], "offsets": []
        })
    };
    // Group g saved in coordinator epochs 1 and 2: the first is superseded.
    sealed(v, &store::path(3, "g", 1), "group", group("g")).await;
    sealed(v, &store::path(3, "g", 2), "group", group("g")).await;
    // Group h's file is torn; group k's file holds another group.
    write(v, &store::path(3, "h", 1), b"KAAS\x01").await;
    sealed(v, &store::path(3, "k", 1), "group", group("not-k")).await;
    write(v, Path::new("groups/003/notes.txt"), b"hello").await;
    // Coordinator epochs 1 and 3 claimed, 2 never fenced.
    let token = vfs::durable::ClaimToken::fresh("coordinator");
    for e in [1, 3] {
        let claim = format!("groups/003/epoch-{e:010}");
        vfs::durable::claim(v, Path::new(&claim), &token, b"leader")
            .await
            .unwrap();
    }
    // A controller claim naming no broker, a foreign producer id block, a
    // credentials version whose claimant stopped before filling it.
    let token = vfs::durable::ClaimToken::fresh("test");
    vfs::durable::claim(v, Path::new("cluster/controller-0000000009"), &token, b"x")
        .await
        .unwrap();
    write(v, Path::new("producers/block-000000000007"), b"garbage").await;
    vfs.mkdir(Path::new("security")).await.unwrap();
    write(v, Path::new("security/credentials-000000000001"), b"").await;
    // A foreign generation of a topic name's claim and of a topic's configs.
    write(v, Path::new("topics/names/orders@7"), b"garbage").await;
    let topic_dir =
        broker::layout::topic_dir(&topic::lookup(v, "orders").await.unwrap().unwrap().id);
    write(v, &topic_dir.join("config-0000000003"), b"torn").await;

    let report = check(v).await.unwrap();
    let errors = findings(&report, Severity::Error);
    let warnings = findings(&report, Severity::Warning);
    let notices = findings(&report, Severity::Notice);
    let has = |list: &[(String, String)], path: &str, what: &str| {
        list.iter().any(|(p, w)| p == path && w.contains(what))
    };
    let at = |p: std::path::PathBuf| p.display().to_string();
    assert!(
        has(&warnings, &at(store::path(3, "g", 1)), "superseded"),
        "{}",
        report.human()
    );
    assert!(
        !has(&warnings, &at(store::path(3, "g", 2)), "superseded"),
        "{}",
        report.human()
    );
    assert!(
        has(&errors, &at(store::path(3, "h", 1)), "unreadable"),
        "{}",
        report.human()
    );
    assert!(
        has(&errors, &at(store::path(3, "k", 1)), "not-k"),
        "{}",
        report.human()
    );
    assert!(
        has(&warnings, "groups/003/notes.txt", "not a group"),
        "{}",
        report.human()
    );
    assert!(
        has(&errors, "cluster/controller-0000000009", "no broker id"),
        "{}",
        report.human()
    );
    assert!(
        has(&errors, "producers/block-000000000007", "unreadable claim"),
        "{}",
        report.human()
    );
    assert!(
        has(
            &notices,
            "security/credentials-000000000001",
            "undecided claim"
        ),
        "{}",
        report.human()
    );
    assert!(
        has(&errors, "groups/003", "epochs [2] have no claim"),
        "{}",
        report.human()
    );
    assert!(
        has(&errors, "topics/names/orders@7", "unreadable claim"),
        "{}",
        report.human()
    );
    assert!(
        has(
            &errors,
            &at(topic_dir.join("config-0000000003")),
            "unreadable claim"
        ),
        "{}",
        report.human()
    );
    assert_eq!(errors.len(), 7, "{}", report.human());
}

/// `--repair` removes what is safe on a live cluster (a deleted topic's
/// files, segments of superseded epochs no manifest names) and nothing
/// else; a second run finds nothing to do.
#[tokio::test]
async fn repair_removes_only_what_no_leader_can_use() {
    let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let dir = written(&vfs).await;
    // The newest manifest of partition 0 is epoch 2's.
    let old = [
        "00000000000000000500-0000000001.log",
        "00000000000000000500-0000000001.index",
    ];
    let current = "00000000000000000700-0000000002.log";
    let newer = "00000000000000000900-0000000003.log";
    for name in old.iter().chain([&current, &newer]) {
        write(vfs.as_ref(), &dir.join(name), b"x").await;
    }
    write(vfs.as_ref(), &dir.join(".manifest.tmp-12ab"), b"x").await;
    vfs.mkdir(Path::new("topics/.tombstone-dead"))
        .await
        .unwrap();
    write(
        vfs.as_ref(),
        Path::new("topics/.tombstone-dead/x.log"),
        b"x",
    )
    .await;
    let before = check(vfs.as_ref()).await.unwrap();
    let repairs = broker::fsck::repair(vfs.as_ref()).await.unwrap();
    let done: Vec<&str> = repairs.done.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(done.len(), 1, "{}", repairs.human());
    assert!(done[0].ends_with(".tombstone-dead"));
    assert!(repairs.pending.is_empty(), "{}", repairs.human());
    // Segments no manifest names stay (a takeover in progress may still
    // name an older epoch's), as do temps: reported, not removed.
    for name in old.iter().chain([&current, &newer, &".manifest.tmp-12ab"]) {
        assert!(
            vfs::exists_now(vfs.as_ref(), &dir.join(name))
                .await
                .unwrap(),
            "{name}"
        );
    }
    let after = check(vfs.as_ref()).await.unwrap();
    assert!(
        findings(&after, Severity::Error).is_empty(),
        "{}",
        after.human()
    );
    assert_eq!(
        findings(&after, Severity::Warning),
        findings(&before, Severity::Warning),
        "the strays are still reported:\n{}",
        after.human()
    );
    // No manifest lost a segment (no error above); a second run has nothing to do.
    let again = broker::fsck::repair(vfs.as_ref()).await.unwrap();
    assert!(again.done.is_empty() && again.pending.is_empty());
    // ... and says so.
    assert!(
        again.human().starts_with("repaired nothing"),
        "{}",
        again.human()
    );
    assert!(
        repairs
            .human()
            .starts_with("repaired topics/.tombstone-dead"),
        "{}",
        repairs.human()
    );
}

/// fsck on a live cluster: a directory its walk found (through a listing
/// NFS served from its cache) and a reaper removed before the walk got
/// there is gone, not damage.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_directory_removed_while_fsck_walks_is_not_damage() {
    use vfs::model::{ModelNfs, NfsConfig};
    let nfs = ModelNfs::new(NfsConfig::default(), 3);
    let (checker, reaper) = (nfs.host(1), nfs.host(2));
    common::prepared(&reaper).await;
    let staging = Path::new("topics/.tombstone-staging-x@1.1");
    reaper.mkdir(staging).await.unwrap();
    reaper.mkdir(&staging.join("0")).await.unwrap();
    write(&reaper, &staging.join("topic.meta"), b"meta").await;
    // The checker's client listed the topics: the listing stays in its
    // cache, while the directory's own listing was never read.
    checker.read_dir(Path::new("topics")).await.unwrap();
    vfs::durable::converge_remove(&reaper, staging)
        .await
        .unwrap();
    let report = check(&checker).await.unwrap();
    assert_eq!(
        findings(&report, Severity::Error),
        Vec::<(String, String)>::new()
    );
}
