//! The Vfs contract against the production backend on a local temp dir.
#![cfg(not(madsim))]
// It sets up and inspects the real directory under PosixVfs with std::fs.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::Arc;

use vfs::{PosixVfs, Vfs};

fn posix() -> (Arc<dyn Vfs>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let vfs = PosixVfs::open_volume(dir.path()).expect("open volume");
    (Arc::new(vfs), dir)
}

vfs::vfs_contract_tests!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    make = posix()
);

#[test]
fn a_missing_data_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = PosixVfs::open_volume(&missing).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("data directory"), "{err}");
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn a_file_as_data_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let err = PosixVfs::open_volume(&file).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotADirectory);
    assert!(err.to_string().contains("is not a directory"), "{err}");
}

#[tokio::test]
async fn symlinks_are_not_followed_out_of_the_volume() {
    let (vfs, dir) = posix();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"s").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
    let err = vfs
        .open(std::path::Path::new("link"), vfs::OpenOptions::read())
        .await
        .err()
        .expect("a symlink must not open");
    assert!(err.to_string().contains("link"), "{err}");
}

#[tokio::test]
async fn space_reports_the_filesystem_of_the_data_directory() {
    let (vfs, _dir) = posix();
    let space = vfs.space().await.unwrap().expect("POSIX knows its space");
    assert!(space.total_bytes > 0, "{space:?}");
    assert!(space.available_bytes <= space.total_bytes, "{space:?}");
    assert_eq!(vfs::MemVfs::new().space().await.unwrap(), None);
}
