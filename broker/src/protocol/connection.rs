//! One client connection: frames in, requests decoded, answered in order.
//!
//! A reader task reads ahead up to `max_in_flight` frames (pipelining);
//! when that many wait, it stops reading and TCP pushes back on the client
//! (backpressure). Responses go out in request order. A frame that cannot
//! be a request closes the connection with a log line; nothing panics.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Encodable, decode_request_header_from_buffer};
use tokio::io::{AsyncRead, AsyncWrite};

use super::frame::{read_frame, write_frame};
use super::versions;

#[derive(Clone, Debug)]
pub struct ProtocolConfig {
    /// Largest request accepted (Kafka's socket.request.max.bytes).
    pub max_frame_bytes: usize,
    /// Requests read ahead of the one being answered.
    pub max_in_flight: usize,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        Self {
            max_frame_bytes: 100 * 1024 * 1024,
            max_in_flight: 16,
        }
    }
}

/// Answers decoded requests. Implemented by the broker.
#[async_trait::async_trait]
pub trait Handler: Send + Sync + 'static {
    /// `Ok(None)`: the request wants no response (a Produce with acks=0).
    async fn handle(
        &self,
        header: &RequestHeader,
        request: RequestKind,
    ) -> Result<Option<ResponseKind>, String>;
}

/// Why a connection was closed instead of answered.
#[derive(Debug, PartialEq, Eq)]
pub struct Close(pub String);

pub async fn serve_connection<S>(
    stream: S,
    peer: String,
    handler: Arc<dyn Handler>,
    config: ProtocolConfig,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(stream);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(config.max_in_flight.max(1));
    let max = config.max_frame_bytes;
    let reader_peer = peer.clone();
    let reader = tokio::spawn(async move {
        loop {
            match read_frame(&mut rd, max).await {
                Ok(Some(frame)) => {
                    if tx.send(frame).await.is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(peer = %reader_peer, error = %e, "closing connection: bad frame");
                    return;
                }
            }
        }
    });
    while let Some(frame) = rx.recv().await {
        match respond(handler.as_ref(), frame).await {
            Ok(Some(out)) => {
                if let Err(e) = write_frame(&mut wr, &out).await {
                    tracing::debug!(peer = %peer, error = %e, "client went away");
                    break;
                }
            }
            Ok(None) => {}
            Err(Close(why)) => {
                tracing::warn!(peer = %peer, "closing connection: {why}");
                break;
            }
        }
    }
    reader.abort();
}

/// Decodes one request frame and produces its response frame (`None` when
/// the request expects no response).
pub async fn respond(handler: &dyn Handler, frame: Bytes) -> Result<Option<Bytes>, Close> {
    if frame.len() < 8 {
        return Err(Close(format!(
            "{}-byte frame is too short for a request header",
            frame.len()
        )));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = ApiKey::try_from(key).map_err(|_| Close(format!("unknown API key {key}")))?;
    let mut body = frame;
    let header = decode_request_header_from_buffer(&mut body)
        .map_err(|e| Close(format!("malformed {api:?} v{version} request header: {e}")))?;
    if !versions::is_supported(api, version) {
        if api == ApiKey::ApiVersions {
            let (response, v) = versions::api_versions(version);
            return encode(&header, api, ResponseKind::ApiVersions(response), v).map(Some);
        }
        return Err(Close(format!(
            "{api:?} v{version} is not served by this broker"
        )));
    }
    let request = RequestKind::decode(api, &mut body, version)
        .map_err(|e| Close(format!("malformed {api:?} v{version} request: {e}")))?;
    let response = handler
        .handle(&header, request)
        .await
        .map_err(|e| Close(format!("{api:?} v{version} failed: {e}")))?;
    response
        .map(|r| encode(&header, api, r, version))
        .transpose()
}

fn encode(
    header: &RequestHeader,
    api: ApiKey,
    response: ResponseKind,
    version: i16,
) -> Result<Bytes, Close> {
    let mut out = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(header.correlation_id)
        .encode(&mut out, api.response_header_version(version))
        .and_then(|_| response.encode(&mut out, version))
        .map_err(|e| {
            Close(format!(
                "cannot encode the {api:?} v{version} response: {e}"
            ))
        })?;
    Ok(out.freeze())
}
