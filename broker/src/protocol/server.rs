//! Accepting client connections.

use std::sync::Arc;

use tokio::net::TcpListener;

use super::connection::{Handler, ProtocolConfig, serve_connection};

/// Accepts connections on `listener` until the task is dropped, serving each
/// on a task of its own.
pub async fn serve(listener: TcpListener, handler: Arc<dyn Handler>, config: ProtocolConfig) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                // Small responses go out at once: with Nagle's algorithm a
                // response waits for the client's delayed ACK of the one
                // before (40 ms on Linux) whenever requests are pipelined.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, error = %e, "TCP_NODELAY not set");
                }
                let (handler, config) = (handler.clone(), config.clone());
                tokio::spawn(serve_connection(stream, peer.to_string(), handler, config));
            }
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}
