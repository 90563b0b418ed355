//! Compaction (`cleanup.policy` with `compact`): the newest record of every
//! key is kept, older ones go, offsets never change.
//!
//! A pass of this epoch's leader (docs/protocols.md's table, "compaction"):
//! 1. choose: the sealed segments below the last stable offset and older
//!    than `min.compaction.lag.ms` are cleanable; the part above the
//!    manifest's `cleaned_until` is dirty; a pass runs once the dirty share
//!    reaches `min.cleanable.dirty.ratio` (or `max.compaction.lag.ms`
//!    forces it);
//! 2. map: the newest offset of each key in the dirty part, in an offset
//!    map of bounded size; where it fills, the pass ends (`end`);
//! 3. write: the cleanable segments below `end`, grouped up to
//!    `segment.bytes`, into new files `<base>-<epoch>-<E>-<pass>.log`
//!    (names no manifest has used), each made durable before the next step;
//! 4. swap: one manifest replace names the new segments instead of the
//!    old ones and moves `cleaned_until` to `end`; then the fence check:
//!    only a confirmed leader goes on to
//! 5. remove the old segments' files (re-driven by the retention pass when
//!    an unlink fails, and by a successor's takeover if this broker dies).
//!
//! A reader sees the old segments or the new ones, never a mix: both are
//! complete on the volume before the manifest that names the new ones.

use sha2::{Digest, Sha256};

use super::*;
use crate::log::manifest::Cleaning;
use crate::log::records::{self, RawRecord};

/// A topic's compaction settings (its `cleanup.policy` includes `compact`).
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionConfig {
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    /// How long a tombstone (a null value) stays once a pass kept it as
    /// the newest record of its key (Kafka's delete horizon, KIP-534: set
    /// by that pass in the tombstone's batch, in this broker's time).
    pub delete_retention_ms: i64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 24 * 3600 * 1000,
        }
    }
}

/// The broker's limits on every pass.
#[derive(Clone, Debug)]
pub struct CleanerLimits {
    /// Most bytes a pass's offset map takes (Kafka's
    /// `log.cleaner.dedupe.buffer.size`).
    pub dedupe_buffer_bytes: u64,
    /// Bytes read plus written per second (Kafka's
    /// `log.cleaner.io.max.bytes.per.second`); `None`: unthrottled.
    pub io_bytes_per_second: Option<u64>,
}

impl Default for CleanerLimits {
    fn default() -> Self {
        Self {
            dedupe_buffer_bytes: 128 << 20,
            io_bytes_per_second: None,
        }
    }
}

/// What a pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compacted {
    pub segments_read: usize,
    pub segments_written: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_kept: u64,
    /// Distinct keys of the dirty part the offset map held.
    pub keys: usize,
    /// Compressed batches kept whole because the pass could not read them
    /// (they expand past the bound, or do not decompress): their keys are
    /// not known to it.
    pub compressed_batches: u64,
    /// The log is deduplicated below this offset now.
    pub cleaned_until: i64,
    /// The earliest delete horizon of a tombstone or transaction marker
    /// the pass kept: a pass is due then even if nothing is dirty.
    pub delete_horizon: Option<i64>,
    /// Transaction markers removed: nothing of their transaction was left,
    /// and their delete horizon passed (as `(producer id, offset)`).
    pub markers_removed: Vec<(i64, i64)>,
}

