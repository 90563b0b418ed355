//! One client connection: frames in, requests decoded, answered in order.
//!
//! A reader task reads ahead up to `max_in_flight` frames, and no more than
//! `max_in_flight_bytes` of them (pipelining); when that many wait, it
//! stops reading and TCP pushes back on the client (backpressure).
//! Responses go out in request order. A request the handler answers
//! [`Answer::Later`] (a produce: its records are queued in their logs when
//! it returns) overlaps the produce requests after it, so that requests a
//! client pipelines share flush cycles; any other request first waits until
//! every request before it is answered, so it sees their effects, as on a
//! Kafka broker. A connection that sends nothing for
//! `idle_timeout` while nothing of it is being answered is closed. A frame that cannot
//! be a request closes the connection with a log line; nothing panics. A
//! request of a version this broker does not serve is answered with
//! UNSUPPORTED_VERSION where the protocol allows (see `unsupported`).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Encodable, decode_request_header_from_buffer};
use tokio::io::{AsyncRead, AsyncWrite};

use super::frame::{read_length, read_payload};
use super::limits::ConnectionLimits;
use super::response_frame::{ResponseFrame, Segmented};
use super::{unsupported, versions};
use crate::security::Session;

#[derive(Clone, Debug)]
pub struct ProtocolConfig {
    /// Largest request accepted (Kafka's socket.request.max.bytes).
    pub max_frame_bytes: usize,
    /// Requests read ahead of the one being answered.
    pub max_in_flight: usize,
    /// Bytes of requests a connection holds at once, read ahead or being
    /// answered; a request larger than this is still read, alone.
    pub max_in_flight_bytes: usize,
    /// A connection idle this long is closed (connections.max.idle.ms).
    pub idle_timeout: Option<Duration>,
    /// The caps on connections, shared by all listeners of a broker.
    pub limits: Arc<ConnectionLimits>,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        Self {
            max_frame_bytes: 100 * 1024 * 1024,
            max_in_flight: 16,
            max_in_flight_bytes: 100 * 1024 * 1024,
            idle_timeout: Some(Duration::from_secs(600)),
            limits: Arc::new(ConnectionLimits::default()),
        }
    }
}

/// A response still being worked out, independent of the connection.
pub type LaterResponse =
    Pin<Box<dyn Future<Output = Result<Option<ResponseKind>, String>> + Send + 'static>>;

/// How a handler answers a request.
// Moved once per request: boxing `Now`, the common case, would cost an
// allocation per request to save a copy.
#[allow(clippy::large_enum_variant)]
pub enum Answer {
    /// The response (`None`: the request wants none).
    Now(Option<ResponseKind>),
    /// Everything whose order matters is done (a produce's records are
    /// queued in their logs); the response is what the future gives. The
    /// connection meanwhile starts the produce requests after this one.
    Later(LaterResponse),
}

/// Answers decoded requests. Implemented by the broker.
#[async_trait::async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Where requests and connections are counted, if anywhere.
    fn metrics(&self) -> Option<&crate::metrics::Metrics> {
        None
    }

    /// [`Self::handle`], for a handler that can let a request's response
    /// come later: what the connection calls.
    async fn answer(
        &self,
        session: &mut Session,
        header: &RequestHeader,
        request: RequestKind,
    ) -> Result<Answer, String> {
        self.handle(session, header, request).await.map(Answer::Now)
    }

    /// `Ok(None)`: the request wants no response (a Produce with acks=0).
    /// `Err`: the connection closes, with that reason in the log. The
    /// session is the connection's: who it is, where its SASL stands.
    async fn handle(
        &self,
        session: &mut Session,
        header: &RequestHeader,
        request: RequestKind,
    ) -> Result<Option<ResponseKind>, String>;

    /// A bare SASL token (after SaslHandshake v0): the bare answer.
    async fn raw_sasl_token(&self, _session: &mut Session, _token: Bytes) -> Result<Bytes, String> {
        Err("a bare SASL token, but this handler does not authenticate".into())
    }
}

/// Why a connection was closed instead of answered.
#[derive(Debug, PartialEq, Eq)]
pub struct Close(pub String);

