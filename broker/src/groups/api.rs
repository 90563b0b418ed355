//! The group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets,
//! ListGroups, DescribeGroups, DeleteGroups, OffsetDelete) over the slots
//! this broker coordinates.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use super::Coordinators;
use super::group::{JoinRequest, JoinResult, Joined, Phase, Synced};

pub(super) fn code(e: ResponseError) -> i16 {
    e.code()
}

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

pub(super) fn opt(v: &Option<StrBytes>) -> Option<String> {
    v.as_ref().map(|x| x.as_str().to_owned())
}

fn new_member_id(client_id: &str) -> String {
    let v: u128 = madsim::rand::random();
    let u = uuid::Uuid::from_u128(v);
    format!("{client_id}-{u}")
}

impl Coordinators {
    pub async fn join_group(
        &self,
        req: JoinGroupRequest,
        version: i16,
        client_id: &str,
    ) -> JoinGroupResponse {
        let fail = |error: i16, member_id: StrBytes| {
            JoinGroupResponse::default()
                .with_error_code(error)
                .with_generation_id(-1)
                .with_member_id(member_id)
                .with_protocol_name(Some(StrBytes::default()))
        };
        let group_id = req.group_id.as_str().to_owned();
        if group_id.is_empty() {
            return fail(code(ResponseError::InvalidGroupId), req.member_id);
        }
        let session = Duration::from_millis(req.session_timeout_ms.max(0) as u64);
        if session < self.config.min_session_timeout || session > self.config.max_session_timeout {
            return fail(code(ResponseError::InvalidSessionTimeout), req.member_id);
        }
        // v0 has no rebalance timeout: it is the session timeout.
        let rebalance = if version >= 1 {
            Duration::from_millis(req.rebalance_timeout_ms.max(0) as u64)
        } else {
            session
        };
        let slot = match self.slot_for(&group_id) {
            Ok(s) => s,
            Err(e) => return fail(e, req.member_id),
        };
        let joined = {
            let mut groups = slot.groups.lock().await;
            let entry = match slot.entry(&mut groups, &group_id, true).await {
                Ok(Some(e)) => e,
                Ok(None) => {
                    return fail(code(ResponseError::CoordinatorNotAvailable), req.member_id);
                }
                Err(e) => return fail(e, req.member_id),
            };
            let request = JoinRequest {
                member_id: req.member_id.as_str().to_owned(),
                instance_id: opt(&req.group_instance_id),
                client_id: client_id.to_owned(),
                client_host: String::new(),
                session_timeout: session,
                rebalance_timeout: rebalance,
                protocol_type: req.protocol_type.as_str().to_owned(),
                protocols: req
                    .protocols
                    .iter()
                    .map(|p| (p.name.as_str().to_owned(), p.metadata.clone()))
                    .collect(),
                require_known_member_id: version >= 4,
            };
            entry.group.join(
                request,
                Instant::now(),
                || new_member_id(client_id),
                self.config.initial_rebalance_delay,
            )
        };
        let result = match joined {
            Joined::Now(r) => r,
            Joined::Wait(rx) => match rx.await {
                Ok(r) => r,
                Err(_) => return fail(code(ResponseError::NotCoordinator), req.member_id),
            },
        };
        join_response(result, version)
    }

