//! Checks a broker makes before it joins a cluster. Each failure is an
//! error that names the problem and what to do about it; the binary prints
//! it and exits non-zero, so a misconfigured pod fails visibly instead of
//! half-joining a cluster.
//!
//! The data directory's existence and permissions are checked when the
//! volume is opened (`PosixVfs::open_volume`); the cluster id by
//! `cluster::identity::settle`; that no other process runs as this broker
//! id by `cluster::id_claim`. The rest is here.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use vfs::{OpenOptions, Vfs};

use crate::layout;

/// The start-up error for a volume that refused a write.
pub(crate) fn refuses_writes(e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "the data directory does not take writes ({e}): check that the volume is \
             mounted read-write and writable by this user"
        ),
    )
}

/// Proves the volume takes writes by this process: creates, writes, fsyncs
/// and unlinks a file in `brokers/`. An existing volume mounted read-only,
/// or owned by another user, passes a permission check on its root but
/// fails here, before the broker would start without ever heartbeating.
///
/// The probe is named like a temp file of `brokers/<id>` (whose only writer
/// is this broker), so one left behind by a crash is swept at the next
/// start with the heartbeat's other temps.
pub(crate) async fn probe_writable(vfs: &dyn Vfs, broker_id: u32) -> io::Result<()> {
    let path = layout::write_probe(broker_id, madsim::rand::random::<u64>());
    let explain = refuses_writes;
    let file = vfs
        .open(&path, OpenOptions::create_new())
        .await
        .map_err(explain)?;
    let written = async {
        file.write_at(0, Bytes::from_static(b"kaas write probe\n"))
            .await?;
        file.fsync().await
    }
    .await;
    let closed = file.close().await;
    let removed = vfs.unlink(&path).await;
    written.and(closed).and(removed).map_err(explain)
}

/// Connects to `advertised` (host:port), retrying for up to `within`:
/// the address clients will be told to use must lead back to a broker. A
/// name that does not resolve yet (DNS of a just-created pod) gets the
/// whole window. The connection is closed at once; a broker that is not
/// serving yet leaves it in the listen backlog, which is enough.
pub(crate) async fn check_advertised(advertised: &str, within: Duration) -> io::Result<()> {
    let deadline = tokio::time::Instant::now() + within;
    let mut last: io::Error;
    loop {
        let attempt = tokio::time::timeout(
            Duration::from_secs(2),
            tokio::net::TcpStream::connect(advertised),
        )
        .await;
        last = match attempt {
            Ok(Ok(_stream)) => return Ok(()),
            Ok(Err(e)) => e,
            Err(_) => io::Error::new(io::ErrorKind::TimedOut, "connect timed out after 2 s"),
        };
        if tokio::time::Instant::now() + Duration::from_millis(500) >= deadline {
            break;
        }
        tracing::debug!(advertised, error = %last, "advertised address not reachable yet");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        format!(
            "the advertised address {advertised} does not reach this broker ({last}, for {} s): \
             clients would fail the same way; fix --advertised-listener \
             (KAAS_ADVERTISED_LISTENER), or set --advertised-check-secs 0 if it is only \
             reachable from outside",
            within.as_secs()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    async fn volume() -> Arc<dyn Vfs> {
        let vfs: Arc<dyn Vfs> = Arc::new(vfs::MemVfs::new());
        crate::node::prepare_volume(vfs.as_ref()).await.unwrap();
        vfs
    }

    #[tokio::test]
    async fn a_writable_volume_passes_the_probe_and_keeps_nothing() {
        let vfs = volume().await;
        probe_writable(vfs.as_ref(), 1).await.unwrap();
        assert!(
            vfs.read_dir(std::path::Path::new(layout::BROKERS_DIR))
                .await
                .unwrap()
                .is_empty()
        );
    }

    // Real sockets: madsim's simulated TCP neither closes a dropped
    // listener's port nor signals end of stream the same way (the
    // simulator runs brokers without these probes).
    #[cfg(not(madsim))]
    #[tokio::test]
    async fn an_advertised_address_without_a_listener_is_refused() {
        // Bind, learn the port, close: nothing listens there any more.
        let port = {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            l.local_addr().unwrap().port()
        };
        let addr = format!("127.0.0.1:{port}");
        let err = check_advertised(&addr, Duration::from_secs(2))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrNotAvailable);
        assert!(err.to_string().contains(&addr), "{err}");
        let l = tokio::net::TcpListener::bind(addr.as_str()).await.unwrap();
        check_advertised(&addr, Duration::from_secs(2))
            .await
            .unwrap();
        drop(l);
    }
}