impl Compacted {
    fn horizon(&mut self, t: Option<i64>) {
        self.delete_horizon = match (self.delete_horizon, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Bytes one offset map entry may take: a 16-byte key digest and an 8-byte
/// offset in a B-tree whose nodes (11 entries, 280 bytes) are at least
/// five entries full, plus the inner nodes.
const MAP_ENTRY_BYTES: u64 = 64;
/// Bytes read from a segment at a time.
const READ_CHUNK: usize = 1 << 20;
/// Bytes written to a new segment at a time.
const WRITE_CHUNK: usize = 1 << 20;

/// Newest offset per key digest, never more than `capacity` keys.
struct OffsetMap {
    map: BTreeMap<u128, i64>,
    capacity: usize,
}

impl OffsetMap {
    fn new(buffer_bytes: u64) -> Self {
        Self {
            map: BTreeMap::new(),
            capacity: (buffer_bytes / MAP_ENTRY_BYTES) as usize,
        }
    }

    /// Records `offset` as the newest of `key`; false if the map is full.
    fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let d = digest(key);
        if let Some(o) = self.map.get_mut(&d) {
            *o = offset;
            return true;
        }
        if self.map.len() >= self.capacity {
            return false;
        }
        self.map.insert(d, offset);
        true
    }

    fn newest(&self, key: &[u8]) -> Option<i64> {
        self.map.get(&digest(key)).copied()
    }
}

/// 128 bits of SHA-256: two keys sharing a digest would lose the older
/// one's newest value, so the digest must not collide in practice.
fn digest(key: &[u8]) -> u128 {
    let d = Sha256::digest(key);
    u128::from_be_bytes(d[..16].try_into().unwrap_or_default())
}

/// Paces a pass's reads and writes to the configured rate.
struct Throttle {
    rate: Option<u64>,
    started: tokio::time::Instant,
    bytes: u64,
}

impl Throttle {
    fn new(rate: Option<u64>) -> Self {
        Self {
            rate: rate.filter(|r| *r > 0),
            started: tokio::time::Instant::now(),
            bytes: 0,
        }
    }

    async fn spend(&mut self, bytes: u64) {
        self.bytes += bytes;
        if let Some(rate) = self.rate {
            let due = std::time::Duration::from_secs_f64(self.bytes as f64 / rate as f64);
            tokio::time::sleep_until(self.started + due).await;
        }
    }
}

/// The batches of a sealed segment up to its end, read a chunk at a time.
struct Batches {
    file: Box<dyn VfsFile>,
    pos: u64,
    end: u64,
    buf: Bytes,
}

impl Batches {
    /// The next batch, validated, or `None` at the segment's end.
    async fn next(&mut self, throttle: &mut Throttle) -> io::Result<Option<Bytes>> {
        if self.pos >= self.end && self.buf.is_empty() {
            return Ok(None);
        }
        self.fill(batch::LOG_OVERHEAD, throttle).await?;
        let size = batch::peek_size(&self.buf).unwrap_or(0);
        if size < batch::HEADER_LEN {
            return Err(corrupt("a batch length below the header's"));
        }
        self.fill(size, throttle).await?;
        let b = self.buf.split_to(size);
        batch::parse(&b).map_err(|e| corrupt(&e.to_string()))?;
        Ok(Some(b))
    }

    async fn fill(&mut self, want: usize, throttle: &mut Throttle) -> io::Result<()> {
        while self.buf.len() < want {
            let left = self.end - self.pos;
            if left == 0 {
                return Err(corrupt("a batch runs past the segment's sealed end"));
            }
            let n = (want - self.buf.len()).max(READ_CHUNK).min(left as usize);
            let chunk = self.file.read_at(self.pos, n).await?;
            if chunk.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment shorter than its sealed end",
                ));
            }
            throttle.spend(chunk.len() as u64).await;
            self.pos += chunk.len() as u64;
            let mut joined = BytesMut::with_capacity(self.buf.len() + chunk.len());
            joined.extend_from_slice(&self.buf);
            joined.extend_from_slice(&chunk);
            self.buf = joined.freeze();
        }
        Ok(())
    }
}

fn corrupt(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("compaction: {why}"))
}

/// A sealed segment: its meta, bytes and next offset.
fn sealed(s: &SegmentMeta) -> Option<(u64, i64, i64)> {
    match s.state {
        SegmentState::Sealed {
            end_position,
            next_offset,
            max_timestamp,
        } => Some((end_position, next_offset, max_timestamp)),
        SegmentState::Active { .. } => None,
    }
}

/// What a pass decided to do.
struct Plan {
    /// The cleanable segments, oldest first.
    cleanable: Vec<SegmentMeta>,
    /// Index into `cleanable` of the first dirty segment; `None` for a
    /// pass that only removes tombstones past their delete horizon.
    first_dirty: Option<usize>,
}

