//! Client quotas: produce and fetch byte rates per user and client id
//! (DescribeClientQuotas / AlterClientQuotas), kept in a cluster-wide
//! document (`doc`) and enforced on each broker with token buckets
//! (`throttle`).

pub mod doc;
pub mod throttle;

use std::io;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;
use vfs::Vfs;

use crate::security::versioned::ChangeError;
pub use doc::{ClientQuotas, Entity, Kind, Limits, Name};

/// The quotas applied on this broker and what each budget has spent.
pub struct Quotas {
    vfs: Arc<dyn Vfs>,
    applied: RwLock<(u64, Arc<ClientQuotas>)>,
    buckets: throttle::Buckets,
}

impl Quotas {
    pub fn new(vfs: Arc<dyn Vfs>) -> Self {
        Self {
            vfs,
            applied: RwLock::new((0, Arc::default())),
            buckets: throttle::Buckets::default(),
        }
    }

    /// The document applied here and its version.
    pub fn applied(&self) -> (u64, Arc<ClientQuotas>) {
        let a = self.applied.read().unwrap_or_else(|p| p.into_inner());
        (a.0, a.1.clone())
    }

    fn install(&self, version: u64, doc: ClientQuotas) {
        let mut a = self.applied.write().unwrap_or_else(|p| p.into_inner());
        if version > a.0 {
            tracing::info!(
                version,
                entries = doc.entries.len(),
                "client quotas applied"
            );
            *a = (version, Arc::new(doc));
        }
    }

    /// Applies the newest version on the volume, if newer.
    pub async fn refresh(&self) -> io::Result<()> {
        let known = self.applied().0;
        if let Some((n, doc)) = doc::newer_than(self.vfs.as_ref(), known).await? {
            self.install(n, doc);
        }
        Ok(())
    }

    /// Refreshes every `every` until the task is dropped.
    pub async fn run_refresher(self: Arc<Self>, every: Duration) {
        loop {
            if let Err(e) = self.refresh().await {
                tracing::warn!(error = %e, "cannot read the client quotas; keeping the ones applied");
            }
            tokio::time::sleep(every).await;
        }
    }

    /// Changes the document on the volume and applies the result here.
    pub async fn change<E>(
        &self,
        edit: impl Fn(&mut ClientQuotas) -> Result<(), E>,
    ) -> Result<(u64, ClientQuotas), ChangeError<E>> {
        let (n, doc) = doc::change(self.vfs.as_ref(), edit).await?;
        self.install(n, doc.clone());
        Ok((n, doc))
    }

    /// How long a client must still wait before `kind` may spend again:
    /// a fetch of a client in debt is answered empty.
    pub fn debt(&self, kind: Kind, user: &str, client_id: &str) -> Duration {
        match self.resolve(kind, user, client_id) {
            Some((budget, rate)) => self.buckets.debt(kind, &budget, rate, Instant::now()),
            None => Duration::ZERO,
        }
    }

    /// Spends `bytes` of the client's `kind` budget; how long it is
    /// throttled for.
    pub fn charge(&self, kind: Kind, user: &str, client_id: &str, bytes: usize) -> Duration {
        match self.resolve(kind, user, client_id) {
            Some((budget, rate)) => self
                .buckets
                .spend(kind, &budget, rate, bytes, Instant::now()),
            None => Duration::ZERO,
        }
    }

    fn resolve(&self, kind: Kind, user: &str, client_id: &str) -> Option<(doc::Budget, u64)> {
        let a = self.applied.read().unwrap_or_else(|p| p.into_inner());
        a.1.resolve(kind, user, client_id)
    }
}
