//! The operator's preferred leaders: the broker each partition should lead
//! on, as set by AlterPartitionReassignments (kaas keeps one copy of a
//! partition, so a reassignment names exactly one broker: the leader).
//!
//! One cluster-wide document, `cluster/preferred-leaders-<n>`, changed by
//! compare-and-swap like the credentials and ACLs (`security::versioned`):
//! any broker may take the request, and version `n + 1` is made by
//! exclusive create, so of two concurrent changes one wins and the other
//! re-reads and edits the newer document. Only the controller acts on it:
//! a preferred broker that is live leads its partition (moved there under
//! a new leader epoch, as any failover); one that is not live does not hold
//! its partition back, which the controller places as any other until the
//! broker is back. Entries are keyed by topic id, so a topic deleted and
//! created again under its name does not inherit them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use vfs::Vfs;

use super::placement::PartitionKey;
use crate::layout;
use crate::security::applied::Applied;
use crate::security::versioned::{ChangeError, Family, Versioned};

/// The document: topic id -> partition -> preferred broker.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreferredLeaders {
    pub topics: BTreeMap<String, BTreeMap<u32, u32>>,
}

impl PreferredLeaders {
    pub fn get(&self, topic_id: &str, partition: u32) -> Option<u32> {
        self.topics.get(topic_id)?.get(&partition).copied()
    }

    /// Sets (`Some`) or removes (`None`) a partition's preferred broker;
    /// returns the one it had.
    pub fn set(&mut self, topic_id: &str, partition: u32, broker: Option<u32>) -> Option<u32> {
        match broker {
            Some(b) => self
                .topics
                .entry(topic_id.to_owned())
                .or_default()
                .insert(partition, b),
            None => {
                let t = self.topics.get_mut(topic_id)?;
                let had = t.remove(&partition);
                if t.is_empty() {
                    self.topics.remove(topic_id);
                }
                had
            }
        }
    }

    /// Every entry, keyed for placement.
    pub(crate) fn as_map(&self) -> BTreeMap<PartitionKey, u32> {
        self.topics
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |(p, b)| ((t.clone(), *p), *b)))
            .collect()
    }
}

pub(crate) const NAME: &str = crate::layout::PREFERRED_LEADERS_DOC;

pub fn doc() -> Versioned {
    Versioned::new(layout::CLUSTER_DIR, NAME).in_family(Family::Preferred)
}

/// Applies `edit` to the newest document and writes it as the next version.
pub async fn change<E>(
    vfs: &dyn Vfs,
    edit: impl Fn(&mut PreferredLeaders) -> Result<(), E>,
) -> Result<(u64, PreferredLeaders), ChangeError<E>> {
    doc().change(vfs, edit).await
}

/// Follows the document and never goes back to an older version.
pub type PreferredReader = Applied<PreferredLeaders>;

/// A reader at version 0 (no preferences) until it refreshes.
pub fn reader() -> PreferredReader {
    Applied::new(doc())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn changes_are_kept_and_readers_follow_them() {
        let v = vfs::MemVfs::new();
        v.mkdir(std::path::Path::new(layout::CLUSTER_DIR))
            .await
            .unwrap();
        let r = reader();
        assert!(!r.refresh(&v).await.unwrap());
        assert_eq!(*r.get().1, PreferredLeaders::default());
        change::<()>(&v, |d| {
            d.set("t", 0, Some(2));
            d.set("t", 1, Some(1));
            Ok(())
        })
        .await
        .unwrap();
        change::<()>(&v, |d| {
            d.set("t", 1, None);
            Ok(())
        })
        .await
        .unwrap();
        assert!(r.refresh(&v).await.unwrap());
        let (version, doc) = r.get();
        assert_eq!(version, 2);
        assert_eq!(doc.get("t", 0), Some(2));
        assert_eq!(doc.get("t", 1), None);
        assert_eq!(doc.as_map(), BTreeMap::from([(("t".to_owned(), 0), 2)]));
        // Removing the last entry of a topic drops the topic.
        let mut d = (*doc).clone();
        assert_eq!(d.set("t", 0, None), Some(2));
        assert!(d.topics.is_empty());
    }
}
