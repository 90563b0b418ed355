//! The records inside an uncompressed v2 batch, as stored bytes, and a
//! batch rebuilt from some of them.
//!
//! Compaction keeps records byte for byte: a record's offset and timestamp
//! are deltas from its batch's base offset and base timestamp, and a
//! rebuilt batch keeps both (and its last offset delta, as Kafka does for
//! v2), so a kept record's bytes stay valid unchanged. Re-encoding through a
//! record model would not be exact: Kafka allows a header key twice.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{self, BatchHeader, HEADER_LEN, get_varlong, put_varlong};
use super::codecs;

/// Attribute bit of a batch whose base timestamp is its delete horizon
/// (KIP-534): once that time passes, compaction removes its tombstones.
pub(crate) const DELETE_HORIZON: i16 = 0x40;

/// The delete horizon a compaction pass set on the batch, if any.
pub(crate) fn delete_horizon(h: &BatchHeader) -> Option<i64> {
    (h.attributes & DELETE_HORIZON != 0).then_some(h.base_timestamp)
}

/// One record of an uncompressed batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecord<'a> {
    pub offset: i64,
    pub timestamp: i64,
    /// `None`: a record without a key (never kept by compaction).
    pub key: Option<&'a [u8]>,
    /// `None`: a tombstone, which deletes its key.
    pub value: Option<&'a [u8]>,
    /// The record as stored, its length prefix included.
    pub bytes: &'a [u8],
}

/// Whether a batch's records are stored compressed.
pub(crate) fn is_compressed(h: &BatchHeader) -> bool {
    h.attributes & 0x07 != 0
}

/// The records section of the batch `batch` (validated, header `h`), as
/// stored, or decompressed (at most [`codecs::MAX_DECOMPRESSED`] bytes).
pub(crate) fn body<'a>(batch: &'a [u8], h: &BatchHeader) -> std::io::Result<Cow<'a, [u8]>> {
    let stored = batch
        .get(HEADER_LEN..h.size)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "short batch"))?;
    match h.attributes & 0x07 {
        0 => Ok(Cow::Borrowed(stored)),
        codec => codecs::decompress(codec, stored, codecs::MAX_DECOMPRESSED).map(Cow::Owned),
    }
}

/// The records of a batch's records section `body` (see [`body`]); `None`
/// if a record does not parse.
pub(crate) fn records_in<'a>(body: &'a [u8], h: &BatchHeader) -> Option<Vec<RawRecord<'a>>> {
    let mut rest = body;
    let mut out = Vec::with_capacity((h.records.max(0) as usize).min(rest.len() / 7));
    for _ in 0..h.records {
        let before = rest;
        let len = usize::try_from(get_varlong(&mut rest)?).ok()?;
        let prefix = before.len() - rest.len();
        let mut rec = rest.get(..len)?;
        let bytes = before.get(..prefix + len)?;
        rest = &rest[len..];
        rec = rec.get(1..)?; // attributes
        let ts_delta = get_varlong(&mut rec)?;
        let offset_delta = get_varlong(&mut rec)?;
        let key_len = get_varlong(&mut rec)?;
        let key = match usize::try_from(key_len) {
            Ok(n) => {
                let k = rec.get(..n)?;
                rec = &rec[n..];
                Some(k)
            }
            Err(_) => None,
        };
        let value = match usize::try_from(get_varlong(&mut rec)?) {
            Ok(n) => Some(rec.get(..n)?),
            Err(_) => None,
        };
        out.push(RawRecord {
            offset: h.base_offset.wrapping_add(offset_delta),
            timestamp: h.base_timestamp.wrapping_add(ts_delta),
            key,
            value,
            bytes,
        });
    }
    rest.is_empty().then_some(out)
}

/// A record as a reader sees it: offset, key, value (`None`: a tombstone).
pub type Keyed = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// The records of every uncompressed batch in `batches` (whole batches, as
/// a fetch returns them); `None` if one is compressed or malformed. For
/// tests and the simulator's checker.
pub fn keyed_records(mut batches: &[u8]) -> Option<Vec<Keyed>> {
    let mut out = Vec::new();
    while !batches.is_empty() {
        let h = batch::parse(batches).ok()?;
        if h.control.is_none() {
            let body = body(batches, &h).ok()?;
            for r in records_in(&body, &h)? {
                out.push((
                    r.offset,
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                ));
            }
        }
        batches = &batches[h.size..];
    }
    Some(out)
}

/// Whether a data batch of `set` (a produce's record set) holds a record
/// without a key. A batch that does not decompress or parse is left to the
/// append's checks.
pub(crate) fn has_keyless(mut set: &[u8]) -> bool {
    while let Ok(h) = batch::parse(set) {
        if h.control.is_none() {
            if let Ok(body) = body(set, &h) {
                if records_in(&body, &h).is_some_and(|r| r.iter().any(|r| r.key.is_none())) {
                    return true;
                }
            }
        }
        set = &set[h.size..];
    }
    false
}

