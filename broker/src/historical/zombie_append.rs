//! Scenario `zombie-append`: a new leader that appended to its
//! predecessor's segment. Compiled as a child of `log::partition` (see the
//! `#[path]` there): it needs the log's internals, which stay private.

use super::*;

/// The offset after a segment's last record, as its manifest entry says.
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
    /// The historical takeover (scenario `zombie-append`): the new leader
    /// goes on appending to the previous epoch's segment, at the end its
    /// own scan saw, instead of a segment of its own. A paused predecessor
    /// that wakes up and flushes writes into the same file at the same
    /// positions.
    #[cfg(madsim)]
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn append_to_previous_segment(
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
        let key = last.id();
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
}
