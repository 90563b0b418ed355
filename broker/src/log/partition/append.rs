//! Appends: one write and one fsync per flush cycle for every waiting
//! request, acknowledged only after the leadership check that follows the
//! fsync; checkpoints and segment rolls.

use std::future::Future;

use tokio::sync::oneshot;

use super::*;

/// Whether the active segment has held records for `age` ms. A clock
/// stepped back (NTP) moves the start back with it: otherwise the roll
/// would wait as long as the clock stepped.
pub(super) fn roll_due(w: &mut Writer, now_ms: i64, age: i64) -> bool {
    if w.position == 0 {
        w.written_since = None;
        return false;
    }
    let since = w.written_since.get_or_insert(now_ms);
    *since = (*since).min(now_ms);
    now_ms.saturating_sub(*since) >= age
}

/// What a queued append was answered, once its flush cycle ended.
async fn answer(epoch: u32, done: oneshot::Receiver<Reply>) -> Result<Appended, LogError> {
    match done.await {
        Ok(Ok(a)) => Ok(a),
        Ok(Err(Refusal::Fenced)) => Err(LogError::Fenced(epoch)),
        Ok(Err(Refusal::Failed(msg))) => Err(LogError::Failed(msg)),
        Ok(Err(Refusal::Full(msg))) => Err(LogError::VolumeFull(msg)),
        Ok(Err(Refusal::OutOfOrder)) => Err(LogError::OutOfOrderSequence),
        Ok(Err(Refusal::StaleEpoch)) => Err(LogError::InvalidProducerEpoch),
        Ok(Err(Refusal::NotInTransaction)) => Err(LogError::NotInTransaction),
        Ok(Err(Refusal::ZombieCoordinator)) => Err(LogError::ZombieCoordinator),
        Err(_) => Err(LogError::Failed("append abandoned".into())),
    }
}

impl PartitionLog {
    /// Appends a produce request's record set (one or more v2 batches) and
    /// returns once it is durable and this epoch was confirmed after the
    /// fsync. Concurrent appends share flush cycles. The flush runs in the
    /// caller's future: for a caller that owns the log and awaits this
    /// directly (tests, tools); the broker's requests use [`Self::enqueue`].
    pub async fn append(&self, records: Bytes) -> Result<Appended, LogError> {
        let (id, done) = self.queue(records)?;
        self.flush_if_queued(id).await;
        answer(self.epoch, done).await
    }

