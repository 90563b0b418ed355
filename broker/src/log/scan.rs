//! Reading a segment file batch by batch, validating as it goes, and the
//! sparse indexes built from that walk.

use std::io;

use bytes::{BufMut, Bytes, BytesMut};
use vfs::VfsFile;
use vfs::durable::{EnvelopeError, open_envelope, seal};

use super::batch::{self, BatchHeader};

const CHUNK: usize = 1 << 20;

/// One entry of the sparse index: the batch starting at `position` has base
/// offset `offset`; `max_timestamp` covers every batch before the next entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub offset: i64,
    pub position: u64,
    pub max_timestamp: i64,
}

/// The sparse offset and time index of one segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SegmentIndex {
    pub entries: Vec<IndexEntry>,
    interval: u64,
    last_indexed: Option<u64>,
}

impl SegmentIndex {
    pub fn new(interval: u64) -> Self {
        Self {
            entries: Vec::new(),
            interval: interval.max(1),
            last_indexed: None,
        }
    }

    /// Notes a batch written at `position`.
    pub fn add(&mut self, position: u64, h: &BatchHeader) {
        let due = self
            .last_indexed
            .is_none_or(|last| position >= last + self.interval);
        if due {
            self.entries.push(IndexEntry {
                offset: h.base_offset,
                position,
                max_timestamp: h.max_timestamp,
            });
            self.last_indexed = Some(position);
        } else if let Some(e) = self.entries.last_mut() {
            e.max_timestamp = e.max_timestamp.max(h.max_timestamp);
        }
    }

    /// The indexed batch at or before `offset`: its position and base
    /// offset, or `None` before the first entry (start at position 0).
    pub(crate) fn entry_for(&self, offset: i64) -> Option<(u64, i64)> {
        let i = self.entries.partition_point(|e| e.offset <= offset);
        (i > 0).then(|| (self.entries[i - 1].position, self.entries[i - 1].offset))
    }

    /// The first entry whose batches may hold a timestamp `>= ts`.
    pub(crate) fn position_for_timestamp(&self, ts: i64) -> Option<u64> {
        self.entries
            .iter()
            .find(|e| e.max_timestamp >= ts)
            .map(|e| e.position)
    }

    /// The two on-volume files: `.index` (offset -> position) and
    /// `.timeindex` (max timestamp -> offset), each in an envelope.
    pub fn encode(&self) -> (Bytes, Bytes) {
        let mut offsets = BytesMut::with_capacity(self.entries.len() * 16);
        let mut times = BytesMut::with_capacity(self.entries.len() * 16);
        for e in &self.entries {
            offsets.put_i64(e.offset);
            offsets.put_u64(e.position);
            times.put_i64(e.max_timestamp);
            times.put_i64(e.offset);
        }
        (seal("offset-index", &offsets), seal("time-index", &times))
    }

    pub fn decode(index: &[u8], timeindex: &[u8], interval: u64) -> Result<Self, EnvelopeError> {
        let offsets = open_envelope("offset-index", index)?;
        let times = open_envelope("time-index", timeindex)?;
        if offsets.len() % 16 != 0 || offsets.len() != times.len() {
            return Err(EnvelopeError::Payload("index sizes do not match".into()));
        }
        let word =
            |b: &[u8], at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap_or_default());
        let entries = (0..offsets.len() / 16)
            .map(|i| IndexEntry {
                offset: word(offsets, i * 16),
                position: word(offsets, i * 16 + 8) as u64,
                max_timestamp: word(times, i * 16),
            })
            .collect::<Vec<_>>();
        Ok(Self {
            last_indexed: entries.last().map(|e| e.position),
            entries,
            interval: interval.max(1),
        })
    }
}

/// Where a walk over a segment stopped.
#[derive(Debug)]
pub(crate) struct Scan {
    /// End of the last valid batch.
    pub end_position: u64,
    pub next_offset: i64,
    pub max_timestamp: i64,
    /// Valid batches found, with their positions.
    pub batches: Vec<(u64, BatchHeader)>,
    /// Why the walk stopped before the end of the file, if it did.
    pub cut: Option<String>,
    /// File size seen by the walk.
    pub file_len: u64,
}

