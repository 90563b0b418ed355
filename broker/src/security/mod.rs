//! Who may connect and what they may do: listeners and their security
//! protocols, TLS, SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), the SCRAM
//! credentials and ACLs kept on the volume, and the authorization of every
//! request.
//!
//! | file | what it is |
//! |---|---|
//! | `listeners` | `--listeners`, `--advertised-listeners`, the protocol map |
//! | `principal` | `User:<name>` |
//! | `session` | one connection's listener, principal and SASL state |
//! | `sasl` | SaslHandshake and SaslAuthenticate (KIP-152, KIP-368) |
//! | `credentials` | the SCRAM credentials document |
//! | `acl` | ACLs and Kafka's authorization decision |
//! | `versioned` | the compare-and-swap versions both documents are kept in |
//! | `tls` | the rustls acceptor, reloaded when its files change |
//! | `tls_files` | the TLS flags: certificate files, client authentication |
//!
//! Every broker keeps a copy of the newest credentials and ACLs it has read
//! and reads newer versions every `refresh` (and at once after a change it
//! made itself); it never installs a version older than the one it has.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use vfs::Vfs;

use crate::layout;

pub mod acl;
pub mod applied;
pub mod credentials;
pub mod listeners;
pub mod principal;
pub mod sasl;
pub mod session;
#[cfg(not(madsim))]
pub mod tls;
pub mod tls_files;
pub mod versioned;

pub use acl::{AclSet, AuthorizerConfig, Operation, ResourceType};
use applied::Applied;
pub use credentials::{Credential, Credentials, Mechanism};
pub use listeners::{Listener, SecurityProtocol};
pub use principal::Principal;
pub use session::{Session, Who};
use versioned::{ChangeError, Versioned};

/// The SASL mechanisms a broker can offer.
pub const MECHANISMS: &[&str] = &["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"];

/// Security settings of one broker.
#[derive(Clone, Debug)]
pub struct SecurityConfig {
    /// The SASL mechanisms offered on SASL listeners.
    pub sasl_mechanisms: Vec<String>,
    /// Kafka's `connections.max.reauth.ms`: an authenticated SASL session
    /// lasts this long, then the client must re-authenticate (KIP-368).
    pub session_lifetime: Option<Duration>,
    pub authorizer: AuthorizerConfig,
    /// How often newer credentials and ACLs are looked for.
    pub refresh: Duration,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        Self {
            sasl_mechanisms: MECHANISMS.iter().map(|m| (*m).to_owned()).collect(),
            session_lifetime: None,
            authorizer: AuthorizerConfig::default(),
            refresh: Duration::from_secs(1),
        }
    }
}

fn credentials_doc() -> Versioned {
    Versioned::new(layout::SECURITY_DIR, layout::CREDENTIALS_DOC)
}

fn acls_doc() -> Versioned {
    Versioned::new(layout::SECURITY_DIR, layout::ACLS_DOC)
}

/// The security state one broker shares among its connections.
pub struct Security {
    vfs: Arc<dyn Vfs>,
    pub config: SecurityConfig,
    credentials: Applied<Credentials>,
    acls: Applied<AclSet>,
}

impl Security {
    pub fn new(vfs: Arc<dyn Vfs>, config: SecurityConfig) -> Self {
        Self {
            vfs,
            config,
            credentials: Applied::new(credentials_doc()),
            acls: Applied::new(acls_doc()),
        }
    }

    pub fn credentials(&self) -> Arc<Credentials> {
        self.credentials.get().1
    }

    /// The credentials applied here and their version.
    pub fn credentials_at(&self) -> (u64, Arc<Credentials>) {
        self.credentials.get()
    }

    /// The ACLs applied here and their version.
    pub fn acls(&self) -> (u64, Arc<AclSet>) {
        self.acls.get()
    }

    pub async fn refresh_credentials(&self) -> io::Result<()> {
        self.credentials.refresh(self.vfs.as_ref()).await?;
        Ok(())
    }

    pub async fn refresh_acls(&self) -> io::Result<()> {
        if self.acls.refresh(self.vfs.as_ref()).await? {
            tracing::info!(version = self.acls.get().0, "ACLs applied");
        }
        Ok(())
    }