/// The uncompressed batch `batch` with its records compressed by `codec`
/// (1 gzip, 2 snappy, 3 lz4, 4 zstd), as a producer with that
/// `compression.type` sends it. For tests and benchmarks.
pub fn compressed(batch: &[u8], codec: i16) -> std::io::Result<Bytes> {
    let h =
        batch::parse(batch).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let records = codecs::compress(codec, &batch[HEADER_LEN..h.size], &[])?;
    let mut out = BytesMut::with_capacity(HEADER_LEN + records.len());
    out.put_slice(&batch[..HEADER_LEN]);
    out.put_slice(&records);
    let length = (out.len() - batch::LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let attributes = (h.attributes & !0x07) | codec;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch::restamp_crc(&mut out);
    Ok(out.freeze())
}

/// `batch` with only `kept` of its records (a non-empty subset, in order):
/// the same header but for the record count, the length and the CRC; and
/// with `horizon`, the delete horizon set (the base timestamp becomes the
/// horizon, each record's timestamp delta is rewritten to keep its
/// timestamp).
/// A compressed batch's kept records are compressed again with its codec.
pub(crate) fn rebuild(
    batch: &[u8],
    kept: &[RawRecord<'_>],
    horizon: Option<i64>,
) -> std::io::Result<Bytes> {
    let mut body = BytesMut::with_capacity(batch.len());
    for r in kept {
        match horizon {
            None => body.put_slice(r.bytes),
            Some(base) => put_rebased(&mut body, r, base),
        }
    }
    let codec = i16::from_be_bytes([batch[21], batch[22]]) & 0x07;
    let mut out = BytesMut::with_capacity(HEADER_LEN + body.len());
    out.put_slice(&batch[..HEADER_LEN]);
    match codec {
        0 => out.put_slice(&body),
        c => out.put_slice(&codecs::compress(c, &body, &batch[HEADER_LEN..])?),
    }
    let length = (out.len() - batch::LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    if let Some(base) = horizon {
        let attributes = i16::from_be_bytes([out[21], out[22]]) | DELETE_HORIZON;
        out[21..23].copy_from_slice(&attributes.to_be_bytes());
        out[27..35].copy_from_slice(&base.to_be_bytes());
    }
    out[57..61].copy_from_slice(&(kept.len() as i32).to_be_bytes());
    batch::restamp_crc(&mut out);
    Ok(out.freeze())
}

/// `r` with its timestamp delta taken from `base` instead.
fn put_rebased(out: &mut BytesMut, r: &RawRecord<'_>, base: i64) {
    let mut rest = r.bytes;
    let _ = get_varlong(&mut rest); // length
    let attributes = rest.first().copied().unwrap_or(0);
    rest = rest.get(1..).unwrap_or_default();
    let _ = get_varlong(&mut rest); // old timestamp delta
    let mut body = BytesMut::with_capacity(r.bytes.len() + 10);
    body.put_u8(attributes);
    put_varlong(&mut body, r.timestamp.wrapping_sub(base));
    body.put_slice(rest);
    put_varlong(out, body.len() as i64);
    out.put_slice(&body);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records of an uncompressed batch.
    fn records<'a>(batch: &'a [u8], h: &BatchHeader) -> Option<Vec<RawRecord<'a>>> {
        if is_compressed(h) {
            return None;
        }
        records_in(batch.get(HEADER_LEN..h.size)?, h)
    }

    #[test]
    fn a_batch_rebuilt_from_some_records_keeps_their_offsets_and_bytes() {
        let mut b = BytesMut::from(
            &batch::build_keyed(
                (7, 1, 10),
                1_000,
                &[
                    (b"a", Some(b"1")),
                    (b"b", None),
                    (b"a", Some(b"22")),
                    (b"c", Some(b"333")),
                ],
            )[..],
        );
        batch::stamp(&mut b, 100, 3);
        let h = batch::parse(&b).unwrap();
        let all = records(&b, &h).unwrap();
        let keys: Vec<_> = all.iter().map(|r| (r.offset, r.key, r.value)).collect();
        assert_eq!(
            keys,
            [
                (100, Some(&b"a"[..]), Some(&b"1"[..])),
                (101, Some(&b"b"[..]), None),
                (102, Some(&b"a"[..]), Some(&b"22"[..])),
                (103, Some(&b"c"[..]), Some(&b"333"[..])),
            ]
        );
        let kept = [all[1], all[3]];
        let rebuilt = rebuild(&b, &kept, None).unwrap();
        let r = batch::parse(&rebuilt).unwrap();
        assert_eq!((r.base_offset, r.last_offset(), r.records), (100, 103, 2));
        assert_eq!((r.producer_id, r.base_sequence, r.leader_epoch), (7, 10, 3));
        let again = records(&rebuilt, &r).unwrap();
        assert_eq!(
            again.iter().map(|r| r.offset).collect::<Vec<_>>(),
            [101, 103]
        );
        assert_eq!(
            batch::decode_values(&rebuilt).unwrap(),
            [b"".to_vec(), b"333".to_vec()]
        );
        assert_eq!(delete_horizon(&r), None);
        // With a delete horizon: the base timestamp is the horizon, and
        // every kept record keeps its own timestamp and bytes otherwise.
        let stamped = rebuild(&b, &kept, Some(90_000_000)).unwrap();
        let s = batch::parse(&stamped).unwrap();
        assert_eq!(delete_horizon(&s), Some(90_000_000));
        assert_eq!((s.base_offset, s.last_offset(), s.records), (100, 103, 2));
        let again = records(&stamped, &s).unwrap();
        let seen: Vec<_> = again
            .iter()
            .map(|r| (r.offset, r.timestamp, r.key, r.value))
            .collect();
        let before: Vec<_> = kept
            .iter()
            .map(|r| (r.offset, r.timestamp, r.key, r.value))
            .collect();
        assert_eq!(seen, before);
        assert_eq!(seen[0].1, 1_000);
    }

    #[test]
    fn malformed_records_are_refused_not_read_past() {
        let b = batch::build_keyed((-1, -1, -1), 0, &[(b"k", Some(b"v"))]);
        let h = batch::parse(&b).unwrap();
        let mut cut = BytesMut::from(&b[..]);
        cut[HEADER_LEN] = 0x7e; // record length 63, more than is there
        assert_eq!(records(&cut, &h), None);
        let compressed = BatchHeader { attributes: 1, ..h };
        assert_eq!(records(&b, &compressed), None);
    }
}
