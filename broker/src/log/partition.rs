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
use super::manifest::{Manifest, SegmentMeta, SegmentState, parse_segment_file, segment_file};
use super::producers::{ProducerState, Sequence};
use super::scan::{SegmentIndex, first_batch_reaching, scan};

#[derive(Clone, Debug)]
pub struct LogConfig {
    /// Roll to a new segment once the active one reaches this size.
    pub segment_bytes: u64,
    /// One sparse index entry per this many bytes of log.
    pub index_interval_bytes: u64,
    /// Rewrite the manifest's checkpoint after this many appended bytes, so
    /// a takeover never scans more than this (plus one flush cycle).
    pub checkpoint_bytes: u64,
    /// Delete sealed segments whose newest record is older than this.
    pub retention_ms: Option<i64>,
    /// Delete the oldest sealed segments while the log is larger than this.
    pub retention_bytes: Option<u64>,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 256 << 20,
            index_interval_bytes: 4096,
            checkpoint_bytes: 16 << 20,
            retention_ms: Some(7 * 24 * 3600 * 1000),
            retention_bytes: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("invalid record batch: {0}")]
    Corrupt(#[from] BatchError),
    #[error("not the leader any more: epoch {0} was superseded")]
    Fenced(u32),
    #[error("offset {offset} is out of range [{start}, {end}]")]
    OutOfRange { offset: i64, start: i64, end: i64 },
    #[error("the log stopped after a storage error: {0}")]
    Failed(String),
    #[error("storage: {0}")]
    Io(#[from] io::Error),
    #[error("the producer's sequence number is out of order")]
    OutOfOrderSequence,
    #[error("the producer's epoch is older than one this partition has seen")]
    InvalidProducerEpoch,
}

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
    pub log_start_offset: i64,
}

struct Pending {
    id: u64,
    records: Bytes,
    headers: Vec<batch::BatchHeader>,
    reply: tokio::sync::oneshot::Sender<Result<Appended, Refusal>>,
}

/// Why a queued append was not acknowledged.
#[derive(Clone, Debug)]
enum Refusal {
    Fenced,
    Failed(String),
    OutOfOrder,
    StaleEpoch,
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
    producers: ProducerState,
    manifest: Manifest,
    failed: Option<String>,
}

/// What readers need, updated after each acknowledged flush.
struct View {
    segments: Vec<SegmentMeta>,
    indexes: BTreeMap<(i64, u32), SharedIndex>,
    log_start_offset: i64,
    high_watermark: i64,
    /// Durable, acknowledged end of the active segment.
    active_end: u64,
    /// Largest batch max timestamp in the active segment up to `active_end`.
    active_max_timestamp: i64,
    handles: BTreeMap<(i64, u32), Arc<dyn VfsFile>>,
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
    writer: tokio::sync::Mutex<Writer>,
    view: Mutex<View>,
}

type SharedIndex = Arc<Mutex<SegmentIndex>>;