    pub async fn sync_group(&self, req: SyncGroupRequest, _version: i16) -> SyncGroupResponse {
        let fail = |error: i16| SyncGroupResponse::default().with_error_code(error);
        let group_id = req.group_id.as_str().to_owned();
        let slot = match self.slot_for(&group_id) {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
        let rx = {
            let mut groups = slot.groups.lock().await;
            let entry = match slot.entry(&mut groups, &group_id, false).await {
                Ok(Some(e)) => e,
                Ok(None) => return fail(code(ResponseError::UnknownMemberId)),
                Err(e) => return fail(e),
            };
            let g = &entry.group;
            let mismatch = |asked: &Option<StrBytes>, have: &Option<String>| {
                asked
                    .as_ref()
                    .is_some_and(|a| have.as_deref() != Some(a.as_str()))
            };
            if g.phase != Phase::Empty
                && (mismatch(&req.protocol_type, &g.protocol_type)
                    || mismatch(&req.protocol_name, &g.protocol))
            {
                return fail(code(ResponseError::InconsistentGroupProtocol));
            }
            let assignments: Vec<(String, Bytes)> = req
                .assignments
                .iter()
                .map(|a| (a.member_id.as_str().to_owned(), a.assignment.clone()))
                .collect();
            let now = Instant::now();
            match entry.group.sync(
                req.member_id.as_str(),
                req.group_instance_id.as_ref().map(|i| i.as_str()),
                req.generation_id,
                assignments,
                now,
            ) {
                Synced::Now(r) => return sync_response(r),
                Synced::Wait(rx) => rx,
                Synced::Complete(rx) => {
                    let record = entry.group.record();
                    let outcome = slot.persist(entry, &record).await;
                    let error = outcome.err().unwrap_or(0);
                    entry
                        .group
                        .release_sync(error, now, self.config.initial_rebalance_delay);
                    rx
                }
            }
        };
        match rx.await {
            Ok(r) => sync_response(r),
            Err(_) => fail(code(ResponseError::NotCoordinator)),
        }
    }

    pub async fn heartbeat(&self, req: HeartbeatRequest) -> HeartbeatResponse {
        let error = self
            .with_group(req.group_id.as_str(), |g, now| {
                g.heartbeat(
                    req.member_id.as_str(),
                    req.group_instance_id.as_ref().map(|i| i.as_str()),
                    req.generation_id,
                    now,
                )
            })
            .await
            .unwrap_or_else(|e| e);
        HeartbeatResponse::default().with_error_code(error)
    }

    /// Runs `f` on an existing group; UNKNOWN_MEMBER_ID if there is none.
    async fn with_group<T>(
        &self,
        group_id: &str,
        f: impl FnOnce(&mut super::group::Group, Instant) -> T,
    ) -> Result<T, i16> {
        let slot = self.slot_for(group_id)?;
        let mut groups = slot.groups.lock().await;
        match slot.entry(&mut groups, group_id, false).await? {
            Some(entry) => Ok(f(&mut entry.group, Instant::now())),
            None => Err(code(ResponseError::UnknownMemberId)),
        }
    }

    pub(crate) async fn leave_group(
        &self,
        req: LeaveGroupRequest,
        version: i16,
    ) -> LeaveGroupResponse {
        let who: Vec<(String, Option<String>)> = if version >= 3 {
            req.members
                .iter()
                .map(|m| (m.member_id.as_str().to_owned(), opt(&m.group_instance_id)))
                .collect()
        } else {
            vec![(req.member_id.as_str().to_owned(), None)]
        };
        let group_id = req.group_id.as_str().to_owned();
        let outcome: Result<Vec<i16>, i16> = async {
            let slot = self.slot_for(&group_id)?;
            let mut groups = slot.groups.lock().await;
            let Some(entry) = slot.entry(&mut groups, &group_id, false).await? else {
                return Err(code(ResponseError::UnknownMemberId));
            };
            let (errors, emptied) =
                entry
                    .group
                    .leave(&who, Instant::now(), self.config.initial_rebalance_delay);
            if emptied {
                let record = entry.group.record();
                slot.persist(entry, &record).await?;
            }
            Ok(errors)
        }
        .await;
        match outcome {
            Err(e) => LeaveGroupResponse::default().with_error_code(e),
            Ok(errors) if version >= 3 => LeaveGroupResponse::default().with_members(
                who.iter()
                    .zip(errors)
                    .map(|((m, i), e)| {
                        MemberResponse::default()
                            .with_member_id(s(m))
                            .with_group_instance_id(i.as_deref().map(s))
                            .with_error_code(e)
                    })
                    .collect(),
            ),
            Ok(errors) => {
                LeaveGroupResponse::default().with_error_code(errors.first().copied().unwrap_or(0))
            }
        }
    }

    pub(crate) async fn list_groups(
        &self,
        req: ListGroupsRequest,
        version: i16,
    ) -> ListGroupsResponse {
        let states: Vec<String> = req
            .states_filter
            .iter()
            .map(|s| s.as_str().to_lowercase())
            .collect();
        // v5 (KIP-848) filters by group type: classic or consumer.
        let types: Vec<String> = req
            .types_filter
            .iter()
            .map(|t| t.as_str().to_lowercase())
            .collect();
        let mut out = Vec::new();
        for slot in self.led() {
            let groups = slot.groups.lock().await;
            for entry in groups.values() {
                let g = &entry.group;
                let state = g.state_name();
                if !states.is_empty() && !states.contains(&state.to_lowercase()) {
                    continue;
                }
                if !types.is_empty() && !types.iter().any(|t| t == g.group_type()) {
                    continue;
                }
                let protocol_type = match &g.consumer {
                    Some(_) => "consumer",
                    None => g.protocol_type.as_deref().unwrap_or(""),
                };
                let mut listed = ListedGroup::default()
                    .with_group_id(GroupId(s(&g.id)))
                    .with_protocol_type(s(protocol_type));
                if version >= 4 {
                    listed = listed.with_group_state(s(state));
                }
                if version >= 5 {
                    listed = listed.with_group_type(s(g.group_type()));
                }
                out.push(listed);
            }
        }
        ListGroupsResponse::default().with_groups(out)
    }

    pub async fn describe_groups(
        &self,
        req: DescribeGroupsRequest,
        version: i16,
    ) -> DescribeGroupsResponse {
        let mut out = Vec::new();
        for id in req.groups {
            let described = DescribedGroup::default().with_group_id(id.clone());
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
                Ok(None) => described.with_group_state(s("Dead")),
                // As Kafka: a consumer-protocol group is described by
                // ConsumerGroupDescribe.
                Ok(Some(entry)) if entry.group.consumer.is_some() => described
                    .with_error_code(code(ResponseError::GroupIdNotFound))
                    .with_error_message(Some(s(&format!(
                        "group {} is not a classic group",
                        id.as_str()
                    )))),
                Ok(Some(entry)) => describe(&entry.group, described, version),
            });
        }
        DescribeGroupsResponse::default().with_groups(out)
    }

    pub(crate) async fn delete_groups(&self, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
        let mut out = Vec::new();
        for id in req.groups_names {
            let error = self.delete_group(id.as_str()).await.err().unwrap_or(0);
            out.push(
                DeletableGroupResult::default()
                    .with_group_id(id)
                    .with_error_code(error),
            );
        }
        DeleteGroupsResponse::default().with_results(out)
    }

    /// Leaves a tombstone in this epoch's file, so no older file of the
    /// group can bring it back, then forgets it.
    async fn delete_group(&self, group_id: &str) -> Result<(), i16> {
        let slot = self.slot_for(group_id)?;
        let mut groups = slot.groups.lock().await;
        let Some(entry) = slot.entry(&mut groups, group_id, false).await? else {
            return Err(code(ResponseError::GroupIdNotFound));
        };
        if !entry.group.is_empty() {
            return Err(code(ResponseError::NonEmptyGroup));
        }
        let mut record = entry.group.record();
        record.deleted = true;
        record.offsets.clear();
        slot.persist(entry, &record).await?;
        groups.remove(group_id);
        Ok(())
    }
}