pub(crate) async fn serve_connection<S>(
    stream: S,
    peer: String,
    handler: Arc<dyn Handler>,
    config: ProtocolConfig,
    mut session: Session,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (rd, mut wr) = tokio::io::split(stream);
    let (tx, mut rx) = tokio::sync::mpsc::channel(config.max_in_flight.max(1));
    let max = config.max_frame_bytes;
    // Semaphore permits are u32s: a budget is capped at 4 GiB.
    let budget_bytes = u32::try_from(config.max_in_flight_bytes.max(1)).unwrap_or(u32::MAX);
    let budget = Arc::new(tokio::sync::Semaphore::new(budget_bytes as usize));
    let reader = tokio::spawn(read_frames(rd, max, budget, budget_bytes, tx, peer.clone()));
    // Started requests whose responses come later, in request order, each
    // holding its room until its response is written.
    let mut later: FuturesOrdered<Pin<Box<dyn Future<Output = Written> + Send>>> =
        FuturesOrdered::new();
    loop {
        if let Some(until) = session.muted_until.take() {
            if !wait_muted(until, &mut later, &mut wr, &peer).await {
                break;
            }
        }
        let next = if let Some(idle) = config.idle_timeout.filter(|_| later.is_empty()) {
            match tokio::time::timeout(idle, rx.recv()).await {
                Ok(next) => next,
                Err(_) => {
                    tracing::info!(
                        peer = %peer,
                        idle_ms = idle.as_millis() as u64,
                        "closing connection: idle (--connections-max-idle-ms)"
                    );
                    break;
                }
            }
        } else if later.is_empty() {
            rx.recv().await
        } else {
            tokio::select! {
                biased;
                Some((out, room)) = later.next() => {
                    let go_on = send(&mut wr, &peer, out).await;
                    drop(room);
                    if go_on {
                        continue;
                    }
                    break;
                }
                next = rx.recv(), if later.len() < config.max_in_flight.max(1) => next,
            }
        };
        let Some((frame, room)) = next else { break };
        // Only produce requests overlap: any other request is started once
        // everything before it is answered.
        let produce = !session.raw_tokens && frame.len() >= 2 && frame[..2] == PRODUCE_KEY;
        if !produce && !drain(&mut later, &mut wr, &peer).await {
            break;
        }
        // The responses of the requests started before this one keep
        // going out while it starts: its start may wait on what they do.
        let (started, open) = alongside(
            start(handler.as_ref(), &mut session, frame),
            &mut later,
            &mut wr,
            &peer,
        )
        .await;
        if !open {
            break;
        }
        let go_on = match started {
            Ok(Started::Later(response)) => {
                later.push_back(Box::pin(async move { (response.await, room) }));
                true
            }
            Ok(Started::Now(out)) => {
                let go_on = send(&mut wr, &peer, Ok(out)).await;
                drop(room);
                go_on
            }
            Err(close) => {
                // What was started before this request is still answered.
                drain(&mut later, &mut wr, &peer).await;
                send(&mut wr, &peer, Err(close)).await
            }
        };
        if !go_on {
            break;
        }
        if let Some(why) = session.close_after_response.take() {
            drain(&mut later, &mut wr, &peer).await;
            tracing::info!(peer = %peer, "closing connection: {why}");
            break;
        }
    }
    drain(&mut later, &mut wr, &peer).await;
    reader.abort();
}

/// Reads the connection's request frames and hands each on with the room
/// it takes of the connection's budget, until the client closes, a frame
/// is bad or the connection is served no more.
async fn read_frames<R: AsyncRead + Unpin>(
    mut rd: R,
    max: usize,
    budget: Arc<tokio::sync::Semaphore>,
    budget_bytes: u32,
    tx: tokio::sync::mpsc::Sender<(Bytes, tokio::sync::OwnedSemaphorePermit)>,
    reader_peer: String,
) {
    loop {
        let size = match read_length(&mut rd, max).await {
            Ok(Some(size)) => size,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(peer = %reader_peer, error = %e, "closing connection: bad frame");
                return;
            }
        };
        // Room for the request before its bytes are read: what waits
        // stays in the client's socket buffer, not in this broker.
        let want = u32::try_from(size).unwrap_or(u32::MAX).min(budget_bytes);
        let Ok(room) = budget.clone().acquire_many_owned(want).await else {
            return;
        };
        match read_payload(&mut rd, size).await {
            Ok(frame) => {
                if tx.send((frame, room)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(peer = %reader_peer, error = %e, "closing connection: bad frame");
                return;
            }
        }
    }
}

const PRODUCE_KEY: [u8; 2] = (ApiKey::Produce as i16).to_be_bytes();

/// A response frame (or why the connection closes) and the room its
/// request held.
type Written = (
    Result<Option<ResponseFrame>, Close>,
    tokio::sync::OwnedSemaphorePermit,
);

