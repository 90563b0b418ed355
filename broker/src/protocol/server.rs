//! Accepting client connections on one listener.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::connection::{Handler, ProtocolConfig, serve_connection};
#[cfg(not(madsim))]
use crate::security::Principal;
use crate::security::{SecurityProtocol, Session};

/// What a listener is: its name and protocol, and its TLS acceptor.
#[derive(Clone)]
pub struct ListenerInfo {
    pub name: Arc<str>,
    pub protocol: SecurityProtocol,
    /// The brokers' own listener: outside the cap on client connections.
    pub inter_broker: bool,
    #[cfg(not(madsim))]
    pub tls: Option<Arc<crate::security::tls::Reloading>>,
}

/// A TLS handshake that takes longer than this is dropped, so that
/// half-open connections cannot pile up.
#[cfg(not(madsim))]
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections on `listener` until the task is dropped, serving each
/// on a task of its own.
pub async fn serve(
    listener: TcpListener,
    handler: Arc<dyn Handler>,
    config: ProtocolConfig,
    info: ListenerInfo,
) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let admitted = match config.limits.admit(peer.ip(), info.inter_broker) {
                    Ok(a) => a,
                    Err(why) => {
                        if let Some(m) = handler.metrics() {
                            m.connection_refused();
                        }
                        config.limits.log_refusal(&info.name, peer, &why);
                        drop(stream);
                        continue;
                    }
                };
                // Small responses go out at once: with Nagle's algorithm a
                // response waits for the client's delayed ACK of the one
                // before (40 ms on Linux) whenever requests are pipelined.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, error = %e, "TCP_NODELAY not set");
                }
                let open = handler.metrics().map(|m| m.connection_opened());
                let (handler, config, info) = (handler.clone(), config.clone(), info.clone());
                tokio::spawn(async move {
                    let _admitted = (admitted, open);
                    let session =
                        Session::new(info.name.clone(), info.protocol, peer.ip().to_string());
                    #[cfg(not(madsim))]
                    if let Some(tls) = &info.tls {
                        let accepting = tls.acceptor().accept(stream);
                        let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, accepting)
                            .await
                        {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::info!(target: "kaas::audit", %peer, listener = %info.name, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::info!(target: "kaas::audit", %peer, listener = %info.name, "TLS handshake timed out");
                                return;
                            }
                        };
                        let mut session = session;
                        if info.protocol == SecurityProtocol::Ssl
                            && let Some(p) = client_principal(&stream, tls)
                        {
                            session.principal = p;
                        }
                        serve_connection(stream, peer.to_string(), handler, config, session).await;
                        return;
                    }
                    serve_connection(stream, peer.to_string(), handler, config, session).await;
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The principal of a verified client certificate (SSL listeners; on
/// SASL_SSL the SASL exchange names the principal instead).
#[cfg(not(madsim))]
fn client_principal<S>(
    stream: &tokio_rustls::server::TlsStream<S>,
    tls: &crate::security::tls::Reloading,
) -> Option<Principal> {
    let cert = stream.get_ref().1.peer_certificates()?.first()?;
    crate::security::tls::principal_of(cert, tls.principal_from())
}