/// The segment a new leader appends to, as its takeover left it.
struct ActiveSegment {
    file: Box<dyn VfsFile>,
    /// (base offset, epoch) of the segment, as the view keys it.
    key: (i64, u32),
    index: SegmentIndex,
    position: u64,
    next_offset: i64,
    max_timestamp: i64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The offset after a segment's last record, as its manifest entry says.
#[cfg(madsim)]
fn manifest_next(seg: &SegmentMeta) -> i64 {
    match seg.state {
        SegmentState::Sealed { next_offset, .. } => next_offset,
        SegmentState::Active {
            checkpoint_next_offset,
            ..
        } => checkpoint_next_offset,
    }
}

impl PartitionLog {
    /// Takes over the partition in `dir` as leader of `epoch` (see the
    /// module docs for the order). Creates nothing but this epoch's claim,
    /// fence claims of skipped epochs, this epoch's segment and manifest.
    pub async fn open_as_leader(
        vfs: Arc<dyn Vfs>,
        dir: PathBuf,
        expected: (&str, u32),
        epoch: u32,
        token: &ClaimToken,
        fence: Arc<dyn LeadershipFence>,
        config: LogConfig,
    ) -> Result<Self, LogError> {
        let v = vfs.as_ref();
        if epoch == 0 {
            return Err(
                io::Error::new(io::ErrorKind::InvalidInput, "leader epochs start at 1").into(),
            );
        }
        #[cfg(madsim)]
        let resurrect = crate::historical::on("resurrected-partition");
        #[cfg(madsim)]
        if resurrect {
            Self::make_dirs(v, &dir).await?;
        }
        fence::claim_epoch(v, &dir, epoch, token).await?;
        let mut previous = None;
        for q in (0..epoch).rev() {
            if q > 0 {
                fence::fence_epoch(v, &dir, q, token).await?;
            }
            if let Some(m) = Manifest::read(v, &dir, q).await? {
                previous = Some(m);
                break;
            }
        }
        #[cfg(madsim)]
        if resurrect && previous.is_none() {
            let m = Manifest::initial(expected.0, expected.1);
            m.write(v, &dir).await?;
            previous = Some(m);
        }
        let mut manifest = previous.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} holds no manifest: not a kaas partition", dir.display()),
            )
        })?;
        if (manifest.topic_id.as_str(), manifest.partition) != expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} belongs to topic {} partition {}, expected {} partition {}",
                    dir.display(),
                    manifest.topic_id,
                    manifest.partition,
                    expected.0,
                    expected.1
                ),
            )
            .into());
        }
        let mut producers = manifest.producers.clone();
        // The previous leader's bytes past its checkpoint may never have
        // been committed at the NFS server (written, seen by this host,
        // then dropped by a server restart), so they are not sealed in
        // place: the valid ones are copied into this epoch's segment and
        // made durable here, and the old segment is sealed at the
        // checkpoint, which only ever names committed data.
        let mut adopted = Bytes::new();
        let mut adopted_batches: Vec<(u64, batch::BatchHeader)> = Vec::new();
        let mut adopted_max_ts = -1;
        #[cfg(madsim)]
        let mut previous_checkpoint = None;
        if let Some(last) = manifest.segments.last_mut() {
            if let SegmentState::Active {
                checkpoint_position,
                checkpoint_next_offset,
                max_timestamp,
            } = last.state
            {
                let path = dir.join(last.file_name());
                let file = v.open(&path, OpenOptions::read()).await?;
                let tail = async {
                    let tail = scan(
                        file.as_ref(),
                        checkpoint_position,
                        checkpoint_next_offset,
                        None,
                    )
                    .await?;
                    let len = (tail.end_position - checkpoint_position) as usize;
                    let bytes = if len > 0 {
                        file.read_at(checkpoint_position, len).await?
                    } else {
                        Bytes::new()
                    };
                    Ok::<_, io::Error>((tail, bytes))
                }
                .await;
                let _ = file.close().await;
                let (tail, bytes) = tail?;
                if bytes.len() as u64 != tail.end_position - checkpoint_position {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("{}: the tail shrank while it was copied", path.display()),
                    )
                    .into());
                }
                if let Some(why) = &tail.cut {
                    tracing::warn!(
                        segment = %path.display(),
                        cut_at = tail.end_position,
                        ignored_bytes = tail.file_len - tail.end_position,
                        "adopting the tail up to the last valid batch: {why}"
                    );
                }
                for (pos, h) in &tail.batches {
                    producers.observe(h);
                    adopted_batches.push((pos - checkpoint_position, *h));
                }
                adopted = bytes;
                adopted_max_ts = tail.max_timestamp;
                #[cfg(madsim)]
                {
                    previous_checkpoint = Some(checkpoint_position);
                }
                last.state = SegmentState::Sealed {
                    end_position: checkpoint_position,
                    next_offset: checkpoint_next_offset,
                    max_timestamp,
                };
            }
        }
        #[cfg(madsim)]
        if let Some(at) = previous_checkpoint.filter(|_| crate::historical::on("zombie-append")) {
            return Self::append_to_previous_segment(
                vfs,
                dir,
                epoch,
                fence,
                config,
                manifest,
                producers,
                adopted_batches,
                at,
                adopted.len() as u64,
                adopted_max_ts,
            )
            .await;
        }
        let base_offset = manifest.next_offset();
        let next_offset = adopted_batches
            .last()
            .map_or(base_offset, |(_, h)| h.next_offset());
        let position = adopted.len() as u64;
        let own = SegmentMeta {
            base_offset,
            epoch,
            state: SegmentState::Active {
                checkpoint_position: position,
                checkpoint_next_offset: next_offset,
                max_timestamp: adopted_max_ts,
            },
            adopted_until: (next_offset > base_offset).then_some(next_offset),
        };
        let file = v
            .open(&dir.join(own.file_name()), OpenOptions::create_new())
            .await?;
        if !adopted.is_empty() {
            file.write_all_and_sync(0, vec![adopted]).await?;
        }
        manifest.epoch = epoch;
        manifest.producers = producers.clone();
        manifest.segments.push(own);
        manifest.write(v, &dir).await?;

        let mut own_index = SegmentIndex::new(config.index_interval_bytes);
        for (pos, h) in &adopted_batches {
            own_index.add(*pos, h);
        }
        let log = Self::assemble(
            (vfs, dir, epoch, fence, config),
            manifest,
            producers,
            ActiveSegment {
                file,
                key: (base_offset, epoch),
                index: own_index,
                position,
                next_offset,
                max_timestamp: adopted_max_ts,
            },
        );
        log.sweep_orphans().await;
        Ok(log)
    }

    /// The historical open (scenario `resurrected-partition`): "mkdir -p"
    /// the partition's directory, then open or create its files. A leader
    /// that took over a partition of a topic deleted meanwhile made the
    /// deleted topic's directory again, with an empty log in it.
    #[cfg(madsim)]
    async fn make_dirs(vfs: &dyn Vfs, dir: &Path) -> io::Result<()> {
        let mut at = PathBuf::new();
        for part in dir.components() {
            at.push(part);
            match vfs.mkdir(&at).await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The historical takeover (scenario `zombie-append`): the new leader
    /// goes on appending to the previous epoch's segment, at the end its
    /// own scan saw, instead of a segment of its own. A paused predecessor
    /// that wakes up and flushes writes into the same file at the same
    /// positions.
    #[cfg(madsim)]
    #[allow(clippy::too_many_arguments)]
    async fn append_to_previous_segment(
        vfs: Arc<dyn Vfs>,
        dir: PathBuf,
        epoch: u32,
        fence: Arc<dyn LeadershipFence>,
        config: LogConfig,
        mut manifest: Manifest,
        producers: ProducerState,
        tail: Vec<(u64, batch::BatchHeader)>,
        checkpoint: u64,
        tail_len: u64,
        max_timestamp: i64,
    ) -> Result<Self, LogError> {
        let Some(last) = manifest.segments.last_mut() else {
            return Err(io::Error::other("no segment to append to").into());
        };
        let position = checkpoint + tail_len;
        let next_offset = tail
            .last()
            .map_or(manifest_next(last), |(_, h)| h.next_offset());
        last.state = SegmentState::Active {
            checkpoint_position: position,
            checkpoint_next_offset: next_offset,
            max_timestamp,
        };
        let key = (last.base_offset, last.epoch);
        let file = vfs
            .open(&dir.join(last.file_name()), OpenOptions::write())
            .await?;
        manifest.epoch = epoch;
        manifest.producers = producers.clone();
        manifest.write(vfs.as_ref(), &dir).await?;
        let mut index = SegmentIndex::new(config.index_interval_bytes);
        for (pos, h) in &tail {
            index.add(checkpoint + pos, h);
        }
        Ok(Self::assemble(
            (vfs, dir, epoch, fence, config),
            manifest,
            producers,
            ActiveSegment {
                file,
                key,
                index,
                position,
                next_offset,
                max_timestamp,
            },
        ))
    }

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
                producers,
                manifest,
                failed: None,
            }),
            queue: Mutex::new(Vec::new()),
            next_id: std::sync::atomic::AtomicU64::new(0),
            stopped: std::sync::atomic::AtomicBool::new(false),
            vfs,
            dir,
            epoch,
            config: Mutex::new(config),
            fence,
        }
    }

    fn cfg(&self) -> LogConfig {
        lock(&self.config).clone()
    }

    /// Applies a topic's current size and retention settings (they take
    /// effect at the next roll and the next retention pass).
    pub fn set_limits(
        &self,
        segment_bytes: u64,
        retention_ms: Option<i64>,
        retention_bytes: Option<u64>,
    ) {
        let mut c = lock(&self.config);
        c.segment_bytes = segment_bytes;
        c.retention_ms = retention_ms;
        c.retention_bytes = retention_bytes;
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

    /// Producer state as of the last acknowledged append.
    pub async fn producers(&self) -> ProducerState {
        self.writer.lock().await.producers.clone()
    }

    /// Appends a produce request's record set (one or more v2 batches) and
    /// returns once it is durable and this epoch was confirmed after the
    /// fsync. Concurrent appends share flush cycles.
    pub async fn append(&self, records: Bytes) -> Result<Appended, LogError> {
        let headers = batch::split(&records)?;
        if headers.is_empty() {
            return Err(BatchError::TooShort(0).into());
        }
        let (reply, done) = tokio::sync::oneshot::channel();
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.queue).push(Pending {
            id,
            records,
            headers,
            reply,
        });
        // Group commit: whoever gets the writer while its own request is
        // still queued flushes everything queued by then in one cycle. A
        // waiter whose request another cycle already took lets go at once,
        // so queued requests wait for one flusher, not one each.
        let mut writer = self.writer.lock().await;
        let batch: Vec<Pending> = {
            let mut queue = lock(&self.queue);
            if queue.iter().any(|p| p.id == id) {
                std::mem::take(&mut *queue)
            } else {
                Vec::new()
            }
        };
        if !batch.is_empty() {
            self.flush(&mut writer, batch).await;
        }
        drop(writer);
        match done.await {
            Ok(Ok(a)) => Ok(a),
            Ok(Err(Refusal::Fenced)) => Err(LogError::Fenced(self.epoch)),
            Ok(Err(Refusal::Failed(msg))) => Err(LogError::Failed(msg)),
            Ok(Err(Refusal::OutOfOrder)) => Err(LogError::OutOfOrderSequence),
            Ok(Err(Refusal::StaleEpoch)) => Err(LogError::InvalidProducerEpoch),
            Err(_) => Err(LogError::Failed("append abandoned".into())),
        }
    }

    async fn flush(&self, w: &mut Writer, batch: Vec<Pending>) {
        if let Some(why) = &w.failed {
            for p in batch {
                let _ = p.reply.send(Err(Refusal::Failed(why.clone())));
            }
            return;
        }
        let (mut batch, duplicates) = self.check_sequences(w, batch);
        // Each request's buffer is stamped in place when this is its only
        // reference (as it is for a request read off a socket), else copied.
        let mut chunks = Vec::with_capacity(batch.len());
        let mut placed = Vec::with_capacity(batch.len());
        let mut next = w.next_offset;
        for p in &mut batch {
            let base = next;
            let mut buf = match std::mem::take(&mut p.records).try_into_mut() {
                Ok(unique) => unique,
                Err(shared) => BytesMut::from(&shared[..]),
            };
            let mut at = 0;
            for h in &p.headers {
                batch::stamp(&mut buf[at..], next, self.epoch as i32);
                at += h.size;
                next += i64::from(h.last_offset_delta) + 1;
            }
            chunks.push(buf.freeze());
            placed.push(Appended {
                base_offset: base,
                last_offset: next - 1,
            });
        }
        let written: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        let outcome = async {
            w.file.write_all_and_sync(w.position, chunks).await?;
            self.fence.still_leader(self.epoch).await
        }
        .await;
        let failure = match outcome {
            Ok(true) => None,
            Ok(false) => Some(format!("fenced: epoch {} superseded", self.epoch)),
            Err(e) => Some(format!("flush of {} failed: {e}", self.dir.display())),
        };
        if let Some(why) = failure {
            // Nothing of this cycle is acknowledged, and nothing after it:
            // the file's tail is unknown now, and a successor seals it.
            w.failed = Some(why.clone());
            self.stopped
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let refusal = if why.starts_with("fenced") {
                Refusal::Fenced
            } else {
                Refusal::Failed(why)
            };
            for p in batch
                .into_iter()
                .chain(duplicates.into_iter().map(|(p, _)| p))
            {
                let _ = p.reply.send(Err(refusal.clone()));
            }
            return;
        }
        let mut pos = w.position;
        let mut offset = w.next_offset;
        for p in &batch {
            for h in &p.headers {
                let mut stored = *h;
                stored.base_offset = offset;
                stored.leader_epoch = self.epoch as i32;
                offset = stored.next_offset();
                lock(&w.index).add(pos, &stored);
                w.producers.observe(&stored);
                w.max_timestamp = w.max_timestamp.max(stored.max_timestamp);
                pos += h.size as u64;
            }
        }
        debug_assert_eq!(pos - w.position, written);
        w.since_checkpoint += pos - w.position;
        w.position = pos;
        w.next_offset = next;
        {
            let mut view = lock(&self.view);
            view.high_watermark = next;
            view.active_end = pos;
            view.active_max_timestamp = w.max_timestamp;
        }
        for (p, a) in batch.into_iter().zip(placed).chain(duplicates) {
            let _ = p.reply.send(Ok(a));
        }
        if let Err(e) = self.after_flush(w).await {
            w.failed = Some(format!("roll or checkpoint failed: {e}"));
            self.stopped
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Applies the idempotent producers' sequence rules to a cycle, in queue
    /// order: batches this cycle already took count, so two in-flight
    /// batches of one producer are checked against each other. Refused
    /// requests are answered at once; duplicates are answered with their
    /// original offsets once this cycle is confirmed (the original may be
    /// in it).
    fn check_sequences(
        &self,
        w: &Writer,
        batch: Vec<Pending>,
    ) -> (Vec<Pending>, Vec<(Pending, Appended)>) {
        let mut taken = ProducerState::default();
        let mut next = w.next_offset;
        let mut append = Vec::with_capacity(batch.len());
        let mut duplicates = Vec::new();
        for p in batch {
            let mut trial = taken.clone();
            let mut verdict = Sequence::Next;
            let mut offset = next;
            for h in &p.headers {
                if h.producer_id >= 0 && !trial.producers.contains_key(&h.producer_id) {
                    if let Some(e) = w.producers.producers.get(&h.producer_id) {
                        trial.producers.insert(h.producer_id, e.clone());
                    }
                }
                verdict = trial.check(h);
                if verdict != Sequence::Next {
                    break;
                }
                let mut stored = *h;
                stored.base_offset = offset;
                trial.observe(&stored);
                offset = stored.next_offset();
            }
            match verdict {
                Sequence::Next => {
                    taken = trial;
                    next = offset;
                    append.push(p);
                }
                Sequence::Duplicate {
                    base_offset,
                    last_offset,
                } if p.headers.len() == 1 => duplicates.push((
                    p,
                    Appended {
                        base_offset,
                        last_offset,
                    },
                )),
                Sequence::StaleEpoch => {
                    let _ = p.reply.send(Err(Refusal::StaleEpoch));
                }
                Sequence::Duplicate { .. } | Sequence::OutOfOrder => {
                    let _ = p.reply.send(Err(Refusal::OutOfOrder));
                }
            }
        }
        (append, duplicates)
    }

    /// Rolls the segment or rewrites the checkpoint when due. Runs only
    /// after a confirmed flush, so the manifest never names unacknowledged data.
    async fn after_flush(&self, w: &mut Writer) -> io::Result<()> {
        if w.position >= self.cfg().segment_bytes {
            return self.roll(w).await;
        }
        if w.since_checkpoint >= self.cfg().checkpoint_bytes {
            self.write_checkpoint(w).await?;
        }
        Ok(())
    }

    async fn write_checkpoint(&self, w: &mut Writer) -> io::Result<()> {
        if let Some(last) = w.manifest.segments.last_mut() {
            last.state = SegmentState::Active {
                checkpoint_position: w.position,
                checkpoint_next_offset: w.next_offset,
                max_timestamp: w.max_timestamp,
            };
        }
        w.manifest.producers = w.producers.clone();
        w.manifest.write(self.vfs.as_ref(), &self.dir).await?;
        w.since_checkpoint = 0;
        Ok(())
    }

    async fn roll(&self, w: &mut Writer) -> io::Result<()> {
        let v = self.vfs.as_ref();
        let sealed_meta = w.manifest.segments.last().cloned();
        let Some(mut sealed) = sealed_meta else {
            return Ok(());
        };
        sealed.state = SegmentState::Sealed {
            end_position: w.position,
            next_offset: w.next_offset,
            max_timestamp: w.max_timestamp,
        };
        let (index, timeindex) = lock(&w.index).encode();
        for (ext, data) in [("index", index), ("timeindex", timeindex)] {
            let path = self
                .dir
                .join(segment_file(sealed.base_offset, sealed.epoch, ext));
            // Indexes can be rebuilt from the log; a failure only costs a scan.
            if let Err(e) = atomic_replace(v, &path, data).await {
                tracing::warn!(index = %path.display(), error = %e, "segment index not written");
            }
        }
        let next = SegmentMeta {
            adopted_until: None,
            base_offset: w.next_offset,
            epoch: self.epoch,
            state: SegmentState::Active {
                checkpoint_position: 0,
                checkpoint_next_offset: w.next_offset,
                max_timestamp: -1,
            },
        };
        let file = v
            .open(&self.dir.join(next.file_name()), OpenOptions::create_new())
            .await?;
        let mut manifest = w.manifest.clone();
        if let Some(last) = manifest.segments.last_mut() {
            *last = sealed.clone();
        }
        manifest.segments.push(next.clone());
        manifest.producers = w.producers.clone();
        if let Err(e) = manifest.write(v, &self.dir).await {
            let _ = file.close().await;
            return Err(e);
        }
        let old = std::mem::replace(&mut w.file, file);
        let _ = old.close().await;
        w.manifest = manifest;
        // The sealed segment keeps its index in the view; the new one starts empty.
        w.index = Arc::new(Mutex::new(SegmentIndex::new(
            self.cfg().index_interval_bytes,
        )));
        w.position = 0;
        w.max_timestamp = -1;
        w.since_checkpoint = 0;
        let mut view = lock(&self.view);
        view.indexes
            .insert((next.base_offset, next.epoch), w.index.clone());
        view.segments = w.manifest.segments.clone();
        view.active_end = 0;
        view.active_max_timestamp = -1;
        Ok(())
    }

    /// Reads whole batches starting with the one that holds `offset`, up to
    /// `max_bytes` (at least one batch), never past a sealed end or the
    /// high watermark.
    pub async fn read(&self, offset: i64, max_bytes: usize) -> Result<ReadResult, LogError> {
        let (segments, start, hw, active_end) = {
            let v = lock(&self.view);
            (
                v.segments.clone(),
                v.log_start_offset,
                v.high_watermark,
                v.active_end,
            )
        };
        let result = |records| ReadResult {
            records,
            high_watermark: hw,
            log_start_offset: start,
        };
        if offset < start || offset > hw {
            return Err(LogError::OutOfRange {
                offset,
                start,
                end: hw,
            });
        }
        if offset == hw {
            return Ok(result(Bytes::new()));
        }
        let idx = segments.partition_point(|s| s.base_offset <= offset);
        for seg in segments.iter().skip(idx.saturating_sub(1)) {
            let (limit, seg_next) = match seg.state {
                SegmentState::Sealed {
                    end_position,
                    next_offset,
                    ..
                } => (end_position, next_offset),
                SegmentState::Active { .. } => (active_end, hw),
            };
            if seg_next <= offset {
                continue;
            }
            let file = self.handle(seg).await?;
            let index = self.index_of(seg, file.as_ref(), limit).await?;
            let from = lock(&index).position_for(offset);
            let mut out = collect(file.as_ref(), from, limit, offset, max_bytes).await?;
            if out.is_empty() {
                // The records are there (below the segment's end), so this
                // host's view through a long-lived handle is stale (NFS
                // serves reads from cached pages up to a cached size). A
                // fresh open revalidates (close-to-open).
                lock(&self.view)
                    .handles
                    .remove(&(seg.base_offset, seg.epoch));
                let file = self.handle(seg).await?;
                out = collect(file.as_ref(), from, limit, offset, max_bytes).await?;
                if out.is_empty() {
                    return Err(LogError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "{}: no batch at offset {offset} (position {from}) below its end {limit}",
                            seg.file_name()
                        ),
                    )));
                }
            }
            return Ok(result(out));
        }
        Ok(result(Bytes::new()))
    }

    async fn handle(&self, seg: &SegmentMeta) -> io::Result<Arc<dyn VfsFile>> {
        let key = (seg.base_offset, seg.epoch);
        if let Some(h) = lock(&self.view).handles.get(&key) {
            return Ok(h.clone());
        }
        // A fresh open: this host sees everything closed or fsynced before.
        let file: Arc<dyn VfsFile> = Arc::from(
            self.vfs
                .open(&self.dir.join(seg.file_name()), OpenOptions::read())
                .await?,
        );
        lock(&self.view).handles.insert(key, file.clone());
        Ok(file)
    }

    /// The segment's sparse index: in memory, else from its index files,
    /// else rebuilt by scanning the segment.
    async fn index_of(
        &self,
        seg: &SegmentMeta,
        file: &dyn VfsFile,
        limit: u64,
    ) -> io::Result<SharedIndex> {
        let key = (seg.base_offset, seg.epoch);
        if let Some(i) = lock(&self.view).indexes.get(&key) {
            return Ok(i.clone());
        }
        let interval = self.cfg().index_interval_bytes;
        let read = |ext: &str| {
            let path = self.dir.join(segment_file(seg.base_offset, seg.epoch, ext));
            let vfs = self.vfs.clone();
            async move { vfs::read_file(vfs.as_ref(), &path).await }
        };
        let index = match (read("index").await, read("timeindex").await) {
            (Ok(a), Ok(b)) => SegmentIndex::decode(&a, &b, interval).ok(),
            _ => None,
        };
        let index = match index {
            Some(i) => i,
            None => {
                let walk = scan(file, 0, seg.base_offset, Some(limit)).await?;
                let mut i = SegmentIndex::new(interval);
                for (pos, h) in &walk.batches {
                    i.add(*pos, h);
                }
                i
            }
        };
        let shared = Arc::new(Mutex::new(index));
        lock(&self.view).indexes.insert(key, shared.clone());
        Ok(shared)
    }

    /// Each readable segment with how far it may be read, the offset after
    /// its last batch and its largest batch max timestamp, from one view.
    fn timed_segments(&self) -> (Vec<(SegmentMeta, u64, i64, i64)>, i64) {
        let v = lock(&self.view);
        let segments = v
            .segments
            .iter()
            .map(|s| match s.state {
                SegmentState::Sealed {
                    end_position,
                    next_offset,
                    max_timestamp,
                } => (s.clone(), end_position, next_offset, max_timestamp),
                SegmentState::Active { .. } => (
                    s.clone(),
                    v.active_end,
                    v.high_watermark,
                    v.active_max_timestamp,
                ),
            })
            .collect();
        (segments, v.log_start_offset)
    }

    /// The first batch of `seg` before `limit` whose max timestamp is at
    /// least `ts`, whole.
    async fn batch_reaching(
        &self,
        seg: &SegmentMeta,
        limit: u64,
        ts: i64,
    ) -> io::Result<Option<Bytes>> {
        let file = self.handle(seg).await?;
        let index = self.index_of(seg, file.as_ref(), limit).await?;
        let from = lock(&index).position_for_timestamp(ts).unwrap_or(0);
        first_batch_reaching(file.as_ref(), from, limit, ts).await
    }

    /// The first record with a timestamp at or after `ts` (ListOffsets by
    /// time); `None` if there is none. Inside a compressed batch, whose
    /// records kaas does not decode, the batch's first offset and max
    /// timestamp stand for it.
    pub async fn offset_for_timestamp(&self, ts: i64) -> Result<Option<TimestampOffset>, LogError> {
        let (segments, _) = self.timed_segments();
        for (seg, limit, _, max_timestamp) in &segments {
            if *max_timestamp < ts {
                continue;
            }
            let Some(whole) = self.batch_reaching(seg, *limit, ts).await? else {
                continue;
            };
            let h = batch::parse(&whole)?;
            let exact = batch::record_times(&whole)
                .and_then(|times| times.into_iter().find(|&(_, t)| t >= ts));
            let (offset, timestamp) = match exact {
                Some((delta, t)) => (h.base_offset + delta, t),
                None => (h.base_offset, h.max_timestamp),
            };
            return Ok(Some(TimestampOffset {
                offset,
                timestamp,
                leader_epoch: h.leader_epoch,
            }));
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the record with the largest timestamp, the
    /// first of several that share it, as Kafka picks it: the first segment
    /// and in it the first batch reaching the largest max timestamp. Inside a
    /// compressed batch the batch's last offset stands for the record, as in
    /// Kafka's compressed v2 batches. `None` for a log with no records.
    pub async fn offset_of_max_timestamp(&self) -> Result<Option<TimestampOffset>, LogError> {
        let (segments, start) = self.timed_segments();
        let mut best: Option<&(SegmentMeta, u64, i64, i64)> = None;
        for s in &segments {
            let (_, limit, next_offset, max_timestamp) = s;
            // Empty, or wholly below the log start: deleted, not yet unlinked.
            if *limit == 0 || *next_offset <= start {
                continue;
            }
            if best.is_none_or(|b| *max_timestamp > b.3) {
                best = Some(s);
            }
        }
        let Some((seg, limit, _, max_timestamp)) = best else {
            return Ok(None);
        };
        let Some(whole) = self.batch_reaching(seg, *limit, *max_timestamp).await? else {
            return Ok(None);
        };
        let h = batch::parse(&whole)?;
        Ok(Some(TimestampOffset {
            offset: batch::offset_of_max_timestamp(&whole).unwrap_or(h.last_offset()),
            timestamp: h.max_timestamp,
            leader_epoch: h.leader_epoch,
        }))
    }

    /// OffsetForLeaderEpoch: the end of leader epoch `requested` and the
    /// largest epoch at or below it that wrote records, from the segment
    /// list (see `epochs`); the high watermark for the current epoch.
    pub fn epoch_end_offset(&self, requested: i32) -> (i32, i64) {
        let v = lock(&self.view);
        let starts = epochs::epoch_starts(
            &v.segments,
            v.high_watermark,
            v.log_start_offset,
            self.epoch,
        );
        epochs::end_offset_for(&starts, requested, v.high_watermark)
    }

    /// Deletes sealed segments past retention: manifest first, then own
    /// handles, then the files; a failed unlink is retried by the next call.
    /// Returns how many segments left the log.
    pub async fn enforce_retention(&self, now_ms: i64) -> Result<usize, LogError> {
        let mut w = self.writer.lock().await;
        if let Some(why) = &w.failed {
            return Err(LogError::Failed(why.clone()));
        }
        let mut doomed = Vec::new();
        let sealed: Vec<(SegmentMeta, u64, i64, i64)> = w
            .manifest
            .segments
            .iter()
            .filter_map(|s| match s.state {
                SegmentState::Sealed {
                    end_position,
                    next_offset,
                    max_timestamp,
                } => Some((s.clone(), end_position, next_offset, max_timestamp)),
                SegmentState::Active { .. } => None,
            })
            .collect();
        let mut total: u64 = sealed.iter().map(|s| s.1).sum::<u64>() + w.position;
        let start = w.manifest.log_start_offset;
        for (seg, size, next, max_ts) in &sealed {
            // Entirely below the log start offset (DeleteRecords).
            let deleted = *next <= start;
            let too_old = self
                .cfg()
                .retention_ms
                .is_some_and(|ms| *max_ts >= 0 && *max_ts < now_ms - ms);
            let too_big = self
                .cfg()
                .retention_bytes
                .is_some_and(|limit| total > limit);
            if !(deleted || too_old || too_big) {
                break;
            }
            total -= size;
            doomed.push(seg.clone());
        }
        if !doomed.is_empty() {
            let mut manifest = w.manifest.clone();
            manifest.segments.drain(..doomed.len());
            manifest.log_start_offset = manifest
                .segments
                .first()
                .map_or(w.next_offset, |s| s.base_offset)
                .max(start);
            if let Err(e) = manifest.write(self.vfs.as_ref(), &self.dir).await {
                return Err(e.into());
            }
            w.manifest = manifest;
        }
        let mut to_unlink = {
            let mut view = lock(&self.view);
            view.segments = w.manifest.segments.clone();
            view.log_start_offset = w.manifest.log_start_offset;
            for seg in &doomed {
                view.handles.remove(&(seg.base_offset, seg.epoch));
                view.indexes.remove(&(seg.base_offset, seg.epoch));
            }
            std::mem::take(&mut view.pending_deletes)
        };
        drop(w);
        for seg in &doomed {
            for ext in ["log", "index", "timeindex"] {
                to_unlink.push(self.dir.join(segment_file(seg.base_offset, seg.epoch, ext)));
            }
        }
        let mut failed = Vec::new();
        for path in to_unlink {
            match self.vfs.unlink(&path).await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::info!(file = %path.display(), error = %e, "unlink failed; retrying at the next retention pass");
                    failed.push(path);
                }
            }
        }
        lock(&self.view).pending_deletes.extend(failed);
        Ok(doomed.len())
    }

    /// DeleteRecords: moves the log start offset up to `offset` (`-1`: the
    /// high watermark). The manifest changes first; whole segments below it
    /// go at the next retention pass. Returns the new log start offset.
    pub async fn delete_records(&self, offset: i64) -> Result<i64, LogError> {
        let mut w = self.writer.lock().await;
        if let Some(why) = &w.failed {
            return Err(LogError::Failed(why.clone()));
        }
        let hw = w.next_offset;
        let target = if offset == -1 { hw } else { offset };
        let start = w.manifest.log_start_offset;
        if target < 0 || target > hw {
            return Err(LogError::OutOfRange {
                offset,
                start,
                end: hw,
            });
        }
        if target > start {
            let mut manifest = w.manifest.clone();
            manifest.log_start_offset = target;
            manifest.write(self.vfs.as_ref(), &self.dir).await?;
            w.manifest = manifest;
            lock(&self.view).log_start_offset = target;
        }
        Ok(target.max(start))
    }

    /// Files still waiting for their unlink to succeed.
    pub fn pending_deletes(&self) -> usize {
        lock(&self.view).pending_deletes.len()
    }

    /// Removes segment files of older epochs that the manifest does not
    /// name: deleted by retention before a crash, or written by a fenced
    /// leader after its epoch ended. Failures are queued for retention.
    async fn sweep_orphans(&self) {
        let listed: Vec<(i64, u32)> = lock(&self.view)
            .segments
            .iter()
            .map(|s| (s.base_offset, s.epoch))
            .collect();
        let Ok(entries) = self.vfs.read_dir(&self.dir).await else {
            return;
        };
        let mut orphans = Vec::new();
        for e in entries {
            if let Some((base, epoch, _)) = parse_segment_file(&e.name) {
                if epoch < self.epoch && !listed.contains(&(base, epoch)) {
                    orphans.push(self.dir.join(&e.name));
                }
            }
        }
        lock(&self.view).pending_deletes.extend(orphans);
    }

    /// Closes every handle this log holds (on step-down or shutdown).
    pub async fn close(self) -> io::Result<()> {
        let handles: Vec<_> = std::mem::take(&mut lock(&self.view).handles)
            .into_values()
            .collect();
        drop(handles);
        let w = self.writer.into_inner();
        w.file.close().await
    }
}

