//! SaslHandshake and SaslAuthenticate (KIP-152): PLAIN, SCRAM-SHA-256 and
//! SCRAM-SHA-512 (the SCRAM exchange is scram-rs's), and re-authentication
//! (KIP-368).
//!
//! SaslHandshake v0, after which the client sends bare SASL tokens outside
//! Kafka's framing, is not served: every client since Kafka 1.0 sends v1.

use std::num::NonZeroU32;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use scram_rs::scram_sync::{ScramServerDyn, SyncScramServer};
use scram_rs::{
    SCRAM_TYPES, ScramAuthServer, ScramCbHelper, ScramHashing, ScramNonce, ScramPassword,
    ScramResult, ScramResultServer, ScramSha256RustNative, ScramSha512RustNative,
};
use tokio::time::Instant;

use super::Security;
use super::credentials::{Credentials, Mechanism};
use super::principal::Principal;
use super::session::{SaslState, Session};

/// A SASL exchange in progress.
pub enum Exchange {
    Plain,
    Scram {
        mechanism: Mechanism,
        server: Box<dyn ScramServerDyn + Send + Sync>,
        /// The server's first message's nonce, to name a known client bug.
        nonce: Option<String>,
        /// The version of the credentials it checks against.
        version: u64,
    },
}

/// scram-rs's view of the credentials: a snapshot taken at the handshake.
#[derive(Debug)]
struct Lookup {
    credentials: Arc<Credentials>,
    mechanism: Mechanism,
}

#[derive(Debug)]
struct NoChannelBinding;
impl ScramCbHelper for NoChannelBinding {}

impl<S: ScramHashing> ScramAuthServer<S> for Lookup {
    fn get_password_for_user(
        &self,
        username: &str,
        _authzid: Option<&str>,
    ) -> ScramResult<ScramPassword> {
        let found = self
            .credentials
            .get(username, self.mechanism)
            .and_then(|c| Some((c.salted_password_bytes()?, c)))
            .and_then(|(salted, c)| Some((salted, c, NonZeroU32::new(c.iterations)?)));
        match found {
            Some((salted, c, iterations)) => Ok(ScramPassword::found_secret_password(
                salted,
                c.salt.clone(),
                iterations,
                None,
            )),
            // A made-up salt, so an unknown user looks like a wrong password.
            None => ScramPassword::not_found::<S>(),
        }
    }
}

fn scram_server(
    credentials: Arc<Credentials>,
    mechanism: Mechanism,
) -> Result<Box<dyn ScramServerDyn + Send + Sync>, String> {
    let lookup = Lookup {
        credentials,
        mechanism,
    };
    let nonce_bytes: [u8; 24] = madsim::rand::random();
    let nonce = ScramNonce::plain(&nonce_bytes).map_err(|e| e.to_string())?;
    let kind = SCRAM_TYPES
        .get_scramtype(mechanism.sasl_name())
        .map_err(|e| e.to_string())?;
    Ok(match mechanism {
        Mechanism::Sha256 => Box::new(
            SyncScramServer::<ScramSha256RustNative, _, _>::new(
                lookup,
                NoChannelBinding,
                nonce,
                kind,
                true,
            )
            .map_err(|e| e.to_string())?,
        ),
        Mechanism::Sha512 => Box::new(
            SyncScramServer::<ScramSha512RustNative, _, _>::new(
                lookup,
                NoChannelBinding,
                nonce,
                kind,
                true,
            )
            .map_err(|e| e.to_string())?,
        ),
    })
}

fn offered(security: &Security) -> Vec<StrBytes> {
    security
        .config
        .sasl_mechanisms
        .iter()
        .map(|m| StrBytes::from_string(m.clone()))
        .collect()
}

/// SaslHandshake: picks the mechanism of the exchange that follows.
pub fn handshake(
    security: &Security,
    session: &mut Session,
    req: &SaslHandshakeRequest,
    version: i16,
) -> SaslHandshakeResponse {
    let response = SaslHandshakeResponse::default().with_mechanisms(offered(security));
    let ready = matches!(session.sasl, SaslState::Handshake)
        || matches!(session.sasl, SaslState::Done { .. });
    if !ready {
        return response.with_error_code(ResponseError::IllegalSaslState.code());
    }
    let wanted = req.mechanism.as_str();
    if let SaslState::Done { mechanism, .. } = &session.sasl
        && mechanism != wanted
    {
        // KIP-368: a re-authentication uses the session's mechanism.
        return response.with_error_code(ResponseError::UnsupportedSaslMechanism.code());
    }
    if !security.config.sasl_mechanisms.iter().any(|m| m == wanted) {
        return response.with_error_code(ResponseError::UnsupportedSaslMechanism.code());
    }
    let (credentials_version, credentials) = security.credentials_at();
    let exchange = match Mechanism::from_sasl_name(wanted) {
        Some(m) => match scram_server(credentials, m) {
            Ok(server) => Exchange::Scram {
                mechanism: m,
                server,
                nonce: None,
                version: credentials_version,
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a SCRAM exchange");
                return response.with_error_code(ResponseError::UnknownServerError.code());
            }
        },
        None if wanted == "PLAIN" => Exchange::Plain,
        None => return response.with_error_code(ResponseError::UnsupportedSaslMechanism.code()),
    };
    session.sasl = SaslState::Exchanging(Box::new(exchange));
    session.raw_tokens = version == 0;
    response
}

/// A bare token after SaslHandshake v0: the answer is a bare token too,
/// and a failure closes the connection (there is nowhere to put an error).
pub fn raw_token(
    security: &Security,
    session: &mut Session,
    token: Bytes,
    now: Instant,
) -> Result<Bytes, String> {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(token);
    let r = authenticate(security, session, &request, now);
    if r.error_code != 0 {
        return Err(r
            .error_message
            .map_or_else(|| "SASL authentication failed".into(), |m| m.to_string()));
    }
    if matches!(session.sasl, SaslState::Done { .. }) {
        session.raw_tokens = false;
    }
    Ok(r.auth_bytes)
}

