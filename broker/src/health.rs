//! The probe endpoint (`--health-listen`): a minimal HTTP/1.0 server for
//! Kubernetes probes, so that readiness means what clients need.
//!
//! - `GET /livez`: 200 while the process runs and its runtime answers.
//!   Deliberately not tied to the volume: a stalled NFS server stalls
//!   every broker alike, and restarting them would not bring it back.
//! - `GET /readyz`: 200 once this broker serves clients and the cluster's
//!   current assignment lists it (it is registered: the controller counts
//!   it live and may give it partitions); 503, with the reason, before
//!   that and from the moment a shutdown begins.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const STARTING: u8 = 0;
const READY: u8 = 1;
const UNREGISTERED: u8 = 2;
const LEAVING: u8 = 3;

/// What `/readyz` answers; the broker's main loop updates it.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicU8>);

impl Readiness {
    /// After each look at the assignment: serving, and listed in it or not.
    pub fn observe(&self, registered: bool) {
        let next = if registered { READY } else { UNREGISTERED };
        // Leaving is final.
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                (s != LEAVING).then_some(next)
            });
    }

    pub fn leaving(&self) {
        self.0.store(LEAVING, Ordering::Relaxed);
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed) == READY
    }

    fn reason(&self) -> &'static str {
        match self.0.load(Ordering::Relaxed) {
            STARTING => "starting: no assignment seen yet, not serving clients",
            READY => "ready",
            UNREGISTERED => "serving, but not in the cluster's current assignment yet",
            _ => "shutting down",
        }
    }
}

/// Serves probes on `listener` until the task is dropped or aborted.
pub async fn serve(listener: tokio::net::TcpListener, readiness: Readiness) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "health listener accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let readiness = readiness.clone();
        tokio::spawn(async move {
            let answered =
                tokio::time::timeout(Duration::from_secs(5), answer(stream, &readiness)).await;
            if let Ok(Err(e)) = answered {
                tracing::debug!(error = %e, "health probe connection failed");
            }
        });
    }
}

async fn answer(mut stream: tokio::net::TcpStream, readiness: &Readiness) -> io::Result<()> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    // The request line is all we need; stop at the end of the headers.
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let (status, body) = respond(&buf, readiness);
    let reply = format!(
        "HTTP/1.0 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}\n",
        body.len() + 1
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

fn respond(request: &[u8], readiness: &Readiness) -> (&'static str, &'static str) {
    let line = request.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, path) = (parts.next(), parts.next());
    if !matches!(method, Some(b"GET" | b"HEAD")) {
        return ("405 Method Not Allowed", "only GET");
    }
    match path {
        Some(b"/livez") => ("200 OK", "alive"),
        Some(b"/readyz") if readiness.is_ready() => ("200 OK", readiness.reason()),
        Some(b"/readyz") => ("503 Service Unavailable", readiness.reason()),
        _ => ("404 Not Found", "try /livez or /readyz"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_the_broker_and_leaving_is_final() {
        let r = Readiness::default();
        let get = |path: &str| respond(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes(), &r).0;
        assert_eq!(get("/livez"), "200 OK");
        assert_eq!(get("/readyz"), "503 Service Unavailable");
        r.observe(false);
        assert_eq!(get("/readyz"), "503 Service Unavailable");
        r.observe(true);
        assert_eq!(get("/readyz"), "200 OK");
        r.leaving();
        r.observe(true);
        assert_eq!(get("/readyz"), "503 Service Unavailable");
        assert_eq!(get("/livez"), "200 OK");
        assert_eq!(get("/other"), "404 Not Found");
        assert_eq!(
            respond(b"POST /readyz HTTP/1.1\r\n\r\n", &r).0,
            "405 Method Not Allowed"
        );
    }

    // Real sockets: madsim's simulated TCP neither closes a dropped
    // listener's port nor signals end of stream the same way (the
    // simulator runs brokers without these probes).
    #[cfg(not(madsim))]
    #[tokio::test]
    async fn answers_over_tcp() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let r = Readiness::default();
        let server = tokio::spawn(serve(listener, r.clone()));
        let get = |path: &'static str| async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        assert!(get("/readyz").await.starts_with("HTTP/1.0 503"));
        r.observe(true);
        let ok = get("/readyz").await;
        assert!(
            ok.starts_with("HTTP/1.0 200 OK") && ok.ends_with("ready\n"),
            "{ok}"
        );
        server.abort();
    }
}
