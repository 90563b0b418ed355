//! Consumer-protocol groups (KIP-848) on the model NFS: what a coordinator
//! answered survives its failover, a member keeps its epoch and partitions
//! across it, a partition moves only once its holder let go, a deposed
//! coordinator answers nothing, and every refusal has Kafka's code.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::collections::BTreeSet;

use broker::groups::Coordinators;
use broker::groups::consumer::Topics;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DescribeGroupsRequest, GroupId, TopicName,
};
use tokio::time::Instant;
use uuid::Uuid;
use vfs::model::{ModelNfs, NfsConfig};

mod common;
use common::{assignment, commit_at, coordinator, s};

const TOPIC_ID: Uuid = Uuid::from_u128(7);

fn topics() -> Topics {
    [("t".to_owned(), (TOPIC_ID.to_string(), 4))].into()
}

fn beat(member: &str, epoch: i32, owned: Option<&[i32]>) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
        .with_subscribed_topic_names((epoch == 0).then(|| vec![TopicName(s("t"))]))
        .with_topic_partitions(owned.map(|ps| {
            vec![
                TopicPartitions::default()
                    .with_topic_id(TOPIC_ID)
                    .with_partitions(ps.to_vec()),
            ]
        }))
}

async fn send(
    c: &Coordinators,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    send_with(c, req, &topics()).await
}

/// [`send`] with the topics the coordinator sees.
async fn send_with(
    c: &Coordinators,
    req: ConsumerGroupHeartbeatRequest,
    topics: &Topics,
) -> ConsumerGroupHeartbeatResponse {
    c.consumer_group_heartbeat(req, 1, "client", topics, Instant::now())
        .await
}

/// The partitions an answer assigned, if it carried an assignment.
fn assigned(r: &ConsumerGroupHeartbeatResponse) -> Option<BTreeSet<i32>> {
    r.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().copied())
            .collect()
    })
}

