//! Retention by time and size, and DeleteRecords: the manifest moves the
//! log start first, then the old segments' files are unlinked, re-driven on
//! the next pass when an unlink fails.

use super::*;

impl PartitionLog {
    /// Deletes sealed segments past retention: manifest first, then own
    /// handles, then the files; a failed unlink is retried by the next call.
    /// Returns how many segments that held records left the log (an empty
    /// one, sealed by a takeover at a checkpoint with nothing before it,
    /// goes unremarked).
    pub async fn enforce_retention(&self, now_ms: i64) -> Result<usize, LogError> {
        let mut w = self.writer_for_chore().await?;
        if let Some(why) = &w.failed {
            return Err(LogError::Failed(why.clone()));
        }
        let mut doomed = Vec::new();
        let mut with_records = 0;
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
            if *size > 0 {
                with_records += 1;
            }
            doomed.push(seg.clone());
        }
        if !doomed.is_empty() {
            vfs::fault_point!(self.vfs, "retention.decided");
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
            vfs::fault_point!(self.vfs, "retention.manifest-written");
            // A successor never reads this epoch's manifest again: if one
            // took over, the segments are still its, not ours to unlink.
            self.confirm_epoch(&mut w).await?;
        } else if !lock(&self.view).pending_deletes.is_empty() {
            // Files this epoch found unnamed (a takeover's sweep, a
            // compaction's inputs) are a successor's once one took over:
            // its manifest may name them. A log paused past its epoch
            // unlinked the successor's segments so.
            self.confirm_epoch(&mut w).await?;
        }
        let mut to_unlink = {
            let mut view = lock(&self.view);
            view.segments = w.manifest.segments.clone();
            view.log_start_offset = w.manifest.log_start_offset;
            for seg in &doomed {
                view.handles.remove(&seg.id());
                view.indexes.remove(&seg.id());
            }
            std::mem::take(&mut view.pending_deletes)
        };
        drop(w);
        for seg in &doomed {
            for ext in ["log", "index", "timeindex"] {
                to_unlink.push(self.dir.join(seg.id().file(ext)));
            }
        }
        self.remove_files(to_unlink).await;
        Ok(with_records)
    }

    /// Unlinks files no manifest of this epoch names any more; those whose
    /// unlink fails wait for the next retention pass.
    pub(super) async fn remove_files(&self, paths: Vec<PathBuf>) {
        let mut failed = Vec::new();
        for path in paths {
            match self.vfs.unlink(&path).await {
                Ok(()) => vfs::fault_point!(self.vfs, "retention.unlinked"),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::info!(file = %path.display(), error = %e, "unlink failed; retrying at the next retention pass");
                    failed.push(path);
                }
            }
        }
        lock(&self.view).pending_deletes.extend(failed);
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
            vfs::fault_point!(self.vfs, "delete-records.decided");
            let mut manifest = w.manifest.clone();
            manifest.log_start_offset = target;
            manifest.write(self.vfs.as_ref(), &self.dir).await?;
            vfs::fault_point!(self.vfs, "delete-records.manifest-written");
            w.manifest = manifest;
            // Answered only while this epoch leads: a successor that took
            // over meanwhile has the old log start, and keeps it.
            self.confirm_epoch(&mut w).await?;
            lock(&self.view).log_start_offset = target;
        }
        Ok(target.max(start))
    }

    /// The log start offset as ListOffsets (earliest) answers it: read, then
    /// confirmed by a fresh fence check. A leader held past its successor's
    /// takeover remembers the log start of its own epoch, below what the
    /// successor's DeleteRecords and retention moved it to since; answered,
    /// a client would see the log start go back (swarm seed 189: a leader
    /// whose tasks were held answered 0 after its successor had answered a
    /// DeleteRecords with 5).
    pub async fn confirmed_log_start_offset(&self) -> Result<i64, LogError> {
        let start = self.log_start_offset();
        match self.fence.still_leader(self.epoch).await {
            Ok(true) => Ok(start),
            Ok(false) => Err(LogError::Fenced(self.epoch)),
            Err(e) => Err(e.into()),
        }
    }

    /// After a manifest write, whether this epoch still leads: the fence
    /// check a flush makes before it acknowledges. A fenced log stops, and
    /// so does one whose check went unanswered, as a flush's does: its
    /// written manifest is ahead of what it serves (a DeleteRecords then
    /// answered the new log start while ListOffsets answered the old one,
    /// seed 156), and the next epoch's takeover reads the manifest back.
    pub(super) async fn confirm_epoch(&self, w: &mut Writer) -> Result<(), LogError> {
        let (why, err) = match self.fence.still_leader(self.epoch).await {
            Ok(true) => return Ok(()),
            Ok(false) => (
                format!("fenced: epoch {} superseded", self.epoch),
                LogError::Fenced(self.epoch),
            ),
            Err(e) => (
                format!("fence check after a manifest write failed: {e}"),
                e.into(),
            ),
        };
        self.stop(w, why);
        Err(err)
    }

    /// Files still waiting for their unlink to succeed.
    pub fn pending_deletes(&self) -> usize {
        lock(&self.view).pending_deletes.len()
    }
}
