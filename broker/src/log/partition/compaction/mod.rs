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

use super::*;
use crate::log::manifest::Cleaning;
use crate::log::records::{self, RawRecord};

mod scan;
mod write;

use scan::{Batches, OffsetMap, Throttle};
use write::aborted_data;

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
        stats.keys = map.len();
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
        let file = self.vfs.open(&path, OpenOptions::read()).await?;
        Ok(Batches::new(file, end))
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
