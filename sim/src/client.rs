//! A small Kafka client for the simulation's workload: one connection per
//! broker, every call bounded by a timeout. One request at a time, or
//! several in flight on one connection ([`Client::call_pipelined`]), as
//! librdkafka sends produce requests. Built on the kafka-protocol codecs,
//! like the broker.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::net::TcpStream;

pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(4);

/// Why a call has no answer. Every failure is indeterminate for a write:
/// it may or may not have happened.
#[derive(Clone, Debug)]
pub struct CallError {
    pub what: String,
    /// The broker took the request (it was sent on a live connection) and
    /// gave no answer within the call's timeout: not a refused or broken
    /// connection.
    pub timed_out: bool,
}

impl CallError {
    pub(crate) fn failed(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            timed_out: false,
        }
    }

    fn timeout(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            timed_out: true,
        }
    }
}

pub struct Client {
    name: String,
    conns: BTreeMap<u32, TcpStream>,
    next_correlation: i32,
    /// Requests sent so far.
    pub sent: u64,
    /// What each request that timed out was: sent on a live connection,
    /// and not answered within its call's timeout.
    pub timeouts: Vec<String>,
}

/// Where broker `id` listens in the simulation.
pub(crate) fn broker_addr(id: u32) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1 + id as u8], 9092))
}

impl Client {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            conns: BTreeMap::new(),
            next_correlation: 1,
            sent: 0,
            timeouts: Vec::new(),
        }
    }

    /// Sends `request` as `api` v`version` to broker `to` and waits for the
    /// answer. A failed call drops the connection; the next one reconnects.
    pub async fn call(
        &mut self,
        to: u32,
        api: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> Result<ResponseKind, CallError> {
        self.call_within(CALL_TIMEOUT, to, api, version, request)
            .await
    }

    /// [`Self::call`], waiting up to `timeout` for the answer (Kafka
    /// clients wait 30 s by default: an answer from a broker that was
    /// frozen that long still arrives).
    pub async fn call_within(
        &mut self,
        timeout: Duration,
        to: u32,
        api: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> Result<ResponseKind, CallError> {
        let correlation = self.next_correlation;
        self.next_correlation += 1;
        self.sent += 1;
        let outcome = tokio::time::timeout(
            timeout,
            self.exchange(to, api, version, correlation, request),
        )
        .await;
        match outcome {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                self.conns.remove(&to);
                Err(e)
            }
            Err(_) => {
                self.conns.remove(&to);
                let e = CallError::timeout(format!("{api:?} to broker-{to} timed out"));
                self.timeouts.push(e.what.clone());
                Err(e)
            }
        }
    }

    /// Sends every request of `requests` to broker `to` on one connection
    /// before reading any answer (several in flight, as librdkafka
    /// pipelines up to `max.in.flight` produce requests), then reads their
    /// answers in order. Each answer must come within `timeout` of the
    /// previous one (or of the sending); from the first failure on, every
    /// later request of the set fails too (its answer is indeterminate) and
    /// the connection is dropped.
    pub async fn call_pipelined(
        &mut self,
        timeout: Duration,
        to: u32,
        requests: Vec<(ApiKey, i16, RequestKind)>,
    ) -> Vec<Result<ResponseKind, CallError>> {
        let first = self.next_correlation;
        self.next_correlation += requests.len() as i32;
        self.sent += requests.len() as u64;
        let sent = tokio::time::timeout(timeout, self.send_all(to, first, &requests)).await;
        let mut out = Vec::with_capacity(requests.len());
        let mut failed = match sent {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some(CallError::timeout(format!(
                "pipelined requests to broker-{to}: send timed out"
            ))),
        };
        for (k, (api, version, _)) in requests.iter().enumerate() {
            if let Some(e) = &failed {
                out.push(Err(e.clone()));
                continue;
            }
            let correlation = first + k as i32;
            let answer = match self.conns.get_mut(&to) {
                Some(stream) => tokio::time::timeout(
                    timeout,
                    broker::peer::read_response(stream, (*api, *version), correlation),
                )
                .await
                .map_err(|_| {
                    CallError::timeout(format!(
                        "{api:?} to broker-{to} timed out (pipelined, {k} of {})",
                        requests.len()
                    ))
                })
                .and_then(|r| r.map_err(|e| CallError::failed(format!("to broker-{to}: {e}")))),
                None => Err(CallError::failed("no connection")),
            };
            match answer {
                Ok(r) => out.push(Ok(r)),
                Err(e) => {
                    failed = Some(e.clone());
                    out.push(Err(e));
                }
            }
        }
        if failed.is_some() {
            self.conns.remove(&to);
        }
        self.timeouts.extend(
            out.iter()
                .filter_map(|r| r.as_ref().err())
                .filter(|e| e.timed_out)
                .map(|e| e.what.clone()),
        );
        out
    }

    async fn send_all(
        &mut self,
        to: u32,
        first: i32,
        requests: &[(ApiKey, i16, RequestKind)],
    ) -> Result<(), CallError> {
        let name = self.name.clone();
        let stream = self.connection(to).await?;
        for (k, (api, version, request)) in requests.iter().enumerate() {
            broker::peer::send_request(stream, &name, (*api, *version), first + k as i32, request)
                .await
                .map_err(|e| CallError::failed(format!("to broker-{to}: {e}")))?;
        }
        Ok(())
    }

    async fn connection(&mut self, to: u32) -> Result<&mut TcpStream, CallError> {
        if !self.conns.contains_key(&to) {
            let s = TcpStream::connect(broker_addr(to))
                .await
                .map_err(|e| CallError::failed(format!("to broker-{to}: connect: {e}")))?;
            tracing::trace!(client = %self.name, to, "connected");
            self.conns.insert(to, s);
        }
        self.conns
            .get_mut(&to)
            .ok_or_else(|| CallError::failed("no connection"))
    }

    async fn exchange(
        &mut self,
        to: u32,
        api: ApiKey,
        version: i16,
        correlation: i32,
        request: RequestKind,
    ) -> Result<ResponseKind, CallError> {
        let name = self.name.clone();
        let stream = self.connection(to).await?;
        broker::peer::exchange(stream, &name, (api, version), correlation, &request)
            .await
            .map_err(|e| CallError::failed(format!("to broker-{to}: {e}")))
    }
}