/// A step of an exchange: more to send, done as someone, or failed.
enum Step {
    Continue(Bytes),
    Done(Principal, Bytes),
    Failed(String),
}

fn plain(credentials: &Credentials, token: &[u8]) -> Step {
    let mut parts = token.split(|b| *b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Step::Failed("malformed PLAIN message".into());
    };
    let (Ok(authzid), Ok(user), Ok(password)) = (
        std::str::from_utf8(authzid),
        std::str::from_utf8(user),
        std::str::from_utf8(password),
    ) else {
        return Step::Failed("PLAIN message is not UTF-8".into());
    };
    if !authzid.is_empty() && authzid != user {
        return Step::Failed("PLAIN: authorization id differs from the user".into());
    }
    if credentials.check_plain(user, password) {
        Step::Done(Principal::user(user), Bytes::new())
    } else {
        Step::Failed(format!("invalid credentials for user {user}"))
    }
}

/// The `r=` attribute (the nonce) of a SCRAM message.
fn nonce_of(message: &str) -> Option<&str> {
    message.split(',').find_map(|a| a.strip_prefix("r="))
}

fn scram(
    server: &mut (dyn ScramServerDyn + Send + Sync),
    sent_nonce: &mut Option<String>,
    token: &[u8],
) -> Step {
    let Ok(text) = std::str::from_utf8(token) else {
        return Step::Failed("SCRAM message is not UTF-8".into());
    };
    // librdkafka before 2.6.1 (Debian 12's kcat, for one) puts its own
    // nonce in front of the server's, which already starts with it
    // (librdkafka#4895); Kafka 4 refuses it as RFC 5802 says, and so does
    // kaas, but says why.
    if let (Some(sent), Some(got)) = (sent_nonce.as_deref(), nonce_of(text))
        && got.len() > sent.len()
        && got.ends_with(sent)
    {
        return Step::Failed(
            "the client sent its nonce twice in its final SCRAM message, a bug of \
             librdkafka before 2.6.1 (confluentinc/librdkafka#4895) that Kafka 4 refuses \
             too: upgrade the client, or use PLAIN over TLS"
                .into(),
        );
    }
    match server.parse_response(text) {
        ScramResultServer::Data(d) => {
            *sent_nonce = nonce_of(&d).map(str::to_owned);
            Step::Continue(Bytes::from(d.into_bytes()))
        }
        ScramResultServer::Final(d) => match server.get_auth_username() {
            Some(user) => Step::Done(Principal::user(user.clone()), Bytes::from(d.into_bytes())),
            None => Step::Failed("SCRAM finished without a user".into()),
        },
        ScramResultServer::Error(e) => Step::Failed(format!("SCRAM: {e}")),
    }
}

/// SaslAuthenticate: one step of the exchange SaslHandshake started.
pub fn authenticate(
    security: &Security,
    session: &mut Session,
    req: &SaslAuthenticateRequest,
    now: Instant,
) -> SaslAuthenticateResponse {
    let failed = |code: ResponseError, why: String| {
        SaslAuthenticateResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(why)))
    };
    let SaslState::Exchanging(exchange) = &mut session.sasl else {
        return failed(
            ResponseError::IllegalSaslState,
            "SaslAuthenticate without a SaslHandshake before it".into(),
        );
    };
    let (step, mechanism, version) = match exchange.as_mut() {
        Exchange::Plain => {
            let (version, credentials) = security.credentials_at();
            (plain(&credentials, &req.auth_bytes), "PLAIN", version)
        }
        Exchange::Scram {
            mechanism,
            server,
            nonce,
            version,
        } => (
            scram(server.as_mut(), nonce, &req.auth_bytes),
            mechanism.sasl_name(),
            *version,
        ),
    };
    match step {
        Step::Continue(out) => SaslAuthenticateResponse::default().with_auth_bytes(out),
        Step::Done(principal, out) => {
            if session.authenticated_once && principal != session.principal {
                session.sasl = SaslState::Handshake;
                session.close_after_response = Some(format!("re-authentication as {principal}"));
                return failed(
                    ResponseError::SaslAuthenticationFailed,
                    format!(
                        "re-authentication as {principal} on a connection of {}",
                        session.principal
                    ),
                );
            }
            let lifetime = security.config.session_lifetime;
            tracing::debug!(%principal, mechanism, listener = %session.listener, "authenticated");
            session.principal = principal;
            session.authenticated_once = true;
            session.sasl = SaslState::Done {
                mechanism: mechanism.to_owned(),
                expires: lifetime.map(|l| now + l),
            };
            SaslAuthenticateResponse::default()
                .with_auth_bytes(out)
                .with_session_lifetime_ms(lifetime.map_or(0, |l| l.as_millis() as i64))
        }
        Step::Failed(why) => {
            tracing::info!(
                target: "kaas::audit",
                host = %session.host,
                listener = %session.listener,
                mechanism,
                credentials_version = version,
                "authentication failed: {why}"
            );
            // Kafka closes the connection after a failed authentication
            // (a first one or a re-authentication).
            session.sasl = SaslState::Handshake;
            session.principal = Principal::anonymous();
            session.close_after_response = Some(format!("authentication failed: {why}"));
            // The version says which credentials refused (as a refused
            // request names its ACL version); it tells nothing of the user.
            failed(
                ResponseError::SaslAuthenticationFailed,
                format!(
                    "Authentication failed: invalid credentials (credentials version {version})"
                ),
            )
        }
    }
}
