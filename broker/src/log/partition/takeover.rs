//! Taking over a partition as the leader of a new epoch (the order is in
//! the parent module's docs), and the historical takeovers the simulator
//! can switch back on.

use super::*;
use crate::log::manifest::manifest_path;
use std::collections::BTreeSet;

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
        Self::take_over(vfs, dir, expected, epoch, token, fence, config, None).await
    }

    /// A takeover that, where the plain one holds a damaged partition
    /// offline, gives the damage up (`give_up`) and
    /// says what it gave up: `kaas fsck --repair --truncate-damaged`, on
    /// an operator's word only.
    #[allow(clippy::too_many_arguments)]
    pub async fn give_up_damaged(
        vfs: Arc<dyn Vfs>,
        dir: PathBuf,
        expected: (&str, u32),
        epoch: u32,
        token: &ClaimToken,
        fence: Arc<dyn LeadershipFence>,
        config: LogConfig,
    ) -> Result<(Self, Vec<GivenUp>), LogError> {
        let mut given_up = Vec::new();
        let log = Self::take_over(
            vfs,
            dir,
            expected,
            epoch,
            token,
            fence,
            config,
            Some(&mut given_up),
        )
        .await?;
        Ok((log, given_up))
    }

    #[allow(clippy::too_many_arguments)]
    async fn take_over(
        vfs: Arc<dyn Vfs>,
        dir: PathBuf,
        expected: (&str, u32),
        epoch: u32,
        token: &ClaimToken,
        fence: Arc<dyn LeadershipFence>,
        config: LogConfig,
        mut give_up: Option<&mut Vec<GivenUp>>,
    ) -> Result<Self, LogError> {
        let v = vfs.as_ref();
        if epoch == 0 {
            return Err(
                io::Error::new(io::ErrorKind::InvalidInput, "leader epochs start at 1").into(),
            );
        }
        // Decided, nothing claimed yet: a broker that dies here leaves its
        // epoch unclaimed, and the next leader must fence that gap.
        vfs::fault_point!(v, "takeover.decided");
        #[cfg(madsim)]
        let resurrect = super::resurrected_partition::make_dirs_if_on(v, &dir).await?;
        let previous = claim_and_find_previous(v, &dir, epoch, token)
            .await
            .map_err(unusable_if_unreadable)?;
        #[cfg(madsim)]
        let previous = super::resurrected_partition::empty_log_if_missing(
            resurrect, previous, v, &dir, expected,
        )
        .await?;
        let mut manifest = ours(previous, &dir, expected).map_err(unusable_if_unreadable)?;
        match give_up.as_deref_mut() {
            None => missing_segments(v, &dir, &manifest).await?,
            Some(out) => out.extend(super::give_up::missing(v, &dir, &mut manifest, epoch).await?),
        }
        let mut producers = manifest.producers.clone();
        vfs::fault_point!(v, "takeover.fenced");
        let adopted = adopt_tail(v, &dir, &mut manifest, &mut producers).await?;
        vfs::fault_point!(v, "takeover.tail-read");
        if let Some(out) = give_up {
            out.extend(super::give_up::damaged(v, &dir, &mut manifest).await?);
        }
        #[cfg(madsim)]
        if let Some(at) = adopted
            .checkpoint
            .filter(|_| crate::historical::on("zombie-append"))
        {
            return Self::append_to_previous_segment(
                vfs,
                dir,
                epoch,
                fence,
                config,
                manifest,
                producers,
                adopted.batches,
                at,
                adopted.bytes.len() as u64,
                adopted.max_timestamp,
            )
            .await;
        }
        manifest.producers = producers.clone();
        let active = write_own_segment(v, &dir, epoch, &mut manifest, adopted, &config).await?;
        vfs::fault_point!(v, "takeover.manifest-written");
        let log = Self::assemble(
            (vfs, dir, epoch, fence, config),
            manifest,
            producers,
            active,
        );
        log.sweep_orphans().await;
        Ok(log)
    }

    /// Removes segment files of older epochs that the manifest does not
    /// name: deleted by retention before a crash, or written by a fenced
    /// leader after its epoch ended. Failures are queued for retention.
    pub(super) async fn sweep_orphans(&self) {
        let listed: Vec<SegmentId> = lock(&self.view).segments.iter().map(|s| s.id()).collect();
        let Ok(entries) = self.vfs.read_dir(&self.dir).await else {
            return;
        };
        let mut orphans = Vec::new();
        for e in entries {
            if let Some((id, _)) = parse_segment_file(&e.name) {
                if id.written_in() < self.epoch && !listed.contains(&id) {
                    orphans.push(self.dir.join(&e.name));
                }
            }
        }
        lock(&self.view).pending_deletes.extend(orphans);
    }
}

