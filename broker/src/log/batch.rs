//! Kafka record batches (magic v2) as they travel and as they are stored.
//!
//! kaas stores batches byte for byte as producers sent them. It validates the
//! header and the CRC-32C, then rewrites only the two fields Kafka's CRC does
//! not cover: the base offset and the partition leader epoch. Records are
//! never decompressed or re-encoded, so every compression codec passes
//! through untouched.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes before the records: the fixed v2 header.
pub(crate) const HEADER_LEN: usize = 61;
/// `baseOffset` + `batchLength`: what precedes the length-counted part.
pub(crate) const LOG_OVERHEAD: usize = 12;
const MAGIC_OFFSET: usize = 16;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("batch is {0} bytes, shorter than the 61-byte v2 header")]
    TooShort(usize),
    #[error("batch length field says {declared} bytes, {available} available")]
    Truncated { declared: usize, available: usize },
    #[error("unsupported record batch magic {0} (only v2 is accepted)")]
    Magic(i8),
    #[error("CRC-32C mismatch: stored {stored:08x}, computed {computed:08x}")]
    Crc { stored: u32, computed: u32 },
    #[error("invalid batch header: {0}")]
    Header(&'static str),
}

/// The header fields kaas needs, read from a validated batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Total bytes of the batch, header included.
    pub size: usize,
    pub leader_epoch: i32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records: i32,
    /// A control batch's marker; `None` for data.
    pub control: Option<Control>,
}

/// What a transaction marker says: how the transaction ended, and the
/// epoch of the coordinator that decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    pub marker: Marker,
    pub coordinator_epoch: i32,
}

/// The control record of a transaction marker: how a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Abort,
    Commit,
}

/// Attribute bits of a v2 batch (Kafka's `RecordBatch`).
pub(crate) const TRANSACTIONAL: i16 = 0x10;
pub(crate) const CONTROL: i16 = 0x20;

impl BatchHeader {
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL != 0
    }

    /// Saturating: a batch read from a damaged file may carry any base
    /// offset, and must not overflow the arithmetic of its reader.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(i64::from(self.last_offset_delta))
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }
}

/// Reads the total size of the batch starting at `buf` from its length
/// field, if at least the first 12 bytes are there.
pub(crate) fn peek_size(buf: &[u8]) -> Option<usize> {
    let len = i32::from_be_bytes(buf.get(8..12)?.try_into().ok()?);
    usize::try_from(len).ok().map(|l| l + LOG_OVERHEAD)
}

/// Reads the max timestamp from a batch header, if the header is all there.
pub(crate) fn peek_max_timestamp(buf: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(buf.get(35..43)?.try_into().ok()?))
}

/// Validates the batch at the start of `buf` (header, length, CRC) and
/// returns its header. Bytes after the batch are ignored.
pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    if buf.len() < HEADER_LEN {
        return Err(BatchError::TooShort(buf.len()));
    }
    let magic = buf[MAGIC_OFFSET] as i8;
    if magic != 2 {
        return Err(BatchError::Magic(magic));
    }
    let size = peek_size(buf).ok_or(BatchError::Header("negative batch length"))?;
    if size < HEADER_LEN {
        return Err(BatchError::Header("batch length shorter than the header"));
    }
    if buf.len() < size {
        return Err(BatchError::Truncated {
            declared: size,
            available: buf.len(),
        });
    }
    let mut h = &buf[..HEADER_LEN];
    let base_offset = h.get_i64();
    let _length = h.get_i32();
    let leader_epoch = h.get_i32();
    let _magic = h.get_i8();
    let stored = h.get_u32();
    let computed = crc32c::crc32c(&buf[ATTRIBUTES_OFFSET..size]);
    if stored != computed {
        return Err(BatchError::Crc { stored, computed });
    }
    let header = BatchHeader {
        base_offset,
        size,
        leader_epoch,
        attributes: h.get_i16(),
        last_offset_delta: h.get_i32(),
        base_timestamp: h.get_i64(),
        max_timestamp: h.get_i64(),
        producer_id: h.get_i64(),
        producer_epoch: h.get_i16(),
        base_sequence: h.get_i32(),
        records: h.get_i32(),
        control: None,
    };
    let header = BatchHeader {
        control: if header.attributes & CONTROL != 0 {
            Some(control_type(&buf[HEADER_LEN..size])?)
        } else {
            None
        },
        ..header
    };
    if header.last_offset_delta < 0 {
        return Err(BatchError::Header("negative last offset delta"));
    }
    if header.records < 1 {
        return Err(BatchError::Header("a batch must hold at least one record"));
    }
    Ok(header)
}

