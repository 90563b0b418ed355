//! A small Kafka client for the simulation's workload: one connection per
//! broker, one request at a time, every call bounded by a timeout. Built
//! on the kafka-protocol codecs, like the broker.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::net::TcpStream;

pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(4);

/// Why a call has no answer. Every failure is indeterminate for a write:
/// it may or may not have happened.
#[derive(Clone, Debug)]
pub struct CallError(pub String);

pub struct Client {
    name: String,
    conns: BTreeMap<u32, TcpStream>,
    next_correlation: i32,
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
                Err(CallError(format!("{api:?} to broker-{to} timed out")))
            }
        }
    }

    async fn exchange(
        &mut self,
        to: u32,
        api: ApiKey,
        version: i16,
        correlation: i32,
        request: RequestKind,
    ) -> Result<ResponseKind, CallError> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            CallError(format!("{api:?} to broker-{to}: {what}: {e}"))
        };
        if !self.conns.contains_key(&to) {
            let s = TcpStream::connect(broker_addr(to))
                .await
                .map_err(|e| fail("connect", &e))?;
            tracing::trace!(client = %self.name, to, "connected");
            self.conns.insert(to, s);
        }
        let Some(stream) = self.conns.get_mut(&to) else {
            return Err(CallError("no connection".into()));
        };
        broker::peer::exchange(stream, &self.name, (api, version), correlation, &request)
            .await
            .map_err(|e| CallError(format!("to broker-{to}: {e}")))
    }
}
