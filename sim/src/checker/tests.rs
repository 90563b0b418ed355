use super::*;
use std::time::Duration;

fn acked(p: i32, value: &str, offset: i64, broker: u32) -> (Duration, Event) {
    (
        Duration::ZERO,
        Event::Produce {
            client: "c".into(),
            idempotent: value == "a",
            partition: p,
            value: value.into(),
            outcome: Outcome::Acked { offset, broker },
        },
    )
}

fn admin(
    topic: &str,
    grow: bool,
    answer: Option<(i16, &str)>,
    volume_errors: u64,
) -> (Duration, Event) {
    (
        Duration::ZERO,
        Event::Admin {
            client: "creator-0".into(),
            topic: topic.into(),
            grow,
            broker: 1,
            sent: Duration::ZERO,
            answer: answer.map(|(c, m)| (c, m.into())),
            volume_errors,
        },
    )
}

type Rows<'a> = &'a [(i64, &'a str, i32)];

fn logs(entries: &[(i32, Rows<'_>)]) -> FinalLogs {
    let mut out: FinalLogs = (0..PARTITIONS).map(|p| (p, Vec::new())).collect();
    for (p, rows) in entries {
        out.insert(
            *p,
            rows.iter()
                .map(|(o, v, e)| (*o, (*v).to_owned(), *e))
                .collect(),
        );
    }
    out
}

fn names(v: &[String]) -> Vec<&str> {
    v.iter().filter_map(|s| s.split(' ').next()).collect()
}

/// A commit of `offset` to group `g` partition 0, answered at `ms`.
fn commit(ms: u64, offset: i64, acked: bool) -> (Duration, Event) {
    (
        Duration::from_millis(ms),
        Event::Commit {
            group: "g".into(),
            partition: 0,
            offset,
            acked,
        },
    )
}

fn event(e: Event) -> (Duration, Event) {
    (Duration::from_secs(1), e)
}

/// A consumer-protocol member holding `partitions` from `at` to `until`
/// seconds.
fn holds(at: u64, member: &str, partitions: &[i32], until: u64) -> (Duration, Event) {
    (
        Duration::from_secs(at),
        Event::Holds {
            member: member.into(),
            partitions: partitions.to_vec(),
            until: Duration::from_secs(until),
        },
    )
}

#[test]
fn a_partition_moves_once_its_holder_let_go_or_lapsed() {
    let l = logs(&[(0, &[(0, "a", 1), (1, "b", 1), (2, "c", 1)])]);
    let released = vec![
        holds(1, "m1", &[0, 1], 11),
        holds(2, "m1", &[0], 11),
        holds(3, "m2", &[1], 13),
    ];
    assert_eq!(check(&released, &l), Vec::<String>::new());
    let lapsed = vec![holds(1, "m1", &[0, 1], 11), holds(12, "m2", &[0, 1], 22)];
    assert_eq!(check(&lapsed, &l), Vec::<String>::new());
    // m1's lease renewed with the same partitions: still held.
    let renewed = vec![
        holds(1, "m1", &[0], 11),
        holds(10, "m1", &[0], 20),
        holds(12, "m2", &[0], 22),
    ];
    assert_eq!(names(&check(&renewed, &l)), ["consumer-group-overlap"]);
}

/// Broker 0 answering, between `sent` and `got` seconds, that `leader`
/// leads partition 0 in `epoch`.
fn metadata(leader: i32, epoch: i32, sent: u64, got: u64) -> (Duration, Event) {
    (
        Duration::from_secs(got),
        Event::Metadata {
            client: "c".into(),
            sent: Duration::from_secs(sent),
            broker: 0,
            topic_id: "t".into(),
            partitions: vec![(0, leader, epoch)],
        },
    )
}

fn poll(from: i64, got: &[(i64, &str)]) -> (Duration, Event) {
    event(Event::Poll {
        client: "r".into(),
        partition: 0,
        from,
        got: got.iter().map(|(o, v)| (*o, (*v).to_owned())).collect(),
    })
}

/// Every anomaly, each in a history of its own: the checker names
/// exactly that one, and nothing in a clean history.
#[test]
fn an_offset_fetch_is_judged_against_the_commits_acknowledged_before_it_was_sent() {
    let base = [(0, "a", 1), (1, "b", 1), (2, "c", 1)];
    let clean_log = logs(&[(0, &base)]);
    let fetched = |sent: u64, answered: u64, offset: i64| {
        (
            Duration::from_millis(answered),
            Event::Committed {
                group: "g".into(),
                partition: 0,
                offset,
                sent: Duration::from_millis(sent),
            },
        )
    };
    // Sent before the commit of 9 was acknowledged: 5 is a legal answer
    // (the coordinator may have read before the commit).
    let slow = vec![
        commit(1_000, 5, true),
        commit(2_000, 9, true),
        fetched(1_500, 3_000, 5),
    ];
    assert!(check(&slow, &clean_log).is_empty());
    // Sent after it: 5 went back.
    let stale = vec![
        commit(1_000, 5, true),
        commit(2_000, 9, true),
        fetched(2_500, 3_000, 5),
    ];
    let found = check(&stale, &clean_log);
    assert_eq!(
        names(&found),
        vec!["committed-offset-regression"],
        "{found:?}"
    );
}

#[test]
fn a_group_file_is_judged_against_commits_acknowledged_before_it_was_read() {
    let clean_log = logs(&[(0, &[(0, "a", 1)])]);
    let on_volume = |sent: u64, offset: i64| {
        (
            Duration::from_millis(sent + 10),
            Event::GroupOnVolume {
                group: "g".into(),
                sent: Duration::from_millis(sent),
                offsets: vec![(0, offset)],
                file_epoch: (offset >= 0).then_some(1),
                newest_epoch: 1,
            },
        )
    };
    // Read before the commit of 9 was acknowledged: 5 may be all there was.
    let early = vec![
        commit(1_000, 5, true),
        on_volume(1_500, 5),
        commit(2_000, 9, true),
    ];
    assert!(check(&early, &clean_log).is_empty());
    // A commit in doubt may land after a newer one and stay.
    let late = vec![
        commit(1_000, 4, false),
        commit(2_000, 9, true),
        on_volume(2_500, 4),
    ];
    assert!(check(&late, &clean_log).is_empty());
    // Read after it: the file lost the commit, or never had it.
    for offset in [5, -1] {
        let lost = vec![
            commit(1_000, 5, true),
            commit(2_000, 9, true),
            on_volume(2_500, offset),
        ];
        let found = check(&lost, &clean_log);
        assert_eq!(names(&found), vec!["commit-not-durable"], "{found:?}");
    }
}

type Cases = Vec<(&'static str, Vec<(Duration, Event)>, FinalLogs)>;

fn clean_log() -> FinalLogs {
    logs(&[(0, &[(0, "a", 1), (1, "b", 1), (2, "c", 1)])])
}

/// Anomalies of the log, reads and commits, each with the one invariant it
/// must break.
fn log_anomalies() -> Cases {
    let clean_log = clean_log();
    vec![
        (
            "lost-write",
            vec![acked(0, "b", 1, 1), acked(0, "z", 7, 1)],
            clean_log.clone(),
        ),
        ("lost-write", vec![acked(0, "z", 1, 1)], clean_log.clone()),
        (
            "duplicate",
            vec![acked(0, "a", 0, 1)],
            logs(&[(0, &[(0, "a", 1), (1, "b", 1), (2, "a", 1)])]),
        ),
        (
            "inconsistent-offsets",
            vec![poll(0, &[(0, "a"), (1, "x")])],
            clean_log.clone(),
        ),
        (
            "nonmonotonic-poll",
            vec![poll(1, &[(0, "a"), (1, "b")])],
            clean_log.clone(),
        ),
        ("poll-skip", vec![poll(0, &[(1, "b")])], clean_log.clone()),
        (
            "poll-skip",
            vec![poll(0, &[(0, "a"), (2, "c")])],
            clean_log.clone(),
        ),
        (
            "poll-skip",
            vec![],
            logs(&[(0, &[(0, "a", 1), (2, "c", 1)])]),
        ),
        (
            "committed-offset-regression",
            vec![
                event(Event::Commit {
                    group: "g".into(),
                    partition: 0,
                    offset: 5,
                    acked: true,
                }),
                event(Event::Committed {
                    group: "g".into(),
                    partition: 0,
                    offset: 3,
                    sent: Duration::from_secs(1),
                }),
            ],
            clean_log.clone(),
        ),
        (
            "commit-not-durable",
            vec![
                event(Event::Commit {
                    group: "g".into(),
                    partition: 0,
                    offset: 5,
                    acked: true,
                }),
                event(Event::GroupOnVolume {
                    group: "g".into(),
                    sent: Duration::from_secs(1),
                    offsets: vec![(0, 3), (1, -1)],
                    file_epoch: Some(1),
                    newest_epoch: 2,
                }),
            ],
            clean_log.clone(),
        ),
        (
            "read-from-deleted-topic",
            vec![event(Event::DeletedRead {
                incarnation: 1,
                values: vec!["churn-1-0".into()],
            })],
            clean_log.clone(),
        ),
    ]
}

/// Anomalies of groups, topics, admins and liveness.
fn other_anomalies() -> Cases {
    let clean_log = clean_log();
    vec![
        (
            "recreated-topic-not-empty",
            vec![event(Event::ChurnRead {
                incarnation: 2,
                values: vec!["churn-1-0".into()],
                in_doubt: vec!["churn-1-1".into()],
            })],
            clean_log.clone(),
        ),
        (
            "epoch-regression",
            vec![
                metadata(1, 3, 1, 2),
                metadata(2, 3, 3, 4),
                metadata(1, 4, 5, 6),
                metadata(0, 2, 7, 8),
            ],
            clean_log.clone(),
        ),
        (
            "split-brain",
            vec![acked(0, "b", 1, 2), acked(0, "c", 2, 1)],
            clean_log.clone(),
        ),
        (
            "group-exclusivity",
            vec![
                event(Event::Assigned {
                    member: "m1".into(),
                    generation: 3,
                    partitions: vec![0, 1],
                }),
                event(Event::Assigned {
                    member: "m2".into(),
                    generation: 3,
                    partitions: vec![1, 2],
                }),
            ],
            clean_log.clone(),
        ),
        (
            "consumer-group-overlap",
            vec![
                holds(1, "m1", &[0, 1], 11),
                holds(2, "m2", &[2], 12),
                holds(3, "m2", &[1, 2], 13),
            ],
            clean_log.clone(),
        ),
        (
            "create-failed",
            vec![admin("t1", false, Some((56, "was damaged")), 0)],
            clean_log.clone(),
        ),
        (
            "create-failed",
            vec![admin("t1", false, Some((36, "")), 0)],
            clean_log.clone(),
        ),
        (
            "create-failed",
            vec![admin("t1:3", true, Some((56, "swept")), 0)],
            clean_log.clone(),
        ),
        (
            "create-failed",
            // Already exists is fine only for a name asked for before.
            vec![
                admin("t1", false, None, 0),
                admin("t2", false, Some((36, "")), 0),
            ],
            clean_log.clone(),
        ),
        (
            "new-topic-unwritable",
            vec![event(Event::NewTopicWritable {
                topic: "t".into(),
                answered: Duration::from_secs(10),
                writable: Duration::from_secs(27),
                settle: Duration::from_secs(1),
            })],
            clean_log.clone(),
        ),
        ("liveness", vec![], {
            let mut l = clean_log.clone();
            l.remove(&1);
            l
        }),
    ]
}

#[test]
fn each_anomaly_is_reported_alone_and_by_name() {
    for (expected, events, l) in log_anomalies().into_iter().chain(other_anomalies()) {
        let found = check(&events, &l);
        assert!(
            !found.is_empty() && names(&found).iter().all(|n| *n == expected),
            "expected only {expected}, got {found:#?}"
        );
    }
}

#[test]
fn a_quiet_history_breaks_nothing() {
    let clean_log = clean_log();
    let quiet = vec![
        event(Event::NewTopicWritable {
            topic: "t".into(),
            answered: Duration::from_secs(10),
            writable: Duration::from_secs(25),
            settle: Duration::from_secs(1),
        }),
        // Overlapping requests: the older answer was made before the
        // newer one, whatever the order of arrival.
        metadata(1, 3, 1, 2),
        metadata(1, 4, 3, 5),
        metadata(0, 3, 4, 6),
        // A commit that got no positive answer may land after a newer one.
        event(Event::Commit {
            group: "g".into(),
            partition: 1,
            offset: 1,
            acked: false,
        }),
        event(Event::Commit {
            group: "g".into(),
            partition: 1,
            offset: 2,
            acked: true,
        }),
        event(Event::Committed {
            group: "g".into(),
            partition: 1,
            offset: 1,
            sent: Duration::from_secs(1),
        }),
        acked(0, "a", 0, 1),
        acked(0, "b", 1, 1),
        poll(0, &[(0, "a"), (1, "b")]),
        poll(2, &[(2, "c")]),
        event(Event::Commit {
            group: "g".into(),
            partition: 0,
            offset: 2,
            acked: true,
        }),
        event(Event::Committed {
            group: "g".into(),
            partition: 0,
            offset: 2,
            sent: Duration::from_secs(1),
        }),
        event(Event::ChurnRead {
            incarnation: 3,
            values: vec!["churn-3-0".into(), "churn-2-1".into()],
            // A write of incarnation 2 that got no answer: a broker may
            // take it late, into whichever topic has the name by then.
            in_doubt: vec!["churn-2-1".into()],
        }),
        event(Event::DeletedRead {
            incarnation: 3,
            values: vec![],
        }),
        event(Event::Assigned {
            member: "m1".into(),
            generation: 3,
            partitions: vec![0],
        }),
        event(Event::Assigned {
            member: "m2".into(),
            generation: 3,
            partitions: vec![1, 2],
        }),
        event(Event::Assigned {
            member: "m2".into(),
            generation: 4,
            partitions: vec![0],
        }),
    ];
    let quiet = quiet
        .into_iter()
        .chain([
            admin("t1", false, Some((0, "")), 0),
            // No answer, then "exists": the first attempt went through.
            admin("t2", false, None, 0),
            admin("t2", false, Some((36, "")), 0),
            // A storage error while the volume injected I/O errors, then
            // "exists": the failed attempt may have been applied.
            admin("t3", false, Some((56, "EIO")), 2),
            admin("t3", false, Some((36, "")), 0),
            admin("t1:2", true, None, 0),
            admin("t1:2", true, Some((37, "already 2")), 0),
        ])
        .collect::<Vec<_>>();
    let clean = check(&quiet, &clean_log);
    assert!(clean.is_empty(), "{clean:?}");
}

/// An OffsetFetch of group `g` partition 0 sent at `sent` ms and answered
/// 10 ms later with `offset`.
fn served(sent: u64, offset: i64) -> (Duration, Event) {
    (
        Duration::from_millis(sent + 10),
        Event::Committed {
            group: "g".into(),
            partition: 0,
            offset,
            sent: Duration::from_millis(sent),
        },
    )
}

fn group_file(sent: u64, offset: i64) -> (Duration, Event) {
    (
        Duration::from_millis(sent + 10),
        Event::GroupOnVolume {
            group: "g".into(),
            sent: Duration::from_millis(sent),
            offsets: vec![(0, offset)],
            file_epoch: Some(1),
            newest_epoch: 1,
        },
    )
}

#[test]
fn an_offset_served_must_be_in_the_file_unless_a_lower_commit_came_after() {
    let l = logs(&[(0, &[(0, "a", 1)])]);
    // A commit of 9 failed (an error to its client), yet OffsetFetch
    // returned 9: the coordinator kept it in memory.
    let kept = vec![
        commit(1_000, 5, true),
        commit(2_000, 9, false),
        served(2_100, 9),
        group_file(2_500, 5),
    ];
    assert_eq!(names(&check(&kept, &l)), ["served-not-durable"]);
    // Read before the answer came: the file may be behind.
    let early = vec![
        commit(1_000, 5, true),
        group_file(1_950, 5),
        served(2_000, 9),
    ];
    assert!(check(&early, &l).is_empty());
    // Another member committed 5 after the fetch was sent (a lower
    // commit is legal), or a commit of 5 is still in doubt.
    for acked in [true, false] {
        let lower = vec![
            commit(1_000, 9, true),
            served(1_100, 9),
            commit(1_200, 5, acked),
            group_file(1_500, 5),
        ];
        assert!(check(&lower, &l).is_empty(), "{acked}");
    }
}

fn txn_init(ms: u64, producer: (i64, i16)) -> (Duration, Event) {
    (
        Duration::from_millis(ms),
        Event::TxnInit {
            client: "transactor-0".into(),
            transactional_id: "t".into(),
            from: None,
            producer,
        },
    )
}

fn txn_file(sent: u64, producer: Option<(i64, i16)>) -> (Duration, Event) {
    (
        Duration::from_millis(sent + 10),
        Event::TxnOnVolume {
            transactional_id: "t".into(),
            sent: Duration::from_millis(sent),
            producer,
            file_epoch: producer.map(|_| 1),
            newest_epoch: 1,
        },
    )
}

#[test]
fn a_transactional_id_file_holds_every_producer_handed_out_before_it_was_read() {
    let l = logs(&[(0, &[(0, "a", 1)])]);
    let kept = vec![
        txn_init(1_000, (7, 2)),
        txn_file(1_500, Some((7, 2))),
        // Bumped since (a timed-out transaction aborted): newer is fine.
        txn_file(2_000, Some((7, 3))),
        // Read before the next answer came.
        txn_file(2_500, Some((7, 3))),
        txn_init(2_600, (7, 4)),
    ];
    assert!(check(&kept, &l).is_empty());
    for lost in [None, Some((7, 1))] {
        let events = vec![txn_init(1_000, (7, 2)), txn_file(1_500, lost)];
        assert_eq!(
            names(&check(&events, &l)),
            ["txn-state-not-durable"],
            "{lost:?}"
        );
    }
    let forgotten = vec![txn_init(1_000, (7, 2)), txn_init(2_000, (8, 0))];
    assert_eq!(names(&check(&forgotten, &l)), ["txn-state-not-durable"]);
}
