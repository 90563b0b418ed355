//! Request frames as a client sends them.

use bytes::Bytes;

use crate::protocol::connection::decode;
use crate::protocol::frame::read_frame;

/// The largest frame the stream reader accepts here; the broker's own
/// limit (socket.request.max.bytes) is larger, this one keeps a case fast.
const MAX_FRAME: usize = 1 << 20;

/// `data` as one request frame (without its length prefix), then as a
/// stream of length-prefixed frames, each decoded.
pub fn request_frame(data: &[u8]) {
    let _ = decode(Bytes::copy_from_slice(data));
    super::block_on(async {
        let mut stream = data;
        while let Ok(Some(frame)) = read_frame(&mut stream, MAX_FRAME).await {
            let _ = decode(frame);
        }
    });
}
