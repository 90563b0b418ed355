//! Broker heartbeats: each broker rewrites its own file; others only read it.
//!
//! Single writer: the file of broker N is written only by broker N. Two
//! processes started with the same id by mistake would both write; the
//! `incarnation` (random per start) lets readers see that happening.

use std::io;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use vfs::Vfs;
use vfs::durable::{EnvelopeError, atomic_replace, open_envelope, seal, sweep_temps};

use crate::layout;

const KIND: &str = "broker-heartbeat";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub broker_id: u32,
    /// Random per process start, so a restart is told apart from a stall.
    pub incarnation: u64,
    /// Grows by one with every heartbeat of this incarnation.
    pub sequence: u64,
    pub advertised: String,
    /// Set by a broker shutting down: count it gone now and move its
    /// partitions, instead of waiting for its heartbeat to go stale.
    #[serde(default)]
    pub leaving: bool,
    /// Leaderships this broker was given but can never hold in their
    /// epoch (the claim is lost, undecided, or a takeover or flush failed
    /// half-way): `(topic id or coordinator key, partition or slot, epoch)`.
    /// The controller answers with the next epoch.
    #[serde(default)]
    pub stuck: Vec<(String, u32, u32)>,
}

impl Heartbeat {
    pub fn encode(&self) -> Bytes {
        let json = serde_json::to_vec(self).expect("heartbeat serialises");
        seal(KIND, &json)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let payload = open_envelope(KIND, bytes)?;
        serde_json::from_slice(payload).map_err(|e| EnvelopeError::Payload(e.to_string()))
    }
}

/// Publishes `hb` as this broker's heartbeat (atomic replace).
pub async fn write(vfs: &dyn Vfs, hb: &Heartbeat) -> io::Result<()> {
    atomic_replace(vfs, &layout::heartbeat(hb.broker_id), hb.encode()).await
}

/// Removes temp files a previous incarnation of this broker left behind.
pub async fn sweep(vfs: &dyn Vfs, broker_id: u32) -> io::Result<usize> {
    sweep_temps(vfs, &layout::heartbeat(broker_id)).await
}

/// Reads broker `id`'s latest heartbeat (fresh open by path).
pub async fn read(vfs: &dyn Vfs, id: u32) -> io::Result<Heartbeat> {
    let path = layout::heartbeat(id);
    let bytes = vfs::read_file(vfs, &path).await?;
    Heartbeat::decode(&bytes).map_err(|e| e.at(path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let hb = Heartbeat {
            broker_id: 2,
            incarnation: 9,
            sequence: 4,
            advertised: "h:1".into(),
            leaving: false,
            stuck: Vec::new(),
        };
        assert_eq!(Heartbeat::decode(&hb.encode()).unwrap(), hb);
        assert_eq!(Heartbeat::decode(b""), Err(EnvelopeError::Empty));
        let not_json = seal(KIND, b"{");
        assert!(matches!(
            Heartbeat::decode(&not_json),
            Err(EnvelopeError::Payload(_))
        ));
    }
}
