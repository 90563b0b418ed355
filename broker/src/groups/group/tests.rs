use super::*;

fn req(member_id: &str) -> JoinRequest {
    JoinRequest {
        member_id: member_id.to_owned(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(30),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"m"))],
        require_known_member_id: true,
    }
}

fn join_now(g: &mut Group, member: &str, now: Instant) -> Joined {
    let id = member.to_owned();
    g.join(req(member), now, move || id, Duration::ZERO)
}

#[tokio::test(start_paused = true)]
async fn two_members_complete_a_generation_and_a_leave_rebalances() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let Joined::Now(r) = g.join(req(""), now, || "a".into(), Duration::ZERO) else {
        panic!("member id required first")
    };
    assert_eq!(r.error, ResponseError::MemberIdRequired.code());
    let Joined::Wait(a) = join_now(&mut g, "a", now) else {
        panic!()
    };
    // Alone and past the (zero) initial delay: completes at once.
    let a = a.await.unwrap();
    assert_eq!((a.error, a.generation, a.leader.as_str()), (0, 1, "a"));
    assert_eq!(a.members.len(), 1);
    let Synced::Complete(s) = g.sync(
        "a",
        None,
        1,
        vec![("a".into(), Bytes::from_static(b"p0"))],
        now,
    ) else {
        panic!()
    };
    g.release_sync(0, now, Duration::ZERO);
    assert_eq!(s.await.unwrap().assignment, Bytes::from_static(b"p0"));
    assert_eq!(g.phase, Phase::Stable);

    // A second member: the first learns of the rebalance by heartbeat.
    g.pending.insert("b".into(), now + Duration::from_secs(10));
    let Joined::Wait(b) = join_now(&mut g, "b", now) else {
        panic!()
    };
    assert_eq!(
        g.heartbeat("a", None, 1, now),
        ResponseError::RebalanceInProgress.code()
    );
    let Joined::Wait(a) = join_now(&mut g, "a", now) else {
        panic!()
    };
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!((a.generation, b.generation), (2, 2));
    assert_eq!(a.members.len(), 2, "the leader gets the roster");
    assert!(b.members.is_empty());
    assert_eq!(
        g.check_commit("a", None, 1, 9),
        Err(ResponseError::RebalanceInProgress.code())
    );
    let Synced::Wait(sb) = g.sync("b", None, 2, vec![], now) else {
        panic!()
    };
    let Synced::Complete(sa) = g.sync(
        "a",
        None,
        2,
        vec![("b".into(), Bytes::from_static(b"p1"))],
        now,
    ) else {
        panic!()
    };
    g.release_sync(0, now, Duration::ZERO);
    assert_eq!(sb.await.unwrap().assignment, Bytes::from_static(b"p1"));
    assert!(
        sa.await.unwrap().assignment.is_empty(),
        "empty assignments are valid"
    );
    assert_eq!(
        g.check_commit("a", None, 1, 9),
        Err(ResponseError::IllegalGeneration.code())
    );
    assert_eq!(g.check_commit("a", None, 2, 9), Ok(()));
    assert_eq!(
        g.check_commit("zz", None, 2, 9),
        Err(ResponseError::UnknownMemberId.code())
    );

    let (errors, emptied) = g.leave(&[("b".into(), None)], now, Duration::ZERO);
    assert_eq!((errors, emptied), (vec![0], false));
    assert_eq!(g.phase, Phase::Preparing);
}

#[tokio::test(start_paused = true)]
async fn silent_members_expire_and_the_round_completes_without_them() {
    let now = Instant::now();
    let delay = Duration::from_secs(1);
    let mut g = Group::new("g");
    for m in ["a", "b"] {
        g.pending.insert(m.into(), now + Duration::from_secs(10));
        let Joined::Wait(_) = g.join(req(m), now, || m.to_owned(), delay) else {
            panic!()
        };
    }
    assert_eq!(
        g.phase,
        Phase::Preparing,
        "a new group waits the initial delay"
    );
    assert!(!g.tick(now + delay, delay));
    assert_eq!(
        (g.phase, g.generation, g.members.len()),
        (Phase::Completing, 1, 2)
    );
    // Neither syncs nor heartbeats: both expire, the group empties.
    assert!(!g.tick(now + Duration::from_secs(5), delay));
    assert!(g.tick(now + Duration::from_secs(12), delay));
    assert_eq!((g.phase, g.generation), (Phase::Empty, 2));
    assert_eq!(
        g.check_commit("", None, -1, 9),
        Ok(()),
        "manual commits once empty"
    );
}