/// Walks `file` from `position` (where a batch with base offset
/// `next_offset` starts) to the end of the file or `limit`, stopping at the
/// first batch that is incomplete, fails its CRC, or does not continue the
/// offsets: what follows is a torn tail or a fenced writer's late bytes.
pub(crate) async fn scan(
    file: &dyn VfsFile,
    mut position: u64,
    mut next_offset: i64,
    limit: Option<u64>,
) -> io::Result<Scan> {
    let file_len = file.stat().await?.len;
    let end = limit.map_or(file_len, |l| l.min(file_len));
    let mut out = Scan {
        end_position: position,
        next_offset,
        max_timestamp: -1,
        batches: Vec::new(),
        cut: None,
        file_len,
    };
    let mut buf = Bytes::new();
    let mut buf_start = position;
    while position < end {
        let at = (position - buf_start) as usize;
        let need = batch::peek_size(&buf[at.min(buf.len())..]).unwrap_or(batch::HEADER_LEN);
        if buf.len() < at + need {
            let want = (need.max(CHUNK) as u64).min(end - position) as usize;
            buf = file.read_at(position, want).await?;
            buf_start = position;
            if buf.len() < need {
                out.cut = Some(format!(
                    "incomplete batch at position {position} ({} of {need} bytes)",
                    buf.len()
                ));
                break;
            }
            continue;
        }
        let header = match batch::parse(&buf[at..]) {
            Ok(h) => h,
            Err(e) => {
                out.cut = Some(format!("invalid batch at position {position}: {e}"));
                break;
            }
        };
        if header.base_offset != next_offset {
            out.cut = Some(format!(
                "batch at position {position} has base offset {}, expected {next_offset}",
                header.base_offset
            ));
            break;
        }
        if position + header.size as u64 > end {
            out.cut = Some(format!(
                "batch at position {position} crosses the sealed end"
            ));
            break;
        }
        out.batches.push((position, header));
        position += header.size as u64;
        next_offset = header.next_offset();
        out.end_position = position;
        out.next_offset = next_offset;
        out.max_timestamp = out.max_timestamp.max(header.max_timestamp);
    }
    Ok(out)
}

/// Reads a file forward through one buffer, so that walking many small
/// batches costs one read call per window instead of two per batch: with
/// O_DIRECT on NFS (`vfs::PosixVfs::direct_io`) every call is a round trip
/// to the server, and a fetch of a thousand small batches made that many
/// trips (a simulated fetch from offset 0 of a few thousand batches ran
/// past its client's timeout on every try).
pub(crate) struct Window<'f> {
    file: &'f dyn VfsFile,
    start: u64,
    buf: Bytes,
    /// How much one read asks for when it may (never past `limit`).
    want: usize,
    limit: u64,
}

impl<'f> Window<'f> {
    pub fn new(file: &'f dyn VfsFile, want: usize, limit: u64) -> Self {
        Self {
            file,
            start: 0,
            buf: Bytes::new(),
            want,
            limit,
        }
    }

    /// `len` bytes at `pos`, fewer only where the file ends, as `read_at`
    /// answers. Reads past `limit` only as far as `len` asks.
    pub async fn get(&mut self, pos: u64, len: usize) -> io::Result<Bytes> {
        let held = self.start + self.buf.len() as u64;
        if pos >= self.start && pos + len as u64 <= held {
            let at = (pos - self.start) as usize;
            return Ok(self.buf.slice(at..at + len));
        }
        let ahead = self.limit.saturating_sub(pos).min(self.want as u64) as usize;
        self.buf = self.file.read_at(pos, len.max(ahead)).await?;
        self.start = pos;
        Ok(self.buf.slice(..len.min(self.buf.len())))
    }
}

/// The first whole batch from `position` (a batch boundary) up to `limit`
/// whose max timestamp is at least `ts`. Only headers are read until one
/// matches; a short read (a file shorter than its sealed end) ends the walk.
pub(crate) async fn first_batch_reaching(
    file: &dyn VfsFile,
    mut position: u64,
    limit: u64,
    ts: i64,
) -> io::Result<Option<Bytes>> {
    let mut window = Window::new(file, CHUNK, limit);
    while position + batch::HEADER_LEN as u64 <= limit {
        let head = window.get(position, batch::HEADER_LEN).await?;
        let (Some(size), Some(max_timestamp)) =
            (batch::peek_size(&head), batch::peek_max_timestamp(&head))
        else {
            return Ok(None);
        };
        if position + size as u64 > limit {
            return Ok(None);
        }
        if max_timestamp >= ts {
            let whole = window.get(position, size).await?;
            return Ok((whole.len() == size).then_some(whole));
        }
        position += size as u64;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_at(offset: i64, ts: i64) -> BatchHeader {
        let mut b = batch::build((-1, -1, -1), ts, &[b"x"]).to_vec();
        batch::stamp(&mut b, offset, 0);
        batch::parse(&b).unwrap()
    }

    #[test]
    fn the_index_is_sparse_and_finds_the_entry_at_or_before() {
        let mut idx = SegmentIndex::new(100);
        for i in 0..10u64 {
            idx.add(i * 40, &header_at(i as i64, i as i64 * 10));
        }
        let positions: Vec<_> = idx.entries.iter().map(|e| e.position).collect();
        assert_eq!(positions, [0, 120, 240, 360]);
        assert_eq!(idx.entry_for(4), Some((120, 3)));
        assert_eq!(idx.entry_for(0), Some((0, 0)));
        assert_eq!(idx.entry_for(100), Some((360, 9)));
        assert_eq!(idx.entry_for(-1), None);
        assert_eq!(idx.position_for_timestamp(35), Some(120));
        let (a, b) = idx.encode();
        assert_eq!(SegmentIndex::decode(&a, &b, 100).unwrap(), idx);
        assert!(SegmentIndex::decode(&b, &a, 100).is_err());
    }
}