/// Collects whole batches from `from` (a batch boundary at or before the
/// one holding `offset`) up to `limit`, at most `max_bytes` unless the
/// first batch alone is larger.
async fn collect(
    file: &dyn VfsFile,
    mut pos: u64,
    limit: u64,
    offset: i64,
    max_bytes: usize,
) -> io::Result<Bytes> {
    let mut out = BytesMut::new();
    while pos + batch::LOG_OVERHEAD as u64 <= limit {
        let head = file.read_at(pos, batch::HEADER_LEN).await?;
        let (Some(size), Some(base)) = (
            batch::peek_size(&head),
            head.get(0..8)
                .map(|b| i64::from_be_bytes(b.try_into().unwrap_or_default())),
        ) else {
            break;
        };
        let last_delta = head
            .get(23..27)
            .map_or(0, |b| i32::from_be_bytes(b.try_into().unwrap_or_default()));
        if pos + size as u64 > limit {
            break;
        }
        if base + i64::from(last_delta) < offset {
            pos += size as u64;
            continue;
        }
        if !out.is_empty() && out.len() + size > max_bytes {
            break;
        }
        let data = file.read_at(pos, size).await?;
        if data.len() < size {
            break;
        }
        out.extend_from_slice(&data);
        pos += size as u64;
        if out.len() >= max_bytes {
            break;
        }
    }
    Ok(out.freeze())
}
