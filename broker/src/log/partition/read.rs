//! Reads: whole batches from the segment holding an offset, through the
//! sparse offset index.

use super::*;

impl PartitionLog {
    /// Reads whole batches starting with the one that holds `offset`, up to
    /// `max_bytes` (at least one batch), never past a sealed end or the
    /// high watermark.
    pub async fn read(&self, offset: i64, max_bytes: usize) -> Result<ReadResult, LogError> {
        Ok(self.read_isolated(offset, max_bytes, false).await?.result)
    }

    /// A read_committed read: like [`Self::read`], but only up to the last
    /// stable offset, with the aborted transactions it overlaps (the
    /// client drops their records).
    pub async fn read_committed(
        &self,
        offset: i64,
        max_bytes: usize,
    ) -> Result<ReadResult, LogError> {
        let mut r = self.read_isolated(offset, max_bytes, true).await?;
        let last = r.records_end.saturating_sub(1);
        r.result.aborted = r
            .aborted
            .iter()
            .filter(|a| a.first_offset <= last && a.last_offset >= offset)
            .copied()
            .collect();
        Ok(r.result)
    }

    async fn read_isolated(
        &self,
        offset: i64,
        max_bytes: usize,
        committed: bool,
    ) -> Result<Isolated, LogError> {
        match self.read_view(offset, max_bytes, committed).await {
            // A compaction pass (or retention) swapped the segments between
            // this read's view and its open, and removed the file: the new
            // view names what replaced it.
            Err(LogError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                self.read_view(offset, max_bytes, committed).await
            }
            r => r,
        }
    }

    async fn read_view(
        &self,
        offset: i64,
        max_bytes: usize,
        committed: bool,
    ) -> Result<Isolated, LogError> {
        let (segments, start, hw, lso, aborted, active_end) = {
            let v = lock(&self.view);
            (
                v.segments.clone(),
                v.log_start_offset,
                v.high_watermark,
                v.last_stable,
                v.aborted.clone(),
                v.active_end,
            )
        };
        let upto = if committed { lso } else { hw };
        let result = |records: Bytes| {
            let records_end = end_of(&records).unwrap_or(offset);
            Isolated {
                result: ReadResult {
                    records,
                    high_watermark: hw,
                    last_stable_offset: lso,
                    log_start_offset: start,
                    aborted: Vec::new(),
                },
                records_end,
                aborted: aborted.clone(),
            }
        };
        if offset < start || offset > hw {
            return Err(LogError::OutOfRange {
                offset,
                start,
                end: hw,
            });
        }
        if offset >= upto {
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
            let (from, expected) = lock(&index)
                .entry_for(offset)
                .unwrap_or((0, seg.base_offset));
            // Offsets are outside a batch's CRC: a flipped one would make a
            // read skip the batch. They run on without gaps, except in a
            // compacted segment, where they only go up.
            let start = Expected {
                offset: expected,
                exact: seg.cleaned.is_none(),
            };
            let (mut out, short) = match collect(
                file.as_ref(),
                (from, start),
                (limit, upto),
                offset,
                max_bytes,
            )
            .await?
            {
                Ok(got) => got,
                // Read again through a fresh open before calling it
                // damage: a long-lived handle may serve stale pages.
                Err(_) => {
                    self.collect_fresh(seg, (from, start), (limit, upto), offset, max_bytes)
                        .await?
                }
            };
            if out.is_empty() && !gap(seg, limit, short, offset) {
                // The records are there (below the segment's end), so this
                // host's view through a long-lived handle is stale (NFS
                // serves reads from cached pages up to a cached size). A
                // fresh open revalidates (close-to-open).
                out = self
                    .collect_fresh(seg, (from, start), (limit, upto), offset, max_bytes)
                    .await?
                    .0;
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
            if out.is_empty() {
                continue;
            }
            return Ok(result(out));
        }
        Ok(result(Bytes::new()))
    }

    /// [`collect`] through a fresh open of `seg` (close-to-open: this
    /// host's long-lived handle may serve stale pages); a damaged batch
    /// there is damage, unless this epoch was superseded: an operator's
    /// `kaas fsck --truncate-damaged` takes the partition over in an epoch
    /// of its own to give the damage up, and this leader's view still
    /// names it. The log stops, so the broker asks for a new epoch.
    async fn collect_fresh(
        &self,
        seg: &SegmentMeta,
        from: (u64, Expected),
        ends: (u64, i64),
        offset: i64,
        max_bytes: usize,
    ) -> Result<(Bytes, bool), LogError> {
        lock(&self.view).handles.remove(&seg.id());
        let file = self.handle(seg).await?;
        match collect(file.as_ref(), from, ends, offset, max_bytes).await? {
            Ok(read) => Ok(read),
            Err((position, why)) => {
                if !self.fence.still_leader(self.epoch).await? {
                    self.stopped
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    return Err(LogError::Fenced(self.epoch));
                }
                Err(LogError::Damaged {
                    segment: self.dir.join(seg.file_name()).display().to_string(),
                    position,
                    why,
                })
            }
        }
    }

    pub(super) async fn handle(&self, seg: &SegmentMeta) -> io::Result<Arc<dyn VfsFile>> {
        let key = seg.id();
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
    pub(super) async fn index_of(
        &self,
        seg: &SegmentMeta,
        file: &dyn VfsFile,
        limit: u64,
    ) -> io::Result<SharedIndex> {
        let key = seg.id();
        if let Some(i) = lock(&self.view).indexes.get(&key) {
            return Ok(i.clone());
        }
        let interval = self.cfg().index_interval_bytes;
        let read = |ext: &str| {
            let path = self.dir.join(key.file(ext));
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
}

/// A read and what a read_committed caller needs to finish it.
struct Isolated {
    result: ReadResult,
    /// The offset after the last record read.
    records_end: i64,
    aborted: Arc<Vec<AbortedTxn>>,
}

/// The offset after the last batch of `records` (whole batches).
fn end_of(records: &[u8]) -> Option<i64> {
    let mut at = 0;
    let mut end = None;
    while let Some(size) = records.get(at..).and_then(batch::peek_size) {
        let h = records.get(at..at + batch::HEADER_LEN)?;
        let base = i64::from_be_bytes(h[0..8].try_into().ok()?);
        let delta = i32::from_be_bytes(h[23..27].try_into().ok()?);
        end = Some(base + i64::from(delta) + 1);
        at += size;
    }
    end
}

/// Whether a read of `seg` that found nothing at `offset` (`short`: its
/// batches ended before `limit`) met a gap. Compaction leaves gaps: a
/// cleaned segment may hold nothing from `offset` on, and `offset` may
/// fall in a gap before a segment (one that holds nothing yet, or whose
/// first batch is past the last stable offset). The next record, if any,
/// is in a later segment. So may an operator's repair, which gives up a
/// damaged segment's offsets from its first bad batch on. A gap is where
/// the segment's batches end below `offset`, never where its file ends
/// before its size.
fn gap(seg: &SegmentMeta, limit: u64, short: bool, offset: i64) -> bool {
    let given_up = seg.given_up_from.is_some_and(|g| offset >= g);
    limit == 0 || !short && (seg.cleaned.is_some() || offset < seg.base_offset || given_up)
}