/// The marker of a control batch, from its first record's key (version,
/// type) and value (version, coordinator epoch); control batches are never
/// compressed.
fn control_type(records: &[u8]) -> Result<Control, BatchError> {
    let bad = BatchError::Header("malformed control record");
    let mut rest = records;
    get_varlong(&mut rest).ok_or(bad.clone())?; // record length
    rest = rest.get(1..).ok_or(bad.clone())?; // attributes
    get_varlong(&mut rest).ok_or(bad.clone())?; // timestamp delta
    get_varlong(&mut rest).ok_or(bad.clone())?; // offset delta
    let key_len = get_varlong(&mut rest).ok_or(bad.clone())?;
    let key = usize::try_from(key_len)
        .ok()
        .and_then(|n| rest.get(..n))
        .filter(|k| k.len() >= 4)
        .ok_or(bad.clone())?;
    let marker = match i16::from_be_bytes([key[2], key[3]]) {
        0 => Marker::Abort,
        1 => Marker::Commit,
        _ => return Err(BatchError::Header("unknown control record type")),
    };
    rest = &rest[key.len()..];
    let value_len = get_varlong(&mut rest).ok_or(bad.clone())?;
    let value = usize::try_from(value_len)
        .ok()
        .and_then(|n| rest.get(..n))
        .filter(|v| v.len() >= 6)
        .ok_or(bad)?;
    Ok(Control {
        marker,
        coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
    })
}

/// The fewest bytes a record takes in an uncompressed batch: one varint
/// byte each for its length, timestamp delta, offset delta, key length,
/// value length and header count, and its attributes byte.
const MIN_RECORD_BYTES: usize = 7;

/// Splits a produce request's record set into validated batches. Beyond
/// [`parse`], the record count must agree with the offset range (Kafka's
/// LogValidator refuses "Inconsistent batch offset range and record
/// count" too) and, uncompressed, fit in the batch's bytes: every later
/// reader trusts that count.
pub fn split(records: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let header = parse(&records[at..])?;
        if i64::from(header.last_offset_delta) + 1 != i64::from(header.records) {
            return Err(BatchError::Header(
                "record count does not match the batch's offset range",
            ));
        }
        let uncompressed = header.attributes & 0x07 == 0;
        if uncompressed && header.records as usize * MIN_RECORD_BYTES > header.size - HEADER_LEN {
            return Err(BatchError::Header(
                "record count larger than the batch's records",
            ));
        }
        at += header.size;
        out.push(header);
    }
    Ok(out)
}

/// The bytes of a batch's header that [`stamp`] rewrites: base offset,
/// length and partition leader epoch, all before what the CRC covers.
pub const STAMPED_BYTES: usize = 16;

/// Sets the base offset and partition leader epoch of a stored batch.
/// Neither field is covered by the CRC, so the batch stays valid.
pub fn stamp(batch: &mut [u8], base_offset: i64, leader_epoch: i32) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Builds an uncompressed v2 batch of `values` (no keys, no headers), the
/// way a simple producer would. For tests, benchmarks and the simulator's
/// clients.
pub fn build(producer: (i64, i16, i32), timestamp: i64, values: &[&[u8]]) -> Bytes {
    let timed: Vec<(i64, &[u8])> = values.iter().map(|v| (timestamp, *v)).collect();
    build_timed(producer, &timed)
}