/// Step 1: which segments a pass may clean, if it should run now.
fn plan(manifest: &Manifest, last_stable: i64, now_ms: i64, c: &CompactionConfig) -> Option<Plan> {
    let cleanable: Vec<SegmentMeta> = manifest
        .segments
        .iter()
        .map_while(|s| {
            let (_, next, max_ts) = sealed(s)?;
            // Timestamps are the producers' (their clocks, not this
            // broker's): consulted only when a lag is asked for, as Kafka.
            let old_enough = c.min_compaction_lag_ms == 0
                || (max_ts < 0 || max_ts <= now_ms.saturating_sub(c.min_compaction_lag_ms));
            (next <= last_stable && old_enough).then(|| s.clone())
        })
        .collect();
    let first_dirty = cleanable
        .iter()
        .position(|s| sealed(s).is_some_and(|(_, next, _)| next > manifest.cleaned_until));
    let horizon_passed = manifest.delete_horizon.is_some_and(|t| t <= now_ms);
    let Some(first) = first_dirty else {
        return horizon_passed.then_some(Plan {
            cleanable,
            first_dirty,
        });
    };
    let size = |s: &[SegmentMeta]| -> u64 { s.iter().filter_map(sealed).map(|x| x.0).sum() };
    let dirty = size(&cleanable[first..]);
    let total = size(&cleanable).max(1);
    let overdue = sealed(&cleanable[first]).is_some_and(|(_, _, max_ts)| {
        max_ts >= 0 && max_ts < now_ms.saturating_sub(c.max_compaction_lag_ms)
    });
    let due = dirty as f64 / total as f64 >= c.min_cleanable_dirty_ratio;
    (due || overdue || horizon_passed).then_some(Plan {
        cleanable,
        first_dirty,
    })
}

/// Whether a data batch belongs to an aborted transaction.
fn aborted_data(h: &batch::BatchHeader, aborted: &[AbortedTxn]) -> bool {
    h.is_transactional()
        && h.control.is_none()
        && aborted.iter().any(|a| {
            a.producer_id == h.producer_id
                && a.first_offset <= h.base_offset
                && h.base_offset <= a.last_offset
        })
}

/// The records of a batch (its records section `body`) to keep; `None`
/// keeps the batch whole. A tombstone goes once its batch's delete horizon
/// passed.
fn keep<'a>(
    body: &'a [u8],
    h: &batch::BatchHeader,
    map: &OffsetMap,
    end: i64,
    now_ms: i64,
) -> Option<Vec<RawRecord<'a>>> {
    if h.control.is_some() || h.base_offset >= end {
        return None;
    }
    let expired = records::delete_horizon(h).is_some_and(|t| t <= now_ms);
    let all = records::records_in(body, h)?;
    Some(
        all.into_iter()
            .filter(|r| {
                if r.offset >= end {
                    return true;
                }
                let Some(key) = r.key else {
                    return false; // Kafka's cleaner drops records without a key
                };
                let newest = map.newest(key).is_none_or(|o| o <= r.offset);
                newest && !(r.value.is_none() && expired)
            })
            .collect(),
    )
}

/// A cleaned segment being written.
struct Output {
    meta: SegmentMeta,
    file: Option<Box<dyn VfsFile>>,
    pending: BytesMut,
    position: u64,
    index: SegmentIndex,
    max_timestamp: i64,
}

impl PartitionLog {
    /// Whether a cleaner round has work here now: the active segment is
    /// due to roll by `segment.ms`, or a compaction pass is due. Answered
    /// without waiting (a busy writer: not now), so that a broker with
    /// nothing to clean does nothing at all.
    pub fn cleaning_due(&self, now_ms: i64) -> bool {
        let cfg = self.cfg();
        let Ok(mut w) = self.writer.try_lock() else {
            return false;
        };
        if w.failed.is_some() {
            return false;
        }
        if cfg
            .segment_ms
            .is_some_and(|age| super::append::roll_due(&mut w, now_ms, age))
        {
            return true;
        }
        let last_stable = lock(&self.view).last_stable;
        cfg.compaction
            .is_some_and(|c| plan(&w.manifest, last_stable, now_ms, &c).is_some())
    }