    /// Refreshes every `config.refresh`, until the task is dropped: the
    /// credentials if `sasl` (a SASL listener verifies against them), the
    /// ACLs if they are enforced.
    pub async fn run_refresher(self: Arc<Self>, sasl: bool) {
        loop {
            let mut done = Ok(());
            if sasl {
                done = self.refresh_credentials().await;
            }
            if self.enforcing() {
                done = done.and(self.refresh_acls().await);
            }
            if let Err(e) = done {
                tracing::warn!(error = %e, "cannot read the credentials or ACLs; keeping the ones applied");
            }
            tokio::time::sleep(self.config.refresh).await;
        }
    }

    /// Changes the credentials on the volume and applies the result here.
    pub async fn change_credentials<E>(
        &self,
        edit: impl Fn(&mut Credentials) -> Result<(), E>,
    ) -> Result<(), ChangeError<E>> {
        ensure_dir(self.vfs.as_ref()).await?;
        self.credentials.change(self.vfs.as_ref(), edit).await?;
        Ok(())
    }

    /// Changes the ACLs on the volume and applies the result here.
    pub async fn change_acls<E>(
        &self,
        edit: impl Fn(&mut AclSet) -> Result<(), E>,
    ) -> Result<u64, ChangeError<E>> {
        ensure_dir(self.vfs.as_ref()).await?;
        let (version, _) = self.acls.change(self.vfs.as_ref(), edit).await?;
        Ok(version)
    }

    /// Whether `session` may do `operation` on the resource; a denial is
    /// logged as an audit line.
    pub fn allowed(
        &self,
        session: &Session,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        !self.enforcing() || self.decide(&session.who(), operation, resource_type, name, true)
    }

    /// Whether a listing (all topics, all groups) shows `who` this
    /// resource: leaving it out refuses nothing, so no audit line.
    pub fn allowed_for(
        &self,
        who: &Who,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.decide(who, operation, resource_type, name, false)
    }

    /// A check that chooses between ways of answering (may this principal
    /// auto-create, list every group?), not a refusal: no audit line.
    pub fn allowed_quietly(
        &self,
        session: &Session,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        !self.enforcing() || self.decide(&session.who(), operation, resource_type, name, false)
    }

    fn decide(
        &self,
        who: &Who,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
        audit: bool,
    ) -> bool {
        self.decide_at(who, operation, resource_type, name, audit).0
    }

    /// The decision and the version of the ACLs it was made under (a
    /// refusal names it, so an operator, and the simulator, can tell which
    /// set refused).
    pub fn decide_at(
        &self,
        who: &Who,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
        audit: bool,
    ) -> (bool, u64) {
        let (version, acls) = self.acls();
        if !self.enforcing() {
            return (true, version);
        }
        let ok = self.config.authorizer.allowed(
            &acls,
            &who.principal,
            &who.host,
            operation,
            resource_type,
            name,
        );
        if !ok && audit {
            tracing::info!(
                target: "kaas::audit",
                principal = %who.principal,
                host = %who.host,
                listener = %who.listener,
                operation = ?operation,
                resource_type = ?resource_type,
                resource = name,
                acl_version = version,
                "denied"
            );
        }
        (ok, version)
    }

    /// Whether ACLs are enforced at all (a shortcut for the hot paths).
    pub fn enforcing(&self) -> bool {
        self.config.authorizer.enabled
    }
}

/// The documents' directory, made by the first change (a volume that never
/// had credentials or ACLs has none). `mkdir` is atomic; an existing one is
/// the same end state.
async fn ensure_dir(vfs: &dyn Vfs) -> io::Result<()> {
    match vfs.mkdir(std::path::Path::new(layout::SECURITY_DIR)).await {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Writes the first credential of an empty volume (`kaas scram-user`): the
/// way in for the first admin when every listener needs SASL.
pub async fn bootstrap_user(
    vfs: &dyn Vfs,
    user: &str,
    mechanism: Mechanism,
    credential: Credential,
) -> io::Result<u64> {
    ensure_dir(vfs).await?;
    credentials_doc()
        .change::<Credentials, std::convert::Infallible>(vfs, |c| {
            c.upsert(user, mechanism, credential.clone());
            Ok(())
        })
        .await
        .map(|(v, _)| v)
        .map_err(|e| match e {
            ChangeError::Volume(e) => e,
            ChangeError::Refused(never) => match never {},
        })
}