/// Like `build`, with a timestamp per record: the batch's base timestamp is
/// the first record's and its max timestamp the largest, as producers set
/// them.
pub fn build_timed(producer: (i64, i16, i32), records: &[(i64, &[u8])]) -> Bytes {
    let keyed: Vec<Record> = records.iter().map(|(t, v)| (*t, None, Some(*v))).collect();
    encode(producer, 0, &keyed)
}

/// An uncompressed batch of keyed records; a `None` value is a tombstone
/// (it deletes its key from a compacted topic). For tests and the
/// simulator's clients.
pub fn build_keyed(
    producer: (i64, i16, i32),
    timestamp: i64,
    records: &[(&[u8], Option<&[u8]>)],
) -> Bytes {
    encode(producer, 0, &keyed(timestamp, records))
}

/// Like `build_keyed`, a transactional producer's batch.
pub fn build_transactional_keyed(
    producer: (i64, i16, i32),
    timestamp: i64,
    records: &[(&[u8], Option<&[u8]>)],
) -> Bytes {
    encode(producer, TRANSACTIONAL, &keyed(timestamp, records))
}

fn keyed<'a>(timestamp: i64, records: &[(&'a [u8], Option<&'a [u8]>)]) -> Vec<Record<'a>> {
    records
        .iter()
        .map(|(k, v)| (timestamp, Some(*k), *v))
        .collect()
}

/// A transactional producer's batch (the transactional attribute set), for
/// tests and the simulator's clients.
pub fn build_transactional(producer: (i64, i16, i32), timestamp: i64, values: &[&[u8]]) -> Bytes {
    let records: Vec<Record> = values.iter().map(|v| (timestamp, None, Some(*v))).collect();
    encode(producer, TRANSACTIONAL, &records)
}

/// The control batch a partition leader appends when a transaction of
/// `(producer id, producer epoch)` ends: one record whose key is (version 0,
/// type) and whose value is (version 0, coordinator epoch), as Kafka writes.
pub fn build_marker(
    producer: (i64, i16),
    marker: Marker,
    coordinator_epoch: i32,
    timestamp: i64,
) -> Bytes {
    let mut key = BytesMut::new();
    key.put_i16(0);
    key.put_i16(match marker {
        Marker::Abort => 0,
        Marker::Commit => 1,
    });
    let mut value = BytesMut::new();
    value.put_i16(0);
    value.put_i32(coordinator_epoch);
    encode(
        (producer.0, producer.1, -1),
        CONTROL | TRANSACTIONAL,
        &[(timestamp, Some(&key), Some(&value))],
    )
}

/// A record to encode: timestamp, key, value (`None`: a tombstone).
type Record<'a> = (i64, Option<&'a [u8]>, Option<&'a [u8]>);

fn encode(producer: (i64, i16, i32), attributes: i16, records: &[Record]) -> Bytes {
    let (producer_id, producer_epoch, base_sequence) = producer;
    let base_timestamp = records.first().map_or(-1, |r| r.0);
    let max_timestamp = records.iter().map(|r| r.0).max().unwrap_or(-1);
    let mut encoded = BytesMut::new();
    for (i, (ts, key, value)) in records.iter().enumerate() {
        let mut body = BytesMut::new();
        body.put_i8(0); // record attributes
        put_varlong(&mut body, ts - base_timestamp);
        put_varlong(&mut body, i as i64); // offset delta
        match key {
            Some(k) => {
                put_varlong(&mut body, k.len() as i64);
                body.put_slice(k);
            }
            None => put_varlong(&mut body, -1),
        }
        match value {
            Some(v) => {
                put_varlong(&mut body, v.len() as i64);
                body.put_slice(v);
            }
            None => put_varlong(&mut body, -1),
        }
        put_varlong(&mut body, 0); // no headers
        put_varlong(&mut encoded, body.len() as i64);
        encoded.put_slice(&body);
    }
    let count = records.len().max(1) as i32;
    let mut b = BytesMut::with_capacity(HEADER_LEN + encoded.len());
    b.put_i64(0);
    b.put_i32((HEADER_LEN - LOG_OVERHEAD + encoded.len()) as i32);
    b.put_i32(-1);
    b.put_i8(2);
    b.put_u32(0); // CRC, filled below
    b.put_i16(attributes);
    b.put_i32(count - 1);
    b.put_i64(base_timestamp);
    b.put_i64(max_timestamp);
    b.put_i64(producer_id);
    b.put_i16(producer_epoch);
    b.put_i32(base_sequence);
    b.put_i32(count);
    b.put_slice(&encoded);
    restamp_crc(&mut b);
    b.freeze()
}

