//! Where partitions lead: a pure function of the previous assignment, the
//! live brokers and the topics, so every controller computes the same thing.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Topic id and partition number.
pub(crate) type PartitionKey = (String, u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leadership {
    pub leader: u32,
    /// Bumped by every change of leader; a leader acts only in its epoch.
    pub leader_epoch: u32,
}

/// Keeps every partition whose leader is live where it is; gives each
/// partition without a live leader to the live broker leading the fewest
/// partitions (lowest id on a tie), bumping its leader epoch; then moves
/// partitions from the most to the least loaded broker until no two differ
/// by more than one; drops partitions of topics that no longer exist. With
/// no live broker, nothing moves.
///
/// A leader in `restarted` (a new process since the previous assignment)
/// keeps its partitions under a new epoch: the new process cannot hold the
/// old process's epoch claims.
pub fn place(
    previous: &BTreeMap<PartitionKey, Leadership>,
    live: &BTreeSet<u32>,
    restarted: &BTreeSet<u32>,
    partitions: &BTreeSet<PartitionKey>,
) -> BTreeMap<PartitionKey, Leadership> {
    let mut next: BTreeMap<PartitionKey, Leadership> = previous
        .iter()
        .filter(|(k, _)| partitions.contains(*k))
        .map(|(k, v)| {
            let mut l = *v;
            if restarted.contains(&l.leader) && live.contains(&l.leader) {
                l.leader_epoch += 1;
            }
            (k.clone(), l)
        })
        .collect();
    if live.is_empty() {
        return next;
    }
    let mut load: BTreeMap<u32, usize> = live.iter().map(|&b| (b, 0)).collect();
    for l in next.values() {
        if let Some(n) = load.get_mut(&l.leader) {
            *n += 1;
        }
    }
    for key in partitions {
        let current = next.get(key).copied();
        if current.is_some_and(|l| live.contains(&l.leader)) {
            continue;
        }
        let (&broker, _) = load
            .iter()
            .min_by_key(|&(&b, &n)| (n, b))
            .expect("live is not empty");
        *load.entry(broker).or_default() += 1;
        next.insert(
            key.clone(),
            Leadership {
                leader: broker,
                leader_epoch: current.map_or(1, |l| l.leader_epoch + 1),
            },
        );
    }
    // Even out: while one broker leads two more than another (a broker
    // joined), move the most loaded broker's last partition to the least
    // loaded one. Each move is a new epoch; the old leader is fenced by it.
    loop {
        let (&max_b, &max_n) = load
            .iter()
            .max_by_key(|&(&b, &n)| (n, std::cmp::Reverse(b)))
            .expect("live is not empty");
        let (&min_b, &min_n) = load
            .iter()
            .min_by_key(|&(&b, &n)| (n, b))
            .expect("live is not empty");
        if max_n <= min_n + 1 {
            break;
        }
        let Some(key) = next
            .iter()
            .rev()
            .find(|(_, l)| l.leader == max_b)
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        if let Some(l) = next.get_mut(&key) {
            *l = Leadership {
                leader: min_b,
                leader_epoch: l.leader_epoch + 1,
            };
        }
        *load.entry(max_b).or_default() -= 1;
        *load.entry(min_b).or_default() += 1;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: u32) -> BTreeSet<PartitionKey> {
        (0..n).map(|p| ("t".to_owned(), p)).collect()
    }

    #[test]
    fn spreads_evenly_and_starts_at_epoch_one() {
        let live = BTreeSet::from([0, 1, 2]);
        let a = place(&BTreeMap::new(), &live, &BTreeSet::new(), &keys(6));
        let mut per_broker = BTreeMap::new();
        for l in a.values() {
            *per_broker.entry(l.leader).or_insert(0) += 1;
            assert_eq!(l.leader_epoch, 1);
        }
        assert_eq!(per_broker.values().copied().collect::<Vec<_>>(), [2, 2, 2]);
    }

    #[test]
    fn only_partitions_of_dead_brokers_move_and_each_move_bumps_the_epoch() {
        let a = place(
            &BTreeMap::new(),
            &BTreeSet::from([0, 1, 2]),
            &BTreeSet::new(),
            &keys(6),
        );
        let b = place(&a, &BTreeSet::from([0, 2]), &BTreeSet::new(), &keys(6));
        for (k, before) in &a {
            let after = b[k];
            if before.leader == 1 {
                assert_ne!(after.leader, 1);
                assert_eq!(after.leader_epoch, before.leader_epoch + 1);
            } else {
                assert_eq!(after, *before, "a live leader keeps its partition");
            }
        }
        // Broker 1 comes back: it gets its share again, each move a new epoch.
        let c = place(&b, &BTreeSet::from([0, 1, 2]), &BTreeSet::new(), &keys(6));
        assert_eq!(c.values().filter(|l| l.leader == 1).count(), 2);
        for (k, l) in &c {
            assert!(l.leader_epoch == b[k].leader_epoch || l.leader_epoch == b[k].leader_epoch + 1);
        }
        // Balanced already: a stable assignment does not change.
        assert_eq!(
            place(&c, &BTreeSet::from([0, 1, 2]), &BTreeSet::new(), &keys(6)),
            c
        );
        // Nobody alive: nothing changes, epochs do not grow.
        assert_eq!(place(&b, &BTreeSet::new(), &BTreeSet::new(), &keys(6)), b);
        // A restarted leader keeps its partitions under new epochs.
        let d = place(
            &c,
            &BTreeSet::from([0, 1, 2]),
            &BTreeSet::from([2]),
            &keys(6),
        );
        for (k, l) in &d {
            let was = c[k];
            assert_eq!(l.leader, was.leader);
            let bump = u32::from(was.leader == 2);
            assert_eq!(l.leader_epoch, was.leader_epoch + bump);
        }
        // A deleted topic's partitions leave the assignment.
        assert!(place(&b, &BTreeSet::from([0]), &BTreeSet::new(), &BTreeSet::new()).is_empty());
    }
}
