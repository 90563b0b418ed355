//! Credential changes under faults: an admin switches a user's password
//! between two values while a probe logs in with one of them (SASL/PLAIN
//! on the brokers' SASL_PLAINTEXT listener). The brokers check logins
//! against the credentials' versions on the volume, and a refused login
//! names the version it was refused under.
//!
//! After each change the admin notes the newest version on the volume, as
//! the ACL admin does (`guard`), so the checker can hold
//! credential-regression: a broker that refused the probe's password under
//! version `v` accepts it later only if a version after `v` that accepts it
//! was begun before.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiKey, RequestKind, ResponseKind, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;
use tokio::net::TcpStream;
use vfs::Vfs;

use crate::actors::{Actor, FinalRead, Play, Role, Stage};
use crate::history::Event;
use crate::hosts::OBSERVER_HOST;
use crate::session::Session;

/// The user whose password changes.
pub const USER: &str = "prober";
/// The password the probe logs in with; the admin alternates it with
/// [`OTHER`].
pub const PROBED: &str = "alpha-password";
pub const OTHER: &str = "beta-password";
/// The admin's and the probe's addresses.
pub const ADMIN_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 3);
pub const PROBE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 4);
/// The brokers' SASL_PLAINTEXT port (`run::brokers::start_broker`).
pub const SASL_PORT: u16 = 9093;

const MECHANISM: broker::security::Mechanism = broker::security::Mechanism::Sha256;

