//! The records check: every batch a manifest vouches for is read back and
//! must pass its CRC, with offsets that only go up. A bit flipped on the
//! volume (a bad disk, a broken server, an operator's tool) is found here
//! (by `kaas fsck`, and by its `--truncate-damaged` repair, which gives up
//! a segment from its first damage on) before a consumer meets it as
//! CORRUPT_MESSAGE.

use std::io;

use bytes::Bytes;
use vfs::VfsFile;

use crate::log::batch;

const CHUNK: usize = 1 << 20;

/// The first damaged batch of a segment, below what its manifest vouches.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Damage {
    pub position: u64,
    /// The first offset that cannot be read: the damaged batch's own if
    /// its header still says it, else the one after the last good batch.
    pub first_bad_offset: i64,
    pub why: String,
}

/// Walks `file` from 0 to `vouched` batch by batch (reading `CHUNK` at a
/// time), from `base_offset` on without gaps (`exact`), or, in a segment
/// compaction wrote, with offsets that only go up. Offsets are outside a
/// batch's CRC, so they are checked here.
pub(crate) async fn first_damage(
    file: &dyn VfsFile,
    (base_offset, exact): (i64, bool),
    vouched: u64,
) -> io::Result<Option<Damage>> {
    let mut pos = 0u64;
    let mut next = base_offset;
    let mut buf = Bytes::new();
    let mut buf_start = 0u64;
    while pos < vouched {
        let at = (pos - buf_start) as usize;
        let need = buf
            .get(at..)
            .and_then(batch::peek_size)
            .unwrap_or(batch::HEADER_LEN);
        if buf.len() < at + need {
            let want = (need.max(CHUNK) as u64).min(vouched - pos) as usize;
            buf = file.read_at(pos, want).await?;
            buf_start = pos;
            if buf.len() < need {
                return Ok(Some(Damage {
                    position: pos,
                    first_bad_offset: next,
                    why: format!(
                        "a batch of {need} bytes runs past the {vouched} bytes vouched for \
                         (or the file ends there)"
                    ),
                }));
            }
            continue;
        }
        let here = &buf[at..];
        let claimed = here
            .get(0..8)
            .map(|b| i64::from_be_bytes(b.try_into().unwrap_or_default()));
        let bad = |why: String| {
            Ok(Some(Damage {
                position: pos,
                // Without gaps the next offset is known; with them, the
                // batch's own says where it starts, if it is plausible.
                first_bad_offset: claimed.filter(|&o| !exact && o >= next).unwrap_or(next),
                why,
            }))
        };
        let header = match batch::parse(here) {
            Ok(h) => h,
            Err(e) => return bad(e.to_string()),
        };
        if header.base_offset < next || exact && header.base_offset != next {
            return bad(format!(
                "base offset {} where offset {next} comes next",
                header.base_offset
            ));
        }
        if pos + header.size as u64 > vouched {
            return bad(format!(
                "batch of {} bytes runs past the {vouched} bytes vouched for",
                header.size
            ));
        }
        pos += header.size as u64;
        next = header.next_offset();
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfs::{MemVfs, OpenOptions, Vfs};

    async fn segment(bytes: Vec<u8>) -> Box<dyn VfsFile> {
        let vfs = MemVfs::new();
        let path = std::path::Path::new("s.log");
        let f = vfs.open(path, OpenOptions::create_new()).await.unwrap();
        f.write_all_and_sync(0, vec![Bytes::from(bytes)])
            .await
            .unwrap();
        f.close().await.unwrap();
        vfs.open(path, OpenOptions::read()).await.unwrap()
    }

    fn batches(n: i64) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut starts = Vec::new();
        for i in 0..n {
            let mut b = batch::build((-1, -1, -1), 1_000 + i, &[b"a record value"]).to_vec();
            batch::stamp(&mut b, 10 + i, 1);
            starts.push(out.len());
            out.extend_from_slice(&b);
        }
        (out, starts)
    }

    #[tokio::test]
    async fn a_clean_segment_has_no_damage_and_a_flipped_byte_is_found() {
        let (bytes, starts) = batches(5);
        let len = bytes.len() as u64;
        let clean = segment(bytes.clone()).await;
        assert_eq!(
            first_damage(clean.as_ref(), (10, true), len).await.unwrap(),
            None
        );
        let mut flipped = bytes;
        flipped[starts[2] + 70] ^= 0x5a;
        let damaged = segment(flipped).await;
        let d = first_damage(damaged.as_ref(), (10, true), len)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((d.position, d.first_bad_offset), (starts[2] as u64, 12));
        assert!(d.why.contains("CRC") || d.why.contains("crc"), "{}", d.why);
    }

    #[tokio::test]
    async fn a_segment_shorter_than_vouched_is_damage() {
        let (bytes, starts) = batches(3);
        let len = bytes.len() as u64;
        let short = segment(bytes[..starts[2] + 10].to_vec()).await;
        let d = first_damage(short.as_ref(), (10, true), len)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((d.position, d.first_bad_offset), (starts[2] as u64, 12));
    }
}
