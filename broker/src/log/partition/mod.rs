//! A partition's log, as its leader for one epoch sees it.
//!
//! Takeover order (each step visible before the next starts):
//! 1. claim `epoch-<E>`: the takeover is now visible, and the previous
//!    leader is fenced at its next confirmation;
//! 2. walk down from `E-1` to the newest epoch that wrote a manifest, giving
//!    every epoch on the way a claim file (so its leader is fenced too);
//! 3. scan that manifest's active segment from its checkpoint to the last
//!    valid batch (a torn tail or a zombie's late bytes after it are cut
//!    off, and a line says so), and seal it at the checkpoint;
//! 4. create this epoch's own segment, copy the scanned tail into it and
//!    fsync it (the tail may have reached the server without ever being
//!    committed, and a server restart would drop it), then write
//!    `manifest-<E>` naming it;
//! 5. producer state = checkpoint + the batches of the adopted tail.
//!
//! Appends share one write and one fsync per flush cycle, and are
//! acknowledged only once a leadership check made after that fsync says this
//! epoch is still current.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use vfs::durable::{ClaimToken, atomic_replace};
use vfs::{OpenOptions, Vfs, VfsFile};

use super::batch::{self, BatchError};
use super::epochs;
use super::fence::{self, LeadershipFence};
use super::manifest::{Manifest, SegmentId, SegmentMeta, SegmentState, parse_segment_file};
use super::producers::{AbortedTxn, ProducerState, Sequence};
use super::scan::{SegmentIndex, first_batch_reaching, scan};

mod append;
mod compaction;
mod give_up;
mod read;
#[cfg(madsim)]
#[path = "../../historical/resurrected_partition.rs"]
mod resurrected_partition;
mod retention;
mod takeover;
mod timestamps;
#[cfg(madsim)]
#[path = "../../historical/zombie_append.rs"]
mod zombie_append;

pub use compaction::{CleanerLimits, Compacted, CompactionConfig};
pub use give_up::GivenUp;

#[derive(Clone, Debug)]
pub struct LogConfig {
    /// Roll to a new segment once the active one reaches this size.
    pub segment_bytes: u64,
    /// Roll a non-empty active segment once it is this old (checked by
    /// [`PartitionLog::roll_if_due`]).
    pub segment_ms: Option<i64>,
    /// One sparse index entry per this many bytes of log.
    pub index_interval_bytes: u64,
    /// Rewrite the manifest's checkpoint after this many appended bytes, so
    /// a takeover never scans more than this (plus one flush cycle).
    pub checkpoint_bytes: u64,
    /// ... and at most this long after the first acknowledged byte past the
    /// checkpoint. The checkpoint is what the volume knows was acknowledged:
    /// below it a takeover never cuts the log, so damage there is refused
    /// to readers (CORRUPT_MESSAGE), never truncated away and its offsets
    /// never handed out again. Above it a takeover cuts at the first bad
    /// batch, as it must for a torn tail: the acknowledged records of this
    /// window are the ones damage could take silently.
    pub checkpoint_interval: std::time::Duration,
    /// Delete sealed segments whose newest record is older than this.
    pub retention_ms: Option<i64>,
    /// Delete the oldest sealed segments while the log is larger than this.
    pub retention_bytes: Option<u64>,
    /// Keep the newest record per key (`cleanup.policy` with `compact`).
    pub compaction: Option<CompactionConfig>,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 256 << 20,
            segment_ms: None,
            index_interval_bytes: 4096,
            checkpoint_bytes: 16 << 20,
            checkpoint_interval: std::time::Duration::from_secs(1),
            retention_ms: Some(7 * 24 * 3600 * 1000),
            retention_bytes: None,
            compaction: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("invalid record batch: {0}")]
    Corrupt(#[from] BatchError),
    /// A stored batch that fails its checks (CRC, header, size) where the
    /// manifest vouches for whole batches: damage to the one copy.
    #[error("damaged batch in {segment} at position {position}: {why}")]
    Damaged {
        segment: String,
        position: u64,
        why: String,
    },
    #[error("not the leader any more: epoch {0} was superseded")]
    Fenced(u32),
    /// The partition's files on the volume cannot be used as they are (an
    /// unreadable manifest, a segment the manifest names that is gone): a
    /// new epoch would find the same, so the partition is held offline
    /// until an operator restores or repairs them (`kaas fsck`).
    #[error("the partition's files are damaged: {0}")]
    Unusable(String),
    #[error("offset {offset} is out of range [{start}, {end}]")]
    OutOfRange { offset: i64, start: i64, end: i64 },
    #[error("the log stopped after a storage error: {0}")]
    Failed(String),
    /// Not written for want of space; nothing changed, and a later append
    /// succeeds once space is back.
    #[error("the volume is full: {0}")]
    VolumeFull(String),
    #[error("storage: {0}")]
    Io(#[from] io::Error),
    #[error("the producer's sequence number is out of order")]
    OutOfOrderSequence,
    #[error("the producer's epoch is older than one this partition has seen")]
    InvalidProducerEpoch,
    #[error("the partition has not joined the producer's transaction")]
    NotInTransaction,
    #[error("a marker from an older transaction coordinator than the last one")]
    ZombieCoordinator,
    #[error(
        "the partition's writer was busy for {0:?} (a flush cycle that does not end); left for the next round"
    )]
    Busy(std::time::Duration),
}

