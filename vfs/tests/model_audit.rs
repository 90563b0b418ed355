//! The model's durability audit of renames (`ModelNfs::publications`):
//! what a rename makes visible is judged at that instant, against what the
//! server has committed.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::path::Path;

use bytes::Bytes;
use vfs::model::{ModelNfs, NfsConfig};
use vfs::{OpenOptions, Vfs};

fn p(s: &str) -> &Path {
    Path::new(s)
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_file_renamed_after_its_fsync_is_durable_and_one_renamed_before_is_not() {
    let nfs = ModelNfs::new(NfsConfig::default(), 7);
    let a = nfs.host(1);
    let f = a.open(p("t1"), OpenOptions::create_new()).await.unwrap();
    f.write_at(0, Bytes::from_static(b"synced")).await.unwrap();
    f.fsync().await.unwrap();
    a.rename(p("t1"), p("doc")).await.unwrap();
    assert_eq!(nfs.publications(), (1, vec![]));

    let g = a.open(p("t2"), OpenOptions::create_new()).await.unwrap();
    g.write_at(0, Bytes::from_static(b"not yet")).await.unwrap();
    a.rename(p("t2"), p("doc")).await.unwrap();
    let (audited, found) = nfs.publications();
    assert_eq!(audited, 2);
    assert_eq!(found.len(), 1, "{found:?}");
    let bad = &found[0];
    assert_eq!((bad.name.as_str(), bad.file.as_str()), ("doc", "doc"));
    assert_eq!((bad.host, bad.committed), (1, 0));
    assert!(bad.unsent, "the write is still in host 1's cache");
    g.close().await.unwrap();
    assert_eq!(
        nfs.publications().1.len(),
        1,
        "a later commit undoes nothing"
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn an_overwrite_still_in_the_cache_is_not_durable() {
    let nfs = ModelNfs::new(NfsConfig::default(), 7);
    let a = nfs.host(1);
    let f = a.open(p("t"), OpenOptions::create_new()).await.unwrap();
    f.write_at(0, Bytes::from(vec![1u8; 10_000])).await.unwrap();
    f.fsync().await.unwrap();
    f.write_at(5_000, Bytes::from_static(b"changed"))
        .await
        .unwrap();
    a.rename(p("t"), p("doc")).await.unwrap();
    let found = nfs.publications().1;
    assert_eq!(found.len(), 1, "same length, other bytes: {found:?}");
    assert_eq!((found[0].committed, found[0].len), (10_000, 10_000));
    assert!(found[0].unsent);
    f.close().await.unwrap();
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_directory_renamed_into_place_is_judged_by_every_file_in_it() {
    let nfs = ModelNfs::new(NfsConfig::default(), 7);
    let a = nfs.host(1);
    a.mkdir(p("staging")).await.unwrap();
    a.mkdir(p("staging/0")).await.unwrap();
    let done = a
        .open(p("staging/meta"), OpenOptions::create_new())
        .await
        .unwrap();
    done.write_at(0, Bytes::from_static(b"meta")).await.unwrap();
    done.close().await.unwrap();
    let open = a
        .open(p("staging/0/claim"), OpenOptions::create_new())
        .await
        .unwrap();
    open.write_at(0, Bytes::from_static(b"claim"))
        .await
        .unwrap();
    a.rename(p("staging"), p("topic")).await.unwrap();
    let found = nfs.publications().1;
    let files: Vec<_> = found
        .iter()
        .map(|f| (f.name.as_str(), f.file.as_str()))
        .collect();
    assert_eq!(files, [("topic", "topic/0/claim")]);
    open.close().await.unwrap();
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn refused_flushes_fail_the_fsync_and_the_close_and_keep_the_pages_unsent() {
    let nfs = ModelNfs::new(NfsConfig::default(), 7);
    let a = nfs.host(1);
    let f = a.open(p("t"), OpenOptions::create_new()).await.unwrap();
    f.write_at(0, Bytes::from_static(b"refused")).await.unwrap();
    nfs.fail_next_flushes(1, 2);
    assert!(f.fsync().await.is_err());
    assert!(
        f.close().await.is_err(),
        "the close's write-back is refused too"
    );
    a.rename(p("t"), p("doc")).await.unwrap();
    let found = nfs.publications().1;
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].unsent && found[0].committed == 0, "{found:?}");

    // Used up: the next file's flushes go through, and a clean close
    // (nothing to send) would not have used one.
    let g = a.open(p("u"), OpenOptions::create_new()).await.unwrap();
    g.write_at(0, Bytes::from_static(b"fine")).await.unwrap();
    g.fsync().await.unwrap();
    g.close().await.unwrap();
    a.rename(p("u"), p("doc2")).await.unwrap();
    assert_eq!(nfs.publications().1.len(), 1);
}
