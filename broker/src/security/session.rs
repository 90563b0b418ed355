//! One connection's identity: the listener it came in on, the principal it
//! proved (or ANONYMOUS), and where its SASL exchange stands.

use std::sync::Arc;

use kafka_protocol::messages::ApiKey;
use tokio::time::Instant;

use super::listeners::SecurityProtocol;
use super::principal::Principal;
use super::sasl::Exchange;

/// Where a connection's SASL authentication stands.
pub enum SaslState {
    /// Not a SASL listener.
    Off,
    /// Waiting for SaslHandshake (first, or a re-authentication).
    Handshake,
    /// SaslHandshake chose a mechanism; SaslAuthenticate exchanges follow.
    Exchanging(Box<Exchange>),
    /// Authenticated; the session ends at `expires` (KIP-368).
    Done {
        mechanism: String,
        expires: Option<Instant>,
    },
}

pub struct Session {
    pub listener: Arc<str>,
    pub protocol: SecurityProtocol,
    pub principal: Principal,
    /// The client's address (ACLs' host).
    pub host: String,
    pub sasl: SaslState,
    /// Set once the first authentication completed: a re-authentication
    /// must keep the principal (KIP-368).
    pub authenticated_once: bool,
    /// Set when the connection must close once this response is sent (a
    /// failed authentication, as Kafka does).
    pub close_after_response: Option<String>,
    /// SaslHandshake v0 was answered: the SASL tokens come as bare frames
    /// until the exchange ends.
    pub raw_tokens: bool,
    /// A quota throttled this client: its next request is not read before
    /// then (KIP-219), whatever the client does with `throttle_time_ms`.
    pub muted_until: Option<Instant>,
    /// Idempotent batches refused before their log took them, so that
    /// the ones pipelined behind them are refused too.
    pub produce_order: crate::produce_order::ProduceOrder,
}

/// Who a request comes from, as the authorizer sees it.
#[derive(Clone, Debug)]
pub struct Who {
    pub principal: Principal,
    pub host: String,
    pub listener: Arc<str>,
}

impl Session {
    /// Mutes the connection for `throttle` (if longer than a mute already
    /// set).
    pub fn mute_for(&mut self, throttle: std::time::Duration) {
        if throttle.is_zero() {
            return;
        }
        let until = Instant::now() + throttle;
        self.muted_until = Some(self.muted_until.map_or(until, |u| u.max(until)));
    }

    pub fn who(&self) -> Who {
        Who {
            principal: self.principal.clone(),
            host: self.host.clone(),
            listener: self.listener.clone(),
        }
    }

    pub fn new(listener: Arc<str>, protocol: SecurityProtocol, host: String) -> Self {
        Self {
            listener,
            protocol,
            principal: Principal::anonymous(),
            host,
            sasl: if protocol.sasl() {
                SaslState::Handshake
            } else {
                SaslState::Off
            },
            authenticated_once: false,
            close_after_response: None,
            raw_tokens: false,
            muted_until: None,
            produce_order: Default::default(),
        }
    }

    /// A session of the default plaintext listener (tests, the simulator's
    /// peers).
    pub fn plaintext(host: &str) -> Self {
        Self::new(
            Arc::from("PLAINTEXT"),
            SecurityProtocol::Plaintext,
            host.to_owned(),
        )
    }

    /// Why `api` may not be sent now, if it may not: before a SASL
    /// listener's authentication only ApiVersions and the SASL requests
    /// are, and after a session expired only a re-authentication is. Kafka
    /// closes the connection then.
    pub fn refusal(&self, api: ApiKey, now: Instant) -> Option<String> {
        let sasl_api = matches!(
            api,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        );
        match &self.sasl {
            SaslState::Off => None,
            SaslState::Done { expires, .. } => match expires {
                Some(at) if now >= *at && !sasl_api => Some(format!(
                    "{api:?} after the SASL session of {} expired without re-authentication",
                    self.principal
                )),
                _ => None,
            },
            SaslState::Handshake | SaslState::Exchanging(_) if !sasl_api => Some(format!(
                "{api:?} before SASL authentication on listener {}",
                self.listener
            )),
            _ => None,
        }
    }
}