/// Writes one response; false when the connection is to close.
async fn send<W: AsyncWrite + Unpin>(
    wr: &mut W,
    peer: &str,
    out: Result<Option<ResponseFrame>, Close>,
) -> bool {
    match out {
        Ok(Some(out)) => match out.write_to(wr).await {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(peer = %peer, error = %e, "client went away");
                false
            }
        },
        Ok(None) => true,
        Err(Close(why)) => {
            tracing::warn!(peer = %peer, "closing connection: {why}");
            false
        }
    }
}

/// A throttled client's mute (KIP-219): no request is read until `until`,
/// while the responses of requests already started still go out. False
/// when the connection is to close.
async fn wait_muted<W: AsyncWrite + Unpin>(
    until: tokio::time::Instant,
    later: &mut FuturesOrdered<Pin<Box<dyn Future<Output = Written> + Send>>>,
    wr: &mut W,
    peer: &str,
) -> bool {
    let muted = tokio::time::sleep_until(until);
    tokio::pin!(muted);
    loop {
        tokio::select! {
            biased;
            Some((out, room)) = later.next() => {
                let go_on = send(wr, peer, out).await;
                drop(room);
                if !go_on {
                    return false;
                }
            }
            _ = &mut muted => return true,
        }
    }
}

/// Runs `work` (the start of the next request) while the requests started
/// before it go on and their responses are written as they come, in order.
/// Nothing a connection has started may wait unpolled on a later request:
/// a produce's answer waits for its flush cycle, and the start of the
/// produce after it may wait for something that cycle does. Returns what
/// `work` gave, and false when the connection is to close (a response
/// could not be written).
async fn alongside<T, W: AsyncWrite + Unpin>(
    work: impl Future<Output = T>,
    later: &mut FuturesOrdered<Pin<Box<dyn Future<Output = Written> + Send>>>,
    wr: &mut W,
    peer: &str,
) -> (T, bool) {
    tokio::pin!(work);
    let mut open = true;
    loop {
        tokio::select! {
            biased;
            out = &mut work => return (out, open),
            Some((out, room)) = later.next(), if open => {
                open = send(wr, peer, out).await;
                drop(room);
                if !open {
                    // The rest are dropped unanswered: the connection closes.
                    *later = FuturesOrdered::new();
                }
            }
        }
    }
}

/// Waits for every started request and writes its response, in order;
/// false when the connection is to close.
async fn drain<W: AsyncWrite + Unpin>(
    later: &mut FuturesOrdered<Pin<Box<dyn Future<Output = Written> + Send>>>,
    wr: &mut W,
    peer: &str,
) -> bool {
    while let Some((out, room)) = later.next().await {
        let go_on = send(wr, peer, out).await;
        drop(room);
        if !go_on {
            // The rest are dropped unanswered: the connection closes.
            *later = FuturesOrdered::new();
            return false;
        }
    }
    true
}

/// A request's response frame, now or later.
pub(crate) enum Started {
    Now(Option<ResponseFrame>),
    Later(Pin<Box<dyn Future<Output = Result<Option<ResponseFrame>, Close>> + Send + 'static>>),
}

/// Decodes one request frame and produces its response's payload (`None`
/// when the request expects no response).
#[cfg(test)]
pub(crate) async fn respond(
    handler: &dyn Handler,
    session: &mut Session,
    frame: Bytes,
) -> Result<Option<Bytes>, Close> {
    let out = match start(handler, session, frame).await? {
        Started::Now(out) => out,
        Started::Later(out) => out.await?,
    };
    Ok(out.map(|f| f.payload()))
}

/// Decodes one request frame and starts answering it.
pub(crate) async fn start(
    handler: &dyn Handler,
    session: &mut Session,
    frame: Bytes,
) -> Result<Started, Close> {
    if session.raw_tokens {
        return handler
            .raw_sasl_token(session, frame)
            .await
            .map_err(|why| Close(format!("SASL authentication failed: {why}")))
            .and_then(|token| {
                ResponseFrame::whole(&token)
                    .map(|f| Started::Now(Some(f)))
                    .map_err(|e| Close(format!("cannot frame the SASL token: {e}")))
            });
    }
    let (header, api, version, request) = match decode(frame)? {
        Decoded::Request {
            header,
            api,
            version,
            request,
        } => (header, api, version, request),
        Decoded::Answered(out) => return Ok(Started::Now(Some(out))),
    };
    let failed = move |e| Close(format!("{api:?} v{version} failed: {e}"));
    let counted = Counted {
        metrics: handler.metrics().cloned(),
        api,
        began: tokio::time::Instant::now(),
    };
    match handler
        .answer(session, &header, request)
        .await
        .map_err(failed)?
    {
        Answer::Now(response) => response
            .map(|r| encode(&header, api, counted.answered(r), version))
            .transpose()
            .map(Started::Now),
        Answer::Later(response) => Ok(Started::Later(Box::pin(async move {
            response
                .await
                .map_err(failed)?
                .map(|r| encode(&header, api, counted.answered(r), version))
                .transpose()
        }))),
    }
}

/// A request frame, decoded.
// Made once per frame and taken apart at once: boxing would cost an
// allocation per request for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Decoded {
    /// A request of a version this broker serves, for the handler.
    Request {
        header: RequestHeader,
        api: ApiKey,
        version: i16,
        request: RequestKind,
    },
    /// Answered from the frame alone: a version this broker does not serve.
    Answered(ResponseFrame),
}

