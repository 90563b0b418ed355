//! Caps on client connections: how many a broker holds in all, how many
//! one client address holds (Kafka's `max.connections` and
//! `max.connections.per.ip`). A connection over a cap is closed as soon as
//! it is accepted, with a log line, so that one misbehaving client (a
//! connection leak, a reconnect storm) cannot take every file descriptor
//! of the broker from the others.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Refusals are logged at most this often (with the count since the last
/// line), so that a reconnect storm does not become a log storm.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub max_per_ip: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Connections counted against `max_connections` (the inter-broker
    /// listener's are not: brokers must reach each other however many
    /// clients there are, as in Kafka).
    total: usize,
    per_ip: BTreeMap<IpAddr, usize>,
    refused_unlogged: u64,
    last_refusal_log: Option<Instant>,
}

/// Why a connection was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Broker { max: usize },
    Address { ip: IpAddr, max: usize },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Broker { max } => write!(
                f,
                "the broker holds its maximum of {max} client connections (--max-connections)"
            ),
            Refusal::Address { ip, max } => write!(
                f,
                "{ip} holds its maximum of {max} connections (--max-connections-per-ip)"
            ),
        }
    }
}

/// One admitted connection; dropping it gives its place back.
#[derive(Debug)]
pub struct Admitted {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
    counted: bool,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut s = self.limits.lock();
        if self.counted {
            s.total = s.total.saturating_sub(1);
        }
        if let Some(n) = s.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                s.per_ip.remove(&self.ip);
            }
        }
    }
}

impl ConnectionLimits {
    pub fn new(max_connections: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(Self {
            max_connections,
            max_per_ip,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The counts stay consistent under every panic (each change is
        // one statement), so a poisoned lock is still good.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a connection from `ip`, or says which cap it is over.
    /// `inter_broker`: on the inter-broker listener, outside the broker's
    /// total (the per-address cap still applies).
    pub fn admit(self: &Arc<Self>, ip: IpAddr, inter_broker: bool) -> Result<Admitted, Refusal> {
        let mut s = self.lock();
        let from_ip = s.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.max_per_ip {
            return Err(Refusal::Address {
                ip,
                max: self.max_per_ip,
            });
        }
        if !inter_broker && s.total >= self.max_connections {
            return Err(Refusal::Broker {
                max: self.max_connections,
            });
        }
        *s.per_ip.entry(ip).or_insert(0) += 1;
        if !inter_broker {
            s.total += 1;
        }
        Ok(Admitted {
            limits: self.clone(),
            ip,
            counted: !inter_broker,
        })
    }

    /// Logs a refusal, or counts it for the next line if one was logged
    /// less than `REFUSAL_LOG_EVERY` ago.
    pub fn log_refusal(&self, listener: &str, peer: std::net::SocketAddr, why: &Refusal) {
        let now = Instant::now();
        let mut s = self.lock();
        if s.last_refusal_log
            .is_some_and(|t| now.duration_since(t) < REFUSAL_LOG_EVERY)
        {
            s.refused_unlogged += 1;
            return;
        }
        let earlier = std::mem::take(&mut s.refused_unlogged);
        s.last_refusal_log = Some(now);
        drop(s);
        tracing::warn!(
            %peer,
            %listener,
            refused_since_last_line = earlier,
            "connection refused: {why}"
        );
    }

    /// Connections held now (all listeners), for tests and the logs.
    pub fn held(&self) -> usize {
        self.lock().per_ip.values().sum()
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: usize::MAX,
            max_per_ip: usize::MAX,
            state: Mutex::new(State::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn caps_per_address_and_in_all_and_places_come_back() {
        let limits = ConnectionLimits::new(3, 2);
        let a1 = limits.admit(ip(1), false).unwrap();
        let _a2 = limits.admit(ip(1), false).unwrap();
        assert_eq!(
            limits.admit(ip(1), false).unwrap_err(),
            Refusal::Address { ip: ip(1), max: 2 }
        );
        let _b1 = limits.admit(ip(2), false).unwrap();
        assert_eq!(
            limits.admit(ip(3), false).unwrap_err(),
            Refusal::Broker { max: 3 }
        );
        // Brokers still get in past the total, not past the address cap.
        let _peer = limits.admit(ip(3), true).unwrap();
        assert_eq!(limits.held(), 4);
        drop(a1);
        let _a3 = limits.admit(ip(1), false).unwrap();
        assert_eq!(
            limits.admit(ip(4), false).unwrap_err(),
            Refusal::Broker { max: 3 }
        );
        drop(_peer);
        assert_eq!(limits.held(), 3);
    }
}