/// Rewrites the CRC of the whole batch `batch` over its bytes after the
/// CRC field.
pub(crate) fn restamp_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
}

/// The values of an uncompressed batch's records (`None` if compressed or
/// malformed). For checkers and tests that need to see what a batch holds.
pub fn decode_values(batch: &[u8]) -> Option<Vec<Vec<u8>>> {
    let h = parse(batch).ok()?;
    if h.attributes & 0x07 != 0 {
        return None;
    }
    let mut rest = &batch[HEADER_LEN..h.size];
    let mut values = Vec::new();
    for _ in 0..h.records {
        let len = get_varlong(&mut rest)? as usize;
        let mut rec = rest.get(..len)?;
        rest = &rest[len..];
        rec.get(..1)?;
        rec = &rec[1..]; // attributes
        get_varlong(&mut rec)?; // timestamp delta
        get_varlong(&mut rec)?; // offset delta
        let key = get_varlong(&mut rec)?;
        if key > 0 {
            rec = rec.get(key as usize..)?;
        }
        let vlen = get_varlong(&mut rec)?;
        values.push(if vlen < 0 {
            Vec::new()
        } else {
            rec.get(..vlen as usize)?.to_vec()
        });
    }
    Some(values)
}

/// `(offset delta, timestamp)` of every record of an uncompressed batch
/// (`None` if compressed or malformed): for finding an offset by time.
pub(crate) fn record_times(batch: &[u8]) -> Option<Vec<(i64, i64)>> {
    let h = parse(batch).ok()?;
    if h.attributes & 0x07 != 0 {
        return None;
    }
    let mut rest = &batch[HEADER_LEN..h.size];
    // The count is the header's word; the bytes bound what is there.
    let mut out =
        Vec::with_capacity((h.records.max(0) as usize).min(rest.len() / MIN_RECORD_BYTES));
    for _ in 0..h.records {
        let len = get_varlong(&mut rest)? as usize;
        let mut rec = rest.get(..len)?;
        rest = &rest[len..];
        rec = rec.get(1..)?; // attributes
        let ts_delta = get_varlong(&mut rec)?;
        let offset_delta = get_varlong(&mut rec)?;
        out.push((offset_delta, h.base_timestamp.wrapping_add(ts_delta)));
    }
    Some(out)
}

/// The offset of the first record carrying the batch's max timestamp, for
/// an uncompressed batch (`None` if compressed, malformed, or no record
/// carries it).
pub fn offset_of_max_timestamp(batch: &[u8]) -> Option<i64> {
    let h = parse(batch).ok()?;
    record_times(batch)?
        .into_iter()
        .find(|&(_, t)| t == h.max_timestamp)
        .map(|(delta, _)| h.base_offset.wrapping_add(delta))
}

pub(crate) fn get_varlong(buf: &mut &[u8]) -> Option<i64> {
    let mut z: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        z |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
    }
    None
}

