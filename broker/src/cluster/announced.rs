//! Topics this broker created, announced in its heartbeat until the
//! assignment gives them leaders.
//!
//! The controller finds new topics by listing `topics/`, but an NFS client
//! answers `readdir` from its cache while the directory's cached attributes
//! are fresh (acdirmin 30 s, acdirmax 60 s): a topic another broker created
//! can stay out of the controller's listing for up to a minute, and its
//! creator's clients get LEADER_NOT_AVAILABLE all that time. The heartbeat
//! is read by a fresh open (close-to-open), so the controller learns the new
//! topic's id from there within a tick, and opens its meta by path.
//!
//! Nothing here is persisted on its own: the ids travel in the heartbeat,
//! which only its broker writes (atomic replace). An id is only a hint: the
//! controller still reads the topic's meta and confirms its name.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::assignment::Assignment;

/// How long an id stays announced if no assignment names it (a topic that
/// lost its name, or was deleted at once): by then any listing shows it.
const ANNOUNCE_FOR: Duration = Duration::from_secs(120);

#[derive(Default)]
pub struct Announced {
    ids: Mutex<BTreeMap<String, Instant>>,
    /// Wakes the heartbeat task, so the announcement goes out now rather
    /// than at the next beat.
    beat: Notify,
}

impl Announced {
    /// Announces `ids` (topics this broker just created).
    pub fn add<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        let now = Instant::now();
        let mut map = self.lock();
        let before = map.len();
        for id in ids {
            map.entry(id.to_owned()).or_insert(now);
        }
        if map.len() > before {
            self.beat.notify_one();
        }
    }

    /// The ids to put in the next heartbeat, after dropping expired ones.
    pub fn pending(&self) -> Vec<String> {
        let now = Instant::now();
        let mut map = self.lock();
        map.retain(|_, since| now.duration_since(*since) < ANNOUNCE_FOR);
        map.keys().cloned().collect()
    }

    /// Stops announcing the topics `a` gives leaders to.
    pub fn settled(&self, a: &Assignment) {
        let mut map = self.lock();
        if map.is_empty() {
            return;
        }
        for (id, _, _) in &a.partitions {
            map.remove(id);
        }
    }

    /// Resolves when something new was announced since the last call.
    pub async fn changed(&self) {
        self.beat.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Instant>> {
        self.ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg_attr(not(madsim), tokio::test(start_paused = true))]
    #[cfg_attr(madsim, tokio::test)]
    async fn announces_until_led_or_expired() {
        let a = Announced::default();
        a.add(["t1", "t2"]);
        // The heartbeat task is woken by the addition.
        tokio::time::timeout(Duration::from_millis(1), a.changed())
            .await
            .expect("woken");
        assert_eq!(a.pending(), ["t1", "t2"]);
        let assignment = Assignment {
            partitions: vec![(
                "t1".into(),
                0,
                super::super::placement::Leadership {
                    leader: 1,
                    leader_epoch: 1,
                },
            )],
            ..Default::default()
        };
        a.settled(&assignment);
        assert_eq!(a.pending(), ["t2"]);
        tokio::time::sleep(ANNOUNCE_FOR).await;
        assert!(a.pending().is_empty());
        // Nothing new: no wake-up.
        a.add([]);
        assert!(
            tokio::time::timeout(Duration::from_millis(1), a.changed())
                .await
                .is_err()
        );
    }
}
