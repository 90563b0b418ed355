//! Requests from this broker to another one, over the Kafka port: a
//! transaction coordinator asks partition leaders to write markers
//! (WriteTxnMarkers) and leaders ask the coordinator whether a partition
//! joined a transaction (AddPartitionsToTxn, verify only). One connection
//! per peer address, one request at a time on it; a failed call drops the
//! connection and the next call reconnects.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::net::TcpStream;

use crate::protocol::frame::{read_frame, write_frame};

/// Largest response a peer call accepts.
const MAX_RESPONSE: usize = 64 << 20;

/// Sends one request on `stream` and reads its response.
pub async fn exchange(
    stream: &mut TcpStream,
    client_id: &str,
    (api, version): (ApiKey, i16),
    correlation: i32,
    request: &RequestKind,
) -> Result<ResponseKind, String> {
    send_request(stream, client_id, (api, version), correlation, request).await?;
    read_response(stream, (api, version), correlation).await
}

/// Writes one request frame on `stream` without waiting for its answer:
/// a client pipelining several requests sends them all, then reads their
/// answers in order with [`read_response`].
pub async fn send_request(
    stream: &mut TcpStream,
    client_id: &str,
    (api, version): (ApiKey, i16),
    correlation: i32,
    request: &RequestKind,
) -> Result<(), String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{api:?}: {what}: {e}");
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_string(client_id.to_owned())))
        .encode(&mut buf, api.request_header_version(version))
        .map_err(|e| fail("encode header", &e))?;
    request
        .encode(&mut buf, version)
        .map_err(|e| fail("encode", &e))?;
    write_frame(stream, &buf)
        .await
        .map_err(|e| fail("send", &e))
}

/// Reads the response to the request sent as `correlation`: the next frame
/// on `stream` must be it (a broker answers a connection's requests in order).
pub async fn read_response(
    stream: &mut TcpStream,
    (api, version): (ApiKey, i16),
    correlation: i32,
) -> Result<ResponseKind, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{api:?}: {what}: {e}");
    let mut frame = read_frame(stream, MAX_RESPONSE)
        .await
        .map_err(|e| fail("receive", &e))?
        .ok_or_else(|| format!("{api:?}: connection closed"))?;
    let header = ResponseHeader::decode(&mut frame, api.response_header_version(version))
        .map_err(|e| fail("decode header", &e))?;
    if header.correlation_id != correlation {
        return Err(format!(
            "{api:?}: correlation id {} for request {correlation}",
            header.correlation_id
        ));
    }
    ResponseKind::decode(api, &mut frame, version).map_err(|e| fail("decode", &e))
}

type Conn = Arc<tokio::sync::Mutex<Option<TcpStream>>>;

/// This broker's connections to the others.
pub struct Peers {
    client_id: String,
    conns: Mutex<BTreeMap<String, Conn>>,
    next_correlation: AtomicI32,
}

impl Peers {
    pub fn new(broker_id: u32) -> Self {
        Self {
            client_id: format!("kaas-broker-{broker_id}"),
            conns: Mutex::new(BTreeMap::new()),
            next_correlation: AtomicI32::new(1),
        }
    }

    /// Sends `request` to the broker at `addr` (host:port) and waits up to
    /// `timeout` for the answer. An error is indeterminate: the request may
    /// or may not have been applied.
    pub async fn call(
        &self,
        addr: &str,
        api: (ApiKey, i16),
        request: RequestKind,
        timeout: Duration,
    ) -> Result<ResponseKind, String> {
        let conn = self
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(addr.to_owned())
            .or_default()
            .clone();
        let mut guard = conn.lock().await;
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let outcome = tokio::time::timeout(timeout, async {
            if guard.is_none() {
                let s = TcpStream::connect(addr)
                    .await
                    .map_err(|e| format!("connect to {addr}: {e}"))?;
                let _ = s.set_nodelay(true);
                *guard = Some(s);
            }
            let Some(stream) = guard.as_mut() else {
                return Err("no connection".to_owned());
            };
            exchange(stream, &self.client_id, api, correlation, &request).await
        })
        .await
        .unwrap_or_else(|_| Err(format!("{:?} to {addr} timed out", api.0)));
        if outcome.is_err() {
            *guard = None;
        }
        outcome
    }
}