    /// Runs one compaction pass if the topic compacts and enough of its
    /// log is dirty. `Ok(None)`: nothing to do now.
    pub async fn compact(
        &self,
        now_ms: i64,
        limits: &CleanerLimits,
    ) -> Result<Option<Compacted>, LogError> {
        let Some(c) = self.cfg().compaction else {
            return Ok(None);
        };
        let mut passes = self.cleaning.lock().await;
        let manifest = {
            let w = self.writer_for_chore().await?;
            if let Some(why) = &w.failed {
                return Err(LogError::Failed(why.clone()));
            }
            w.manifest.clone()
        };
        let cleaned_until = manifest.cleaned_until;
        let (last_stable, aborted) = {
            let v = lock(&self.view);
            (v.last_stable, v.aborted.clone())
        };
        let Some(plan) = plan(&manifest, last_stable, now_ms, &c) else {
            return Ok(None);
        };
        vfs::fault_point!(self.vfs, "compaction.planned");
        let mut throttle = Throttle::new(limits.io_bytes_per_second);
        let mut stats = Compacted::default();
        let (map, end) = self
            .map_keys(&plan, cleaned_until, limits, &aborted, &mut throttle)
            .await?;
        if let Some(first) = plan.first_dirty {
            if end <= cleaned_until.max(plan.cleanable[first].base_offset) {
                tracing::warn!(dir = %self.dir.display(), "compaction: the offset map holds no key; raise the dedupe buffer");
                return Ok(None);
            }
        }
        stats.keys = map.map.len();
        stats.cleaned_until = end;
        let sources: Vec<SegmentMeta> = plan
            .cleanable
            .into_iter()
            .take_while(|s| s.base_offset < end)
            .collect();
        let horizon = now_ms.saturating_add(c.delete_retention_ms);
        let pass = Cleaning {
            by_epoch: self.epoch,
            pass: *passes,
        };
        *passes += 1;
        let mut created = Vec::new();
        let written = self
            .write_cleaned(
                &sources,
                (&map, end, (now_ms, horizon), pass),
                (&aborted, &mut created),
                &mut throttle,
                &mut stats,
            )
            .await;
        let outputs = match written {
            Ok(o) => o,
            Err(e) => {
                // No manifest names them, and no later pass of this epoch
                // uses their names.
                self.forget_outputs(&created).await;
                return Err(e.into());
            }
        };
        vfs::fault_point!(self.vfs, "compaction.segments-written");
        self.swap_in(sources, outputs, (end, &stats)).await?;
        Ok(Some(stats))
    }

