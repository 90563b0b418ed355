//! The client quotas: one cluster-wide document, `cluster/client-quotas-<n>`,
//! changed by compare-and-swap like the ACLs and the preferred leaders
//! (`security::versioned`), and how a connection's quota is found in it.
//!
//! Entities are Kafka's (KIP-546): a user, a client id, or both, each named
//! or the default. A connection takes the first entry that sets the quota,
//! in Kafka's order of precedence; the entity that matched also names the
//! byte budget it spends from, so a default quota is a quota per user or
//! per client id, and a user's quota is shared by all of that user's
//! clients.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::layout;
use crate::security::versioned::{Family, Versioned};

/// One side of an entity: a named user or client id, or the default.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Name {
    Default,
    Named(String),
}

impl Name {
    /// Kafka's wire form: `None` is the default.
    pub fn from_wire(name: Option<&str>) -> Self {
        name.map_or(Name::Default, |n| Name::Named(n.to_owned()))
    }

    pub fn wire(&self) -> Option<&str> {
        match self {
            Name::Default => None,
            Name::Named(n) => Some(n),
        }
    }
}

/// An entity quotas are set for: a user, a client id, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Entity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Name>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<Name>,
}

/// The quotas kaas enforces, in bytes per second per broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Produce,
    Fetch,
}

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Produce, Kind::Fetch];

    /// Kafka's key for the quota.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Produce => "producer_byte_rate",
            Kind::Fetch => "consumer_byte_rate",
        }
    }

    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.key() == key)
    }
}

/// What an entity is limited to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer_byte_rate: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_byte_rate: Option<u64>,
}

impl Limits {
    pub fn get(&self, kind: Kind) -> Option<u64> {
        match kind {
            Kind::Produce => self.producer_byte_rate,
            Kind::Fetch => self.consumer_byte_rate,
        }
    }

    pub fn set(&mut self, kind: Kind, rate: Option<u64>) {
        match kind {
            Kind::Produce => self.producer_byte_rate = rate,
            Kind::Fetch => self.consumer_byte_rate = rate,
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }
}

/// The document: every entity with a quota.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientQuotas {
    /// A list, not a map: JSON keys are strings, entities are not.
    pub entries: Vec<(Entity, Limits)>,
}

/// The budget a request spends from: the matched entity with its defaults
/// replaced by the connection's own names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Budget {
    pub user: Option<String>,
    pub client_id: Option<String>,
}

impl ClientQuotas {
    pub fn get(&self, entity: &Entity) -> Option<&Limits> {
        self.entries
            .iter()
            .find(|(e, _)| e == entity)
            .map(|(_, l)| l)
    }

    /// Sets (`Some`) or removes (`None`) one quota of an entity; an entity
    /// left with none is dropped. Entries stay sorted.
    pub fn set(&mut self, entity: &Entity, kind: Kind, rate: Option<u64>) {
        let mut map: BTreeMap<Entity, Limits> =
            std::mem::take(&mut self.entries).into_iter().collect();
        let limits = map.entry(entity.clone()).or_default();
        limits.set(kind, rate);
        if limits.is_empty() {
            map.remove(entity);
        }
        self.entries = map.into_iter().collect();
    }

    /// The quota of `kind` for a connection of `user` (its principal's
    /// name) and `client_id`, and the budget it spends from; `None` when no
    /// entry limits it. Kafka's precedence: user and client id, user and
    /// default client, user alone, default user and client id, default
    /// user and default client, default user alone, client id alone,
    /// default client alone.
    pub fn resolve(&self, kind: Kind, user: &str, client_id: &str) -> Option<(Budget, u64)> {
        // Every produce and fetch asks: one pass over the (operator-sized)
        // list, nothing allocated unless a quota applies.
        let (_, entity, rate) = self
            .entries
            .iter()
            .filter_map(|(e, l)| {
                let rank = precedence(e, user, client_id)?;
                Some((rank, e, l.get(kind)?))
            })
            .min_by_key(|(rank, _, _)| *rank)?;
        let budget = Budget {
            user: entity.user.as_ref().map(|_| user.to_owned()),
            client_id: entity.client_id.as_ref().map(|_| client_id.to_owned()),
        };
        Some((budget, rate))
    }
}

/// Where `entity` stands in Kafka's order of precedence for a connection of
/// `user` and `client_id` (0 first); `None` if it does not match it.
fn precedence(entity: &Entity, user: &str, client_id: &str) -> Option<u8> {
    // 0 named, 1 default, 2 absent; `None` names someone else.
    let side = |name: &Option<Name>, own: &str| match name {
        Some(Name::Named(n)) if n == own => Some(0u8),
        Some(Name::Named(_)) => None,
        Some(Name::Default) => Some(1),
        None => Some(2),
    };
    let (u, c) = (
        side(&entity.user, user)?,
        side(&entity.client_id, client_id)?,
    );
    match (u, c) {
        // An entity names a user, a client id or both.
        (2, 2) => None,
        // The user decides first, then the client id; a client id
        // alone comes after every user entry.
        (2, c) => Some(6 + c),
        (u, c) => Some(u * 3 + c),
    }
}

