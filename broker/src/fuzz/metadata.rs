//! Every metadata file on the volume, as its own reader reads it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use vfs::durable::{ClaimToken, create_slot, fill_slot, seal};
use vfs::{MemVfs, OpenOptions, Vfs};

use crate::cluster::heartbeat;
use crate::cluster::{assignment, election, identity};
use crate::groups::store;
use crate::log::manifest::{Manifest, manifest_path};
use crate::log::{names, topic, topic_config};
use crate::security::{Security, SecurityConfig};
use crate::txn_store::record::TxnRecord;
use crate::{layout, slot_files};

/// How a file is laid out: in the checksummed envelope of a kind, or in a
/// claim (envelope "claim" with the claimant's token before the payload).
enum Format {
    Envelope(&'static str),
    Claim,
}

/// The files, by the selector's low bits.
const FILES: &[(&str, Format)] = &[
    ("topic meta", Format::Envelope("topic-meta")),
    ("partition manifest", Format::Envelope("partition-manifest")),
    ("broker heartbeat", Format::Envelope("broker-heartbeat")),
    ("cluster id", Format::Envelope("cluster-id")),
    ("assignment", Format::Envelope("assignment")),
    ("group", Format::Envelope("group")),
    ("transaction", Format::Envelope("transaction")),
    ("topic config", Format::Claim),
    ("credentials", Format::Claim),
    ("acls", Format::Claim),
    ("controller claim", Format::Claim),
    ("topic name claim", Format::Claim),
    ("producer id block", Format::Claim),
    ("preferred leaders", Format::Claim),
    ("client quotas", Format::Claim),
];

struct Base {
    vfs: MemVfs,
    topic: String,
}

thread_local! {
    static BASE: Base = super::block_on(base());
}

async fn base() -> Base {
    let vfs = MemVfs::new();
    let prepared = async {
        crate::node::prepare_volume(&vfs).await?;
        vfs.mkdir(Path::new(layout::SECURITY_DIR)).await?;
        vfs.mkdir(&layout::group_slot(0)).await?;
        vfs.mkdir(&identity::identity_dir()).await?;
        topic::create_topic(&vfs, "t", 1).await
    };
    match prepared.await {
        Ok(meta) => Base {
            vfs,
            topic: meta.id,
        },
        Err(e) => panic!("cannot prepare the fuzz volume: {e}"),
    }
}

fn path_of(which: usize, topic_id: &str) -> PathBuf {
    let partition = layout::partition_dir(topic_id, 0);
    match which {
        0 => layout::topic_meta(topic_id),
        1 => manifest_path(&partition, 5),
        2 => layout::heartbeat(7),
        3 => identity::identity_dir().join("id"),
        4 => layout::assignment(3),
        5 => store::path(0, "g", 2),
        6 => slot_files::path::<TxnRecord>(0, "tx", 2),
        7 => layout::topic_config(topic_id, 1),
        8 => Path::new(layout::SECURITY_DIR).join("credentials-000000000001"),
        9 => Path::new(layout::SECURITY_DIR).join("acls-000000000001"),
        10 => election::claim_path(2),
        11 => layout::name_claim("n", 1),
        12 => layout::producer_block(0),
        13 => Path::new(layout::CLUSTER_DIR).join("preferred-leaders-000000000001"),
        _ => Path::new(layout::CLUSTER_DIR).join("client-quotas-000000000001"),
    }
}

/// The first byte picks the file (modulo the number of kinds) and whether
/// the rest is the whole file (bit 7 clear: torn, foreign or flipped
/// files) or its payload, sealed as the broker would (bit 7 set: reaches
/// the JSON and what reads it).
pub fn metadata_file(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let which = usize::from(selector & 0x7f) % FILES.len();
    let sealed = selector & 0x80 != 0;
    let (vfs, topic_id) = BASE.with(|b| (b.vfs.snapshot(), b.topic.clone()));
    let vfs: Arc<dyn Vfs> = Arc::new(vfs);
    super::block_on(async {
        let path = path_of(which, &topic_id);
        let written = match (&FILES[which].1, sealed) {
            (_, false) => write(vfs.as_ref(), &path, rest).await,
            (Format::Envelope(kind), true) => write(vfs.as_ref(), &path, &seal(kind, rest)).await,
            (Format::Claim, true) => claim(vfs.as_ref(), &path, rest).await,
        };
        if let Err(e) = written {
            panic!("cannot write {} for the fuzz case: {e}", path.display());
        }
        read(which, vfs, &topic_id).await;
    });
}

async fn write(vfs: &dyn Vfs, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let file = vfs
        .open(
            path,
            OpenOptions::write()
                .with_create(vfs::Create::IfMissing)
                .with_truncate(),
        )
        .await?;
    file.write_at(0, bytes.to_vec().into()).await?;
    file.close().await
}

async fn claim(vfs: &dyn Vfs, path: &Path, payload: &[u8]) -> std::io::Result<()> {
    match create_slot(vfs, path).await? {
        Some(file) => fill_slot(file, &ClaimToken::fresh("fuzz"), payload).await,
        None => Ok(()),
    }
}

/// Reads the file the way the broker does; errors are the expected
/// answer to most inputs, only a panic or a hang is a finding.
async fn read(which: usize, vfs: Arc<dyn Vfs>, topic_id: &str) {
    let v = vfs.as_ref();
    let me = ClaimToken::fresh("reader");
    match which {
        0 => drop(topic::read_meta(v, topic_id).await),
        1 => drop(Manifest::read(v, &layout::partition_dir(topic_id, 0), 5).await),
        2 => drop(heartbeat::read(v, 7).await),
        3 => drop(identity::read(v).await),
        4 => drop(assignment::read(v, 3).await),
        5 => {
            drop(store::read_at(v, &store::path(0, "g", 2)).await);
            drop(store::load(v, 0, "g", 9).await);
        }
        6 => drop(slot_files::load::<TxnRecord>(v, 0, "tx", 9).await),
        7 => drop(topic_config::read(v, topic_id).await),
        8 | 9 => {
            let security = Security::new(vfs.clone(), SecurityConfig::default());
            drop(security.refresh_credentials().await);
            drop(security.refresh_acls().await);
        }
        10 => drop(election::holder(v, 2, &me).await),
        11 => drop(names::holder(v, "n").await),
        12 => drop(
            crate::producer_ids::ProducerIds::new(vfs.clone(), 1, 1000)
                .allocate()
                .await,
        ),
        13 => drop(crate::cluster::preferred::reader().refresh(v).await),
        _ => {
            let quotas = crate::quota::Quotas::new(vfs.clone());
            if quotas.refresh().await.is_ok() {
                // What every request of a throttled client asks of it.
                let (_, doc) = quotas.applied();
                for kind in crate::quota::Kind::ALL {
                    drop(doc.resolve(kind, "u", "c"));
                }
            }
        }
    }
}
