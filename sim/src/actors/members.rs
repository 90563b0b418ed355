//! Simulated consumer-group members: they join a group through the
//! coordinator (KIP-394 member ids, the leader assigns), heartbeat, consume
//! the partitions of their generation from the committed offsets, commit
//! as members of that generation, and rejoin when told to. `member-1` is a
//! static member (KIP-345) that now and then restarts: it forgets its
//! member id without leaving and joins again under its instance id, which
//! in a stable group gives it its partitions back in the same generation.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, RequestKind,
    ResponseKind, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;

use crate::actors::{Actor, Play, Role, Stage};
use crate::history::Event;
use crate::session::Session;
use crate::workload::{PARTITIONS, TOPIC};

pub(crate) const MEMBER_GROUP: &str = "sim-members";
const MEMBER_ID_REQUIRED: i16 = 79;

fn text(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A generation this member is part of.
struct Membership {
    member_id: String,
    generation: i32,
    partitions: Vec<i32>,
}

/// The leader's assignment: partitions dealt round robin over the members
/// in member id order, encoded as a comma-separated list.
fn assign(members: &[String]) -> Vec<(String, Bytes)> {
    let mut sorted = members.to_vec();
    sorted.sort();
    sorted
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mine: Vec<String> = (0..PARTITIONS)
                .filter(|p| *p as usize % sorted.len() == i)
                .map(|p| p.to_string())
                .collect();
            (m.clone(), Bytes::from(mine.join(",")))
        })
        .collect()
}

fn decode(assignment: &[u8]) -> Vec<i32> {
    String::from_utf8_lossy(assignment)
        .split(',')
        .filter_map(|p| p.parse().ok())
        .collect()
}

async fn join(
    s: &mut Session,
    member_id: &mut String,
    instance: Option<&str>,
) -> Option<Membership> {
    let to = s.coordinator().await?;
    let req = JoinGroupRequest::default()
        .with_group_id(GroupId(text(MEMBER_GROUP)))
        .with_group_instance_id(instance.map(text))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(text(member_id))
        .with_protocol_type(text("sim"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(text("round-robin"))
                .with_metadata(Bytes::new()),
        ]);
    let joined = match s
        .client
        .call(to, ApiKey::JoinGroup, 5, RequestKind::JoinGroup(req))
        .await
    {
        Ok(ResponseKind::JoinGroup(r)) => r,
        _ => {
            s.lost_coordinator();
            return None;
        }
    };
    if joined.error_code == MEMBER_ID_REQUIRED {
        *member_id = joined.member_id.as_str().to_owned();
        return None; // join again with it
    }
    if joined.error_code != 0 {
        if joined.error_code == 25 {
            member_id.clear(); // UNKNOWN_MEMBER_ID: start over
        } else {
            s.lost_coordinator();
        }
        return None;
    }
    *member_id = joined.member_id.as_str().to_owned();
    let generation = joined.generation_id;
    let assignments = if joined.leader == joined.member_id {
        let members: Vec<String> = joined
            .members
            .iter()
            .map(|m| m.member_id.as_str().to_owned())
            .collect();
        assign(&members)
            .into_iter()
            .map(|(m, a)| {
                SyncGroupRequestAssignment::default()
                    .with_member_id(text(&m))
                    .with_assignment(a)
            })
            .collect()
    } else {
        Vec::new()
    };
    let req = SyncGroupRequest::default()
        .with_group_id(GroupId(text(MEMBER_GROUP)))
        .with_generation_id(generation)
        .with_member_id(text(member_id))
        .with_group_instance_id(instance.map(text))
        .with_assignments(assignments);
    match s
        .client
        .call(to, ApiKey::SyncGroup, 3, RequestKind::SyncGroup(req))
        .await
    {
        Ok(ResponseKind::SyncGroup(r)) if r.error_code == 0 => Some(Membership {
            member_id: member_id.clone(),
            generation,
            partitions: decode(&r.assignment),
        }),
        Ok(ResponseKind::SyncGroup(_)) => None,
        _ => {
            s.lost_coordinator();
            None
        }
    }
}

