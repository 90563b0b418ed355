//! TLS for SSL and SASL_SSL listeners (rustls): the certificate and key
//! from files, optional client certificates (mTLS, the principal from the
//! certificate's subject), and the files read again when they change, as
//! Kubernetes and cert-manager rotate a Secret in place. A reload only
//! affects new connections; open ones keep the session they negotiated.
//!
//! The files are the pod's own (a mounted Secret), not the shared volume,
//! and this module runs only in the production build.

use std::path::PathBuf;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig, crypto};

use super::principal::Principal;
use super::tls_files::{ClientAuth, PrincipalFrom, TlsFiles};

// The pod's own files (a mounted Secret), outside the volume and the
// simulated world: read with std, small, every few seconds at most.
#[allow(clippy::disallowed_methods)]
fn read(path: &PathBuf) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn build(files: &TlsFiles) -> Result<ServerConfig, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(&files.cert)?)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", files.cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in it", files.cert.display()));
    }
    warn_if_expiring(&files.cert, &certs[0]);
    let key = PrivateKeyDer::from_pem_slice(&read(&files.key)?)
        .map_err(|e| format!("{}: {e}", files.key.display()))?;
    let provider = Arc::new(crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match (files.client_auth, &files.ca) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (_, None) => {
            return Err("client certificates need --ssl-ca-file, the CA that signs them".into());
        }
        (auth, Some(ca)) => {
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(&read(ca)?) {
                let c = c.map_err(|e| format!("{}: {e}", ca.display()))?;
                roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| e.to_string())?)
        }
    };
    builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("{} and {}: {e}", files.cert.display(), files.key.display()))
}

/// A server certificate that has expired or expires within this many days
/// is logged when loaded: clients refuse it from that day on, and a
/// rotation that failed upstream (cert-manager) is otherwise unseen.
const EXPIRY_WARNING_DAYS: i64 = 14;

// Production only: the certificate's dates are wall-clock dates.
#[allow(clippy::disallowed_methods)]
fn warn_if_expiring(path: &std::path::Path, cert: &CertificateDer<'_>) {
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if let Some(warning) = expiry_warning(parsed.validity().not_after.timestamp(), now) {
        tracing::warn!(
            cert = %path.display(),
            not_after = %parsed.validity().not_after,
            "TLS certificate {warning}"
        );
    }
}

/// What to say of a certificate valid until `not_after` (Unix seconds).
fn expiry_warning(not_after: i64, now: i64) -> Option<String> {
    let left = not_after - now;
    if left <= 0 {
        return Some(format!(
            "expired {} days ago: clients will refuse it",
            -left / 86_400
        ));
    }
    (left < EXPIRY_WARNING_DAYS * 86_400).then(|| {
        format!(
            "expires in {} days {} hours: rotate it",
            left / 86_400,
            left % 86_400 / 3_600
        )
    })
}

/// What the files hold now: a Secret is rotated by swapping a symlink, so
/// the contents, not a modification time, tell a change.
fn stamp(files: &TlsFiles) -> Vec<Option<Vec<u8>>> {
    [Some(&files.cert), Some(&files.key), files.ca.as_ref()]
        .into_iter()
        .flatten()
        .map(|p| read(p).ok())
        .collect()
}

/// The acceptor of new TLS connections, rebuilt when its files change.
pub struct Reloading {
    files: TlsFiles,
    current: RwLock<(Vec<Option<Vec<u8>>>, TlsAcceptor)>,
}

impl Reloading {
    /// Reads the files; an error here stops the broker from starting.
    pub fn new(files: TlsFiles) -> Result<Arc<Self>, String> {
        let stamp = stamp(&files);
        let acceptor = TlsAcceptor::from(Arc::new(build(&files)?));
        Ok(Arc::new(Self {
            files,
            current: RwLock::new((stamp, acceptor)),
        }))
    }

    pub fn acceptor(&self) -> TlsAcceptor {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone()
    }

    pub fn principal_from(&self) -> PrincipalFrom {
        self.files.principal_from
    }

    /// Rebuilds the acceptor if a file changed. A bad new file keeps the
    /// old acceptor (and says why): a half-rotated Secret must not take
    /// the listener down.
    pub fn reload_if_changed(&self) {
        let now = stamp(&self.files);
        if self.current.read().unwrap_or_else(|p| p.into_inner()).0 == now {
            return;
        }
        match build(&self.files) {
            Ok(config) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) =
                    (now, TlsAcceptor::from(Arc::new(config)));
                tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
            }
            Err(e) => {
                tracing::warn!(error = %e, "TLS files changed but cannot be loaded; keeping the old ones");
            }
        }
    }

    /// Looks for changed files every `every`, until the task is dropped.
    pub async fn watch(self: Arc<Self>, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            self.reload_if_changed();
        }
    }
}

/// The principal a verified client certificate names.
pub fn principal_of(cert: &CertificateDer<'_>, from: PrincipalFrom) -> Option<Principal> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let subject = parsed.subject();
    let name = match from {
        PrincipalFrom::Cn => subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())?
            .to_owned(),
        PrincipalFrom::Dn => {
            // RFC 2253: the most specific RDN first, no spaces.
            let mut rdns: Vec<String> = Vec::new();
            for rdn in subject.iter_rdn() {
                let parts: Vec<String> = rdn
                    .iter()
                    .filter_map(|atv| {
                        let key = x509_parser::objects::oid2abbrev(
                            atv.attr_type(),
                            x509_parser::objects::oid_registry(),
                        )
                        .map_or_else(|_| atv.attr_type().to_id_string(), str::to_owned);
                        Some(format!("{key}={}", atv.as_str().ok()?))
                    })
                    .collect();
                rdns.push(parts.join("+"));
            }
            rdns.reverse();
            rdns.join(",")
        }
    };
    Some(Principal::user(name))
}

#[cfg(test)]
mod tests {
    use super::expiry_warning;

    #[test]
    fn a_certificate_near_or_past_its_end_is_warned_of() {
        let day = 86_400;
        assert_eq!(expiry_warning(100 * day, 0), None);
        assert_eq!(expiry_warning(14 * day, 0), None);
        assert_eq!(
            expiry_warning(13 * day + 5 * 3_600, 0).as_deref(),
            Some("expires in 13 days 5 hours: rotate it")
        );
        assert_eq!(
            expiry_warning(0, 3 * day).as_deref(),
            Some("expired 3 days ago: clients will refuse it")
        );
    }
}
