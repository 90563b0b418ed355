//! Response frames whose record bytes are not copied: a fetch response is
//! written as the encoded protocol fields, with the records read from the
//! log passed to the socket as they are (one vectored write), instead of
//! being copied into the response buffer first.
//!
//! The codec encodes into any [`ByteBufMut`]; [`Segmented`] is one that
//! owns the bytes the codec produces and, when the codec puts a slice that
//! lies inside one of the records buffers it was given, keeps a reference
//! to that buffer instead of a copy.

use std::io::IoSlice;
use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Shorter slices are copied: an iovec entry costs more than the copy.
const SHARE_AT_LEAST: usize = 1024;

/// One response frame: the 4-byte length prefix and the payload, in
/// parts that are written out in order.
#[derive(Debug)]
pub(crate) struct ResponseFrame {
    parts: Vec<Bytes>,
}

impl ResponseFrame {
    /// A frame holding `payload` (copied behind the length prefix).
    pub(crate) fn whole(payload: &[u8]) -> std::io::Result<Self> {
        let mut buf = BytesMut::with_capacity(4 + payload.len());
        buf.put_u32(0);
        buf.put_slice(payload);
        Self::prefixed(buf)
    }

    /// A frame from `buf`, whose first 4 bytes are room for the length.
    pub(crate) fn prefixed(mut buf: BytesMut) -> std::io::Result<Self> {
        let len = u32::try_from(buf.len().saturating_sub(4)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame over 4 GiB")
        })?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        Ok(ResponseFrame {
            parts: vec![buf.freeze()],
        })
    }

    /// The payload, without the length prefix, in one buffer.
    #[cfg(test)]
    pub(crate) fn payload(&self) -> Bytes {
        let mut all = BytesMut::new();
        for p in &self.parts {
            all.extend_from_slice(p);
        }
        all.split_off(4).freeze()
    }

    /// Writes the frame: its parts go out in vectored writes where the
    /// stream supports them (a plain socket, tokio-rustls); a stream that
    /// does not (madsim's simulated TCP) gets the frame in one buffer.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin>(&self, w: &mut W) -> std::io::Result<()> {
        match self.parts.as_slice() {
            [one] => w.write_all(one).await?,
            parts if w.is_write_vectored() => write_all_vectored(w, parts).await?,
            parts => {
                let mut all = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
                for p in parts {
                    all.extend_from_slice(p);
                }
                w.write_all(&all).await?;
            }
        }
        // A buffered writer (and madsim's simulated TCP) sends nothing
        // until flushed; on a plain socket this is free.
        w.flush().await
    }
}

async fn write_all_vectored<W: AsyncWrite + Unpin>(
    w: &mut W,
    parts: &[Bytes],
) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut left = slices.as_mut_slice();
    while !left.is_empty() {
        let n = w.write_vectored(left).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut left, n);
    }
    Ok(())
}

/// What the codec encodes into: owned bytes in `current`, and before it
/// `parts`, which alternate between owned bytes and references into the
/// `shared` buffers. The first part starts with room for the length.
pub(crate) struct Segmented {
    parts: Vec<Bytes>,
    /// Bytes in `parts`.
    before: usize,
    current: BytesMut,
    shared: Vec<Bytes>,
}

impl Segmented {
    /// A buffer that keeps references instead of copies of slices of
    /// `shared` (the records a response carries).
    pub(crate) fn new(shared: Vec<Bytes>) -> Self {
        let mut current = BytesMut::with_capacity(256);
        current.put_u32(0);
        Segmented {
            parts: Vec::new(),
            before: 0,
            current,
            shared,
        }
    }

    /// The frame, with its length prefix filled in.
    pub(crate) fn finish(mut self) -> std::io::Result<ResponseFrame> {
        let len = u32::try_from(self.offset() - 4).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame over 4 GiB")
        })?;
        if self.parts.is_empty() {
            // Nothing was shared: one buffer, patched in place.
            self.current[..4].copy_from_slice(&len.to_be_bytes());
            return Ok(ResponseFrame {
                parts: vec![self.current.split().freeze()],
            });
        }
        let mut parts = std::mem::take(&mut self.parts);
        if !self.current.is_empty() {
            parts.push(self.current.split().freeze());
        }
        // The prefix is in the first part, what was encoded before the
        // first shared slice (headers, small records): patch a copy of it.
        let mut head = BytesMut::from(&parts[0][..]);
        head[..4].copy_from_slice(&len.to_be_bytes());
        parts[0] = head.freeze();
        Ok(ResponseFrame { parts })
    }

    fn share(&self, src: &[u8]) -> Option<Bytes> {
        let (start, end) = (src.as_ptr() as usize, src.as_ptr() as usize + src.len());
        self.shared.iter().find_map(|b| {
            let (b_start, b_end) = (b.as_ptr() as usize, b.as_ptr() as usize + b.len());
            (b_start <= start && end <= b_end).then(|| b.slice_ref(src))
        })
    }

    /// Back to one owned buffer, for a seek or a range into what was
    /// already handed over (the codec does this only inside record
    /// batches it encodes itself, never around a shared slice).
    fn flatten(&mut self) {
        if self.parts.is_empty() {
            return;
        }
        let mut all = BytesMut::with_capacity(self.offset());
        for p in self.parts.drain(..) {
            all.extend_from_slice(&p);
        }
        all.extend_from_slice(&self.current);
        self.current = all;
        self.before = 0;
    }
}