/// Whether `e` says the volume has no room (ENOSPC, or EDQUOT on a quota):
/// a write that fails so changes nothing the writer relies on, and is
/// tried again once space is back.
pub fn is_full(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// How long a chore (retention, a roll by age, a compaction pass) waits
/// for a partition's writer before it leaves that partition to its next
/// round: a flush cycle that never ends (a volume call that hangs) must not
/// hold up the chores of every other partition behind it.
pub const CHORE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Offsets an append received: the first and last offset of each batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: i64,
    pub last_offset: i64,
}

/// A record found by its timestamp, with the leader epoch of its batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampOffset {
    pub offset: i64,
    pub timestamp: i64,
    pub leader_epoch: i32,
}

/// Batches read from the log, whole.
#[derive(Clone, Debug)]
pub struct ReadResult {
    pub records: Bytes,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// For a read_committed read: the aborted transactions overlapping it.
    pub aborted: Vec<AbortedTxn>,
}

struct Pending {
    id: u64,
    records: Bytes,
    headers: Vec<batch::BatchHeader>,
    reply: tokio::sync::oneshot::Sender<Reply>,
}

/// What a queued append is answered once its flush cycle ends.
type Reply = Result<Appended, Refusal>;

/// Why a queued append was not acknowledged.
#[derive(Clone, Debug)]
enum Refusal {
    Fenced,
    Failed(String),
    Full(String),
    OutOfOrder,
    StaleEpoch,
    NotInTransaction,
    ZombieCoordinator,
}

/// What the flusher owns: the active segment and the log's durable end.
struct Writer {
    file: Box<dyn VfsFile>,
    position: u64,
    next_offset: i64,
    max_timestamp: i64,
    /// Shared with the view, so readers of the active segment see entries
    /// as they are added without copying the index.
    index: SharedIndex,
    since_checkpoint: u64,
    /// When the first byte past the checkpoint was acknowledged.
    unchecked_since: Option<tokio::time::Instant>,
    /// When a roll-by-age check first saw the active segment non-empty.
    written_since: Option<i64>,
    /// A roll created its segment and then failed to write the manifest
    /// for want of space: the next roll reuses that (unnamed) file.
    roll_put_off: bool,
    producers: ProducerState,
    manifest: Manifest,
    failed: Option<String>,
}

/// What readers need, updated after each acknowledged flush.
struct View {
    segments: Vec<SegmentMeta>,
    indexes: BTreeMap<SegmentId, SharedIndex>,
    log_start_offset: i64,
    high_watermark: i64,
    /// The first offset of the oldest open transaction, else the high
    /// watermark: read_committed readers stop here.
    last_stable: i64,
    aborted: Arc<Vec<AbortedTxn>>,
    /// Producer id -> epoch, of the producers with a transaction open here
    /// as of the last acknowledged append: what a produce checks before it
    /// queues a batch, without waiting for the writer's flush cycle.
    open_txns: BTreeMap<i64, i16>,
    /// Durable, acknowledged end of the active segment.
    active_end: u64,
    /// Largest batch max timestamp in the active segment up to `active_end`.
    active_max_timestamp: i64,
    handles: BTreeMap<SegmentId, Arc<dyn VfsFile>>,
    /// Files whose deletion failed; re-driven by the next retention pass.
    pending_deletes: Vec<PathBuf>,
}

