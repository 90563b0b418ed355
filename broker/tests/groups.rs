//! Group coordinators on the model NFS: a coordinator failover keeps every
//! acknowledged commit and the members' generation, and a deposed
//! coordinator can neither acknowledge nor damage anything.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use broker::cluster::assignment::COORDINATOR_SLOTS;
use broker::groups::Coordinators;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use vfs::model::{ModelNfs, NfsConfig};

mod common;
use common::{assignment, commit_at, coordinator, s};

async fn commit(c: &Coordinators, generation: i32, member: &str, offset: i64) -> i16 {
    commit_at(c, generation, member, offset, 8).await
}

async fn committed(c: &Coordinators) -> i64 {
    let (code, offset) = fetched(c).await;
    assert_eq!(code, 0);
    offset
}

/// OffsetFetch of the group's one partition: (error code, offset).
async fn fetched(c: &Coordinators) -> (i16, i64) {
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partition_indexes(vec![0]),
        ]));
    let r = c.offset_fetch(req, 7).await;
    let offset = r
        .topics
        .first()
        .map_or(-1, |t| t.partitions[0].committed_offset);
    (r.error_code, offset)
}

/// Joins a one-member generation and returns (member id, generation).
async fn join(c: &Coordinators) -> (String, i32) {
    let req = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(s(member))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(s("range"))
                    .with_metadata(bytes::Bytes::from_static(b"meta")),
            ])
    };
    let first = c.join_group(req(""), 7, "client").await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    let member = first.member_id.as_str().to_owned();
    let joined = c.join_group(req(&member), 7, "client").await;
    assert_eq!(joined.error_code, 0);
    let generation = joined.generation_id;
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(generation)
        .with_member_id(s(&member))
        .with_assignments(vec![
            SyncGroupRequestAssignment::default()
                .with_member_id(s(&member))
                .with_assignment(bytes::Bytes::from_static(b"t-0")),
        ]);
    let synced = c.sync_group(sync, 5).await;
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment.as_ref(), b"t-0");
    (member, generation)
}

async fn heartbeat(c: &Coordinators, member: &str, generation: i32) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(generation)
        .with_member_id(s(member));
    c.heartbeat(req).await.error_code
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_coordinator_failover_keeps_acknowledged_commits_and_the_generation() {
    let nfs = ModelNfs::new(NfsConfig::default(), 3);
    let first = coordinator(&nfs, 1).await;
    first.sync(&assignment(1, 1)).await;
    let (member, generation) = join(&first).await;
    assert_eq!(commit(&first, generation, &member, 10).await, 0);
    assert_eq!(
        commit(&first, generation, "stranger", 11).await,
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        commit(&first, generation + 1, &member, 11).await,
        ResponseError::IllegalGeneration.code()
    );

    // Broker 2 takes the slots over; broker 1 has not noticed (a zombie).
    let second = coordinator(&nfs, 2).await;
    second.sync(&assignment(2, 2)).await;
    assert_eq!(
        committed(&second).await,
        10,
        "the acknowledged commit survived"
    );
    assert_eq!(
        heartbeat(&second, &member, generation).await,
        0,
        "the member keeps its generation"
    );
    assert_eq!(commit(&second, generation, &member, 20).await, 0);
    assert_eq!(
        fetched(&first).await.0,
        ResponseError::NotCoordinator.code(),
        "the zombie answers no offsets from before its successor's commits"
    );
    assert_eq!(
        commit(&first, generation, &member, 99).await,
        ResponseError::NotCoordinator.code(),
        "the zombie acknowledges nothing"
    );

    // A third coordinator sees the second's commit, not the zombie's late write.
    let third = coordinator(&nfs, 3).await;
    third.sync(&assignment(3, 3)).await;
    assert_eq!(committed(&third).await, 20);
    // The stepped-down coordinators answer NOT_COORDINATOR.
    second.sync(&assignment(3, 3)).await;
    assert_eq!(
        commit(&second, generation, &member, 30).await,
        ResponseError::NotCoordinator.code()
    );
}

/// Under hostile NFS faults (lost replies, stale caches, write-back,
/// silly-renames), every commit a coordinator acknowledged is what its
/// successor reads, however many coordinators came and went.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn acknowledged_commits_survive_every_handover_under_hostile_faults() {
    for seed in 0..10 {
        let nfs = ModelNfs::new(NfsConfig::hostile_without_errors(), seed);
        let mut last_acked = -1;
        let mut zombie: Option<Coordinators> = None;
        for epoch in 1..=6u32 {
            let broker = (epoch % 3) + 1;
            let c = coordinator(&nfs, broker + 10 * epoch).await;
            let mut tries = 0;
            while c.led().len() < COORDINATOR_SLOTS as usize && tries < 20 {
                c.sync(&assignment(broker + 10 * epoch, epoch)).await;
                tries += 1;
            }
            let seen = if c.slot_for("g").is_ok() {
                committed(&c).await
            } else {
                continue; // the takeover never got through; next epoch
            };
            assert!(
                seen >= last_acked,
                "seed {seed} epoch {epoch}: read {seen}, acknowledged {last_acked}"
            );
            for i in 0..3 {
                let offset = i64::from(epoch) * 100 + i;
                if commit(&c, -1, "", offset).await == 0 {
                    last_acked = offset;
                }
                // The previous coordinator, still running, tries too.
                if let Some(z) = &zombie {
                    assert_ne!(commit(z, -1, "", offset + 50).await, 0, "seed {seed}");
                }
            }
            zombie = Some(c);
        }
        assert!(last_acked > 0, "seed {seed}: nothing was ever acknowledged");
    }
}