/// Decodes a request frame (the bytes after the length prefix): the
/// first code that reads what a client sent. A frame that cannot be a
/// request is a [`Close`], never a panic.
pub(crate) fn decode(frame: Bytes) -> Result<Decoded, Close> {
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
            return encode(&header, api, ResponseKind::ApiVersions(response), v)
                .map(Decoded::Answered);
        }
        return refuse(&header, api, version, body).map(Decoded::Answered);
    }
    let request = RequestKind::decode(api, &mut body, version)
        .map_err(|e| Close(format!("malformed {api:?} v{version} request: {e}")))?;
    Ok(Decoded::Request {
        header,
        api,
        version,
        request,
    })
}

/// A request on its way to the metrics: counted with its response's error
/// codes and the time since it was decoded.
struct Counted {
    metrics: Option<crate::metrics::Metrics>,
    api: ApiKey,
    began: tokio::time::Instant,
}

impl Counted {
    fn answered(&self, response: ResponseKind) -> ResponseKind {
        if let Some(m) = &self.metrics {
            let codes = super::error_codes::error_codes(&response);
            m.request(&format!("{:?}", self.api), self.began.elapsed(), &codes);
        }
        response
    }
}

/// Answers a request of a version this broker does not serve with
/// UNSUPPORTED_VERSION, when the codec can still read that version and its
/// response has somewhere to put the error; otherwise the connection closes.
fn refuse(
    header: &RequestHeader,
    api: ApiKey,
    version: i16,
    mut body: Bytes,
) -> Result<ResponseFrame, Close> {
    let served = versions::supported(api)
        .map_or_else(|| "none".to_owned(), |(min, max)| format!("v{min}-v{max}"));
    let known = api.valid_versions();
    if !(known.min..=known.max).contains(&version) {
        return Err(Close(format!(
            "{api:?} v{version} is not served by this broker (it serves {served}) \
             and cannot be decoded to answer UNSUPPORTED_VERSION"
        )));
    }
    let request = RequestKind::decode(api, &mut body, version).map_err(|e| {
        Close(format!(
            "{api:?} v{version} is not served by this broker (it serves {served}), \
             and the request is malformed: {e}"
        ))
    })?;
    let response = unsupported::answer(api, version, &request).ok_or_else(|| {
        Close(format!(
            "{api:?} v{version} is not served by this broker (it serves {served}), \
             and this request has no response that could carry UNSUPPORTED_VERSION"
        ))
    })?;
    tracing::debug!(
        "answering {api:?} v{version} with UNSUPPORTED_VERSION (this broker serves {served})"
    );
    encode(header, api, response, version)
}