pub(crate) const NAME: &str = crate::layout::CLIENT_QUOTAS_DOC;

pub fn doc() -> Versioned {
    Versioned::new(layout::CLUSTER_DIR, NAME).in_family(Family::Quotas)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::security::applied::Applied;
    use vfs::Vfs;

    fn entity(user: Option<Option<&str>>, client: Option<Option<&str>>) -> Entity {
        Entity {
            user: user.map(Name::from_wire),
            client_id: client.map(Name::from_wire),
        }
    }

    #[test]
    fn the_most_specific_entry_wins_and_names_the_budget() {
        let mut q = ClientQuotas::default();
        q.set(&entity(None, Some(None)), Kind::Produce, Some(100));
        assert_eq!(
            q.resolve(Kind::Produce, "alice", "app"),
            Some((
                Budget {
                    user: None,
                    client_id: Some("app".into())
                },
                100
            ))
        );
        assert_eq!(q.resolve(Kind::Fetch, "alice", "app"), None);
        q.set(&entity(Some(Some("alice")), None), Kind::Produce, Some(50));
        let (budget, rate) = q.resolve(Kind::Produce, "alice", "app").unwrap();
        assert_eq!(rate, 50);
        assert_eq!(
            budget.client_id, None,
            "a user's quota is shared by its clients"
        );
        q.set(
            &entity(Some(Some("alice")), Some(Some("app"))),
            Kind::Produce,
            Some(7),
        );
        assert_eq!(q.resolve(Kind::Produce, "alice", "app").unwrap().1, 7);
        assert_eq!(q.resolve(Kind::Produce, "alice", "other").unwrap().1, 50);
        assert_eq!(q.resolve(Kind::Produce, "bob", "other").unwrap().1, 100);
        // Removing the last quota of an entity drops it.
        q.set(&entity(Some(Some("alice")), None), Kind::Produce, None);
        assert_eq!(q.get(&entity(Some(Some("alice")), None)), None);
        assert_eq!(q.entries.len(), 2);
    }

    #[test]
    fn kafkas_eight_levels_of_precedence() {
        let (alice, app) = (Some(Some("alice")), Some(Some("app")));
        let order = [
            entity(alice, app),
            entity(alice, Some(None)),
            entity(alice, None),
            entity(Some(None), app),
            entity(Some(None), Some(None)),
            entity(Some(None), None),
            entity(None, app),
            entity(None, Some(None)),
        ];
        let mut q = ClientQuotas::default();
        // Others' entries never match alice's app.
        q.set(&entity(Some(Some("bob")), app), Kind::Produce, Some(1000));
        q.set(
            &entity(alice, Some(Some("other"))),
            Kind::Produce,
            Some(1000),
        );
        for (rank, e) in order.iter().enumerate().rev() {
            q.set(e, Kind::Produce, Some(rank as u64 + 1));
        }
        for (rank, e) in order.iter().enumerate() {
            let (budget, rate) = q.resolve(Kind::Produce, "alice", "app").unwrap();
            assert_eq!(rate, rank as u64 + 1, "{e:?} comes at {rank}");
            assert_eq!(budget.user.is_some(), e.user.is_some());
            assert_eq!(budget.client_id.is_some(), e.client_id.is_some());
            q.set(e, Kind::Produce, None);
        }
        assert_eq!(q.resolve(Kind::Produce, "alice", "app"), None);
    }

    #[tokio::test]
    async fn changes_are_kept_as_versions() {
        let v = vfs::MemVfs::new();
        v.mkdir(std::path::Path::new(layout::CLUSTER_DIR))
            .await
            .unwrap();
        let e = entity(None, Some(Some("app")));
        let writer = Applied::<ClientQuotas>::new(doc());
        let reader = Applied::<ClientQuotas>::new(doc());
        writer
            .change::<()>(&v, |d| {
                d.set(&e, Kind::Fetch, Some(1 << 20));
                Ok(())
            })
            .await
            .unwrap();
        assert!(reader.refresh(&v).await.unwrap());
        let (n, doc) = reader.get();
        assert_eq!(n, 1);
        assert_eq!(doc.get(&e).unwrap().consumer_byte_rate, Some(1 << 20));
        assert!(!reader.refresh(&v).await.unwrap());
    }
}