async fn commit(c: &Coordinators, member: &str, epoch: i32, version: i16) -> i16 {
    commit_at(c, epoch, member, 5, version).await
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_failover_keeps_epochs_holders_and_pending_revocations() {
    let nfs = ModelNfs::new(NfsConfig::default(), 3);
    let first = coordinator(&nfs, 1).await;
    first.sync(&assignment(1, 1)).await;
    let a = send(&first, beat("a", 0, Some(&[]))).await;
    assert_eq!(a.error_code, 0);
    let a_owns = assigned(&a).unwrap();
    assert_eq!(a_owns.len(), 4);
    let b = send(&first, beat("b", 0, Some(&[]))).await;
    assert_eq!(assigned(&b), Some(BTreeSet::new()), "a holds everything");
    let owned: Vec<i32> = a_owns.iter().copied().collect();
    let revoke = send(&first, beat("a", a.member_epoch, Some(&owned))).await;
    let kept = assigned(&revoke).unwrap();
    assert_eq!(kept.len(), 2, "a is asked to give two up");

    // Broker 2 takes the slots over before a acknowledges.
    let second = coordinator(&nfs, 2).await;
    second.sync(&assignment(2, 2)).await;
    let b2 = send(&second, beat("b", b.member_epoch, Some(&[]))).await;
    assert_eq!(b2.error_code, 0, "b keeps its member epoch");
    assert!(
        assigned(&b2).is_none_or(|p| p.is_empty()),
        "the new coordinator knows a has not let go"
    );
    // a still lists all four: not an acknowledgement.
    let a2 = send(&second, beat("a", revoke.member_epoch, Some(&owned))).await;
    assert_eq!(a2.error_code, 0);
    let b3 = send(&second, beat("b", b.member_epoch, Some(&[]))).await;
    assert!(assigned(&b3).is_none_or(|p| p.is_empty()));
    let kept: Vec<i32> = kept.into_iter().collect();
    let a3 = send(&second, beat("a", revoke.member_epoch, Some(&kept))).await;
    assert!(a3.member_epoch > a.member_epoch, "acknowledged: a moves on");
    let b4 = send(&second, beat("b", b.member_epoch, Some(&[]))).await;
    let b_owns = assigned(&b4).unwrap();
    assert_eq!(b_owns.len(), 2);
    assert!(b_owns.iter().all(|p| !kept.contains(p)));
    assert_eq!(commit(&second, "b", b4.member_epoch, 9).await, 0);

    // The deposed coordinator answers nothing.
    let zombie = send(&first, beat("a", a3.member_epoch, Some(&kept))).await;
    assert_eq!(zombie.error_code, ResponseError::NotCoordinator.code());
    assert_eq!(
        commit(&first, "b", b4.member_epoch, 9).await,
        ResponseError::NotCoordinator.code()
    );
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn refusals_have_kafkas_codes() {
    let nfs = ModelNfs::new(NfsConfig::default(), 3);
    let c = coordinator(&nfs, 1).await;
    c.sync(&assignment(1, 1)).await;
    let code = |r: ConsumerGroupHeartbeatResponse| r.error_code;
    let joined = send(&c, beat("a", 0, Some(&[]))).await;
    let epoch = joined.member_epoch;
    let cases: Vec<(&str, ConsumerGroupHeartbeatRequest, ResponseError)> = vec![
        (
            "empty group id",
            beat("a", 0, None).with_group_id(GroupId(s(""))),
            ResponseError::InvalidGroupId,
        ),
        (
            "v1 without a member id",
            beat("", 0, None),
            ResponseError::InvalidRequest,
        ),
        (
            "join without a subscription",
            beat("x", 0, None).with_subscribed_topic_names(None),
            ResponseError::InvalidRequest,
        ),
        (
            "unknown member",
            beat("x", 3, Some(&[])),
            ResponseError::UnknownMemberId,
        ),
        (
            "epoch ahead",
            beat("a", epoch + 5, Some(&[])),
            ResponseError::FencedMemberEpoch,
        ),
        (
            "negative epoch",
            beat("a", -3, None),
            ResponseError::InvalidRequest,
        ),
        (
            "unknown assignor",
            beat("y", 0, None).with_server_assignor(Some(s("sticky"))),
            ResponseError::UnsupportedAssignor,
        ),
        (
            "bad regex",
            beat("y", 0, None).with_subscribed_topic_regex(Some(s("("))),
            ResponseError::InvalidRegularExpression,
        ),
        (
            "leave of a stranger",
            beat("x", -1, None),
            ResponseError::UnknownMemberId,
        ),
    ];
    for (what, req, expected) in cases {
        assert_eq!(code(send(&c, req).await), expected.code(), "{what}");
    }
    // v0 names a member that comes without an id.
    let v0 = c
        .consumer_group_heartbeat(
            beat("", 0, Some(&[])),
            0,
            "client",
            &topics(),
            Instant::now(),
        )
        .await;
    assert_eq!(v0.error_code, 0);
    assert!(!v0.member_id.unwrap().is_empty());

    // Commits of a consumer-protocol member: v9+, in its current epoch.
    assert_eq!(
        commit(&c, "a", epoch, 8).await,
        ResponseError::UnsupportedVersion.code()
    );
    assert_eq!(
        commit(&c, "a", epoch - 1, 9).await,
        ResponseError::StaleMemberEpoch.code()
    );
    assert_eq!(
        commit(&c, "x", epoch, 9).await,
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(commit(&c, "a", epoch, 9).await, 0);

    // Described by ConsumerGroupDescribe; DescribeGroups refuses it, as in
    // Kafka; an unknown group is GROUP_ID_NOT_FOUND.
    let d = c
        .consumer_group_describe(
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(s("g")), GroupId(s("nope"))]),
            &topics(),
        )
        .await;
    assert_eq!(d.groups[0].error_code, 0);
    assert!(
        d.groups[0]
            .members
            .iter()
            .any(|m| m.member_id.as_str() == "a")
    );
    assert_eq!(
        d.groups[1].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    let classic = c
        .describe_groups(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
            5,
        )
        .await;
    assert_eq!(
        classic.groups[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
}

/// A heartbeat of the member's previous epoch (its answer was lost, or a
/// paused broker takes it up late) says what the member owned before the
/// revocation its current epoch announced: it cannot acknowledge that
/// revocation. Taken as one, it handed a partition to another member while
/// the first still consumed it (simulator seed 248, holding-not-durable).
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_previous_epochs_heartbeat_does_not_acknowledge_a_revocation() {
    let nfs = ModelNfs::new(NfsConfig::default(), 3);
    let c = coordinator(&nfs, 1).await;
    c.sync(&assignment(1, 1)).await;
    let small = topics();
    let grown: Topics = [("t".to_owned(), (TOPIC_ID.to_string(), 8))].into();
    let a1 = send_with(&c, beat("a", 0, Some(&[])), &small).await;
    let four: Vec<i32> = assigned(&a1).unwrap().into_iter().collect();
    assert_eq!(four.len(), 4);
    // The topic grows: a is given four more, a new epoch with no revocation.
    let a2 = send_with(&c, beat("a", a1.member_epoch, Some(&four)), &grown).await;
    assert!(a2.member_epoch > a1.member_epoch);
    let eight: Vec<i32> = assigned(&a2).unwrap().into_iter().collect();
    assert_eq!(eight.len(), 8);
    let b = send_with(&c, beat("b", 0, Some(&[])), &grown).await;
    assert_eq!(b.error_code, 0);
    let revoke = send_with(&c, beat("a", a2.member_epoch, Some(&eight)), &grown).await;
    let kept = assigned(&revoke).unwrap();
    assert_eq!(kept.len(), 4, "a is asked to give four up");

    // The previous epoch's heartbeat, owning nothing yet, arrives late.
    let stale = send_with(&c, beat("a", a1.member_epoch, Some(&[])), &grown).await;
    assert_eq!(stale.error_code, 0, "a lost answer is forgiven");
    let b2 = send_with(&c, beat("b", b.member_epoch, Some(&[])), &grown).await;
    assert!(
        assigned(&b2).is_none_or(|p| p.is_empty()),
        "a has not let go of anything: {:?}",
        assigned(&b2)
    );
    // Its own epoch's heartbeat listing what it kept is the acknowledgement.
    let kept: Vec<i32> = kept.into_iter().collect();
    let a3 = send_with(&c, beat("a", revoke.member_epoch, Some(&kept)), &grown).await;
    assert_eq!(a3.error_code, 0);
    let b3 = send_with(&c, beat("b", b.member_epoch, Some(&[])), &grown).await;
    let b_owns = assigned(&b3).unwrap();
    assert_eq!(b_owns.len(), 4);
    assert!(b_owns.iter().all(|p| !kept.contains(p)));
}
