//! ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) over the
//! slots this broker coordinates.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member, TopicPartitions as DescribedTps,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;
use uuid::Uuid;

use super::Coordinators;
use super::assignor::Tp;
use super::consumer::{self, Beat, ConsumerGroup, Topics};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn opt(v: &Option<StrBytes>) -> Option<String> {
    v.as_ref().map(|x| x.as_str().to_owned())
}

fn uuid(id: &str) -> Uuid {
    Uuid::parse_str(id).unwrap_or(Uuid::nil())
}

/// Partitions by topic id, for the wire; topics without a known id (gone)
/// are left out.
fn by_id(tps: &BTreeSet<Tp>, topics: &Topics) -> BTreeMap<Uuid, Vec<i32>> {
    let mut out: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
    for (t, p) in tps {
        if let Some((id, _)) = topics.get(t) {
            out.entry(uuid(id)).or_default().push(*p);
        }
    }
    out
}

impl Coordinators {
    /// `topics`: every topic of the cluster, name -> (id, partitions), as
    /// the controller's assignment has them; `arrived`: when the request
    /// reached this broker (stale requests are told apart by it).
    pub async fn consumer_group_heartbeat(
        &self,
        req: ConsumerGroupHeartbeatRequest,
        version: i16,
        client_id: &str,
        topics: &Topics,
        arrived: Instant,
    ) -> ConsumerGroupHeartbeatResponse {
        let fail = |(code, why): (i16, String)| {
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(code)
                .with_error_message(Some(s(&why)))
                .with_member_epoch(-1)
        };
        let group_id = req.group_id.as_str().to_owned();
        if group_id.is_empty() {
            return fail((
                ResponseError::InvalidGroupId.code(),
                "GroupId can't be empty".into(),
            ));
        }
        let mut member_id = req.member_id.as_str().to_owned();
        if member_id.is_empty() {
            // v1+ clients name themselves (KIP-1082); v0 ones are named here.
            if version >= 1 || req.member_epoch != consumer::JOIN {
                return fail((
                    ResponseError::InvalidRequest.code(),
                    "MemberId can't be empty".into(),
                ));
            }
            let v: u128 = madsim::rand::random();
            member_id = Uuid::from_u128(v).to_string();
        }
        let slot = match self.slot_for(&group_id) {
            Ok(s) => s,
            Err(e) => return fail((e, "not the coordinator of this group".into())),
        };
        let beat = beat_of(&req, member_id, client_id, topics);
        let mut groups = slot.groups.lock().await;
        let entry = match slot.entry(&mut groups, &group_id, true).await {
            Ok(Some(e)) => e,
            Ok(None) => {
                return fail((
                    ResponseError::CoordinatorNotAvailable.code(),
                    "group not loaded".into(),
                ));
            }
            Err(e) => return fail((e, "group not loaded".into())),
        };
        if entry.group.consumer.is_none() {
            if !entry.group.is_empty() {
                return fail((
                    ResponseError::GroupIdNotFound.code(),
                    format!("group {group_id} is a classic group with members"),
                ));
            }
            entry.group.consumer = Some(ConsumerGroup::default());
        }
        let Some(group) = entry.group.consumer.as_mut() else {
            return fail((
                ResponseError::CoordinatorNotAvailable.code(),
                "group not loaded".into(),
            ));
        };
        let before = group.clone();
        let answer = match group.heartbeat(beat, topics, arrived) {
            Ok(a) => a,
            // A deposed coordinator's refusal (FENCED_MEMBER_EPOCH from its
            // old view) would make a healthy member drop everything.
            Err(refusal) => {
                return match slot.confirm().await {
                    Ok(()) => fail(refusal),
                    Err(e) => fail((e, "no longer the coordinator".into())),
                };
            }
        };
        if group.state != before.state {
            // Nothing is answered that a new coordinator would not find.
            let record = entry.group.record();
            if let Err(e) = slot.persist(entry, &record).await {
                entry.group.consumer = Some(before);
                return fail((e, "the group could not be saved".into()));
            }
        } else if let Err(e) = slot.confirm().await {
            return fail((e, "no longer the coordinator".into()));
        }
        let interval = self.config.consumer.heartbeat_interval.as_millis() as i32;
        answered(answer, interval, topics)
    }

    pub async fn consumer_group_describe(
        &self,
        req: ConsumerGroupDescribeRequest,
        topics: &Topics,
    ) -> ConsumerGroupDescribeResponse {
        let mut out = Vec::new();
        for id in req.group_ids {
            let described = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(i32::MIN);
            let not_found = |why: String| {
                described
                    .clone()
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(s(&why)))
            };
            let slot = match self.slot_for(id.as_str()) {
                Ok(s) => s,
                Err(e) => {
                    out.push(described.with_error_code(e));
                    continue;
                }
            };
            let mut groups = slot.groups.lock().await;
            out.push(match slot.entry(&mut groups, id.as_str(), false).await {
                Err(e) => described.with_error_code(e),
                Ok(None) => not_found(format!("group {} does not exist", id.as_str())),
                Ok(Some(entry)) => match &entry.group.consumer {
                    None => not_found(format!("group {} is not a consumer group", id.as_str())),
                    Some(c) => describe(c, described, topics),
                },
            });
        }
        ConsumerGroupDescribeResponse::default().with_groups(out)
    }
}

