//! A partition's files on the volume (segments, their indexes, manifests,
//! epoch claims) as a new leader opens and reads them, and record sets a
//! producer appends.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use vfs::durable::{ClaimToken, seal};
use vfs::{MemVfs, OpenOptions, Vfs};

use crate::log::fence::{EpochClaims, LeadershipFence};
use crate::log::{LogConfig, PartitionLog, batch, topic};

/// Small segments and a dense index, so the base volume has sealed
/// segments with indexes and an active one.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 300,
        index_interval_bytes: 64,
        checkpoint_bytes: 256,
        checkpoint_interval: std::time::Duration::from_secs(3600),
        ..LogConfig::default()
    }
}

struct Base {
    vfs: MemVfs,
    topic: String,
    files: Vec<String>,
}

thread_local! {
    static BASE: Base = super::block_on(base());
}

async fn base() -> Base {
    let vfs = MemVfs::new();
    let built = async {
        crate::node::prepare_volume(&vfs).await?;
        let meta = topic::create_topic(&vfs, "t", 1)
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let shared: Arc<dyn Vfs> = Arc::new(vfs.clone());
        let log = lead(&shared, &meta.id, 1).await?;
        for i in 0..6i32 {
            let plain = batch::build((-1, -1, -1), 1000 + i64::from(i), &[b"a value", b"another"]);
            log.append(plain).await?;
            let idempotent = batch::build((7, 0, i * 2), 2000 + i64::from(i), &[b"k", b"v"]);
            log.append(idempotent).await?;
        }
        log.close().await?;
        let mut files: Vec<String> = vfs
            .read_dir(&dir(&meta.id))
            .await?
            .into_iter()
            .map(|e| e.name)
            .collect();
        files.sort();
        Ok::<_, crate::log::LogError>(Base {
            vfs,
            topic: meta.id,
            files,
        })
    };
    match built.await {
        Ok(b) => b,
        Err(e) => panic!("cannot prepare the fuzz partition: {e}"),
    }
}

fn dir(topic_id: &str) -> PathBuf {
    crate::layout::partition_dir(topic_id, 0)
}

async fn lead(
    vfs: &Arc<dyn Vfs>,
    topic_id: &str,
    epoch: u32,
) -> Result<PartitionLog, crate::log::LogError> {
    let fence: Arc<dyn LeadershipFence> = Arc::new(EpochClaims::new(vfs.clone(), dir(topic_id)));
    let token = ClaimToken::fresh(&format!("leader-{epoch}"));
    PartitionLog::open_as_leader(
        vfs.clone(),
        dir(topic_id),
        (topic_id, 0),
        epoch,
        &token,
        fence,
        config(),
    )
    .await
}

/// What the first byte (modulo 8) does to the base partition before a
/// new leader opens it: 0 appends the rest as up to eight record sets
/// (CRCs fixed when bit 3 is set); 1-7 damage one file.
#[derive(Clone, Copy)]
enum Case {
    Produce { fix_crcs: bool },
    ReplaceSegment,
    ExtendSegment,
    ReplaceIndex,
    ReplaceTimeIndex,
    ReplaceManifest,
    SealedManifest,
    ReplaceEpochClaim,
}

impl Case {
    fn of(b: u8) -> Self {
        match b % 8 {
            0 => Self::Produce {
                fix_crcs: b & 8 != 0,
            },
            1 => Self::ReplaceSegment,
            2 => Self::ExtendSegment,
            3 => Self::ReplaceIndex,
            4 => Self::ReplaceTimeIndex,
            5 => Self::ReplaceManifest,
            6 => Self::SealedManifest,
            _ => Self::ReplaceEpochClaim,
        }
    }
}