fn text(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// Sets the user's password: `Some(true)` acknowledged, `Some(false)`
/// refused, `None` no answer.
async fn set_password(s: &mut Session, password: &str) -> Option<bool> {
    upsert_user(s, USER, password, crate::client::CALL_TIMEOUT).await
}

/// AlterUserScramCredentials of `user`'s SCRAM-SHA-256 credential for
/// `password` at a broker picked at random, waiting `timeout` for the
/// answer: `Some(true)` acknowledged, `Some(false)` refused, `None` no
/// answer.
pub(crate) async fn upsert_user(
    s: &mut Session,
    user: &str,
    password: &str,
    timeout: Duration,
) -> Option<bool> {
    let salt: [u8; 16] = madsim::rand::random();
    let iterations = 4096;
    let credential =
        broker::security::Credential::from_password(MECHANISM, password, &salt, iterations)?;
    let upsertion = ScramCredentialUpsertion::default()
        .with_name(text(user))
        .with_mechanism(MECHANISM.code())
        .with_iterations(iterations as i32)
        .with_salt(Bytes::copy_from_slice(&salt))
        .with_salted_password(Bytes::from(credential.salted_password_bytes()?));
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
    let to = s.any_broker();
    match s
        .client
        .call_within(
            timeout,
            to,
            ApiKey::AlterUserScramCredentials,
            0,
            RequestKind::AlterUserScramCredentials(req),
        )
        .await
    {
        Ok(ResponseKind::AlterUserScramCredentials(r)) => {
            Some(r.results.iter().all(|r| r.error_code == 0))
        }
        _ => None,
    }
}

/// The newest credentials version on the volume (complete or not).
async fn newest(volume: &dyn Vfs) -> Option<u64> {
    crate::actors::guard::newest_version(volume, "credentials").await
}

/// Every credentials version on the volume and whether it refuses the
/// probe's password, read after the run (see `Event::CredentialVersions`).
pub async fn final_versions(volume: &dyn Vfs) -> Vec<(u64, Option<Option<bool>>)> {
    use broker::security::Credentials;
    let Some(top) = newest(volume).await else {
        return Vec::new();
    };
    crate::actors::guard::read_versions(volume, "credentials", top, |payload| {
        serde_json::from_slice::<Credentials>(payload)
            .ok()
            .map(|c| !c.check_plain(USER, PROBED))
    })
    .await
}

/// Switches the user's password between [`PROBED`] and [`OTHER`] until
/// `until`, the first one [`PROBED`].
pub async fn admin(mut s: Session, volume: std::sync::Arc<dyn Vfs>, until: Duration) {
    let mut probed = true;
    while s.now() < until {
        let start = s.now();
        let acked = set_password(&mut s, if probed { PROBED } else { OTHER }).await;
        let read_at = s.now();
        let top = newest(volume.as_ref()).await;
        s.history.record(
            s.now(),
            Event::CredentialChange {
                probed,
                start,
                acked: acked == Some(true),
                top,
                read_at,
            },
        );
        // An unanswered change may or may not have happened; it is sent
        // again (the checker reads what each version holds off the volume).
        if acked.is_some() {
            probed = !probed;
        } else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        let pause = madsim::rand::thread_rng().gen_range(1500..4000);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// One SASL/PLAIN login on a fresh connection: accepted, or refused under
/// the credentials version the broker names; `None` without an answer.
async fn login(to: u32) -> Option<(bool, Option<u64>)> {
    let addr = SocketAddr::from(([10, 0, 0, 1 + to as u8], SASL_PORT));
    let mut conn = TcpStream::connect(addr).await.ok()?;
    let handshake = SaslHandshakeRequest::default().with_mechanism(text("PLAIN"));
    match broker::peer::exchange(
        &mut conn,
        "login-probe",
        (ApiKey::SaslHandshake, 1),
        1,
        &RequestKind::SaslHandshake(handshake),
    )
    .await
    {
        Ok(ResponseKind::SaslHandshake(r)) if r.error_code == 0 => {}
        _ => return None,
    }
    let token = format!("\0{USER}\0{PROBED}");
    let auth = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let Ok(ResponseKind::SaslAuthenticate(r)) = broker::peer::exchange(
        &mut conn,
        "login-probe",
        (ApiKey::SaslAuthenticate, 2),
        2,
        &RequestKind::SaslAuthenticate(auth),
    )
    .await
    else {
        return None;
    };
    let version = r
        .error_message
        .as_ref()
        .and_then(|m| m.split("credentials version ").nth(1))
        .and_then(|v| v.trim_end_matches(')').parse().ok());
    match r.error_code {
        0 => Some((true, None)),
        58 => Some((false, version)), // SASL_AUTHENTICATION_FAILED
        _ => None,
    }
}

/// Logs in every 300 ms until `until`, at a broker picked at random,
/// noting who accepted and who refused under which version.
pub async fn probe(s: Session, until: Duration) {
    while s.now() < until {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let to = s.any_broker();
        let sent = s.now();
        let answer = tokio::time::timeout(crate::client::CALL_TIMEOUT, login(to)).await;
        if let Ok(Some((accepted, version))) = answer {
            s.history.record(
                s.now(),
                Event::LoginProbe {
                    broker: to,
                    sent,
                    accepted,
                    version,
                },
            );
        }
    }
}

/// An admin switching a user's password while a probe logs in.
pub struct Logins;
pub static LOGINS: Logins = Logins;

impl Actor for Logins {
    fn name(&self) -> &'static str {
        "logins"
    }

    fn roles(&self) -> Vec<Role> {
        vec![
            Role::operator("credential-admin-0", ADMIN_IP),
            Role::operator("login-probe-0", PROBE_IP),
        ]
    }

    fn play(&self, role: &'static str, s: Session, stage: &Stage) -> Play {
        if role == "credential-admin-0" {
            Box::pin(admin(s, stage.volume(OBSERVER_HOST), stage.faults_end))
        } else {
            Box::pin(probe(s, stage.faults_end))
        }
    }

    fn needs_authorizer(&self) -> bool {
        true
    }

    fn final_state(&self, stage: &Stage, _deadline: Duration) -> Vec<FinalRead> {
        let volume = stage.volume(OBSERVER_HOST);
        vec![Box::pin(async move {
            Event::CredentialVersions {
                versions: final_versions(volume.as_ref()).await,
            }
        })]
    }
}
