//! The group requests: READ on the group to be a member or commit, DESCRIBE
//! to look, DELETE to delete; READ (commit) or DESCRIBE (fetch) on topics;
//! and FindCoordinator, which needs DESCRIBE on what it locates.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatResponse, DeleteGroupsRequest,
    DescribeGroupsRequest, FindCoordinatorResponse, HeartbeatResponse, JoinGroupResponse,
    LeaveGroupResponse, ListGroupsRequest, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteResponse, OffsetFetchResponse, RequestKind, ResponseKind, SyncGroupResponse,
};

use super::{Authz, group_denied, proceed, put_back, refused, topic_denied};
use crate::api::{Api, name_of};
use crate::protocol::refusal;
use crate::security::{Operation, ResourceType, Session};

impl Api {
    fn may_group(&self, s: &Session, op: Operation, group: &str) -> bool {
        self.may(s, op, ResourceType::Group, group)
    }

    /// Being a member, and deleting offsets: READ (DELETE) on the group,
    /// or the whole request is refused.
    pub(super) fn authorize_membership(&self, s: &Session, request: RequestKind) -> Authz {
        use RequestKind as R;
        let denied = group_denied();
        match request {
            R::JoinGroup(r) if !self.may_group(s, Operation::Read, r.group_id.as_str()) => {
                Authz::Refuse(ResponseKind::JoinGroup(
                    JoinGroupResponse::default()
                        .with_error_code(denied)
                        .with_generation_id(-1)
                        .with_member_id(r.member_id),
                ))
            }
            R::SyncGroup(r) if !self.may_group(s, Operation::Read, r.group_id.as_str()) => {
                Authz::Refuse(ResponseKind::SyncGroup(
                    SyncGroupResponse::default().with_error_code(denied),
                ))
            }
            R::Heartbeat(r) if !self.may_group(s, Operation::Read, r.group_id.as_str()) => {
                Authz::Refuse(ResponseKind::Heartbeat(
                    HeartbeatResponse::default().with_error_code(denied),
                ))
            }
            R::LeaveGroup(r) if !self.may_group(s, Operation::Read, r.group_id.as_str()) => {
                Authz::Refuse(ResponseKind::LeaveGroup(
                    LeaveGroupResponse::default().with_error_code(denied),
                ))
            }
            R::ConsumerGroupHeartbeat(r)
                if !self.may_group(s, Operation::Read, r.group_id.as_str()) =>
            {
                Authz::Refuse(ResponseKind::ConsumerGroupHeartbeat(
                    ConsumerGroupHeartbeatResponse::default()
                        .with_error_code(denied)
                        .with_member_epoch(-1),
                ))
            }
            R::OffsetDelete(r) if !self.may_group(s, Operation::Delete, r.group_id.as_str()) => {
                Authz::Refuse(ResponseKind::OffsetDelete(
                    OffsetDeleteResponse::default().with_error_code(denied),
                ))
            }
            R::OffsetDelete(mut r) => {
                let no = refused(&mut r.topics, |t| {
                    self.may_topic(s, Operation::Read, name_of(&t.name))
                });
                let no: Vec<OffsetDeleteResponseTopic> = no
                    .into_iter()
                    .map(|t| {
                        OffsetDeleteResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetDeleteResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(topic_denied())
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                put_back!(R::OffsetDelete(r), OffsetDelete.topics, no)
            }
            other => Authz::Proceed(other, None),
        }
    }

    pub(super) fn authorize_offset_commit(&self, s: &Session, mut r: OffsetCommitRequest) -> Authz {
        if !self.may_group(s, Operation::Read, r.group_id.as_str()) {
            let topics = refusal::offset_commit_topics(&r.topics, group_denied());
            return Authz::Refuse(ResponseKind::OffsetCommit(
                OffsetCommitResponse::default().with_topics(topics),
            ));
        }
        let no = refused(&mut r.topics, |t| {
            self.may_topic(s, Operation::Read, name_of(&t.name))
        });
        let no = refusal::offset_commit_topics(&no, topic_denied());
        put_back!(RequestKind::OffsetCommit(r), OffsetCommit.topics, no)
    }

    pub(super) fn authorize_describe_groups(
        &self,
        s: &Session,
        mut r: DescribeGroupsRequest,
    ) -> Authz {
        let no = refused(&mut r.groups, |g| {
            self.may_group(s, Operation::Describe, g.as_str())
        });
        let no = refusal::described_groups(&no, group_denied());
        put_back!(RequestKind::DescribeGroups(r), DescribeGroups.groups, no)
    }

    pub(super) fn authorize_consumer_group_describe(
        &self,
        s: &Session,
        mut r: ConsumerGroupDescribeRequest,
    ) -> Authz {
        let no = refused(&mut r.group_ids, |g| {
            self.may_group(s, Operation::Describe, g.as_str())
        });
        let no = refusal::described_consumer_groups(&no, group_denied());
        put_back!(
            RequestKind::ConsumerGroupDescribe(r),
            ConsumerGroupDescribe.groups,
            no
        )
    }

    pub(super) fn authorize_list_groups(&self, s: &Session, r: ListGroupsRequest) -> Authz {
        // DESCRIBE on the cluster lists every group (Kafka's rule).
        if self.may_quietly(
            s,
            Operation::Describe,
            ResourceType::Cluster,
            crate::security::acl::CLUSTER_NAME,
        ) {
            return Authz::Proceed(RequestKind::ListGroups(r), None);
        }
        let (security, who) = (self.security.clone(), s.who());
        proceed(RequestKind::ListGroups(r), move |resp| {
            if let ResponseKind::ListGroups(l) = resp {
                l.groups.retain(|g| {
                    security.allowed_for(
                        &who,
                        Operation::Describe,
                        ResourceType::Group,
                        g.group_id.as_str(),
                    )
                });
            }
        })
    }

    pub(super) fn authorize_delete_groups(&self, s: &Session, mut r: DeleteGroupsRequest) -> Authz {
        let no = refused(&mut r.groups_names, |g| {
            self.may_group(s, Operation::Delete, g.as_str())
        });
        let no = refusal::deleted_groups(&no, group_denied());
        put_back!(RequestKind::DeleteGroups(r), DeleteGroups.results, no)
    }

    pub(super) fn authorize_offset_fetch(
        &self,
        s: &Session,
        mut r: kafka_protocol::messages::OffsetFetchRequest,
    ) -> Authz {
        let denied = group_denied();
        // v0-v7 name one group; v8+ a list of them.
        if r.groups.is_empty() {
            if !self.may_group(s, Operation::Describe, r.group_id.as_str()) {
                // v0-v1 have no group error: each partition asked carries
                // it (`fit_to_version` keeps the form of the version).
                let topics =
                    refusal::offset_fetch_topics(r.topics.as_deref().unwrap_or_default(), denied);
                return Authz::Refuse(ResponseKind::OffsetFetch(
                    OffsetFetchResponse::default()
                        .with_error_code(denied)
                        .with_topics(topics),
                ));
            }
        } else {
            let no = refused(&mut r.groups, |g| {
                self.may_group(s, Operation::Describe, g.group_id.as_str())
            });
            let no = refusal::offset_fetch_groups(&no, denied);
            if r.groups.is_empty() {
                return Authz::Refuse(ResponseKind::OffsetFetch(
                    OffsetFetchResponse::default().with_groups(no),
                ));
            }
            let (security, who) = (self.security.clone(), s.who());
            return proceed(RequestKind::OffsetFetch(r), move |resp| {
                if let ResponseKind::OffsetFetch(f) = resp {
                    for g in &mut f.groups {
                        g.topics.retain(|t| {
                            security.allowed_for(
                                &who,
                                Operation::Describe,
                                ResourceType::Topic,
                                name_of(&t.name),
                            )
                        });
                    }
                    f.groups.extend(no);
                }
            });
        }
        let (security, who) = (self.security.clone(), s.who());
        proceed(RequestKind::OffsetFetch(r), move |resp| {
            if let ResponseKind::OffsetFetch(f) = resp {
                f.topics.retain(|t| {
                    security.allowed_for(
                        &who,
                        Operation::Describe,
                        ResourceType::Topic,
                        name_of(&t.name),
                    )
                });
            }
        })
    }

    pub(super) fn authorize_find_coordinator(
        &self,
        s: &Session,
        mut r: kafka_protocol::messages::FindCoordinatorRequest,
    ) -> Authz {
        let (resource, code) = match r.key_type {
            1 => (ResourceType::TransactionalId, super::txn_id_denied()),
            _ => (ResourceType::Group, group_denied()),
        };
        if r.coordinator_keys.is_empty() {
            if self.may(s, Operation::Describe, resource, r.key.as_str()) {
                return Authz::Proceed(RequestKind::FindCoordinator(r), None);
            }
            // The v0-v3 form; `fit_to_version` clears it for v4+, whose
            // request with no keys locates nothing.
            return Authz::Refuse(ResponseKind::FindCoordinator(
                FindCoordinatorResponse::default()
                    .with_error_code(code)
                    .with_node_id(kafka_protocol::messages::BrokerId(-1))
                    .with_port(-1),
            ));
        }
        let no = refused(&mut r.coordinator_keys, |k| {
            self.may(s, Operation::Describe, resource, k.as_str())
        });
        let no = refusal::coordinators(&no, code);
        put_back!(
            RequestKind::FindCoordinator(r),
            FindCoordinator.coordinators,
            no
        )
    }
}