/// The error code of a heartbeat, or `None` when there was no answer.
async fn heartbeat(s: &mut Session, m: &Membership) -> Option<i16> {
    let to = s.coordinator().await?;
    let req = HeartbeatRequest::default()
        .with_group_id(GroupId(text(MEMBER_GROUP)))
        .with_generation_id(m.generation)
        .with_member_id(text(&m.member_id));
    match s
        .client
        .call(to, ApiKey::Heartbeat, 3, RequestKind::Heartbeat(req))
        .await
    {
        Ok(ResponseKind::Heartbeat(r)) => Some(r.error_code),
        _ => {
            s.lost_coordinator();
            None
        }
    }
}

/// One member of [`MEMBER_GROUP`] until `until`.
pub async fn member(mut s: Session, until: Duration) {
    s.group = MEMBER_GROUP.to_owned();
    let name = s.name.clone();
    let instance = (name == "member-1").then(|| format!("static-{name}"));
    let mut member_id = String::new();
    while s.now() < until {
        let Some(m) = join(&mut s, &mut member_id, instance.as_deref()).await else {
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        };
        s.history.record(
            s.now(),
            Event::Assigned {
                member: name.clone(),
                generation: m.generation,
                partitions: m.partitions.clone(),
            },
        );
        // Positions start at the committed offsets.
        let mut positions = Vec::new();
        for &p in &m.partitions {
            let Some(offset) = s.committed(p).await else {
                break;
            };
            positions.push((p, offset.max(0)));
        }
        if positions.len() != m.partitions.len() {
            continue; // the coordinator went away: join again
        }
        let mut last_heartbeat = s.now();
        let mut committed: Vec<i64> = positions.iter().map(|(_, o)| *o).collect();
        'generation: while s.now() < until {
            if s.now() >= last_heartbeat + Duration::from_secs(1) {
                if instance.is_some() && madsim::rand::thread_rng().gen_ratio(1, 20) {
                    // A restart: the new process knows only its instance id.
                    member_id.clear();
                    break 'generation;
                }
                match heartbeat(&mut s, &m).await {
                    Some(0) => last_heartbeat = s.now(),
                    Some(_) => break 'generation, // rebalance, fenced, unknown: rejoin
                    None => {}
                }
            }
            for ((p, pos), done) in positions.iter_mut().zip(committed.iter_mut()) {
                let from = *pos;
                if let Some((got, _)) = s.fetch(TOPIC, *p, from).await {
                    if let Some(last) = got.last() {
                        *pos = last.0 + 1;
                    }
                    s.history.record(
                        s.now(),
                        Event::Poll {
                            client: name.clone(),
                            partition: *p,
                            from,
                            got: got.into_iter().map(|(o, v, _)| (o, v)).collect(),
                        },
                    );
                }
                let offset = *pos;
                if offset == *done {
                    continue;
                }
                if s.commit(*p, offset, m.generation, &m.member_id).await {
                    *done = offset;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Leave, so the others take over at once.
    if let Some(to) = s.coordinator().await {
        let req = LeaveGroupRequest::default()
            .with_group_id(GroupId(text(MEMBER_GROUP)))
            .with_members(vec![
                MemberIdentity::default().with_member_id(text(&member_id)),
            ]);
        let _ = s
            .client
            .call(to, ApiKey::LeaveGroup, 3, RequestKind::LeaveGroup(req))
            .await;
    }
}

/// Two members of a classic consumer group.
pub struct Members;
pub static MEMBERS: Members = Members;

impl Actor for Members {
    fn name(&self) -> &'static str {
        "members"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("member-0"), Role::client("member-1")]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(member(s, stage.faults_end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_deals_every_partition_once() {
        let a = assign(&["m-b".into(), "m-a".into()]);
        let owned: Vec<Vec<i32>> = a.iter().map(|(_, b)| decode(b)).collect();
        assert_eq!(owned, [vec![0, 2], vec![1]]);
        assert_eq!(a[0].0, "m-a");
    }
}
