//! The envelope around every metadata file kaas persists.
//!
//! Layout (integers big-endian):
//!
//! ```text
//! "KAAS"  magic            4 bytes
//! version                  1 byte   (currently 1)
//! kind length              1 byte
//! kind                     ASCII, names what the file is ("assignment", ...)
//! payload length           4 bytes
//! payload                  payload length bytes
//! crc32c                   4 bytes, over every byte before it
//! ```
//!
//! A reader learns whether the file is complete, whether it is the kind it
//! expected and whether it was written by a format it understands, and gets an
//! error that says which of those failed. An empty file is reported on its own
//! because it is the normal look of a create whose content is still in flight.

use std::io;

use bytes::{BufMut, Bytes, BytesMut};

const MAGIC: &[u8; 4] = b"KAAS";
const VERSION: u8 = 1;
const TRAILER: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("file is empty (a create or write still in flight, or torn)")]
    Empty,
    #[error("not a kaas metadata file (no KAAS magic)")]
    Foreign,
    #[error("written by format version {0}, this build reads version {VERSION}")]
    UnsupportedVersion(u8),
    #[error("is a `{found}` file, expected `{expected}`")]
    WrongKind { expected: String, found: String },
    #[error("truncated: {found} bytes, header promises {expected}")]
    Truncated { expected: usize, found: usize },
    #[error("{0} unexpected bytes after the end of the envelope")]
    TrailingBytes(usize),
    #[error("content does not parse: {0}")]
    Payload(String),
    #[error("checksum mismatch (stored {stored:08x}, computed {computed:08x}): torn or corrupt")]
    Checksum { stored: u32, computed: u32 },
}

impl EnvelopeError {
    /// An `InvalidData` I/O error that names the file and keeps this error as
    /// its source, so callers can still match on it.
    pub fn at(self, what: impl std::fmt::Display) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, Located(what.to_string(), self))
    }

    /// The envelope error inside an I/O error made by [`EnvelopeError::at`].
    pub fn find(err: &io::Error) -> Option<&EnvelopeError> {
        err.get_ref()?.downcast_ref::<Located>().map(|l| &l.1)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}: {1}")]
struct Located(String, #[source] EnvelopeError);

/// Wraps `payload` as a file of the given kind.
///
/// # Panics
/// If `kind` is longer than 255 bytes or the payload over 4 GiB: both are
/// programming errors (kinds are short literals, metadata files are small).
pub fn seal(kind: &str, payload: &[u8]) -> Bytes {
    let kind_len = u8::try_from(kind.len()).expect("envelope kind fits in 255 bytes");
    let payload_len = u32::try_from(payload.len()).expect("metadata payload under 4 GiB");
    let mut out = BytesMut::with_capacity(4 + 2 + kind.len() + 4 + payload.len() + TRAILER);
    out.put_slice(MAGIC);
    out.put_u8(VERSION);
    out.put_u8(kind_len);
    out.put_slice(kind.as_bytes());
    out.put_u32(payload_len);
    out.put_slice(payload);
    out.put_u32(crc32c::crc32c(&out));
    out.freeze()
}

/// Checks an envelope of the expected kind and returns its payload.
pub fn open_envelope<'a>(expected_kind: &str, bytes: &'a [u8]) -> Result<&'a [u8], EnvelopeError> {
    if bytes.is_empty() {
        return Err(EnvelopeError::Empty);
    }
    if bytes.len() < MAGIC.len() || &bytes[..4] != MAGIC {
        return Err(EnvelopeError::Foreign);
    }
    let truncated = |expected| EnvelopeError::Truncated {
        expected,
        found: bytes.len(),
    };
    let header = bytes.get(4..6).ok_or(truncated(6))?;
    if header[0] != VERSION {
        return Err(EnvelopeError::UnsupportedVersion(header[0]));
    }
    let kind_end = 6 + usize::from(header[1]);
    let len_end = kind_end + 4;
    let len_bytes = bytes.get(kind_end..len_end).ok_or(truncated(len_end))?;
    let payload_len = u32::from_be_bytes(len_bytes.try_into().unwrap_or_default()) as usize;
    let total = len_end + payload_len + TRAILER;
    if bytes.len() < total {
        return Err(truncated(total));
    }
    if bytes.len() > total {
        return Err(EnvelopeError::TrailingBytes(bytes.len() - total));
    }
    let body_end = total - TRAILER;
    let stored = u32::from_be_bytes(bytes[body_end..].try_into().unwrap_or_default());
    let computed = crc32c::crc32c(&bytes[..body_end]);
    if stored != computed {
        return Err(EnvelopeError::Checksum { stored, computed });
    }
    let kind = &bytes[6..kind_end];
    if kind != expected_kind.as_bytes() {
        return Err(EnvelopeError::WrongKind {
            expected: expected_kind.to_owned(),
            found: String::from_utf8_lossy(kind).into_owned(),
        });
    }
    Ok(&bytes[len_end..body_end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let sealed = seal("assignment", b"{\"epoch\":3}");
        assert_eq!(
            open_envelope("assignment", &sealed).unwrap(),
            b"{\"epoch\":3}"
        );
        let empty = seal("x", b"");
        assert_eq!(open_envelope("x", &empty).unwrap(), b"");
    }

    #[test]
    fn every_truncation_is_detected() {
        let sealed = seal("manifest", b"some payload bytes");
        for cut in 0..sealed.len() {
            let err = open_envelope("manifest", &sealed[..cut]).unwrap_err();
            let expected_kind = match cut {
                0 => matches!(err, EnvelopeError::Empty),
                1..=3 => matches!(err, EnvelopeError::Foreign),
                _ => matches!(err, EnvelopeError::Truncated { .. }),
            };
            assert!(expected_kind, "cut at {cut}: {err:?}");
        }
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let sealed = seal("manifest", b"payload");
        for byte in 0..sealed.len() {
            for bit in 0..8 {
                let mut bad = sealed.to_vec();
                bad[byte] ^= 1 << bit;
                assert!(
                    open_envelope("manifest", &bad).is_err(),
                    "flip {byte}.{bit}"
                );
            }
        }
    }

    #[test]
    fn names_what_is_wrong() {
        let sealed = seal("manifest", b"p");
        assert_eq!(
            open_envelope("assignment", &sealed).unwrap_err(),
            EnvelopeError::WrongKind {
                expected: "assignment".into(),
                found: "manifest".into()
            }
        );
        assert_eq!(
            open_envelope("x", b"{\"json\":1}").unwrap_err(),
            EnvelopeError::Foreign
        );
        let mut future = sealed.to_vec();
        future[4] = 9;
        assert_eq!(
            open_envelope("manifest", &future).unwrap_err(),
            EnvelopeError::UnsupportedVersion(9)
        );
        let mut long = sealed.to_vec();
        long.push(0);
        assert_eq!(
            open_envelope("manifest", &long).unwrap_err(),
            EnvelopeError::TrailingBytes(1)
        );
    }

    #[test]
    fn io_errors_keep_the_envelope_error() {
        let err = EnvelopeError::Empty.at("assignment");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(EnvelopeError::find(&err), Some(&EnvelopeError::Empty));
        assert!(
            err.to_string().starts_with("assignment: file is empty"),
            "{err}"
        );
    }
}