pub fn partition_files(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let (vfs, topic_id, files) =
        BASE.with(|b| (b.vfs.snapshot(), b.topic.clone(), b.files.clone()));
    let vfs: Arc<dyn Vfs> = Arc::new(vfs);
    super::block_on(async {
        let dir = dir(&topic_id);
        let named = |ext: &str| files.iter().find(|f| f.ends_with(ext)).map(|f| dir.join(f));
        let case = Case::of(first);
        let damaged = match case {
            Case::Produce { .. } => Ok(()),
            Case::ReplaceSegment => replace(&vfs, named(".log"), rest).await,
            Case::ExtendSegment => extend(&vfs, named(".log"), rest).await,
            Case::ReplaceIndex => replace(&vfs, named(".index"), rest).await,
            Case::ReplaceTimeIndex => replace(&vfs, named(".timeindex"), rest).await,
            Case::ReplaceManifest => replace(&vfs, newest_manifest(&files, &dir), rest).await,
            Case::SealedManifest => {
                let sealed = seal("partition-manifest", rest);
                replace(&vfs, newest_manifest(&files, &dir), &sealed).await
            }
            Case::ReplaceEpochClaim => {
                replace(
                    &vfs,
                    named("epoch-0000000001").or(Some(dir.join("epoch-0000000001"))),
                    rest,
                )
                .await
            }
        };
        if let Err(e) = damaged {
            panic!("cannot damage the fuzz partition: {e}");
        }
        let Ok(log) = lead(&vfs, &topic_id, 2).await else {
            return;
        };
        if let Case::Produce { fix_crcs } = case {
            for set in super::chunks(rest, 8) {
                let mut set = set.to_vec();
                if fix_crcs {
                    super::batches::fix_crcs(&mut set);
                }
                let _ = log.append(Bytes::from(set)).await;
            }
        } else {
            let _ = log
                .append(batch::build((-1, -1, -1), 5000, &[b"after"]))
                .await;
        }
        exercise(&log).await;
        if log.close().await.is_err() {
            return;
        }
        if let Ok(log) = lead(&vfs, &topic_id, 3).await {
            exercise(&log).await;
            let _ = log.close().await;
        }
    });
}

fn newest_manifest(files: &[String], dir: &Path) -> Option<PathBuf> {
    files
        .iter()
        .filter(|f| f.starts_with(crate::layout::MANIFEST_PREFIX))
        .max()
        .map(|f| dir.join(f))
}

async fn replace(vfs: &Arc<dyn Vfs>, path: Option<PathBuf>, bytes: &[u8]) -> std::io::Result<()> {
    let Some(path) = path else { return Ok(()) };
    let file = vfs
        .open(
            &path,
            OpenOptions::write()
                .with_create(vfs::Create::IfMissing)
                .with_truncate(),
        )
        .await?;
    file.write_at(0, Bytes::copy_from_slice(bytes)).await?;
    file.close().await
}

async fn extend(vfs: &Arc<dyn Vfs>, path: Option<PathBuf>, bytes: &[u8]) -> std::io::Result<()> {
    let Some(path) = path else { return Ok(()) };
    let file = vfs.open(&path, OpenOptions::write()).await?;
    let at = file.stat().await?.len;
    file.write_at(at, Bytes::copy_from_slice(bytes)).await?;
    file.close().await
}

/// Everything a client can ask of a partition: a fetch from the start to
/// the end, read_committed, offsets by time, the end of each epoch.
async fn exercise(log: &PartitionLog) {
    let mut offset = log.log_start_offset();
    for _ in 0..256 {
        let Ok(r) = log.read(offset, 1 << 16).await else {
            break;
        };
        let next = batch::split(&r.records)
            .ok()
            .and_then(|h| h.last().map(batch::BatchHeader::next_offset));
        match next {
            Some(n) if n > offset => offset = n,
            _ => break,
        }
    }
    let _ = log.read_committed(log.log_start_offset(), 1 << 16).await;
    for ts in [-2, -1, 0, 1003, 2005, i64::MAX] {
        let _ = log.offset_for_timestamp(ts).await;
    }
    let _ = log.offset_of_max_timestamp().await;
    for epoch in [-1, 0, 1, 2, 3, i32::MAX] {
        let _ = log.epoch_end_offset(epoch);
    }
    let _ = log.producers().await;
}

/// The base partition's files and their contents, for the seed corpus.
#[cfg(test)]
pub(super) fn base_files() -> Vec<(String, Vec<u8>)> {
    let (vfs, topic_id, files) = BASE.with(|b| (b.vfs.clone(), b.topic.clone(), b.files.clone()));
    super::block_on(async {
        let mut out = Vec::new();
        for f in files {
            if let Ok(bytes) = vfs::read_file(&vfs, &dir(&topic_id).join(&f)).await {
                out.push((f, bytes));
            }
        }
        out
    })
}
