//! Client quotas: produce and fetch byte rates per user and client id
//! (DescribeClientQuotas / AlterClientQuotas), kept in a cluster-wide
//! document (`doc`) and enforced on each broker with token buckets
//! (`throttle`).

pub mod doc;
pub mod throttle;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use vfs::Vfs;

use crate::security::applied::Applied;
use crate::security::versioned::ChangeError;
pub use doc::{ClientQuotas, Entity, Kind, Limits, Name};

/// The quotas applied on this broker and what each budget has spent.
pub struct Quotas {
    vfs: Arc<dyn Vfs>,
    applied: Applied<ClientQuotas>,
    buckets: throttle::Buckets,
}

impl Quotas {
    pub fn new(vfs: Arc<dyn Vfs>) -> Self {
        Self {
            vfs,
            applied: Applied::new(doc::doc()),
            buckets: throttle::Buckets::default(),
        }
    }

    /// The document applied here and its version.
    pub fn applied(&self) -> (u64, Arc<ClientQuotas>) {
        self.applied.get()
    }

    /// Applies the newest version on the volume, if newer.
    pub async fn refresh(&self) -> io::Result<()> {
        if self.applied.refresh(self.vfs.as_ref()).await? {
            let (version, doc) = self.applied.get();
            tracing::info!(
                version,
                entries = doc.entries.len(),
                "client quotas applied"
            );
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
    ) -> Result<(u64, Arc<ClientQuotas>), ChangeError<E>> {
        self.applied.change(self.vfs.as_ref(), edit).await
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
        self.applied.with(|doc| doc.resolve(kind, user, client_id))
    }
}