pub(crate) fn put_varlong(buf: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_parses_and_stamps() {
        let b = build((7, 1, 10), 1_000, &[b"a", b"bc", b"def"]);
        let h = parse(&b).unwrap();
        assert_eq!(h.size, b.len());
        assert_eq!(h.records, 3);
        assert_eq!(h.last_offset_delta, 2);
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (7, 1, 10)
        );
        let mut stored = b.to_vec();
        stamp(&mut stored, 42, 5);
        let h = parse(&stored).unwrap();
        assert_eq!(
            (h.base_offset, h.leader_epoch, h.next_offset()),
            (42, 5, 45)
        );
        let values = decode_values(&stored).unwrap();
        assert_eq!(values, vec![b"a".to_vec(), b"bc".to_vec(), b"def".to_vec()]);
    }

    #[test]
    fn every_corruption_and_truncation_is_rejected() {
        let b = build((-1, -1, -1), 5, &[b"payload"]).to_vec();
        for cut in 0..b.len() {
            assert!(parse(&b[..cut]).is_err(), "cut at {cut}");
        }
        for i in ATTRIBUTES_OFFSET..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x40;
            assert!(
                matches!(parse(&bad), Err(BatchError::Crc { .. })),
                "byte {i}"
            );
        }
        let mut v1 = b.clone();
        v1[MAGIC_OFFSET] = 1;
        assert_eq!(parse(&v1), Err(BatchError::Magic(1)));
    }

    #[test]
    fn the_max_timestamp_is_found_in_the_header_and_among_the_records() {
        let mut b = build_timed(
            (-1, -1, -1),
            &[(10, b"a"), (50, b"b"), (20, b"c"), (50, b"d")],
        )
        .to_vec();
        stamp(&mut b, 100, 3);
        let h = parse(&b).unwrap();
        assert_eq!((h.base_timestamp, h.max_timestamp), (10, 50));
        assert_eq!(peek_max_timestamp(&b[..HEADER_LEN]), Some(50));
        assert_eq!(peek_max_timestamp(&b[..42]), None);
        assert_eq!(
            offset_of_max_timestamp(&b),
            Some(101),
            "the first of the two"
        );
        assert_eq!(
            record_times(&b).unwrap(),
            [(0, 10), (1, 50), (2, 20), (3, 50)]
        );
        // Compressed: the records are not read.
        b[22] = 1;
        let crc = crc32c::crc32c(&b[ATTRIBUTES_OFFSET..]);
        b[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(offset_of_max_timestamp(&b), None);
    }

    #[test]
    fn markers_parse_back_and_a_bad_control_record_is_refused() {
        for (m, coordinator_epoch) in [(Marker::Commit, 3), (Marker::Abort, 9)] {
            let b = build_marker((5, 2), m, coordinator_epoch, 77);
            let h = parse(&b).unwrap();
            assert_eq!(
                h.control,
                Some(Control {
                    marker: m,
                    coordinator_epoch
                })
            );
            assert!(h.is_transactional());
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (5, 2, -1)
            );
        }
        let data = build_transactional((5, 2, 0), 1, &[b"x"]);
        let h = parse(&data).unwrap();
        assert_eq!((h.control, h.is_transactional()), (None, true));
        // A control batch whose record has no key is refused.
        let mut bad = data.to_vec();
        bad[ATTRIBUTES_OFFSET + 1] |= CONTROL as u8;
        let crc = crc32c::crc32c(&bad[ATTRIBUTES_OFFSET..]);
        bad[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            parse(&bad),
            Err(BatchError::Header("malformed control record"))
        );
    }

    #[test]
    fn splits_a_record_set() {
        let mut set = build((1, 0, 0), 1, &[b"x"]).to_vec();
        set.extend_from_slice(&build((1, 0, 1), 2, &[b"y", b"z"]));
        let batches = split(&set).unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[1].records, 2);
        set.pop();
        assert!(split(&set).is_err());
    }
}