fn described_assignment(tps: &BTreeSet<Tp>, topics: &Topics) -> DescribedAssignment {
    let mut by_topic: BTreeMap<&String, Vec<i32>> = BTreeMap::new();
    for (t, p) in tps {
        by_topic.entry(t).or_default().push(*p);
    }
    DescribedAssignment::default().with_topic_partitions(
        by_topic
            .into_iter()
            .map(|(t, partitions)| {
                DescribedTps::default()
                    .with_topic_id(topics.get(t).map_or(Uuid::nil(), |(id, _)| uuid(id)))
                    .with_topic_name(TopicName(s(t)))
                    .with_partitions(partitions)
            })
            .collect(),
    )
}

fn describe(c: &ConsumerGroup, d: DescribedGroup, topics: &Topics) -> DescribedGroup {
    let st = &c.state;
    d.with_group_state(s(c.state_name()))
        .with_group_epoch(st.epoch)
        .with_assignment_epoch(st.assignment_epoch)
        .with_assignor_name(s(&st.assignor))
        .with_members(
            st.members
                .iter()
                .filter(|(_, m)| !m.left)
                .map(|(id, m)| {
                    Member::default()
                        .with_member_id(s(id))
                        .with_instance_id(m.instance_id.as_deref().map(s))
                        .with_rack_id(m.rack_id.as_deref().map(s))
                        .with_member_epoch(m.epoch)
                        .with_client_id(s(&m.client_id))
                        .with_client_host(s(&m.client_host))
                        .with_subscribed_topic_names(
                            m.subscribed.iter().map(|t| TopicName(s(t))).collect(),
                        )
                        .with_subscribed_topic_regex(m.regex.as_deref().map(s))
                        .with_assignment(described_assignment(&m.assigned, topics))
                        .with_target_assignment(described_assignment(&m.target, topics))
                        // 1: the consumer protocol (v1's MemberType).
                        .with_member_type(1)
                })
                .collect(),
        )
}

/// What a ConsumerGroupHeartbeat says of its member.
fn beat_of(
    req: &ConsumerGroupHeartbeatRequest,
    member_id: String,
    client_id: &str,
    topics: &Topics,
) -> Beat {
    // The member's partitions by name. A list naming a topic id this
    // broker cannot name (deleted, or not in its assignment yet) says
    // nothing: read as "owns nothing" it would acknowledge revocations
    // of partitions the member may still hold.
    let names: BTreeMap<Uuid, &String> = topics.iter().map(|(n, (id, _))| (uuid(id), n)).collect();
    let owned = req.topic_partitions.as_ref().and_then(|tps| {
        let mut owned = BTreeSet::new();
        for t in tps.iter().filter(|t| !t.partitions.is_empty()) {
            let name = names.get(&t.topic_id)?;
            owned.extend(t.partitions.iter().map(|p| ((*name).clone(), *p)));
        }
        Some(owned)
    });
    Beat {
        member_id,
        epoch: req.member_epoch,
        instance_id: opt(&req.instance_id),
        rack_id: opt(&req.rack_id),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed: req
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.as_str().to_owned()).collect()),
        regex: opt(&req.subscribed_topic_regex),
        server_assignor: opt(&req.server_assignor),
        owned,
        client_id: client_id.to_owned(),
        client_host: String::new(),
    }
}

/// The answer to a heartbeat the group took.
fn answered(
    answer: consumer::Answer,
    interval: i32,
    topics: &Topics,
) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(s(&answer.member_id)))
        .with_member_epoch(answer.epoch)
        .with_heartbeat_interval_ms(interval)
        .with_assignment(answer.assignment.map(|a| {
            Assignment::default().with_topic_partitions(
                by_id(&a, topics)
                    .into_iter()
                    .map(|(id, partitions)| {
                        TopicPartitions::default()
                            .with_topic_id(id)
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_go_out_by_topic_id() {
        let topics: Topics = [(
            "t".to_owned(),
            ("00000000-0000-0000-0000-000000000007".to_owned(), 2),
        )]
        .into();
        let tps: BTreeSet<Tp> = [("t".into(), 1), ("t".into(), 0), ("gone".into(), 0)].into();
        let out = by_id(&tps, &topics);
        assert_eq!(out.len(), 1);
        assert_eq!(out[&Uuid::from_u128(7)], vec![0, 1]);
    }
}