/// Steps 1 and 2: claims `epoch` (the takeover is visible from here on),
/// then walks down to the newest epoch that wrote a manifest, fencing every
/// epoch on the way.
async fn claim_and_find_previous(
    v: &dyn Vfs,
    dir: &Path,
    epoch: u32,
    token: &ClaimToken,
) -> Result<Option<Manifest>, LogError> {
    let claimed = fence::claim_epoch(v, dir, epoch, token).await?;
    vfs::fault_point!(v, "takeover.epoch-claimed");
    // This process claimed `epoch` before. If it led it (its manifest
    // exists), walking down from the epoch below would replace that
    // manifest without what it acknowledged (seed 84, a log dropped by a
    // late compaction failure; torn-assignment reintroduced, a stale
    // version naming this broker again): only a newer epoch may take the
    // partition over. Without a manifest nothing was acknowledged in it.
    if claimed == fence::Claimed::Before && Manifest::read(v, dir, epoch).await?.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "leader epoch {epoch} of {} was led by this broker before (its manifest \
                 exists); only a newer epoch may take the partition over",
                dir.display()
            ),
        )
        .into());
    }
    for q in (0..epoch).rev() {
        if q > 0 {
            fence::fence_epoch(v, dir, q, token).await?;
            vfs::fault_point!(v, "takeover.older-epoch-fenced");
        }
        if let Some(m) = Manifest::read(v, dir, q).await? {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// An unreadable manifest (garbage, empty, another partition's) is damage:
/// a manifest is only ever replaced whole, so no writer leaves one so.
fn unusable_if_unreadable(e: LogError) -> LogError {
    match e {
        LogError::Io(e) if e.kind() == io::ErrorKind::InvalidData => {
            LogError::Unusable(e.to_string())
        }
        e => e,
    }
}

/// Fails with [`LogError::Unusable`] if a segment `manifest` names is not
/// on the volume: one listing of the directory, and a fresh open of each
/// name it lacks (a listing may be a minute old).
async fn missing_segments(v: &dyn Vfs, dir: &Path, manifest: &Manifest) -> Result<(), LogError> {
    let listed: BTreeSet<String> = v.read_dir(dir).await?.into_iter().map(|e| e.name).collect();
    for segment in &manifest.segments {
        let name = segment.file_name();
        if !listed.contains(&name) && !vfs::exists_now(v, &dir.join(&name)).await? {
            return Err(LogError::Unusable(format!(
                "{} names segment {name} (offsets from {}), which is not on the volume",
                manifest_path(dir, manifest.epoch).display(),
                segment.base_offset
            )));
        }
    }
    Ok(())
}

/// The previous manifest, if it is one of the expected partition's: a
/// missing or foreign partition is an error, never a new empty log.
fn ours(
    previous: Option<Manifest>,
    dir: &Path,
    expected: (&str, u32),
) -> Result<Manifest, LogError> {
    let manifest = previous.ok_or_else(|| {
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
    Ok(manifest)
}

/// The previous leader's tail, copied into this epoch's segment.
struct Adopted {
    bytes: Bytes,
    /// `(position in the copy, header)` of each adopted batch.
    batches: Vec<(u64, batch::BatchHeader)>,
    max_timestamp: i64,
    /// Where the previous segment was sealed, if it was active.
    checkpoint: Option<u64>,
}

/// Step 3: scans the previous manifest's active segment from its
/// checkpoint to the last valid batch, seals it at the checkpoint (in
/// `manifest`, written later) and returns the tail to adopt; producer
/// state learns the tail's batches.
async fn adopt_tail(
    v: &dyn Vfs,
    dir: &Path,
    manifest: &mut Manifest,
    producers: &mut ProducerState,
) -> Result<Adopted, LogError> {
    // The previous leader's bytes past its checkpoint may never have
    // been committed at the NFS server (written, seen by this host,
    // then dropped by a server restart), so they are not sealed in
    // place: the valid ones are copied into this epoch's segment and
    // made durable here, and the old segment is sealed at the
    // checkpoint, which only ever names committed data.
    let mut adopted = Adopted {
        bytes: Bytes::new(),
        batches: Vec::new(),
        max_timestamp: -1,
        checkpoint: None,
    };
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
                adopted.batches.push((pos - checkpoint_position, *h));
            }
            adopted.bytes = bytes;
            adopted.max_timestamp = tail.max_timestamp;
            adopted.checkpoint = Some(checkpoint_position);
            last.state = SegmentState::Sealed {
                end_position: checkpoint_position,
                next_offset: checkpoint_next_offset,
                max_timestamp,
            };
        }
    }
    Ok(adopted)
}

/// Step 4: this epoch's own segment, holding a durable copy of the adopted
/// tail, then `manifest-<epoch>` naming it (the previous segment sealed at
/// its checkpoint by [`adopt_tail`]).
async fn write_own_segment(
    v: &dyn Vfs,
    dir: &Path,
    epoch: u32,
    manifest: &mut Manifest,
    adopted: Adopted,
    config: &LogConfig,
) -> Result<ActiveSegment, LogError> {
    let base_offset = manifest.next_offset();
    let next_offset = adopted
        .batches
        .last()
        .map_or(base_offset, |(_, h)| h.next_offset());
    let position = adopted.bytes.len() as u64;
    let own = SegmentMeta {
        base_offset,
        epoch,
        state: SegmentState::Active {
            checkpoint_position: position,
            checkpoint_next_offset: next_offset,
            max_timestamp: adopted.max_timestamp,
        },
        adopted_until: (next_offset > base_offset).then_some(next_offset),
        cleaned: None,
        given_up_from: None,
    };
    let own_id = own.id();
    let file = v
        .open(&dir.join(own.file_name()), OpenOptions::create_new())
        .await?;
    if !adopted.bytes.is_empty() {
        file.write_all_and_sync(0, vec![adopted.bytes]).await?;
    }
    vfs::fault_point!(v, "takeover.segment-written");
    manifest.epoch = epoch;
    manifest.segments.push(own);
    manifest.write(v, dir).await?;
    let mut index = SegmentIndex::new(config.index_interval_bytes);
    for (pos, h) in &adopted.batches {
        index.add(*pos, h);
    }
    Ok(ActiveSegment {
        file,
        key: own_id,
        index,
        position,
        next_offset,
        max_timestamp: adopted.max_timestamp,
    })
}