#[tokio::test(start_paused = true)]
async fn a_restarted_static_member_fences_its_old_id() {
    let now = Instant::now();
    let mut g = Group::new("g");
    let mut r = req("");
    r.instance_id = Some("host-1".into());
    let Joined::Wait(first) = g.join(r, now, || "old".into(), Duration::ZERO) else {
        panic!()
    };
    assert_eq!(first.await.unwrap().member_id, "old");
    let mut r = req("");
    r.instance_id = Some("host-1".into());
    let Joined::Wait(second) = g.join(r, now, || "new".into(), Duration::ZERO) else {
        panic!()
    };
    assert_eq!(second.await.unwrap().member_id, "new");
    assert_eq!(
        g.heartbeat("old", Some("host-1"), g.generation, now),
        ResponseError::FencedInstanceId.code()
    );
}

/// Two static members through one round: `(group, leader's id, other's id)`.
async fn stable_static_pair(now: Instant) -> (Group, String, String) {
    let mut g = Group::new("g");
    let mut waits = Vec::new();
    for (host, id) in [("host-a", "a1"), ("host-b", "b1")] {
        let mut r = req("");
        r.instance_id = Some(host.into());
        let Joined::Wait(w) = g.join(r, now, || id.to_owned(), Duration::from_secs(1)) else {
            panic!()
        };
        waits.push(w);
    }
    assert!(!g.tick(now + Duration::from_secs(1), Duration::from_secs(1)));
    let joined: Vec<JoinResult> = vec![
        waits.remove(0).await.unwrap(),
        waits.remove(0).await.unwrap(),
    ];
    let leader = joined[0].leader.clone();
    let other = if leader == "a1" { "b1" } else { "a1" };
    let Synced::Wait(so) = g.sync(other, None, 1, vec![], now) else {
        panic!()
    };
    let given = vec![
        ("a1".to_owned(), Bytes::from_static(b"pa")),
        ("b1".to_owned(), Bytes::from_static(b"pb")),
    ];
    let Synced::Complete(sl) = g.sync(&leader, None, 1, given, now) else {
        panic!()
    };
    g.release_sync(0, now, Duration::ZERO);
    sl.await.unwrap();
    so.await.unwrap();
    assert_eq!((g.phase, g.generation), (Phase::Stable, 1));
    (g, leader, other.to_owned())
}

#[tokio::test(start_paused = true)]
async fn a_static_member_restarting_into_a_stable_group_keeps_its_assignment_without_a_rebalance() {
    let now = Instant::now();
    let (mut g, leader, other) = stable_static_pair(now).await;
    let host = if other == "a1" { "host-a" } else { "host-b" };
    let mut r = req("");
    r.instance_id = Some(host.into());
    let Joined::Now(back) = g.join(r, now, || "restarted".into(), Duration::ZERO) else {
        panic!("a static rejoin with the same protocols waits for no rebalance")
    };
    assert_eq!(
        (back.error, back.generation, back.member_id.as_str()),
        (0, 1, "restarted")
    );
    assert_eq!(back.leader, leader);
    assert!(back.members.is_empty() && !back.skip_assignment);
    assert_eq!(
        (g.phase, g.generation),
        (Phase::Stable, 1),
        "nobody else rebalances"
    );
    assert_eq!(g.heartbeat(&leader, None, 1, now), 0);
    let Synced::Now(again) = g.sync("restarted", Some(host), 1, vec![], now) else {
        panic!()
    };
    let want = if other == "a1" {
        &b"pa"[..]
    } else {
        &b"pb"[..]
    };
    assert_eq!(again.assignment, Bytes::from_static(want));
    assert_eq!(
        g.heartbeat(&other, Some(host), 1, now),
        ResponseError::FencedInstanceId.code(),
        "the old process is fenced"
    );
}

