//! A versioned document as one broker applies it (the credentials, the
//! ACLs, the client quotas, the preferred leaders): requests read it
//! without touching the volume, a refresh or a change made here moves it
//! to a newer version, and it never goes back to an older one.

use std::io;
use std::sync::{Arc, RwLock};

use serde::Serialize;
use serde::de::DeserializeOwned;
use vfs::Vfs;

use super::versioned::{ChangeError, Versioned, decode};

pub struct Applied<T> {
    doc: Versioned,
    now: RwLock<(u64, Arc<T>)>,
}

impl<T: Default + DeserializeOwned> Applied<T> {
    /// Version 0 (the empty document) until a refresh or a change.
    pub fn new(doc: Versioned) -> Self {
        Self {
            doc,
            now: RwLock::new((0, Arc::default())),
        }
    }

    /// The version applied and the document.
    pub fn get(&self) -> (u64, Arc<T>) {
        let now = self.now.read().unwrap_or_else(|p| p.into_inner());
        (now.0, now.1.clone())
    }

    /// Reads the document applied without taking a reference to it.
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.now.read().unwrap_or_else(|p| p.into_inner()).1)
    }

    /// Applies `doc` as `version` unless that is not newer than what is
    /// applied; whether it was applied.
    pub fn install(&self, version: u64, doc: T) -> bool {
        let mut now = self.now.write().unwrap_or_else(|p| p.into_inner());
        if version <= now.0 {
            return false;
        }
        *now = (version, Arc::new(doc));
        true
    }

    /// Applies the newest complete version on the volume if it is newer;
    /// whether it was. On an error, what was applied stays.
    pub async fn refresh(&self, vfs: &dyn Vfs) -> io::Result<bool> {
        let known = self.get().0;
        match self.doc.newer_than(vfs, known).await? {
            Some(v) => Ok(self.install(v.number, decode(self.doc.name(), &v)?)),
            None => Ok(false),
        }
    }

    /// Changes the document on the volume (see `Versioned::change`) and
    /// applies the result here.
    pub async fn change<E>(
        &self,
        vfs: &dyn Vfs,
        edit: impl Fn(&mut T) -> Result<(), E>,
    ) -> Result<(u64, Arc<T>), ChangeError<E>>
    where
        T: Serialize,
    {
        let (version, doc) = self.doc.change(vfs, edit).await?;
        let doc = Arc::new(doc);
        let mut now = self.now.write().unwrap_or_else(|p| p.into_inner());
        if version > now.0 {
            *now = (version, doc.clone());
        }
        Ok((version, doc))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn follows_newer_versions_and_never_goes_back() {
        let v = vfs::MemVfs::new();
        v.mkdir(Path::new("d")).await.unwrap();
        let doc = || Versioned::new("d", "set");
        let mine = Applied::<BTreeSet<u32>>::new(doc());
        let other = Applied::<BTreeSet<u32>>::new(doc());
        assert!(!mine.refresh(&v).await.unwrap());
        other
            .change::<()>(&v, |s| {
                s.insert(1);
                Ok(())
            })
            .await
            .unwrap();
        other
            .change::<()>(&v, |s| {
                s.insert(2);
                Ok(())
            })
            .await
            .unwrap();
        assert!(mine.refresh(&v).await.unwrap());
        assert_eq!(mine.get().0, 2);
        assert_eq!(mine.with(|s| s.len()), 2);
        assert!(!mine.install(1, BTreeSet::new()), "an older version");
        assert!(!mine.refresh(&v).await.unwrap());
        assert_eq!(*mine.get().1, BTreeSet::from([1, 2]));
    }

    /// Between this broker's claim of version 1 and its install, another
    /// broker writes version 2 and this broker's refresher applies it: the
    /// change that completes afterwards must not take the broker back.
    #[tokio::test]
    async fn a_change_completing_after_a_newer_refresh_does_not_go_back() {
        let mem: Arc<dyn Vfs> = Arc::new(vfs::MemVfs::new());
        mem.mkdir(Path::new("d")).await.unwrap();
        let doc = || Versioned::new("d", "set");
        let mine = Arc::new(Applied::<BTreeSet<u32>>::new(doc()));
        let refresher = mine.clone();
        let v1 = crate::layout::versioned(Path::new("d"), "set", 1);
        // Opens of version 1 in this change: the probe for the newest
        // (not there), the claim's create, the claim's read-back.
        let gated = vfs::testkit::BeforeOpen::new(mem.clone(), v1, move |v| async move {
            let other = Applied::<BTreeSet<u32>>::new(doc());
            let (n, _) = other
                .change::<()>(v.as_ref(), |s| {
                    s.insert(2);
                    Ok(())
                })
                .await
                .map_err(|e| io::Error::other(format!("{e:?}")))?;
            assert_eq!(n, 2);
            assert!(refresher.refresh(v.as_ref()).await?);
            Ok(())
        })
        .at_open(3);
        let (n, _) = mine
            .change::<()>(&gated, |s| {
                s.insert(1);
                Ok(())
            })
            .await
            .unwrap();
        assert!(gated.fired());
        assert_eq!(n, 1, "this change wrote version 1");
        assert_eq!(mine.get().0, 2, "version 2 stays applied");
        assert_eq!(*mine.get().1, BTreeSet::from([1, 2]));
    }
}