pub struct PartitionLog {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    epoch: u32,
    config: Mutex<LogConfig>,
    fence: Arc<dyn LeadershipFence>,
    queue: Mutex<Vec<Pending>>,
    next_id: std::sync::atomic::AtomicU64,
    /// Set once the log stopped (fenced or failed): it acknowledges nothing
    /// more in this epoch.
    stopped: std::sync::atomic::AtomicBool,
    /// The last flush cycle failed because the volume is full (ENOSPC,
    /// EDQUOT): cleared by the next one that succeeds.
    full: std::sync::atomic::AtomicBool,
    writer: tokio::sync::Mutex<Writer>,
    view: Mutex<View>,
    /// Producer id -> epoch whose coordinator confirmed that this partition
    /// joined its transaction (KIP-890): the next transactional batch may
    /// open a transaction here. Consumed by that batch or a marker.
    verified: Mutex<BTreeMap<i64, i16>>,
    /// When the flush cycle under way began (a cycle that never ends is a
    /// volume call that hangs: the shutdown names it).
    flushing_since: Mutex<Option<tokio::time::Instant>>,
    /// One compaction pass at a time; the number of the next (never
    /// reused in this epoch, so a failed pass's files never share a name
    /// with a later pass's).
    cleaning: tokio::sync::Mutex<u32>,
}

type SharedIndex = Arc<Mutex<SegmentIndex>>;

/// The segment a new leader appends to, as its takeover left it.
struct ActiveSegment {
    file: Box<dyn VfsFile>,
    /// The segment, as the view keys it.
    key: SegmentId,
    index: SegmentIndex,
    position: u64,
    next_offset: i64,
    max_timestamp: i64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PartitionLog {
    /// The log of a takeover, from what it found and the segment it writes.
    fn assemble(
        (vfs, dir, epoch, fence, config): (
            Arc<dyn Vfs>,
            PathBuf,
            u32,
            Arc<dyn LeadershipFence>,
            LogConfig,
        ),
        manifest: Manifest,
        producers: ProducerState,
        active: ActiveSegment,
    ) -> Self {
        let index: SharedIndex = Arc::new(Mutex::new(active.index));
        Self {
            view: Mutex::new(View {
                segments: manifest.segments.clone(),
                indexes: BTreeMap::from([(active.key, index.clone())]),
                log_start_offset: manifest.log_start_offset,
                high_watermark: active.next_offset,
                last_stable: producers.last_stable(active.next_offset),
                aborted: Arc::new(producers.aborted.clone()),
                open_txns: producers.open_transactions(),
                active_end: active.position,
                active_max_timestamp: active.max_timestamp,
                handles: BTreeMap::new(),
                pending_deletes: Vec::new(),
            }),
            writer: tokio::sync::Mutex::new(Writer {
                file: active.file,
                position: active.position,
                next_offset: active.next_offset,
                max_timestamp: active.max_timestamp,
                index,
                since_checkpoint: 0,
                unchecked_since: None,
                written_since: None,
                roll_put_off: false,
                producers,
                manifest,
                failed: None,
            }),
            queue: Mutex::new(Vec::new()),
            verified: Mutex::new(BTreeMap::new()),
            cleaning: tokio::sync::Mutex::new(1),
            flushing_since: Mutex::new(None),
            next_id: std::sync::atomic::AtomicU64::new(0),
            stopped: std::sync::atomic::AtomicBool::new(false),
            full: std::sync::atomic::AtomicBool::new(false),
            vfs,
            dir,
            epoch,
            config: Mutex::new(config),
            fence,
        }
    }

    /// The writer, for a chore: waited for [`CHORE_WAIT`] at most.
    async fn writer_for_chore(&self) -> Result<tokio::sync::MutexGuard<'_, Writer>, LogError> {
        tokio::time::timeout(CHORE_WAIT, self.writer.lock())
            .await
            .map_err(|_| LogError::Busy(CHORE_WAIT))
    }

    /// Whether the topic compacts (`cleanup.policy` with `compact`).
    pub fn compacts(&self) -> bool {
        lock(&self.config).compaction.is_some()
    }

    fn cfg(&self) -> LogConfig {
        lock(&self.config).clone()
    }