#[tokio::test(start_paused = true)]
async fn a_static_leader_restarting_is_told_to_skip_the_assignment() {
    let now = Instant::now();
    let (mut g, leader, _) = stable_static_pair(now).await;
    let host = if leader == "a1" { "host-a" } else { "host-b" };
    let mut r = req("");
    r.instance_id = Some(host.into());
    let Joined::Now(back) = g.join(r, now, || "new-leader".into(), Duration::ZERO) else {
        panic!()
    };
    assert_eq!(
        (back.leader.as_str(), back.skip_assignment),
        ("new-leader", true)
    );
    assert_eq!(back.members.len(), 2, "the leader still learns the roster");
    assert_eq!(g.phase, Phase::Stable);
}

#[tokio::test(start_paused = true)]
async fn a_static_member_coming_back_with_other_protocols_rebalances() {
    let now = Instant::now();
    let (mut g, _, other) = stable_static_pair(now).await;
    let host = if other == "a1" { "host-a" } else { "host-b" };
    let mut r = req("");
    r.instance_id = Some(host.into());
    r.protocols = vec![("range".into(), Bytes::from_static(b"other topics"))];
    let Joined::Wait(_) = g.join(r, now, || "changed".into(), Duration::ZERO) else {
        panic!("new subscriptions need a new assignment")
    };
    assert_eq!(g.phase, Phase::Preparing);
}

fn pend(g: &mut Group, pid: i64, epoch: i16, offset: i64) {
    let key = ("t".to_owned(), 0);
    let record = OffsetRecord {
        topic: key.0.clone(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: None,
        commit_ms: 0,
    };
    g.pending_txn.insert(pid, (epoch, [(key, record)].into()));
}

fn marker(coordinator_epoch: i32, producer_epoch: i16, commit: bool) -> TxnMarker {
    TxnMarker {
        producer_id: 7,
        producer_epoch,
        coordinator_epoch,
        commit,
    }
}

fn committed(g: &Group) -> Option<i64> {
    g.offsets.get(&("t".to_owned(), 0)).map(|o| o.offset)
}

/// Seed 183 of the swarm, on the group side: a deposed transaction
/// coordinator's late marker must not end the offsets of a transaction
/// its successor handles, even when the successor's own marker found
/// nothing pending here.
#[test]
fn a_deposed_coordinators_marker_ends_nothing() {
    let mut g = Group::new("g");
    // The successor (coordinator epoch 3) ends a transaction without
    // offsets here: remembered all the same.
    assert_eq!(g.end_txn(marker(3, 0, true)), Ok(true));
    pend(&mut g, 7, 0, 10);
    assert_eq!(
        g.end_txn(marker(2, 1, false)),
        Err(MarkerRefused::ZombieCoordinator)
    );
    assert_eq!(g.pending_txn_partitions().len(), 1, "still pending");
    assert_eq!(g.end_txn(marker(3, 0, true)), Ok(true));
    assert_eq!(committed(&g), Some(10));
    // Survives the group file.
    let mut back = Group::from_record(g.record(), Instant::now());
    pend(&mut back, 7, 1, 20);
    assert_eq!(
        back.end_txn(marker(2, 1, true)),
        Err(MarkerRefused::ZombieCoordinator)
    );
    assert_eq!(committed(&back), Some(10));
}

#[test]
fn a_marker_for_an_older_producer_epoch_leaves_the_newer_offsets_pending() {
    let mut g = Group::new("g");
    pend(&mut g, 7, 2, 10);
    assert_eq!(
        g.end_txn(marker(1, 1, true)),
        Err(MarkerRefused::StaleEpoch)
    );
    assert_eq!(committed(&g), None);
    // The coordinator's abort after it bumped the epoch ends them.
    assert_eq!(g.end_txn(marker(1, 3, false)), Ok(true));
    assert_eq!(committed(&g), None);
    assert!(g.pending_txn_partitions().is_empty());
    assert_eq!(g.end_txn(marker(1, 3, false)), Ok(false), "a repeat");
}
