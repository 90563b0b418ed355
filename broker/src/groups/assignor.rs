//! Server-side assignors of the consumer protocol (KIP-848): `uniform`
//! (sticky and balanced, the default) and `range` (co-partitioned, per
//! topic). Pure functions of the members' subscriptions, the topics and the
//! previous target; deterministic (ordered maps only), so a coordinator
//! that recomputes after a takeover finds the same answer.

use std::collections::{BTreeMap, BTreeSet};

/// A topic partition by topic name.
pub type Tp = (String, i32);

pub const UNIFORM: &str = "uniform";
pub const RANGE: &str = "range";
pub const ASSIGNORS: &[&str] = &[UNIFORM, RANGE];

/// What an assignor sees: each member's subscribed topics (only topics that
/// exist), the partition count of every subscribed topic, and the previous
/// target of each member.
pub struct Input<'a> {
    pub subscriptions: &'a BTreeMap<String, BTreeSet<String>>,
    pub partitions: &'a BTreeMap<String, u32>,
    pub previous: &'a BTreeMap<String, BTreeSet<Tp>>,
}

pub fn assign(name: &str, input: &Input) -> BTreeMap<String, BTreeSet<Tp>> {
    if name == RANGE {
        range(input)
    } else {
        uniform(input)
    }
}

/// Every partition of `topic`.
fn partitions_of(topic: &str, count: u32) -> impl Iterator<Item = Tp> + '_ {
    (0..count as i32).map(move |p| (topic.to_owned(), p))
}

/// Each topic's partitions split into contiguous ranges over the members
/// subscribed to it, in member id order; the first members get one more
/// when the split is uneven.
fn range(input: &Input) -> BTreeMap<String, BTreeSet<Tp>> {
    let mut out: BTreeMap<String, BTreeSet<Tp>> = input
        .subscriptions
        .keys()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for (topic, &count) in input.partitions {
        let members: Vec<&String> = input
            .subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() {
            continue;
        }
        let n = members.len() as u32;
        let (each, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, m) in members.into_iter().enumerate() {
            let take = each + u32::from((i as u32) < extra);
            let set = out.entry(m.clone()).or_default();
            for p in next..next + take {
                set.insert((topic.clone(), p as i32));
            }
            next += take;
        }
    }
    out
}

/// Sticky and balanced: every partition stays with its previous owner while
/// that member still subscribes to its topic, new and orphaned partitions
/// go to the least loaded subscriber, then partitions move from the most to
/// the least loaded member that may take them until no two members that
/// could trade differ by more than one.
fn uniform(input: &Input) -> BTreeMap<String, BTreeSet<Tp>> {
    let subs = input.subscriptions;
    let mut out: BTreeMap<String, BTreeSet<Tp>> =
        subs.keys().map(|m| (m.clone(), BTreeSet::new())).collect();
    let mut owner: BTreeMap<Tp, String> = BTreeMap::new();
    for (m, tps) in input.previous {
        for tp in tps {
            owner.insert(tp.clone(), m.clone());
        }
    }
    let eligible = |m: &String, tp: &Tp| subs.get(m).is_some_and(|t| t.contains(&tp.0));
    let mut orphans = Vec::new();
    for (topic, &count) in input.partitions {
        for tp in partitions_of(topic, count) {
            match owner.get(&tp).filter(|m| eligible(m, &tp)) {
                Some(m) => {
                    out.entry(m.clone()).or_default().insert(tp);
                }
                None => orphans.push(tp),
            }
        }
    }
    for tp in orphans {
        let least = out
            .iter()
            .filter(|(m, _)| eligible(m, &tp))
            .min_by_key(|(m, set)| (set.len(), (*m).clone()))
            .map(|(m, _)| m.clone());
        if let Some(m) = least {
            out.entry(m).or_default().insert(tp);
        }
    }
    balance(&mut out, subs);
    out
}

