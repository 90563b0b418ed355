//! The Vfs contract against one host of the model NFS with faults off.

use std::sync::Arc;

use vfs::Vfs;
use vfs::model::{ModelNfs, NfsConfig};

fn model() -> (Arc<dyn Vfs>, ModelNfs) {
    let nfs = ModelNfs::new(NfsConfig::default(), 7);
    (Arc::new(nfs.host(0)), nfs)
}

vfs::vfs_contract_tests!(
    #[tokio::test]
    make = model()
);
