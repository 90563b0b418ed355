//! Kafka's framing: a 4-byte big-endian length, then that many bytes.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds the maximum of {max}")]
    TooLarge { size: usize, max: usize },
    #[error("negative frame length {0}")]
    Negative(i32),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one frame's payload; `Ok(None)` on a clean end of stream between
/// frames. The length is checked against `max` before anything is allocated.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<Bytes>, FrameError> {
    match read_length(r, max).await? {
        Some(size) => read_payload(r, size).await.map(Some),
        None => Ok(None),
    }
}

/// Reads a frame's length prefix, checked against `max`; `Ok(None)` on a
/// clean end of stream. The payload follows (`read_payload`): a reader
/// may wait in between, for room to hold it.
pub async fn read_length<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<usize>, FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]).await? {
            0 if got == 0 => return Ok(None),
            0 => return Err(FrameError::Truncated),
            n => got += n,
        }
    }
    let len = i32::from_be_bytes(len);
    let size = usize::try_from(len).map_err(|_| FrameError::Negative(len))?;
    if size > max {
        return Err(FrameError::TooLarge { size, max });
    }
    Ok(Some(size))
}

/// Reads the `size` bytes of payload after a length prefix.
pub async fn read_payload<R: AsyncRead + Unpin>(
    r: &mut R,
    size: usize,
) -> Result<Bytes, FrameError> {
    // Read into spare capacity: zeroing a buffer the socket then fills
    // costs a pass over every byte produced.
    let mut buf = BytesMut::with_capacity(size);
    let mut limited = r.take(size as u64);
    while buf.len() < size {
        if limited.read_buf(&mut buf).await? == 0 {
            return Err(FrameError::Truncated);
        }
    }
    Ok(buf.freeze())
}

/// Writes one frame (length prefix and payload).
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, payload: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(payload.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame over 4 GiB"))?;
    w.write_all(&len.to_be_bytes()).await?;
    w.write_all(payload).await?;
    // A buffered writer (and madsim's simulated TCP) sends nothing until
    // flushed; on a plain socket this is free.
    w.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trips_and_refuses_before_allocating() {
        let mut wire = Vec::new();
        write_frame(&mut wire, b"hello").await.unwrap();
        write_frame(&mut wire, b"").await.unwrap();
        let mut r = &wire[..];
        assert_eq!(
            &read_frame(&mut r, 10).await.unwrap().unwrap()[..],
            b"hello"
        );
        assert_eq!(read_frame(&mut r, 10).await.unwrap().unwrap().len(), 0);
        assert!(read_frame(&mut r, 10).await.unwrap().is_none(), "clean end");

        let huge = [0x7f, 0xff, 0xff, 0xff];
        let err = read_frame(&mut &huge[..], 1 << 20).await.unwrap_err();
        assert!(
            matches!(
                err,
                FrameError::TooLarge {
                    size: 2147483647,
                    ..
                }
            ),
            "{err}"
        );
        let negative = [0xff, 0xff, 0xff, 0xfe];
        assert!(matches!(
            read_frame(&mut &negative[..], 10).await,
            Err(FrameError::Negative(-2))
        ));
        let cut = [0, 0, 0, 9, 1, 2];
        assert!(matches!(
            read_frame(&mut &cut[..], 10).await,
            Err(FrameError::Truncated)
        ));
        let half_length = [0, 0];
        assert!(matches!(
            read_frame(&mut &half_length[..], 10).await,
            Err(FrameError::Truncated)
        ));
    }
}