fn encode(
    header: &RequestHeader,
    api: ApiKey,
    response: ResponseKind,
    version: i16,
) -> Result<ResponseFrame, Close> {
    let failed = |e: &dyn std::fmt::Display| {
        Close(format!(
            "cannot encode the {api:?} v{version} response: {e}"
        ))
    };
    let header = ResponseHeader::default().with_correlation_id(header.correlation_id);
    let header_version = api.response_header_version(version);
    if let ResponseKind::Fetch(r) = &response {
        // A fetch response's records go to the socket as they were read.
        let shared = r
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .filter_map(|p| p.records.clone())
            .collect();
        let mut out = Segmented::new(shared);
        header
            .encode(&mut out, header_version)
            .and_then(|_| r.encode(&mut out, version))
            .map_err(|e| failed(&e))?;
        return out.finish().map_err(|e| failed(&e));
    }
    let mut out = BytesMut::new();
    out.put_u32(0);
    header
        .encode(&mut out, header_version)
        .and_then(|_| response.encode(&mut out, version))
        .map_err(|e| failed(&e))?;
    ResponseFrame::prefixed(out).map_err(|e| failed(&e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use kafka_protocol::messages::{self as m, TopicName};
    use kafka_protocol::protocol::{Decodable, StrBytes, encode_request_header_into_buffer};

    use super::*;

    /// Fails every request: a refused version must never reach the handler.
    struct Untouched;

    #[async_trait::async_trait]
    impl Handler for Untouched {
        async fn handle(
            &self,
            _: &mut Session,
            _: &RequestHeader,
            request: RequestKind,
        ) -> Result<Option<ResponseKind>, String> {
            Err(format!("the handler was called with {request:?}"))
        }
    }

    fn frame(api: ApiKey, version: i16, request: &RequestKind) -> Bytes {
        numbered_frame(api, version, request, 77)
    }

    fn numbered_frame(api: ApiKey, version: i16, request: &RequestKind, correlation: i32) -> Bytes {
        let mut buf = BytesMut::new();
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_static_str("test")));
        encode_request_header_into_buffer(&mut buf, &header).unwrap();
        request.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    /// The UNSUPPORTED_VERSION answer to `request` as a client of that
    /// version decodes it: through `respond` for a version this broker does
    /// not serve, straight through `refuse` for one it serves today (how a
    /// version the codec knows and the table does not is answered).
    async fn refused(api: ApiKey, version: i16, request: RequestKind) -> ResponseKind {
        let framed = frame(api, version, &request);
        let out = if versions::is_supported(api, version) {
            let mut body = framed;
            let header = decode_request_header_from_buffer(&mut body).unwrap();
            refuse(&header, api, version, body).map(|f| f.payload())
        } else {
            respond(&Untouched, &mut Session::plaintext("test"), framed)
                .await
                .map(Option::unwrap)
        };
        let mut out = out.unwrap_or_else(|Close(why)| panic!("{api:?} v{version} closed: {why}"));
        let header =
            ResponseHeader::decode(&mut out, api.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, 77);
        let response = ResponseKind::decode(api, &mut out, version).unwrap();
        assert!(out.is_empty(), "{api:?} v{version}: trailing bytes");
        response
    }

    fn topic(s: &'static str) -> TopicName {
        TopicName(StrBytes::from_static_str(s))
    }

    #[tokio::test]
    async fn a_produce_of_an_unserved_version_gets_the_error_on_every_partition() {
        use m::produce_request::{PartitionProduceData, TopicProduceData};
        let request = m::ProduceRequest::default()
            .with_acks(1)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic("orders"))
                    .with_partition_data(vec![
                        PartitionProduceData::default().with_index(0),
                        PartitionProduceData::default().with_index(2),
                    ]),
            ]);
        let ResponseKind::Produce(r) =
            refused(ApiKey::Produce, 10, RequestKind::Produce(request)).await
        else {
            panic!("not a produce response");
        };
        assert_eq!(r.responses[0].name, topic("orders"));
        let parts: Vec<_> = r.responses[0]
            .partition_responses
            .iter()
            .map(|p| (p.index, p.error_code, p.base_offset))
            .collect();
        assert_eq!(parts, [(0, 35, -1), (2, 35, -1)]);
    }

    #[tokio::test]
    async fn list_offsets_and_metadata_of_unserved_versions_name_what_was_asked() {
        use m::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
        let request = m::ListOffsetsRequest::default().with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic("orders"))
                .with_partitions(vec![
                    ListOffsetsPartition::default().with_partition_index(4),
                ]),
        ]);
        let ResponseKind::ListOffsets(r) =
            refused(ApiKey::ListOffsets, 9, RequestKind::ListOffsets(request)).await
        else {
            panic!("not a list offsets response");
        };
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.partition_index, p.error_code, p.offset), (4, 35, -1));

        let request = m::MetadataRequest::default().with_topics(Some(vec![
            m::metadata_request::MetadataRequestTopic::default().with_name(Some(topic("orders"))),
        ]));
        let ResponseKind::Metadata(r) =
            refused(ApiKey::Metadata, 13, RequestKind::Metadata(request)).await
        else {
            panic!("not a metadata response");
        };
        assert_eq!(r.error_code, 35);
        assert_eq!(r.topics[0].error_code, 35);
    }

    #[tokio::test]
    async fn a_fetch_of_an_unserved_version_gets_the_top_level_error() {
        let ResponseKind::Fetch(r) = refused(
            ApiKey::Fetch,
            13,
            RequestKind::Fetch(m::FetchRequest::default()),
        )
        .await
        else {
            panic!("not a fetch response");
        };
        assert_eq!(r.error_code, 35);
    }

    #[tokio::test]
    async fn apis_this_broker_does_not_serve_at_all_are_refused_not_dropped() {
        let ResponseKind::EndTxn(r) =
            refused(ApiKey::EndTxn, 3, RequestKind::EndTxn(Default::default())).await
        else {
            panic!("not an end txn response");
        };
        assert_eq!(r.error_code, 35);
        // v3 of AddPartitionsToTxn has no top-level code: each partition says it.
        let request = m::AddPartitionsToTxnRequest::default().with_v3_and_below_topics(vec![
            m::add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(topic("orders"))
                .with_partitions(vec![1]),
        ]);
        let ResponseKind::AddPartitionsToTxn(r) = refused(
            ApiKey::AddPartitionsToTxn,
            3,
            RequestKind::AddPartitionsToTxn(request),
        )
        .await
        else {
            panic!("not an add partitions to txn response");
        };
        let p = &r.results_by_topic_v3_and_below[0].results_by_partition[0];
        assert_eq!((p.partition_index, p.partition_error_code), (1, 35));
    }

    /// A request header for `api` at `version`, followed by `body`: for
    /// versions the codec cannot even encode.
    fn raw_frame(api: ApiKey, version: i16, body: &[u8]) -> Bytes {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&(api as i16).to_be_bytes());
        buf.extend_from_slice(&version.to_be_bytes());
        buf.extend_from_slice(&5i32.to_be_bytes());
        buf.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
        buf.extend_from_slice(body);
        buf.freeze()
    }

    #[tokio::test]
    async fn versions_the_codec_cannot_read_close_with_a_reason() {
        for (api, version) in [
            (ApiKey::Produce, 2),
            (ApiKey::Fetch, 3),
            (ApiKey::ListOffsets, 0),
            (ApiKey::Metadata, 14),
        ] {
            let out = respond(
                &Untouched,
                &mut Session::plaintext("test"),
                raw_frame(api, version, &[0; 16]),
            )
            .await;
            let Err(Close(why)) = out else {
                panic!("{api:?} v{version} was answered");
            };
            assert!(why.contains("cannot be decoded"), "{why}");
            assert!(why.contains(&format!("{api:?} v{version}")), "{why}");
        }
    }

    #[tokio::test]
    async fn a_refusal_nothing_could_carry_closes_with_a_reason() {
        // acks=0: the client reads no response, so none may be sent.
        let silent = RequestKind::Produce(m::ProduceRequest::default().with_acks(0));
        let mut body = frame(ApiKey::Produce, 10, &silent);
        let header = decode_request_header_from_buffer(&mut body).unwrap();
        let out = refuse(&header, ApiKey::Produce, 10, body);
        let Err(Close(why)) = out else {
            panic!("an acks=0 produce was answered");
        };
        assert!(why.contains("no response that could carry"), "{why}");
        // A malformed body of a decodable version.
        let torn = raw_frame(ApiKey::EndTxn, 3, &[0, 5, b'x']);
        let Err(Close(why)) = respond(&Untouched, &mut Session::plaintext("test"), torn).await
        else {
            panic!("a torn EndTxn was answered");
        };
        assert!(why.contains("malformed"), "{why}");
    }

    /// Real sockets' backpressure (madsim's tokio has no duplex pipe).
    #[cfg(not(madsim))]
    mod limits {
        use super::*;
        use crate::protocol::frame::write_frame;

        /// Answers ApiVersions once let go, counting the requests it was given.
        struct Held {
            go: tokio::sync::Semaphore,
            seen: std::sync::atomic::AtomicUsize,
        }

        #[async_trait::async_trait]
        impl Handler for Held {
            async fn handle(
                &self,
                _: &mut Session,
                _: &RequestHeader,
                _: RequestKind,
            ) -> Result<Option<ResponseKind>, String> {
                self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                self.go.acquire().await.map_err(|e| e.to_string())?.forget();
                Ok(Some(ResponseKind::ApiVersions(
                    m::ApiVersionsResponse::default(),
                )))
            }
        }

        /// How many of 40 pipelined 200-byte requests a client gets written
        /// while the broker answers none, with `budget` bytes in flight.
        async fn written_while_held(budget: usize) -> usize {
            let request = RequestKind::ApiVersions(
                m::ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from("x".repeat(160)))
                    .with_client_software_version(StrBytes::from_static_str("1")),
            );
            let one = frame(ApiKey::ApiVersions, 3, &request);
            // A small pipe: what the broker has not read stays with the client.
            let (client, server) = tokio::io::duplex(64);
            let handler = Arc::new(Held {
                go: tokio::sync::Semaphore::new(0),
                seen: Default::default(),
            });
            let config = ProtocolConfig {
                max_in_flight_bytes: budget,
                ..ProtocolConfig::default()
            };
            let served = tokio::spawn(serve_connection(
                server,
                "test".into(),
                handler.clone(),
                config,
                Session::plaintext("test"),
            ));
            let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let (mut rd, mut wr) = tokio::io::split(client);
            let counter = written.clone();
            let writer = tokio::spawn(async move {
                for _ in 0..40 {
                    write_frame(&mut wr, &one).await.unwrap();
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
            let held = written.load(std::sync::atomic::Ordering::SeqCst);
            assert_eq!(handler.seen.load(std::sync::atomic::Ordering::SeqCst), 1);
            // Let everything through: every request is answered, in order.
            handler.go.add_permits(40);
            for _ in 0..40 {
                assert!(
                    crate::protocol::frame::read_frame(&mut rd, 1 << 20)
                        .await
                        .unwrap()
                        .is_some()
                );
            }
            writer.await.unwrap();
            drop(rd);
            served.abort();
            held
        }

        #[tokio::test]
        async fn bytes_in_flight_are_capped_per_connection() {
            // 16 requests read ahead without a byte cap; 1,000 bytes hold 5
            // (one being answered, four waiting), a sixth's length is read.
            let uncapped = written_while_held(100 << 20).await;
            let capped = written_while_held(1000).await;
            assert!(uncapped >= 16, "{uncapped} requests written without a cap");
            assert!(
                capped <= 6,
                "{capped} requests written with 1,000 bytes in flight"
            );
            // A request larger than the whole budget is still read, alone.
            assert!(written_while_held(100).await >= 1);
        }

        /// Produce requests answer later, once let go; anything else at once.
        /// Logs what it starts.
        struct Pipelined {
            go: Arc<tokio::sync::Semaphore>,
            started: Arc<std::sync::Mutex<Vec<i32>>>,
        }

        #[async_trait::async_trait]
        impl Handler for Pipelined {
            async fn handle(
                &self,
                _: &mut Session,
                _: &RequestHeader,
                _: RequestKind,
            ) -> Result<Option<ResponseKind>, String> {
                Err("handle is not what a connection calls".into())
            }

            async fn answer(
                &self,
                _: &mut Session,
                header: &RequestHeader,
                request: RequestKind,
            ) -> Result<Answer, String> {
                self.started.lock().unwrap().push(header.correlation_id);
                match request {
                    RequestKind::Produce(_) => {
                        let go = self.go.clone();
                        Ok(Answer::Later(Box::pin(async move {
                            go.acquire().await.map_err(|e| e.to_string())?.forget();
                            Ok(Some(ResponseKind::Produce(Default::default())))
                        })))
                    }
                    _ => Ok(Answer::Now(Some(
                        ResponseKind::Metadata(Default::default()),
                    ))),
                }
            }
        }

        #[tokio::test]
        async fn pipelined_produces_overlap_and_everything_else_waits_its_turn() {
            let handler = Arc::new(Pipelined {
                go: Arc::new(tokio::sync::Semaphore::new(0)),
                started: Default::default(),
            });
            let (mut client, server) = tokio::io::duplex(1 << 16);
            let served = tokio::spawn(serve_connection(
                server,
                "test".into(),
                handler.clone(),
                ProtocolConfig::default(),
                Session::plaintext("test"),
            ));
            let produce = RequestKind::Produce(m::ProduceRequest::default().with_acks(-1));
            let metadata = RequestKind::Metadata(m::MetadataRequest::default());
            for (n, (api, request)) in [
                (ApiKey::Produce, &produce),
                (ApiKey::Produce, &produce),
                (ApiKey::Metadata, &metadata),
                (ApiKey::Produce, &produce),
            ]
            .into_iter()
            .enumerate()
            {
                let version = if api == ApiKey::Produce { 9 } else { 12 };
                write_frame(
                    &mut client,
                    &numbered_frame(api, version, request, n as i32),
                )
                .await
                .unwrap();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            // Both produces started before either was answered; the
            // metadata request waits for them, and the produce after it too.
            assert_eq!(*handler.started.lock().unwrap(), [0, 1]);
            handler.go.add_permits(1);
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(*handler.started.lock().unwrap(), [0, 1]);
            handler.go.add_permits(2);
            let mut answered = Vec::new();
            for _ in 0..4 {
                let mut out = crate::protocol::frame::read_frame(&mut client, 1 << 20)
                    .await
                    .unwrap()
                    .unwrap();
                answered.push(i32::from_be_bytes(out.split_to(4)[..].try_into().unwrap()));
            }
            assert_eq!(answered, [0, 1, 2, 3]);
            assert_eq!(*handler.started.lock().unwrap(), [0, 1, 2, 3]);
            served.abort();
        }

        /// Mutes its connection for 200 ms at each request, noting when
        /// each was started.
        struct Muting {
            started: std::sync::Mutex<Vec<tokio::time::Instant>>,
        }

        #[async_trait::async_trait]
        impl Handler for Muting {
            async fn handle(
                &self,
                session: &mut Session,
                _: &RequestHeader,
                _: RequestKind,
            ) -> Result<Option<ResponseKind>, String> {
                self.started
                    .lock()
                    .unwrap()
                    .push(tokio::time::Instant::now());
                session.mute_for(Duration::from_millis(200));
                Ok(Some(ResponseKind::ApiVersions(
                    m::ApiVersionsResponse::default(),
                )))
            }
        }

        #[tokio::test]
        async fn a_muted_connection_answers_but_reads_nothing_until_its_throttle_ends() {
            let handler = Arc::new(Muting {
                started: Default::default(),
            });
            let (mut client, server) = tokio::io::duplex(1 << 16);
            let served = tokio::spawn(serve_connection(
                server,
                "test".into(),
                handler.clone(),
                ProtocolConfig::default(),
                Session::plaintext("test"),
            ));
            let one = frame(
                ApiKey::ApiVersions,
                3,
                &RequestKind::ApiVersions(m::ApiVersionsRequest::default()),
            );
            let began = tokio::time::Instant::now();
            for _ in 0..3 {
                write_frame(&mut client, &one).await.unwrap();
            }
            // The first answer comes at once, muted or not.
            crate::protocol::frame::read_frame(&mut client, 1 << 20)
                .await
                .unwrap()
                .unwrap();
            assert!(began.elapsed() < Duration::from_millis(150));
            for _ in 0..2 {
                crate::protocol::frame::read_frame(&mut client, 1 << 20)
                    .await
                    .unwrap()
                    .unwrap();
            }
            let started = handler.started.lock().unwrap().clone();
            assert_eq!(started.len(), 3);
            for pair in started.windows(2) {
                assert!(pair[1] - pair[0] >= Duration::from_millis(200));
            }
            served.abort();
        }

        #[tokio::test]
        async fn an_idle_connection_is_closed_and_a_busy_one_is_not() {
            let config = ProtocolConfig {
                idle_timeout: Some(Duration::from_millis(200)),
                ..ProtocolConfig::default()
            };
            let handler = Arc::new(Held {
                go: tokio::sync::Semaphore::new(1000),
                seen: Default::default(),
            });
            let request = RequestKind::ApiVersions(m::ApiVersionsRequest::default());
            let one = frame(ApiKey::ApiVersions, 3, &request);
            let (mut client, server) = tokio::io::duplex(1 << 16);
            let served = tokio::spawn(serve_connection(
                server,
                "test".into(),
                handler,
                config,
                Session::plaintext("test"),
            ));
            for _ in 0..8 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                write_frame(&mut client, &one).await.unwrap();
                assert!(
                    crate::protocol::frame::read_frame(&mut client, 1 << 20)
                        .await
                        .unwrap()
                        .is_some()
                );
            }
            tokio::time::timeout(Duration::from_secs(5), served)
                .await
                .expect("an idle connection was not closed")
                .unwrap();
        }
    }

    /// Found by `ci/fuzz/run` (request_frame): 18 bytes claiming 2^31
    /// topics made the codec size a 163 GB Vec and abort the broker
    /// (third_party/kafka-protocol/KAAS-PATCH.md).
    #[test]
    fn an_array_count_larger_than_the_frame_is_refused_before_any_allocation() {
        let frame = Bytes::from_static(&[
            0x00, 0x17, 0x00, 0x02, 0x00, 0x00, 0x00, 0x07, 0x00, 0x04, b'f', b'z', 0x00, 0x75,
            0x7a, 0x00, 0x00, 0x00,
        ]);
        match decode(frame) {
            Err(Close(why)) => assert!(why.contains("malformed"), "{why}"),
            Ok(_) => panic!("a frame claiming 2^31 topics decoded"),
        }
    }
}