fn join_response(r: JoinResult, version: i16) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(r.error)
        .with_generation_id(r.generation)
        .with_protocol_type(r.protocol_type.as_deref().map(s))
        .with_protocol_name(Some(s(r.protocol.as_deref().unwrap_or(""))))
        .with_leader(s(&r.leader))
        .with_skip_assignment(version >= 9 && r.skip_assignment)
        .with_member_id(s(&r.member_id))
        .with_members(
            r.members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(s(&id))
                        .with_group_instance_id(if version >= 5 {
                            instance.as_deref().map(s)
                        } else {
                            None
                        })
                        .with_metadata(metadata)
                })
                .collect(),
        )
}

fn sync_response(r: super::group::SyncResult) -> SyncGroupResponse {
    SyncGroupResponse::default()
        .with_error_code(r.error)
        .with_protocol_type(r.protocol_type.as_deref().map(s))
        .with_protocol_name(r.protocol.as_deref().map(s))
        .with_assignment(r.assignment)
}

fn describe(g: &super::group::Group, d: DescribedGroup, version: i16) -> DescribedGroup {
    let stable = g.phase == Phase::Stable;
    d.with_group_state(s(g.phase.name()))
        .with_protocol_type(s(g.protocol_type.as_deref().unwrap_or("")))
        .with_protocol_data(s(if stable {
            g.protocol.as_deref().unwrap_or("")
        } else {
            ""
        }))
        .with_members(
            g.members
                .values()
                .map(|m| {
                    let metadata = m
                        .protocols
                        .iter()
                        .find(|(n, _)| Some(n) == g.protocol.as_ref())
                        .map(|(_, b)| b.clone())
                        .unwrap_or_default();
                    DescribedGroupMember::default()
                        .with_member_id(s(&m.id))
                        .with_group_instance_id(if version >= 4 {
                            m.instance_id.as_deref().map(s)
                        } else {
                            None
                        })
                        .with_client_id(s(&m.client_id))
                        .with_client_host(s(&m.client_host))
                        .with_member_metadata(if stable { metadata } else { Bytes::new() })
                        .with_member_assignment(if stable {
                            m.assignment.clone()
                        } else {
                            Bytes::new()
                        })
                })
                .collect(),
        )
}
