//! SASL exchanges: the tokens a client sends before it is authenticated.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use crate::security::{Credential, Mechanism, Security, SecurityConfig, SecurityProtocol, Session};

/// The user the exchanges can authenticate as (PLAIN reaches the password
/// check; SCRAM's proof cannot be guessed, so SCRAM stops at its parsing).
pub const USER: &str = "fuzz";
pub const PASSWORD: &str = "fuzz-password";

thread_local! {
    static SECURITY: Arc<Security> = super::block_on(security());
}

async fn security() -> Arc<Security> {
    let vfs: Arc<dyn vfs::Vfs> = Arc::new(vfs::MemVfs::new());
    let security = Arc::new(Security::new(vfs, SecurityConfig::default()));
    let cred = |m| Credential::from_password(m, PASSWORD, b"salt-of-the-fuzzer", 4096);
    let (Some(a), Some(b)) = (cred(Mechanism::Sha256), cred(Mechanism::Sha512)) else {
        panic!("cannot derive the fuzz user's credentials");
    };
    let done = security.change_credentials::<()>(|c| {
        c.upsert(USER, Mechanism::Sha256, a.clone());
        c.upsert(USER, Mechanism::Sha512, b.clone());
        Ok(())
    });
    if done.await.is_err() {
        panic!("cannot store the fuzz user's credentials");
    }
    security
}

/// The first byte picks the mechanism (bits 0-1) and whether the tokens
/// come bare, after SaslHandshake v0 (bit 2), or in SaslAuthenticate; the
/// rest is up to four tokens (see `chunks`).
pub fn sasl_exchange(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mechanism = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "GSSAPI"][usize::from(flags & 3)];
    let bare = flags & 4 != 0;
    SECURITY.with(|security| {
        let mut session = Session::new(
            Arc::from("SASL_PLAINTEXT"),
            SecurityProtocol::SaslPlaintext,
            "127.0.0.1".into(),
        );
        let request =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        let version = if bare { 0 } else { 1 };
        crate::security::sasl::handshake(security, &mut session, &request, version);
        let now = tokio::time::Instant::now();
        for token in super::chunks(rest, 4) {
            let token = Bytes::copy_from_slice(token);
            if session.raw_tokens {
                if crate::security::sasl::raw_token(security, &mut session, token, now).is_err() {
                    return;
                }
            } else {
                let request = SaslAuthenticateRequest::default().with_auth_bytes(token);
                let r = crate::security::sasl::authenticate(security, &mut session, &request, now);
                if r.error_code != 0 {
                    return;
                }
            }
        }
    });
}
