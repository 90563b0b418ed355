//! The Kafka wire protocol: framing, version negotiation, connections.

pub mod connection;
pub mod frame;
pub mod limits;
pub mod server;
pub mod unsupported;
pub mod versions;

pub use connection::{Answer, Close, Handler, LaterResponse, ProtocolConfig};