    /// Applies a topic's current segment, retention and compaction
    /// settings (they take effect at the next roll, retention pass and
    /// compaction pass).
    pub fn set_limits(&self, f: impl FnOnce(&mut LogConfig)) {
        f(&mut lock(&self.config));
    }

    /// Stops the log for the rest of this epoch: every later request is
    /// refused with `why`, and the broker asks for a new epoch.
    fn stop(&self, w: &mut Writer, why: String) {
        w.failed = Some(why);
        self.stopped
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether this log's last flush cycle failed for want of space.
    pub fn volume_full(&self) -> bool {
        self.full.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the log stopped in this epoch (fenced, or a flush failed and
    /// the file's tail is unknown); a new epoch is needed to go on.
    pub fn has_stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn high_watermark(&self) -> i64 {
        lock(&self.view).high_watermark
    }

    pub fn log_start_offset(&self) -> i64 {
        lock(&self.view).log_start_offset
    }

    /// Bytes of the log's segments: the sealed ones whole, the active one
    /// up to its acknowledged end (DescribeLogDirs' partition size).
    pub fn size_bytes(&self) -> u64 {
        let view = lock(&self.view);
        let sealed: u64 = view
            .segments
            .iter()
            .filter_map(|s| match s.state {
                SegmentState::Sealed { end_position, .. } => Some(end_position),
                SegmentState::Active { .. } => None,
            })
            .sum();
        sealed + view.active_end
    }

    /// The last stable offset: read_committed readers see up to here.
    pub fn last_stable_offset(&self) -> i64 {
        lock(&self.view).last_stable
    }

    /// Records that the coordinator confirmed that this partition joined
    /// the transaction of `(producer_id, epoch)`: its first batch here may
    /// open the transaction.
    pub fn verified(&self, producer_id: i64, epoch: i16) {
        lock(&self.verified).insert(producer_id, epoch);
    }

    /// Whether the producer has a transaction open here (its next batches
    /// need no verification), as of the last acknowledged append. Never
    /// waits for the writer: a produce asks this before it queues its
    /// batch, and a flush cycle under way (or a stuck one) must not hold
    /// the request up. A batch queued on a stale `false` costs a needless
    /// verification; a stale `true` is caught by the flush's own check.
    pub fn in_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        lock(&self.view).open_txns.get(&producer_id) == Some(&epoch)
    }

    /// Producer state as of the last acknowledged append.
    /// Whether this log would take `h` now without a gap before it: the
    /// next batch of its producer, a duplicate of a recent one, or one of
    /// a producer or epoch it has no sequence for.
    pub async fn takes_in_order(&self, h: &batch::BatchHeader) -> bool {
        let w = self.writer.lock().await;
        !matches!(w.producers.check(h, None), Sequence::OutOfOrder)
    }

    pub async fn producers(&self) -> ProducerState {
        self.writer.lock().await.producers.clone()
    }

    /// Closes every handle this log holds (on step-down or shutdown).
    /// Records how far the log was acknowledged, if it moved since the
    /// last checkpoint (a broker stopping while it still leads: nobody to
    /// hand the partition to, or the hand-off's time ran out). Waits
    /// [`CHORE_WAIT`] at most for a flush cycle under way.
    pub async fn checkpoint(&self) -> Result<(), LogError> {
        let mut w = self.writer_for_chore().await?;
        if w.failed.is_none() && w.since_checkpoint > 0 {
            append::write_checkpoint(&self.vfs, &self.dir, &mut w).await?;
        }
        Ok(())
    }

    /// Lets go of the partition. A log that has not stopped records how
    /// far it was acknowledged first (its checkpoint), so that the next
    /// leader finds a clean shutdown's whole log vouched for: a manifest
    /// of this epoch, which a successor that took over already read (and
    /// then never reads again) or reads next.
    pub async fn close(self) -> io::Result<()> {
        let handles: Vec<_> = std::mem::take(&mut lock(&self.view).handles)
            .into_values()
            .collect();
        drop(handles);
        let mut w = self.writer.into_inner();
        if w.failed.is_none() && w.since_checkpoint > 0 {
            match append::write_checkpoint(&self.vfs, &self.dir, &mut w).await {
                Ok(()) => {}
                // A deleted topic: nothing left to vouch for.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                // The next leader scans the tail from the older checkpoint.
                Err(e) => tracing::warn!(
                    dir = %self.dir.display(),
                    error = %e,
                    "checkpoint at close not written"
                ),
            }
        }
        w.file.close().await
    }
}

/// Collects whole batches from `from` (a batch boundary at or before the
/// one holding `offset`) up to position `limit` and offset `upto` (the
/// last stable offset for read_committed), at most `max_bytes` unless the
/// first batch alone is larger. Also says whether the file ended (or held
/// no batch) before `limit` where a batch was due: through a stale view,
/// or a segment shorter than its manifest says. Every batch returned
/// passes its CRC; the first that does not (or whose size runs past where
/// the manifest says whole batches end) ends the read, and is
/// `Err(position, why)` if it would have been the first returned.
async fn collect(
    file: &dyn VfsFile,
    (mut pos, mut expected): (u64, Expected),
    (limit, upto): (u64, i64),
    offset: i64,
    max_bytes: usize,
) -> io::Result<Result<(Bytes, bool), (u64, String)>> {
    // Enough for the batches asked for and those before `offset` since the
    // index entry `pos` came from, in one read; bounded, as a fetch may
    // allow tens of megabytes.
    const MIN_WINDOW: usize = 64 << 10;
    const MAX_WINDOW: usize = 8 << 20;
    let want = max_bytes.clamp(MIN_WINDOW, MAX_WINDOW);
    let mut window = crate::log::scan::Window::new(file, want, limit);
    let mut out = BytesMut::new();
    while pos + batch::LOG_OVERHEAD as u64 <= limit {
        let head = window.get(pos, batch::HEADER_LEN).await?;
        let (Some(size), Some(base)) = (
            batch::peek_size(&head),
            head.get(0..8)
                .map(|b| i64::from_be_bytes(b.try_into().unwrap_or_default())),
        ) else {
            if head.len() == batch::HEADER_LEN {
                // A whole header whose size is negative: not a short read.
                return Ok(damaged(out, pos, "negative batch size".into()));
            }
            return Ok(Ok((out.freeze(), true)));
        };
        let last_delta = head
            .get(23..27)
            .map_or(0, |b| i32::from_be_bytes(b.try_into().unwrap_or_default()));
        if pos + size as u64 > limit {
            // Below `limit` batches are whole: a size past it is damage.
            return Ok(damaged(
                out,
                pos,
                format!("batch size {size} runs past the segment's end {limit}"),
            ));
        }
        if let Some(why) = expected.check(base, last_delta) {
            return Ok(damaged(out, pos, why));
        }
        if base >= upto {
            break;
        }
        if base + i64::from(last_delta) < offset {
            pos += size as u64;
            continue;
        }
        if !out.is_empty() && out.len() + size > max_bytes {
            break;
        }
        let data = window.get(pos, size).await?;
        if data.len() < size {
            return Ok(Ok((out.freeze(), true)));
        }
        if let Err(e) = batch::parse(&data) {
            return Ok(damaged(out, pos, e.to_string()));
        }
        out.extend_from_slice(&data);
        pos += size as u64;
        if out.len() >= max_bytes {
            break;
        }
    }
    Ok(Ok((out.freeze(), false)))
}

/// The base offset the next batch of a segment must have: `offset`
/// itself, or at least `offset` in a compacted segment.
#[derive(Clone, Copy, Debug)]
pub(super) struct Expected {
    pub offset: i64,
    pub exact: bool,
}

impl Expected {
    /// Why a batch with these header fields cannot be the next one, if it
    /// cannot; else moves past it.
    fn check(&mut self, base: i64, last_delta: i32) -> Option<String> {
        let fits = if self.exact {
            base == self.offset
        } else {
            base >= self.offset
        };
        if !fits || last_delta < 0 {
            return Some(format!(
                "batch with base offset {base} (last delta {last_delta}) where offset {} \
                 comes next",
                self.offset
            ));
        }
        self.offset = base + i64::from(last_delta) + 1;
        None
    }
}

/// What `collect` answers at a damaged batch: the good batches before it,
/// if any (the next read starts at the damaged one), else the damage.
fn damaged(out: BytesMut, pos: u64, why: String) -> Result<(Bytes, bool), (u64, String)> {
    if out.is_empty() {
        Err((pos, why))
    } else {
        Ok((out.freeze(), false))
    }
}