    /// [`Self::append`] in two steps: the record set takes its place in the
    /// log's queue now, and the returned future waits for its flush cycle.
    /// Record sets queued one after another are appended in that order
    /// even when their futures run concurrently, so that a connection's
    /// pipelined requests can join one flush cycle and keep their order.
    ///
    /// The flush cycle runs in a task of its own, not in the returned
    /// future: it holds the log's writer while it writes, syncs and checks
    /// the epoch, and a future that holds the writer must never depend on
    /// its caller to be polled (a connection starting its next request
    /// while this one's future waits unpolled held the writer forever, and
    /// everything else that needed it: the next request, retention, the
    /// broker's follow loop) nor be dropped half way (a client that goes
    /// away must not cut a roll between its manifest and its file swap).
    pub fn enqueue(
        self: &Arc<Self>,
        records: Bytes,
    ) -> Result<impl Future<Output = Result<Appended, LogError>> + Send + 'static, LogError> {
        let (id, done) = self.queue(records)?;
        let log = self.clone();
        tokio::spawn(async move { log.flush_if_queued(id).await });
        Ok(answer(self.epoch, done))
    }

    fn queue(&self, records: Bytes) -> Result<(u64, oneshot::Receiver<Reply>), LogError> {
        let headers = batch::split(&records)?;
        if headers.is_empty() {
            return Err(BatchError::TooShort(0).into());
        }
        let (reply, done) = oneshot::channel();
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.queue).push(Pending {
            id,
            records,
            headers,
            reply,
        });
        Ok((id, done))
    }

    /// Group commit: whoever gets the writer while request `id` is still
    /// queued flushes everything queued by then in one cycle. A flusher
    /// whose request another cycle already took lets go at once, so queued
    /// requests wait for one flusher, not one each.
    async fn flush_if_queued(&self, id: u64) {
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
            *lock(&self.flushing_since) = Some(tokio::time::Instant::now());
            self.flush(&mut writer, batch).await;
            *lock(&self.flushing_since) = None;
        }
    }

    /// How long the flush cycle under way has been running, if one is.
    pub fn flushing_for(&self) -> Option<std::time::Duration> {
        lock(&self.flushing_since).map(|t| t.elapsed())
    }

    pub(super) async fn flush(&self, w: &mut Writer, batch: Vec<Pending>) {
        if let Some(why) = &w.failed {
            for p in batch {
                let _ = p.reply.send(Err(Refusal::Failed(why.clone())));
            }
            return;
        }
        let (mut batch, duplicates) = self.check_sequences(w, batch);
        let (chunks, placed, next) = self.stamp(w.next_offset, &mut batch);
        let written: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        let outcome = async {
            w.file.write_all_and_sync(w.position, chunks).await?;
            vfs::fault_point!(self.vfs, "flush.synced");
            self.fence.still_leader(self.epoch).await
        }
        .await;
        let failure = match outcome {
            Ok(true) => None,
            Ok(false) => Some(format!("fenced: epoch {} superseded", self.epoch)),
            Err(e) if is_full(&e) => {
                // Nothing moved: the writer's position, offsets and state
                // are still the acknowledged end, and the next cycle
                // writes over whatever of this one reached the file
                // (bytes nobody reads: past the high watermark and the
                // checkpoint). So the log goes on, refusing each request
                // promptly until space is back, never losing its epoch.
                if !self.full.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::error!(dir = %self.dir.display(), error = %e, "the volume is full: produce requests to this partition fail with KAFKA_STORAGE_ERROR until space is freed");
                }
                let why = e.to_string();
                for p in batch
                    .into_iter()
                    .chain(duplicates.into_iter().map(|(p, _)| p))
                {
                    let _ = p.reply.send(Err(Refusal::Full(why.clone())));
                }
                return;
            }
            Err(e) => Some(format!("flush of {} failed: {e}", self.dir.display())),
        };
        if let Some(why) = failure {
            // Nothing of this cycle is acknowledged, and nothing after it:
            // the file's tail is unknown now, and a successor seals it.
            self.stop(w, why.clone());
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
        self.advance(w, &batch, written, next);
        if self.full.swap(false, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(dir = %self.dir.display(), "space is back: the partition takes writes again");
        }
        for (p, a) in batch.into_iter().zip(placed).chain(duplicates) {
            let _ = p.reply.send(Ok(a));
        }
        vfs::fault_point!(self.vfs, "flush.acknowledged");
        match self.after_flush(w).await {
            Ok(()) => {}
            // The roll or checkpoint stays due and is tried again after
            // the next flush: neither changed the writer's state.
            Err(e) if is_full(&e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "roll or checkpoint put off: the volume is full");
            }
            Err(e) => self.stop(w, format!("roll or checkpoint failed: {e}")),
        }
    }

    /// Gives each batch of the cycle its offsets and this epoch: a stamped
    /// copy of its first bytes, then the rest of the batch as received (the
    /// request's buffer is shared with its decoded names, and copying
    /// every batch cost a sixth of the broker's CPU). Returns the chunks to
    /// write, each request's offsets and the next offset after the cycle.
    fn stamp(&self, first: i64, batch: &mut [Pending]) -> (Vec<Bytes>, Vec<Appended>, i64) {
        let mut chunks = Vec::with_capacity(2 * batch.len());
        let mut placed = Vec::with_capacity(batch.len());
        let mut next = first;
        for p in batch {
            let base = next;
            let records = std::mem::take(&mut p.records);
            let mut at = 0;
            for h in &p.headers {
                let mut head = [0; batch::STAMPED_BYTES];
                head.copy_from_slice(&records[at..at + batch::STAMPED_BYTES]);
                batch::stamp(&mut head, next, self.epoch as i32);
                chunks.push(Bytes::copy_from_slice(&head));
                chunks.push(records.slice(at + batch::STAMPED_BYTES..at + h.size));
                at += h.size;
                next += i64::from(h.last_offset_delta) + 1;
            }
            placed.push(Appended {
                base_offset: base,
                last_offset: next - 1,
            });
        }
        (chunks, placed, next)
    }

    /// After a confirmed cycle: the index, producer state, positions and
    /// the readers' view move past it (readers see it only from here on).
    fn advance(&self, w: &mut Writer, batch: &[Pending], written: u64, next: i64) {
        let mut pos = w.position;
        let mut offset = w.next_offset;
        let aborted = w.producers.aborted.len();
        let mut txn_moved = false;
        for p in batch {
            for h in &p.headers {
                let mut stored = *h;
                stored.base_offset = offset;
                stored.leader_epoch = self.epoch as i32;
                offset = stored.next_offset();
                lock(&w.index).add(pos, &stored);
                w.producers.observe(&stored);
                if h.is_transactional() {
                    // Opened, or ended by a marker: the verification is used.
                    lock(&self.verified).remove(&h.producer_id);
                    txn_moved = true;
                }
                w.max_timestamp = w.max_timestamp.max(stored.max_timestamp);
                pos += h.size as u64;
            }
        }
        debug_assert_eq!(pos - w.position, written);
        if pos > w.position {
            w.unchecked_since
                .get_or_insert_with(tokio::time::Instant::now);
        }
        w.since_checkpoint += pos - w.position;
        w.position = pos;
        w.next_offset = next;
        let mut view = lock(&self.view);
        view.high_watermark = next;
        view.last_stable = w.producers.last_stable(next);
        if w.producers.aborted.len() != aborted {
            view.aborted = Arc::new(w.producers.aborted.clone());
        }
        if txn_moved {
            view.open_txns = w.producers.open_transactions();
        }
        view.active_end = pos;
        view.active_max_timestamp = w.max_timestamp;
    }

    /// Applies the idempotent producers' sequence rules to a cycle, in queue
    /// order: batches this cycle already took count, so two in-flight
    /// batches of one producer are checked against each other. Refused
    /// requests are answered at once; duplicates are answered with their
    /// original offsets once this cycle is confirmed (the original may be
    /// in it).
    pub(super) fn check_sequences(
        &self,
        w: &Writer,
        batch: Vec<Pending>,
    ) -> (Vec<Pending>, Vec<(Pending, Appended)>) {
        let verified = lock(&self.verified).clone();
        let mut taken = ProducerState::default();
        let mut next = w.next_offset;
        let mut append = Vec::with_capacity(batch.len());
        let mut duplicates = Vec::new();
        for p in batch {
            let mut trial = taken.clone();
            let mut verdict = Sequence::Next;
            let mut offset = next;
            let mut refused = None;
            for h in &p.headers {
                if h.producer_id >= 0 && !trial.producers.contains_key(&h.producer_id) {
                    if let Some(e) = w.producers.producers.get(&h.producer_id) {
                        trial.producers.insert(h.producer_id, e.clone());
                    }
                }
                verdict = trial.check(h, verified.get(&h.producer_id).copied());
                if verdict != Sequence::Next {
                    refused = Some(*h);
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
                Sequence::NotInTransaction => {
                    let _ = p.reply.send(Err(Refusal::NotInTransaction));
                }
                Sequence::ZombieCoordinator => {
                    let _ = p.reply.send(Err(Refusal::ZombieCoordinator));
                }
                Sequence::Duplicate { .. } | Sequence::OutOfOrder => {
                    // A client answered OUT_OF_ORDER_SEQUENCE_NUMBER starts
                    // a new producer epoch and may send records again:
                    // worth a line, as in Kafka's broker log.
                    if let Some(h) = refused {
                        let known = trial.producers.get(&h.producer_id);
                        tracing::warn!(
                            partition = %self.dir.display(),
                            producer_id = h.producer_id,
                            producer_epoch = h.producer_epoch,
                            base_sequence = h.base_sequence,
                            last_offset_delta = h.last_offset_delta,
                            batches_in_request = p.headers.len(),
                            known_epoch = known.map(|e| e.epoch),
                            known_batches = ?known.map(|e| &e.recent),
                            "out of order sequence refused"
                        );
                    }
                    let _ = p.reply.send(Err(Refusal::OutOfOrder));
                }
            }
        }
        (append, duplicates)
    }

    /// Rolls the segment or rewrites the checkpoint when due. Runs only
    /// after a confirmed flush, so the manifest never names unacknowledged data.
    pub(super) async fn after_flush(&self, w: &mut Writer) -> io::Result<()> {
        if w.position >= self.cfg().segment_bytes {
            return self.roll(w).await;
        }
        let cfg = self.cfg();
        let overdue = w
            .unchecked_since
            .is_some_and(|t| t.elapsed() >= cfg.checkpoint_interval);
        if w.since_checkpoint >= cfg.checkpoint_bytes || overdue {
            self.write_checkpoint(w).await?;
        }
        Ok(())
    }

    /// Rolls the active segment once it has held records for `segment.ms`
    /// (Kafka rolls by the age of its first record; kaas by when this
    /// leader first saw it non-empty, as the segment's first record may
    /// carry any timestamp): a compacted or time-retained topic that is
    /// written slowly gets sealed segments to clean and remove.
    pub async fn roll_if_due(&self, now_ms: i64) -> Result<bool, LogError> {
        let Some(age) = self.cfg().segment_ms else {
            return Ok(false);
        };
        let mut w = self.writer_for_chore().await?;
        if let Some(why) = &w.failed {
            return Err(LogError::Failed(why.clone()));
        }
        if !roll_due(&mut w, now_ms, age) {
            return Ok(false);
        }
        if let Err(e) = self.roll(&mut w).await {
            if is_full(&e) {
                // Put off, as after a flush: the next roll reuses its file.
                return Err(e.into());
            }
            // As after a flush: the roll's file may exist without the
            // manifest naming it, so a retry in this epoch would find it;
            // a new epoch starts from the manifest.
            let why = format!("roll by segment.ms failed: {e}");
            self.stop(&mut w, why.clone());
            return Err(LogError::Failed(why));
        }
        // As after a flush's roll: a successor may have taken over.
        self.confirm_epoch(&mut w).await?;
        Ok(true)
    }

    pub(super) async fn write_checkpoint(&self, w: &mut Writer) -> io::Result<()> {
        write_checkpoint(&self.vfs, &self.dir, w).await
    }

    pub(super) async fn roll(&self, w: &mut Writer) -> io::Result<()> {
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
            let path = self.dir.join(sealed.id().file(ext));
            // Indexes can be rebuilt from the log; a failure only costs a scan.
            if let Err(e) = atomic_replace(v, &path, data).await {
                tracing::warn!(index = %path.display(), error = %e, "segment index not written");
            }
        }
        let next = SegmentMeta {
            adopted_until: None,
            cleaned: None,
            given_up_from: None,
            base_offset: w.next_offset,
            epoch: self.epoch,
            state: SegmentState::Active {
                checkpoint_position: 0,
                checkpoint_next_offset: w.next_offset,
                max_timestamp: -1,
            },
        };
        vfs::fault_point!(v, "roll.indexes-written");
        let path = self.dir.join(next.file_name());
        let file = match v.open(&path, OpenOptions::create_new()).await {
            Ok(file) => file,
            // This epoch's own segment from a roll whose manifest write
            // failed for want of space: nobody else creates this name
            // and no manifest names it, so it is this roll's to use.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && w.roll_put_off => {
                v.open(&path, OpenOptions::write()).await?
            }
            Err(e) => return Err(e),
        };
        vfs::fault_point!(v, "roll.segment-created");
        let mut manifest = w.manifest.clone();
        if let Some(last) = manifest.segments.last_mut() {
            *last = sealed.clone();
        }
        manifest.segments.push(next.clone());
        w.producers.prune(manifest.log_start_offset);
        manifest.producers = w.producers.clone();
        if let Err(e) = manifest.write(v, &self.dir).await {
            w.roll_put_off = is_full(&e);
            let _ = file.close().await;
            return Err(e);
        }
        w.roll_put_off = false;
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
        w.unchecked_since = None;
        w.written_since = None;
        let mut view = lock(&self.view);
        view.indexes.insert(next.id(), w.index.clone());
        view.segments = w.manifest.segments.clone();
        view.active_end = 0;
        view.active_max_timestamp = -1;
        Ok(())
    }
}

/// Records in this epoch's manifest that the active segment was
/// acknowledged up to the writer's position (only ever durable, confirmed
/// data: the writer moves past a flush cycle once it was).
pub(super) async fn write_checkpoint(
    vfs: &Arc<dyn Vfs>,
    dir: &Path,
    w: &mut Writer,
) -> io::Result<()> {
    if let Some(last) = w.manifest.segments.last_mut() {
        last.state = SegmentState::Active {
            checkpoint_position: w.position,
            checkpoint_next_offset: w.next_offset,
            max_timestamp: w.max_timestamp,
        };
    }
    w.producers.prune(w.manifest.log_start_offset);
    w.manifest.producers = w.producers.clone();
    let v = vfs.as_ref();
    w.manifest.write(v, dir).await?;
    vfs::fault_point!(v, "checkpoint.written");
    w.since_checkpoint = 0;
    w.unchecked_since = None;
    Ok(())
}