/// Moves one partition at a time from a more loaded member to a member with
/// at least two fewer that subscribes to its topic. Each move lowers the sum
/// of squared loads, so this ends.
fn balance(out: &mut BTreeMap<String, BTreeSet<Tp>>, subs: &BTreeMap<String, BTreeSet<String>>) {
    loop {
        let mut by_load: Vec<(usize, String)> =
            out.iter().map(|(m, s)| (s.len(), m.clone())).collect();
        by_load.sort();
        let mut moved = None;
        'search: for (hi_load, hi) in by_load.iter().rev() {
            for (lo_load, lo) in by_load.iter() {
                if lo_load + 1 >= *hi_load {
                    break;
                }
                let Some(lo_topics) = subs.get(lo) else {
                    continue;
                };
                let candidate = out[hi].iter().rev().find(|tp| lo_topics.contains(&tp.0));
                if let Some(tp) = candidate {
                    moved = Some((hi.clone(), lo.clone(), tp.clone()));
                    break 'search;
                }
            }
        }
        let Some((from, to, tp)) = moved else {
            return;
        };
        if let Some(s) = out.get_mut(&from) {
            s.remove(&tp);
        }
        out.entry(to).or_default().insert(tp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(of: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        of.iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    fn counts(of: &[(&str, u32)]) -> BTreeMap<String, u32> {
        of.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn loads(a: &BTreeMap<String, BTreeSet<Tp>>) -> Vec<usize> {
        a.values().map(|s| s.len()).collect()
    }

    fn run(
        name: &str,
        subscriptions: &BTreeMap<String, BTreeSet<String>>,
        partitions: &BTreeMap<String, u32>,
        previous: &BTreeMap<String, BTreeSet<Tp>>,
    ) -> BTreeMap<String, BTreeSet<Tp>> {
        assign(
            name,
            &Input {
                subscriptions,
                partitions,
                previous,
            },
        )
    }

    fn each_once(a: &BTreeMap<String, BTreeSet<Tp>>, partitions: &BTreeMap<String, u32>) {
        let mut seen = BTreeSet::new();
        for set in a.values() {
            for tp in set {
                assert!(seen.insert(tp.clone()), "{tp:?} assigned twice");
            }
        }
        let all: BTreeSet<Tp> = partitions
            .iter()
            .flat_map(|(t, n)| partitions_of(t, *n))
            .collect();
        assert_eq!(seen, all);
    }

    #[test]
    fn uniform_balances_and_keeps_what_it_can() {
        let s = subs(&[("a", &["t", "u"]), ("b", &["t", "u"])]);
        let p = counts(&[("t", 3), ("u", 3)]);
        let first = run(UNIFORM, &s, &p, &BTreeMap::new());
        each_once(&first, &p);
        assert_eq!(loads(&first), [3, 3]);
        // A third member takes two partitions; the others keep the rest.
        let s3 = subs(&[("a", &["t", "u"]), ("b", &["t", "u"]), ("c", &["t", "u"])]);
        let second = run(UNIFORM, &s3, &p, &first);
        each_once(&second, &p);
        assert_eq!(loads(&second), [2, 2, 2]);
        for m in ["a", "b"] {
            assert!(second[m].is_subset(&first[m]), "{m} lost more than it gave");
        }
    }

    #[test]
    fn uniform_gives_a_topic_only_to_its_subscribers() {
        let s = subs(&[("a", &["t"]), ("b", &["t", "u"])]);
        let p = counts(&[("t", 4), ("u", 4)]);
        let a = run(UNIFORM, &s, &p, &BTreeMap::new());
        each_once(&a, &p);
        assert!(a["a"].iter().all(|(t, _)| t == "t"));
        assert_eq!(loads(&a), [4, 4]);
    }

    #[test]
    fn range_splits_each_topic_in_member_order() {
        let s = subs(&[("b", &["t", "u"]), ("a", &["t", "u"])]);
        let p = counts(&[("t", 3), ("u", 2)]);
        let a = run(RANGE, &s, &p, &BTreeMap::new());
        each_once(&a, &p);
        let t = |n: &str, p: i32| (n.to_string(), p);
        assert_eq!(a["a"], BTreeSet::from([t("t", 0), t("t", 1), t("u", 0)]));
        assert_eq!(a["b"], BTreeSet::from([t("t", 2), t("u", 1)]));
    }

    #[test]
    fn a_member_that_left_gives_its_partitions_to_the_others() {
        let s = subs(&[("a", &["t"]), ("b", &["t"])]);
        let p = counts(&[("t", 4)]);
        let first = run(UNIFORM, &s, &p, &BTreeMap::new());
        let s1 = subs(&[("a", &["t"])]);
        let second = run(UNIFORM, &s1, &p, &first);
        each_once(&second, &p);
        assert_eq!(second.len(), 1);
    }
}
