//! Settings of the model NFS: cache timeouts and every fault, from serde.
//!
//! The defaults are a well-behaved NFSv4 mount with Linux's default cache
//! timeouts and every injected fault off; caches, silly-renames, ESTALE and
//! the two-step rename are behaviours and always on. [`NfsConfig::hostile`]
//! switches every fault on at rates a simulation can live with.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NfsConfig {
    /// Attribute cache timeouts for files (Linux: acregmin=3, acregmax=60).
    pub acregmin_ms: u64,
    pub acregmax_ms: u64,
    /// Attribute cache timeouts for directories; lookups and listings are
    /// trusted while their directory's attributes are (acdirmin=30, acdirmax=60).
    pub acdirmin_ms: u64,
    pub acdirmax_ms: u64,
    /// NFSv4.1 PRESERVE_UNLINKED: keep an unlinked file while any host has it
    /// open. Off by default, as on most servers.
    pub preserve_unlinked: bool,
    /// Record every operation (host, path, result) in the trace.
    pub trace: bool,
    /// The server delegates files to hosts that read them without
    /// O_DIRECT (Linux nfsd: on). See `delegations.rs`.
    pub delegations: bool,
    /// How long the server keeps a silent host's state, and so how long a
    /// recall of a power-lost host's delegation waits (Linux: 90 s).
    pub lease_ms: u64,
    /// After a server restart, new opens, renames and removals wait this
    /// long (Linux: the lease; 0 here unless a world asks for it).
    pub grace_ms: u64,
    pub faults: Faults,
}

impl Default for NfsConfig {
    fn default() -> Self {
        Self {
            acregmin_ms: 3_000,
            acregmax_ms: 60_000,
            acdirmin_ms: 30_000,
            acdirmax_ms: 60_000,
            preserve_unlinked: false,
            trace: false,
            delegations: true,
            lease_ms: 90_000,
            grace_ms: 0,
            faults: Faults::default(),
        }
    }
}

/// Every injectable fault. Probabilities are per operation, in `0.0..=1.0`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Memory-pressure write-back: after any operation, with this
    /// probability one host sends a random subset of its dirty pages to the
    /// server, in random order, before any fsync or close.
    pub writeback_probability: f64,
    /// On a host crash, the chance that each unflushed dirty page had
    /// reached the server anyway.
    pub crash_landed_probability: f64,
    /// A non-idempotent request (exclusive create, mkdir, rename, remove,
    /// rmdir) succeeds but its reply is lost; the retransmission answers
    /// EEXIST or ENOENT.
    pub lost_reply_probability: f64,
    /// A request fails with EIO.
    pub eio_probability: f64,
    /// Of the EIO failures, the share that happened after the server had
    /// already applied the request (the caller cannot know which).
    pub eio_applied_share: f64,
    /// A WRITE fails with ENOSPC.
    pub enospc_probability: f64,
    /// Total bytes the server stores before answering ENOSPC.
    pub capacity_bytes: Option<u64>,
    /// A two-step operation (rename over a target open on this host) stops
    /// after its first step, with an EIO whose outcome the caller cannot know.
    pub interrupt_probability: f64,
    /// Latency of each server call, uniform in `[min, max]` microseconds.
    pub latency_min_us: u64,
    pub latency_max_us: u64,
    /// A server call stalls for `stall_ms` (a slow or failing-over server).
    pub stall_probability: f64,
    pub stall_ms: u64,
}

impl NfsConfig {
    /// Every fault on, at rates that keep a simulation moving.
    pub fn hostile() -> Self {
        Self {
            faults: Faults {
                writeback_probability: 0.2,
                crash_landed_probability: 0.5,
                lost_reply_probability: 0.02,
                eio_probability: 0.005,
                eio_applied_share: 0.5,
                enospc_probability: 0.002,
                capacity_bytes: None,
                interrupt_probability: 0.1,
                latency_min_us: 100,
                latency_max_us: 2_000,
                stall_probability: 0.001,
                stall_ms: 5_000,
            },
            ..Self::default()
        }
    }

    /// Checks that every probability is within `0.0..=1.0` and every range
    /// is ordered, naming the first field that is not.
    pub fn validate(&self) -> Result<(), String> {
        let f = &self.faults;
        let probabilities = [
            ("writeback_probability", f.writeback_probability),
            ("crash_landed_probability", f.crash_landed_probability),
            ("lost_reply_probability", f.lost_reply_probability),
            ("eio_probability", f.eio_probability),
            ("eio_applied_share", f.eio_applied_share),
            ("enospc_probability", f.enospc_probability),
            ("interrupt_probability", f.interrupt_probability),
            ("stall_probability", f.stall_probability),
        ];
        for (name, p) in probabilities {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("faults.{name} = {p}: must be between 0 and 1"));
            }
        }
        if f.latency_min_us > f.latency_max_us {
            return Err(format!(
                "faults.latency_min_us ({}) exceeds faults.latency_max_us ({})",
                f.latency_min_us, f.latency_max_us
            ));
        }
        if self.acregmin_ms > self.acregmax_ms || self.acdirmin_ms > self.acdirmax_ms {
            return Err("a cache timeout minimum exceeds its maximum".to_owned());
        }
        Ok(())
    }

    /// Caches, write-back, latency and stalls, but no failing requests: for
    /// tests of races rather than of error handling.
    pub fn hostile_without_errors() -> Self {
        let mut c = Self::hostile();
        c.faults.lost_reply_probability = 0.0;
        c.faults.eio_probability = 0.0;
        c.faults.enospc_probability = 0.0;
        c.faults.interrupt_probability = 0.0;
        c.faults.stall_probability = 0.0;
        c
    }

    pub(crate) fn file_timeouts(&self) -> (Duration, Duration) {
        (
            Duration::from_millis(self.acregmin_ms),
            Duration::from_millis(self.acregmax_ms.max(self.acregmin_ms)),
        )
    }

    pub(crate) fn dir_timeouts(&self) -> (Duration, Duration) {
        (
            Duration::from_millis(self.acdirmin_ms),
            Duration::from_millis(self.acdirmax_ms.max(self.acdirmin_ms)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_configs_fill_in_defaults_and_unknown_fields_are_rejected() {
        let c: NfsConfig = serde_json::from_str(
            r#"{"acregmin_ms": 0, "faults": {"lost_reply_probability": 0.5}}"#,
        )
        .unwrap();
        assert_eq!(c.acregmin_ms, 0);
        assert_eq!(c.acdirmin_ms, 30_000);
        assert_eq!(c.faults.lost_reply_probability, 0.5);
        assert_eq!(c.faults.eio_probability, 0.0);
        let err =
            serde_json::from_str::<NfsConfig>(r#"{"faults": {"eoi_probability": 1}}"#).unwrap_err();
        assert!(err.to_string().contains("eoi_probability"), "{err}");
    }

    #[test]
    fn validation_names_the_bad_field() {
        assert_eq!(NfsConfig::default().validate(), Ok(()));
        assert_eq!(NfsConfig::hostile().validate(), Ok(()));
        let mut c = NfsConfig::default();
        c.faults.eio_probability = 1.5;
        assert!(c.validate().unwrap_err().contains("eio_probability"));
        let mut c = NfsConfig::default();
        c.faults.latency_min_us = 10;
        assert!(c.validate().unwrap_err().contains("latency_min_us"));
    }
}
