//! The Kafka wire protocol: framing, version negotiation, connections.

pub mod connection;
mod error_codes;
pub mod frame;
pub mod limits;
pub mod refusal;
mod response_frame;
pub mod server;
pub mod unsupported;
pub mod versions;

pub use connection::{Answer, Close, Handler, LaterResponse, ProtocolConfig};