    /// Step 2: the newest offset of every key in the dirty segments, up to
    /// where the map filled.
    async fn map_keys(
        &self,
        plan: &Plan,
        cleaned_until: i64,
        limits: &CleanerLimits,
        aborted: &[AbortedTxn],
        throttle: &mut Throttle,
    ) -> Result<(OffsetMap, i64), LogError> {
        let mut map = OffsetMap::new(limits.dedupe_buffer_bytes);
        let dirty = plan.first_dirty.map_or(&[][..], |f| &plan.cleanable[f..]);
        let mut end = dirty.last().and_then(sealed).map_or(cleaned_until, |s| s.1);
        'segments: for seg in dirty {
            let mut batches = self.batches(seg).await?;
            while let Some(b) = batches.next(throttle).await? {
                let h = batch::parse(&b).map_err(LogError::Corrupt)?;
                if h.control.is_some() || aborted_data(&h, aborted) {
                    continue;
                }
                let Ok(body) = records::body(&b, &h) else {
                    continue; // kept whole, its keys unknown
                };
                let Some(recs) = records::records_in(&body, &h) else {
                    continue;
                };
                for r in recs.into_iter().filter(|r| r.offset >= cleaned_until) {
                    if let Some(key) = r.key {
                        if !map.put(key, r.offset) {
                            end = r.offset;
                            break 'segments;
                        }
                    }
                }
            }
        }
        Ok((map, end))
    }

    /// A source segment read by a fresh open of its own (close-to-open: a
    /// readers' handle may be stale on NFS), closed when dropped.
    async fn batches(&self, seg: &SegmentMeta) -> io::Result<Batches> {
        let end = sealed(seg).map_or(0, |s| s.0);
        let path = self.dir.join(seg.file_name());
        Ok(Batches {
            file: self.vfs.open(&path, OpenOptions::read()).await?,
            pos: 0,
            end,
            buf: Bytes::new(),
        })
    }

    /// Step 3: the kept records of `sources`, in new segments of at most
    /// `segment.bytes` each, every one durable and closed.
    async fn write_cleaned(
        &self,
        sources: &[SegmentMeta],
        (map, end, (now_ms, horizon), pass): (&OffsetMap, i64, (i64, i64), Cleaning),
        (aborted, created): (&[AbortedTxn], &mut Vec<SegmentId>),
        throttle: &mut Throttle,
        stats: &mut Compacted,
    ) -> io::Result<Vec<SegmentMeta>> {
        let cfg = self.cfg();
        let mut done = Vec::new();
        let mut out: Option<(Output, u64)> = None;
        let mut opaque_before = false;
        // Producers with transactional data kept since their last marker.
        let mut open_data: std::collections::BTreeSet<i64> = std::collections::BTreeSet::new();
        // A marker whose transaction's data is gone goes at its horizon;
        // after a batch the pass could not read, not at all (its data may
        // be in there).
        let expire_marker = |opaque: bool| if opaque { i64::MIN } else { now_ms };
        for seg in sources {
            let (size, next, source_max_ts) = sealed(seg).unwrap_or_default();
            // A cleaned segment holds one epoch's records (the segment list
            // is where OffsetForLeaderEpoch finds each epoch's start), and
            // a takeover's adopted tail only at its start.
            let apart = out.as_ref().is_some_and(|(o, read)| {
                read + size > cfg.segment_bytes
                    || o.meta.epoch != seg.epoch
                    || seg.adopted_until.is_some()
            });
            if apart {
                if let Some((o, _)) = out.take() {
                    done.push(self.finish(o, stats).await?);
                }
            }
            let (o, read) = out.get_or_insert_with(|| {
                (
                    Output {
                        meta: SegmentMeta {
                            base_offset: seg.base_offset,
                            epoch: seg.epoch,
                            cleaned: Some(pass),
                            state: SegmentState::Sealed {
                                end_position: 0,
                                next_offset: next,
                                max_timestamp: -1,
                            },
                            adopted_until: seg.adopted_until,
                            given_up_from: None,
                        },
                        file: None,
                        pending: BytesMut::new(),
                        position: 0,
                        index: SegmentIndex::new(cfg.index_interval_bytes),
                        max_timestamp: -1,
                    },
                    0,
                )
            });
            *read += size;
            if created.last() != Some(&o.meta.id()) {
                created.push(o.meta.id());
            }
            // Retention by time judges the cleaned segment as it judged its
            // sources (an empty one too).
            o.max_timestamp = o.max_timestamp.max(source_max_ts);
            o.meta.state = SegmentState::Sealed {
                end_position: 0,
                next_offset: next,
                max_timestamp: -1,
            };
            stats.segments_read += 1;
            stats.bytes_read += size;
            let mut batches = self.batches(seg).await?;
            while let Some(b) = batches.next(throttle).await? {
                let h = batch::parse(&b).map_err(|e| corrupt(&e.to_string()))?;
                stats.records_read += h.records.max(0) as u64;
                if aborted_data(&h, aborted) {
                    continue;
                }
                if h.control.is_some() && h.base_offset < end {
                    // A marker goes once nothing of its transaction is left
                    // (as Kafka's cleaner does), delete.retention.ms after
                    // the pass that first found it so.
                    if !open_data.remove(&h.producer_id) {
                        match records::delete_horizon(&h) {
                            Some(t) if t <= expire_marker(opaque_before) => {
                                stats.markers_removed.push((h.producer_id, h.base_offset));
                                continue;
                            }
                            Some(t) => stats.horizon(Some(t)),
                            None => {
                                let body = records::body(&b, &h)?;
                                let all = records::records_in(&body, &h)
                                    .ok_or_else(|| corrupt("an unreadable transaction marker"))?;
                                let stamped = records::rebuild(&b, &all, Some(horizon))?;
                                let kh =
                                    batch::parse(&stamped).map_err(|e| corrupt(&e.to_string()))?;
                                stats.horizon(records::delete_horizon(&kh));
                                stats.records_kept += kh.records.max(0) as u64;
                                self.put(o, stamped, &kh, throttle).await?;
                                continue;
                            }
                        }
                    }
                }
                let body = (h.control.is_none() && h.base_offset < end)
                    .then(|| records::body(&b, &h).ok())
                    .flatten();
                // A compressed batch the pass cannot read (it expands past
                // the bound, or does not decompress) stays whole; an older
                // value of a tombstone's key may sit in it, so no
                // tombstone after one goes.
                let opaque = h.control.is_none()
                    && records::is_compressed(&h)
                    && h.base_offset < end
                    && body.is_none();
                if opaque {
                    stats.compressed_batches += 1;
                }
                let expire_at = if opaque_before { i64::MIN } else { now_ms };
                opaque_before |= opaque;
                let mut tombstones = false;
                let kept = match body
                    .as_deref()
                    .and_then(|d| keep(d, &h, map, end, expire_at))
                {
                    None => b,
                    Some(k) if k.is_empty() => continue,
                    Some(k) => {
                        tombstones = k.iter().any(|r| r.value.is_none() && r.offset < end);
                        // Its first pass as its key's newest starts a
                        // tombstone's delete.retention.ms.
                        let stamp = (tombstones && records::delete_horizon(&h).is_none())
                            .then_some(horizon);
                        if stamp.is_none() && k.len() == h.records as usize {
                            b.clone()
                        } else {
                            records::rebuild(&b, &k, stamp)?
                        }
                    }
                };
                let kh = batch::parse(&kept).map_err(|e| corrupt(&e.to_string()))?;
                if tombstones {
                    stats.horizon(records::delete_horizon(&kh));
                }
                if kh.is_transactional() && kh.control.is_none() {
                    open_data.insert(kh.producer_id);
                }
                stats.records_kept += kh.records.max(0) as u64;
                self.put(o, kept, &kh, throttle).await?;
            }
        }
        if let Some((o, _)) = out.take() {
            done.push(self.finish(o, stats).await?);
        }
        Ok(done)
    }

    /// Appends a kept batch to the output, writing a chunk when enough is
    /// pending.
    async fn put(
        &self,
        o: &mut Output,
        b: Bytes,
        h: &batch::BatchHeader,
        throttle: &mut Throttle,
    ) -> io::Result<()> {
        o.index.add(o.position + o.pending.len() as u64, h);
        o.max_timestamp = o.max_timestamp.max(h.max_timestamp);
        o.pending.extend_from_slice(&b);
        if o.pending.len() >= WRITE_CHUNK {
            self.flush_out(o, throttle).await?;
        }
        Ok(())
    }

    async fn create_out(&self, o: &mut Output) -> io::Result<()> {
        if o.file.is_none() {
            let path = self.dir.join(o.meta.file_name());
            o.file = Some(self.vfs.open(&path, OpenOptions::create_new()).await?);
            vfs::fault_point!(self.vfs, "compaction.segment-created");
        }
        Ok(())
    }

    /// Removes the files of a pass that will not swap them in, and their
    /// indexes from memory.
    async fn forget_outputs(&self, ids: &[SegmentId]) {
        {
            let mut v = lock(&self.view);
            for id in ids {
                v.indexes.remove(id);
            }
        }
        let files = ids
            .iter()
            .flat_map(|id| ["log", "index", "timeindex"].map(|e| self.dir.join(id.file(e))))
            .collect();
        self.remove_files(files).await;
    }

    async fn flush_out(&self, o: &mut Output, throttle: &mut Throttle) -> io::Result<()> {
        if o.pending.is_empty() {
            return Ok(());
        }
        self.create_out(o).await?;
        let data = o.pending.split().freeze();
        let n = data.len() as u64;
        if let Some(f) = &o.file {
            f.write_at(o.position, data).await?;
        }
        o.position += n;
        throttle.spend(n).await;
        Ok(())
    }

    /// Makes an output durable and closed, with its indexes. A segment
    /// left with no record is still written: it keeps its epoch's place in
    /// the segment list.
    async fn finish(&self, mut o: Output, stats: &mut Compacted) -> io::Result<SegmentMeta> {
        let mut unthrottled = Throttle::new(None);
        self.create_out(&mut o).await?;
        self.flush_out(&mut o, &mut unthrottled).await?;
        let Some(file) = o.file.take() else {
            return Err(corrupt("a cleaned segment without a file"));
        };
        file.fsync().await?;
        file.close().await?;
        let next = sealed(&o.meta).map_or(0, |s| s.1);
        o.meta.state = SegmentState::Sealed {
            end_position: o.position,
            next_offset: next,
            max_timestamp: o.max_timestamp,
        };
        let (index, timeindex) = o.index.encode();
        for (ext, data) in [("index", index), ("timeindex", timeindex)] {
            let path = self.dir.join(o.meta.id().file(ext));
            // Indexes can be rebuilt from the log; a failure only costs a scan.
            if let Err(e) = atomic_replace(self.vfs.as_ref(), &path, data).await {
                tracing::warn!(index = %path.display(), error = %e, "segment index not written");
            }
        }
        stats.segments_written += 1;
        stats.bytes_written += o.position;
        lock(&self.view)
            .indexes
            .insert(o.meta.id(), Arc::new(Mutex::new(o.index)));
        Ok(o.meta)
    }

    /// Steps 4 and 5: one manifest replace names `outputs` instead of
    /// `sources` (if retention did not take some of them meanwhile), the
    /// fence check, then the old files go.
    async fn swap_in(
        &self,
        sources: Vec<SegmentMeta>,
        outputs: Vec<SegmentMeta>,
        (end, stats): (i64, &Compacted),
    ) -> Result<(), LogError> {
        let new_files = |metas: &[SegmentMeta]| -> Vec<PathBuf> {
            metas
                .iter()
                .flat_map(|s| ["log", "index", "timeindex"].map(|e| self.dir.join(s.id().file(e))))
                .collect()
        };
        // The pass is dropped: its new files were never named, and no
        // later pass of this epoch uses their names.
        let drop_outputs = || async {
            self.remove_files(new_files(&outputs)).await;
            let mut v = lock(&self.view);
            for o in &outputs {
                v.indexes.remove(&o.id());
            }
        };
        let mut w = match self.writer_for_chore().await {
            Ok(w) => w,
            Err(e) => {
                drop_outputs().await;
                return Err(e);
            }
        };
        let at = w
            .manifest
            .segments
            .iter()
            .position(|s| s.id() == sources[0].id())
            .filter(|&i| w.manifest.segments.get(i..i + sources.len()) == Some(sources.as_slice()));
        let failed = w.failed.clone();
        let (Some(at), None) = (at, failed) else {
            // Retention (or a stop) came first.
            drop(w);
            drop_outputs().await;
            return Ok(());
        };
        let mut manifest = w.manifest.clone();
        manifest
            .segments
            .splice(at..at + sources.len(), outputs.iter().cloned());
        manifest.cleaned_until = manifest.cleaned_until.max(end);
        // Every tombstone and marker below `end` went through this pass.
        manifest.delete_horizon = stats.delete_horizon;
        // An aborted range whose marker went has no record left to hide.
        let gone = |a: &AbortedTxn| {
            stats
                .markers_removed
                .contains(&(a.producer_id, a.last_offset))
        };
        manifest.producers.aborted.retain(|a| !gone(a));
        // On an error the new files stay: the replace may have taken
        // effect (a lost reply), and then the volume's manifest names them.
        // The next manifest this epoch writes names the old ones again.
        manifest.write(self.vfs.as_ref(), &self.dir).await?;
        w.manifest = manifest;
        vfs::fault_point!(self.vfs, "compaction.manifest-written");
        // Only a confirmed leader removes the old files: a successor that
        // took over before this manifest was written still names them.
        self.confirm_epoch(&mut w).await?;
        w.producers.aborted.retain(|a| !gone(a));
        {
            let mut view = lock(&self.view);
            view.aborted = Arc::new(w.producers.aborted.clone());
            view.segments = w.manifest.segments.clone();
            for s in &sources {
                view.handles.remove(&s.id());
                view.indexes.remove(&s.id());
            }
        }
        drop(w);
        self.remove_files(new_files(&sources)).await;
        Ok(())
    }
}
