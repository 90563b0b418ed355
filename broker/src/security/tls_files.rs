//! The TLS settings of a broker, in both builds (the acceptor that uses
//! them, `tls`, is production-only).

use std::path::PathBuf;

/// Whether clients present certificates (Kafka's `ssl.client.auth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// How a client certificate names its principal
/// (a small `ssl.principal.mapping.rules`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PrincipalFrom {
    /// The whole subject, RFC 2253 (`CN=app,OU=team,O=org`): Kafka's default.
    Dn,
    /// The subject's common name only.
    Cn,
}

#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Certificates that sign client certificates.
    pub ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
    pub principal_from: PrincipalFrom,
}
