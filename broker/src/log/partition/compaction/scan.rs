//! Reading what a pass cleans: segments batch by batch, in bounded chunks,
//! at the cleaner's I/O rate, and the offset map of the newest offset of
//! each key.

use sha2::{Digest, Sha256};

use super::super::*;

/// Bytes one offset map entry may take: a 16-byte key digest and an 8-byte
/// offset in a B-tree whose nodes (11 entries, 280 bytes) are at least
/// five entries full, plus the inner nodes.
pub(super) const MAP_ENTRY_BYTES: u64 = 64;
/// Bytes read from a segment at a time.
pub(super) const READ_CHUNK: usize = 1 << 20;
/// Bytes written to a new segment at a time.
pub(super) const WRITE_CHUNK: usize = 1 << 20;

/// Newest offset per key digest, never more than `capacity` keys.
pub(super) struct OffsetMap {
    map: BTreeMap<u128, i64>,
    capacity: usize,
}

impl OffsetMap {
    /// How many keys it holds.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn new(buffer_bytes: u64) -> Self {
        Self {
            map: BTreeMap::new(),
            capacity: (buffer_bytes / MAP_ENTRY_BYTES) as usize,
        }
    }

    /// Records `offset` as the newest of `key`; false if the map is full.
    pub(super) fn put(&mut self, key: &[u8], offset: i64) -> bool {
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

    pub(super) fn newest(&self, key: &[u8]) -> Option<i64> {
        self.map.get(&digest(key)).copied()
    }
}

/// 128 bits of SHA-256: two keys sharing a digest would lose the older
/// one's newest value, so the digest must not collide in practice.
pub(super) fn digest(key: &[u8]) -> u128 {
    let d = Sha256::digest(key);
    u128::from_be_bytes(d[..16].try_into().unwrap_or_default())
}

/// Paces a pass's reads and writes to the configured rate.
pub(super) struct Throttle {
    rate: Option<u64>,
    started: tokio::time::Instant,
    bytes: u64,
}

impl Throttle {
    pub(super) fn new(rate: Option<u64>) -> Self {
        Self {
            rate: rate.filter(|r| *r > 0),
            started: tokio::time::Instant::now(),
            bytes: 0,
        }
    }

    pub(super) async fn spend(&mut self, bytes: u64) {
        self.bytes += bytes;
        if let Some(rate) = self.rate {
            let due = std::time::Duration::from_secs_f64(self.bytes as f64 / rate as f64);
            tokio::time::sleep_until(self.started + due).await;
        }
    }
}

/// The batches of a sealed segment up to its end, read a chunk at a time.
pub(super) struct Batches {
    file: Box<dyn VfsFile>,
    pos: u64,
    end: u64,
    buf: Bytes,
}

impl Batches {
    /// The batches of `file` up to `end`.
    pub(super) fn new(file: Box<dyn VfsFile>, end: u64) -> Self {
        Self {
            file,
            pos: 0,
            end,
            buf: Bytes::new(),
        }
    }

    /// The next batch, validated, or `None` at the segment's end.
    pub(super) async fn next(&mut self, throttle: &mut Throttle) -> io::Result<Option<Bytes>> {
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

    pub(super) async fn fill(&mut self, want: usize, throttle: &mut Throttle) -> io::Result<()> {
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

pub(super) fn corrupt(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("compaction: {why}"))
}
