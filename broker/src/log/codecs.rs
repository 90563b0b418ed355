//! Kafka's record codecs (a batch's attributes & 7: 1 gzip, 2 snappy,
//! 3 lz4, 4 zstd), for the two places kaas must see inside a compressed
//! batch: compaction (which records to keep, then the kept ones compressed
//! again with the same codec) and the keyless-record check of a compacted
//! topic. Produce and fetch never decompress.
//!
//! Decompression stops at a bound: a batch is at most `max.message.bytes`
//! on the wire, but what it expands to is the producer's word.

use std::io::{self, Read, Write};

/// Most bytes one batch's records may decompress to.
pub(crate) const MAX_DECOMPRESSED: usize = 64 << 20;

/// snappy-java's stream header (Kafka's Java client frames snappy so);
/// other clients write raw snappy.
const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
const XERIAL_BLOCK: usize = 32 * 1024;

fn invalid(why: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// Reads `r` to its end, refusing more than `limit` bytes.
fn bounded(r: impl Read, limit: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    r.take(limit as u64 + 1).read_to_end(&mut out)?;
    if out.len() > limit {
        return Err(invalid(format!(
            "records decompress to more than {limit} bytes"
        )));
    }
    Ok(out)
}

/// The records of a batch compressed with `codec`, at most `limit` bytes.
pub(crate) fn decompress(codec: i16, data: &[u8], limit: usize) -> io::Result<Vec<u8>> {
    match codec {
        1 => bounded(flate2::read::GzDecoder::new(data), limit),
        2 => snappy_decompress(data, limit),
        3 => bounded(lz4_flex::frame::FrameDecoder::new(data), limit),
        4 => bounded(zstd::stream::read::Decoder::new(data)?, limit),
        c => Err(invalid(format!("unknown compression codec {c}"))),
    }
}

/// `records` compressed with `codec`, framed as `like` (the batch's
/// original records) was where the codec has two framings.
pub(crate) fn compress(codec: i16, records: &[u8], like: &[u8]) -> io::Result<Vec<u8>> {
    match codec {
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(records)?;
            e.finish()
        }
        2 if like.starts_with(XERIAL_MAGIC) => {
            let mut out = XERIAL_MAGIC.to_vec();
            for block in records.chunks(XERIAL_BLOCK) {
                let c = snap::raw::Encoder::new()
                    .compress_vec(block)
                    .map_err(invalid)?;
                out.extend_from_slice(&(c.len() as u32).to_be_bytes());
                out.extend_from_slice(&c);
            }
            Ok(out)
        }
        2 => snap::raw::Encoder::new()
            .compress_vec(records)
            .map_err(invalid),
        3 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(records)?;
            e.finish().map_err(invalid)
        }
        // Kafka's default zstd level.
        4 => zstd::stream::encode_all(records, 3),
        c => Err(invalid(format!("unknown compression codec {c}"))),
    }
}

fn snappy_decompress(data: &[u8], limit: usize) -> io::Result<Vec<u8>> {
    let raw = |block: &[u8], room: usize| -> io::Result<Vec<u8>> {
        let len = snap::raw::decompress_len(block).map_err(invalid)?;
        if len > room {
            return Err(invalid(format!(
                "records decompress to more than {limit} bytes"
            )));
        }
        snap::raw::Decoder::new()
            .decompress_vec(block)
            .map_err(invalid)
    };
    let Some(mut rest) = data.strip_prefix(XERIAL_MAGIC) else {
        return raw(data, limit);
    };
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| invalid("a snappy-java block without its length"))?;
        let len = u32::from_be_bytes(*len) as usize;
        let block = tail
            .get(..len)
            .ok_or_else(|| invalid("a snappy-java block shorter than its length"))?;
        out.extend(raw(block, limit - out.len())?);
        rest = &tail[len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips_and_refuses_more_than_its_bound() {
        let records: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        let xerial = compress(2, b"x", XERIAL_MAGIC).unwrap();
        for (codec, like) in [
            (1, &[][..]),
            (2, &[][..]),
            (2, &xerial[..]),
            (3, &[][..]),
            (4, &[][..]),
        ] {
            let c = compress(codec, &records, like).unwrap();
            assert_eq!(c.starts_with(XERIAL_MAGIC), like.starts_with(XERIAL_MAGIC));
            assert_eq!(
                decompress(codec, &c, records.len()).unwrap(),
                records,
                "codec {codec}"
            );
            let err = decompress(codec, &c, records.len() - 1).unwrap_err();
            assert_eq!(
                err.kind(),
                io::ErrorKind::InvalidData,
                "codec {codec}: {err}"
            );
        }
        assert!(decompress(3, b"not lz4", 100).is_err());
        assert!(decompress(7, b"", 100).is_err());
    }
}
