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
//! - `GET /metrics`: the broker's metrics in the Prometheus text format
//!   (`crate::metrics`).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::metrics::Metrics;

const STARTING: u8 = 0;
const READY: u8 = 1;
const UNREGISTERED: u8 = 2;
const LEAVING: u8 = 3;

/// What `/readyz` answers; the broker's main loop updates it.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    state: Arc<AtomicU8>,
    /// The shared volume has no room: said in the body, not by the status.
    /// Every broker shares the volume, so a 503 would take them all off
    /// the bootstrap Service at once and stop reads, which still work.
    full: Arc<AtomicBool>,
}

impl Readiness {
    /// After each look at the assignment: serving, and listed in it or not.
    pub fn observe(&self, registered: bool) {
        let next = if registered { READY } else { UNREGISTERED };
        // Leaving is final.
        let _ = self
            .state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                (s != LEAVING).then_some(next)
            });
    }

    pub fn leaving(&self) {
        self.state.store(LEAVING, Ordering::Relaxed);
    }

    /// Whether writes fail because the volume is full.
    pub fn volume_full(&self, full: bool) {
        self.full.store(full, Ordering::Relaxed);
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.state.load(Ordering::Relaxed) == READY
    }

    fn reason(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            STARTING => "starting: no assignment seen yet, not serving clients",
            READY if self.full.load(Ordering::Relaxed) => {
                "ready, but the volume is full: produce requests fail with KAFKA_STORAGE_ERROR \
                 until space is freed (reads still work; see kaas_volume_free_bytes)"
            }
            READY => "ready",
            UNREGISTERED => "serving, but not in the cluster's current assignment yet",
            _ => "shutting down",
        }
    }
}

/// Serves probes and metrics on `listener` until the task is dropped or
/// aborted.
pub async fn serve(listener: tokio::net::TcpListener, readiness: Readiness, metrics: Metrics) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "health listener accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (readiness, metrics) = (readiness.clone(), metrics.clone());
        tokio::spawn(async move {
            let answered =
                tokio::time::timeout(Duration::from_secs(5), answer(stream, &readiness, &metrics))
                    .await;
            if let Ok(Err(e)) = answered {
                tracing::debug!(error = %e, "health probe connection failed");
            }
        });
    }
}

async fn answer(
    mut stream: tokio::net::TcpStream,
    readiness: &Readiness,
    metrics: &Metrics,
) -> io::Result<()> {
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
    let (status, content_type, body) = match respond(&buf, readiness) {
        Reply::Text(status, text) => (status, "text/plain", format!("{text}\n").into_bytes()),
        Reply::Metrics => ("200 OK", METRICS_TYPE, metrics.render()),
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&body).await?;
    stream.shutdown().await
}

/// Prometheus's text exposition format, version 0.0.4.
const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Text(&'static str, &'static str),
    Metrics,
}

fn respond(request: &[u8], readiness: &Readiness) -> Reply {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    if req.parse(request).is_err() {
        return Reply::Text("400 Bad Request", "malformed request");
    }
    if !matches!(req.method, Some("GET" | "HEAD")) {
        return Reply::Text("405 Method Not Allowed", "only GET");
    }
    // A scraper may add a query string.
    let path = req.path.map(|p| p.split('?').next().unwrap_or(p));
    match path {
        Some("/livez") => Reply::Text("200 OK", "alive"),
        Some("/readyz") if readiness.is_ready() => Reply::Text("200 OK", readiness.reason()),
        Some("/readyz") => Reply::Text("503 Service Unavailable", readiness.reason()),
        Some("/metrics") => Reply::Metrics,
        _ => Reply::Text("404 Not Found", "try /livez, /readyz or /metrics"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_the_broker_and_leaving_is_final() {
        let r = Readiness::default();
        let get = |path: &str| match respond(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes(), &r)
        {
            Reply::Text(status, _) => status,
            Reply::Metrics => "metrics",
        };
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
        assert_eq!(get("/metrics"), "metrics");
        assert_eq!(get("/metrics?name[]=kaas_connections"), "metrics");
        assert_eq!(
            respond(b"POST /readyz HTTP/1.1\r\n\r\n", &r),
            Reply::Text("405 Method Not Allowed", "only GET")
        );
        assert_eq!(
            respond(b"\x00\x01 garbage\r\n\r\n", &r),
            Reply::Text("400 Bad Request", "malformed request")
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
        let metrics = Metrics::new();
        metrics.bytes_in("t", 7);
        let server = tokio::spawn(serve(listener, r.clone(), metrics));
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
        let scraped = get("/metrics").await;
        assert!(
            scraped.starts_with("HTTP/1.0 200 OK")
                && scraped.contains("version=0.0.4")
                && scraped.contains("kaas_topic_bytes_in_total{topic=\"t\"} 7\n"),
            "{scraped}"
        );
        server.abort();
    }
}
