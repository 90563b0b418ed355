//! The Vfs contract against the in-memory volume (both builds).

use std::sync::Arc;

use vfs::{MemVfs, Vfs};

fn mem() -> (Arc<dyn Vfs>, ()) {
    (Arc::new(MemVfs::new()), ())
}

vfs::vfs_contract_tests!(
    #[tokio::test]
    make = mem()
);

#[tokio::test]
async fn a_full_volume_answers_storage_full() {
    let vfs = MemVfs::with_capacity(10);
    let f = vfs
        .open(std::path::Path::new("f"), vfs::OpenOptions::create_new())
        .await
        .unwrap();
    f.write_at(0, bytes::Bytes::from_static(b"0123456789"))
        .await
        .unwrap();
    let err = f
        .write_at(10, bytes::Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::StorageFull);
    // Overwriting in place needs no new space.
    f.write_at(0, bytes::Bytes::from_static(b"abc"))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_unlinked_open_file_stays_readable_until_closed() {
    let vfs = MemVfs::new();
    let path = std::path::Path::new("f");
    let f = vfs
        .open(path, vfs::OpenOptions::create_new())
        .await
        .unwrap();
    f.write_at(0, bytes::Bytes::from_static(b"data"))
        .await
        .unwrap();
    vfs.unlink(path).await.unwrap();
    assert_eq!(&f.read_at(0, 10).await.unwrap()[..], b"data");
    f.close().await.unwrap();
}
