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
#[cfg(test)]
pub fn place(
    previous: &BTreeMap<PartitionKey, Leadership>,
    live: &BTreeSet<u32>,
    restarted: &BTreeSet<u32>,
    partitions: &BTreeSet<PartitionKey>,
) -> BTreeMap<PartitionKey, Leadership> {
    place_preferring(previous, live, restarted, partitions, &BTreeMap::new())
}

/// The placement `place` describes (tests call it without preferences), where a partition whose `preferred` broker is live leads
/// there (moved under a new epoch if it led elsewhere) and is never moved
/// away to even out the load; a partition whose preferred broker is not
/// live is placed as any other.
pub fn place_preferring(
    previous: &BTreeMap<PartitionKey, Leadership>,
    live: &BTreeSet<u32>,
    restarted: &BTreeSet<u32>,
    partitions: &BTreeSet<PartitionKey>,
    preferred: &BTreeMap<PartitionKey, u32>,
) -> BTreeMap<PartitionKey, Leadership> {
    let mut next: BTreeMap<PartitionKey, Leadership> = previous
        .iter()
        .filter(|(k, _)| partitions.contains(*k))
        .map(|(k, v)| {
            let mut l = *v;
            if restarted.contains(&l.leader) && live.contains(&l.leader) {
                l.leader_epoch = l.leader_epoch.saturating_add(1);
            }
            (k.clone(), l)
        })
        .collect();
    if live.is_empty() {
        return next;
    }
    // Pinned: partitions whose preferred broker is live.
    let pinned = |key: &PartitionKey| preferred.get(key).filter(|b| live.contains(b)).copied();
    for key in partitions {
        let Some(want) = pinned(key) else {
            continue;
        };
        let current = next.get(key).copied();
        if current.is_some_and(|l| l.leader == want) {
            continue;
        }
        next.insert(
            key.clone(),
            Leadership {
                leader: want,
                leader_epoch: current.map_or(1, |l| l.leader_epoch.saturating_add(1)),
            },
        );
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
                leader_epoch: current.map_or(1, |l| l.leader_epoch.saturating_add(1)),
            },
        );
    }
    // Even out: while a broker leads two more than another (a broker
    // joined), move the last partition it may give up (not pinned to it)
    // to the least loaded broker. Each move is a new epoch; the old leader
    // is fenced by it.
    loop {
        let (&min_b, &min_n) = load
            .iter()
            .min_by_key(|&(&b, &n)| (n, b))
            .expect("live is not empty");
        let movable = |b: u32| {
            next.iter()
                .rev()
                .find(|(k, l)| l.leader == b && pinned(k).is_none())
                .map(|(k, _)| k.clone())
        };
        let Some((max_b, key)) = load
            .iter()
            .filter(|&(_, &n)| n > min_n + 1)
            .max_by_key(|&(&b, &n)| (n, std::cmp::Reverse(b)))
            .and_then(|(&b, _)| movable(b).map(|k| (b, k)))
            .or_else(|| {
                // The most loaded broker has only pinned partitions: the
                // next most loaded one that can give one up.
                load.iter()
                    .filter(|&(_, &n)| n > min_n + 1)
                    .filter_map(|(&b, &n)| movable(b).map(|k| (n, b, k)))
                    .max_by_key(|(n, b, _)| (*n, std::cmp::Reverse(*b)))
                    .map(|(_, b, k)| (b, k))
            })
        else {
            break;
        };
        if let Some(l) = next.get_mut(&key) {
            *l = Leadership {
                leader: min_b,
                leader_epoch: l.leader_epoch.saturating_add(1),
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

    #[test]
    fn a_live_preferred_broker_leads_its_partition_and_keeps_it() {
        let live = BTreeSet::from([0, 1, 2]);
        let a = place(&BTreeMap::new(), &live, &BTreeSet::new(), &keys(6));
        let key = ("t".to_owned(), 0);
        let was = a[&key];
        let want = (was.leader + 1) % 3;
        let preferred = BTreeMap::from([(key.clone(), want)]);
        let b = place_preferring(&a, &live, &BTreeSet::new(), &keys(6), &preferred);
        assert_eq!(b[&key].leader, want);
        assert_eq!(b[&key].leader_epoch, was.leader_epoch + 1);
        // Balanced again; a second pass changes nothing.
        let mut per_broker = BTreeMap::new();
        for l in b.values() {
            *per_broker.entry(l.leader).or_insert(0) += 1;
        }
        assert!(per_broker.values().max().unwrap() - per_broker.values().min().unwrap() <= 1);
        assert_eq!(
            place_preferring(&b, &live, &BTreeSet::new(), &keys(6), &preferred),
            b
        );
        // Every partition pinned to broker 0: evening out leaves them.
        let all: BTreeMap<PartitionKey, u32> = keys(6).into_iter().map(|k| (k, 0)).collect();
        let c = place_preferring(&b, &live, &BTreeSet::new(), &keys(6), &all);
        assert!(c.values().all(|l| l.leader == 0));
        // Its broker gone, a pinned partition fails over as any other, and
        // comes back when the broker does, each move a new epoch.
        let d = place_preferring(
            &c,
            &BTreeSet::from([1, 2]),
            &BTreeSet::new(),
            &keys(6),
            &all,
        );
        assert!(d.values().all(|l| l.leader != 0));
        let e = place_preferring(&d, &live, &BTreeSet::new(), &keys(6), &all);
        for (k, l) in &e {
            assert_eq!(l.leader, 0);
            assert_eq!(l.leader_epoch, d[k].leader_epoch + 1);
        }
    }

    #[test]
    fn evening_out_skips_a_broker_whose_partitions_are_all_pinned() {
        // Broker 0 leads 4 pinned, broker 1 leads 3 unpinned, broker 2 none.
        let mut prev = BTreeMap::new();
        for p in 0..4 {
            prev.insert(
                ("t".to_owned(), p),
                Leadership {
                    leader: 0,
                    leader_epoch: 1,
                },
            );
        }
        for p in 4..7 {
            prev.insert(
                ("t".to_owned(), p),
                Leadership {
                    leader: 1,
                    leader_epoch: 1,
                },
            );
        }
        let preferred: BTreeMap<PartitionKey, u32> =
            (0..4).map(|p| (("t".to_owned(), p), 0)).collect();
        let live = BTreeSet::from([0, 1, 2]);
        let next = place_preferring(&prev, &live, &BTreeSet::new(), &keys(7), &preferred);
        let on = |b| next.values().filter(|l| l.leader == b).count();
        assert_eq!((on(0), on(1), on(2)), (4, 2, 1));
    }
}