// SAFETY: every method forwards to `current`, a BytesMut, whose own
// implementation upholds the trait's contract; `put_slice` only appends.
unsafe impl BufMut for Segmented {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `chunk_mut`, which
        // is `current`'s.
        unsafe { self.current.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= SHARE_AT_LEAST
            && let Some(shared) = self.share(src)
        {
            let owned = self.current.split().freeze();
            self.before += owned.len() + shared.len();
            self.parts.push(owned);
            self.parts.push(shared);
            return;
        }
        self.current.extend_from_slice(src);
    }
}

impl ByteBufMut for Segmented {
    fn offset(&self) -> usize {
        self.before + self.current.len()
    }

    fn seek(&mut self, offset: usize) {
        if offset < self.before {
            self.flatten();
        }
        self.current.resize(offset - self.before, 0);
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        if r.start < self.before {
            self.flatten();
        }
        let before = self.before;
        &mut self.current[r.start - before..r.end - before]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    /// A stream that takes at most `step` bytes a call, vectored or not.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
        vectored: bool,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.step - n);
                self.got.extend_from_slice(&b[..take]);
                n += take;
                if n == self.step {
                    break;
                }
            }
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            self.vectored
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn records(n: usize, fill: u8) -> Bytes {
        Bytes::from(vec![fill; n])
    }

    #[test]
    fn slices_of_the_shared_buffers_are_referenced_and_the_rest_copied() {
        let a = records(5000, b'a');
        let b = records(3000, b'b');
        let mut buf = Segmented::new(vec![a.clone(), b.clone()]);
        buf.put_slice(b"header");
        buf.put_slice(&a[..]);
        buf.put_i32(7);
        buf.put_slice(&b[1000..]);
        buf.put_slice(&records(2000, b'c')); // not shared: copied
        let frame = buf.finish().unwrap();
        assert_eq!(frame.parts.len(), 5);
        assert_eq!(frame.parts[1].as_ptr(), a.as_ptr());
        assert_eq!(frame.parts[3].as_ptr(), b[1000..].as_ptr());
        let mut want = b"header".to_vec();
        want.extend_from_slice(&a);
        want.extend_from_slice(&7i32.to_be_bytes());
        want.extend_from_slice(&b[1000..]);
        want.extend_from_slice(&[b'c'; 2000]);
        assert_eq!(frame.payload(), want);
    }

    #[test]
    fn a_response_with_nothing_shared_is_one_part() {
        let mut buf = Segmented::new(vec![records(10, b'a')]);
        buf.put_slice(&records(3000, b'x'));
        let frame = buf.finish().unwrap();
        assert_eq!(frame.parts.len(), 1);
        assert_eq!(&frame.parts[0][..4], &3000u32.to_be_bytes());
        assert_eq!(frame.payload(), records(3000, b'x'));
    }

    #[test]
    fn a_seek_back_into_a_handed_over_part_flattens_first() {
        let a = records(4096, b'a');
        let mut buf = Segmented::new(vec![a.clone()]);
        buf.put_slice(&a[..]);
        buf.put_u8(1);
        let at = 4 + 10;
        buf.range(at..at + 2).copy_from_slice(b"zz");
        buf.seek(4 + 4096 + 1);
        let frame = buf.finish().unwrap();
        assert_eq!(frame.parts.len(), 1);
        let mut want = a.to_vec();
        want[10..12].copy_from_slice(b"zz");
        want.push(1);
        assert_eq!(frame.payload(), want);
    }

    #[tokio::test]
    async fn frames_arrive_whole_through_short_writes_vectored_or_not() {
        let a = records(70_000, b'a');
        let mut buf = Segmented::new(vec![a.clone()]);
        buf.put_slice(b"head");
        buf.put_slice(&a[..]);
        buf.put_slice(b"tail");
        let frame = buf.finish().unwrap();
        let mut want = ((4 + 70_000 + 4) as u32).to_be_bytes().to_vec();
        want.extend_from_slice(b"head");
        want.extend_from_slice(&a);
        want.extend_from_slice(b"tail");
        for vectored in [true, false] {
            for step in [1, 3, 4096, 1 << 20] {
                let mut w = Trickle {
                    got: Vec::new(),
                    step,
                    vectored,
                };
                frame.write_to(&mut w).await.unwrap();
                assert!(w.got == want, "vectored {vectored}, step {step}");
            }
        }
    }
}
