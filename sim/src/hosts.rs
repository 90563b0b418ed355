//! The model NFS host ids of the run's nodes that are not brokers
//! (brokers use their broker id).

/// The observer's, and the operators' who read the volume directly.
pub(crate) const OBSERVER_HOST: u32 = 1_000;
