//! The group requests: READ on the group to be a member or commit, DESCRIBE
//! to look, DELETE to delete; READ (commit) or DESCRIBE (fetch) on topics;
//! and FindCoordinator, which needs DESCRIBE on what it locates.

use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup as NewDescribed;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatResponse, FindCoordinatorResponse, HeartbeatResponse, JoinGroupResponse,
    LeaveGroupResponse, OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse,
    RequestKind, ResponseKind, SyncGroupResponse,
};

use super::topics::split;
use super::{Authz, Merge, group_denied, topic_denied};
use crate::api::{Api, name_of};
use crate::security::{Operation, ResourceType, Session};

fn merge(f: impl FnOnce(&mut ResponseKind) + Send + 'static) -> Option<Merge> {
    Some(Box::new(f))
}

impl Api {
    fn may_group(&self, s: &Session, op: Operation, group: &str) -> bool {
        self.may(s, op, ResourceType::Group, group)
    }

    pub(super) fn authorize_groups(&self, s: &Session, request: RequestKind) -> Authz {
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
            R::OffsetCommit(r) if !self.may_group(s, Operation::Read, r.group_id.as_str()) => {
                let topics = r
                    .topics
                    .iter()
                    .map(|t| {
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_topic_id(t.topic_id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(denied)
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                Authz::Refuse(ResponseKind::OffsetCommit(
                    OffsetCommitResponse::default().with_topics(topics),
                ))
            }
            R::OffsetCommit(mut r) => {
                let (ok, no) = split(std::mem::take(&mut r.topics), |t| {
                    self.may_topic(s, Operation::Read, name_of(&t.name))
                });
                r.topics = ok;
                let no: Vec<OffsetCommitResponseTopic> = no
                    .into_iter()
                    .map(|t| {
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name)
                            .with_topic_id(t.topic_id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(topic_denied())
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                Authz::Proceed(
                    R::OffsetCommit(r),
                    merge(move |resp| {
                        if let ResponseKind::OffsetCommit(c) = resp {
                            c.topics.extend(no);
                        }
                    }),
                )
            }
            R::OffsetFetch(r) => self.authorize_offset_fetch(s, r),
            R::DescribeGroups(mut r) => {
                let (ok, no) = split(std::mem::take(&mut r.groups), |g| {
                    self.may_group(s, Operation::Describe, g.as_str())
                });
                r.groups = ok;
                let no: Vec<DescribedGroup> = no
                    .into_iter()
                    .map(|g| {
                        DescribedGroup::default()
                            .with_group_id(g)
                            .with_error_code(denied)
                    })
                    .collect();
                Authz::Proceed(
                    R::DescribeGroups(r),
                    merge(move |resp| {
                        if let ResponseKind::DescribeGroups(d) = resp {
                            d.groups.extend(no);
                        }
                    }),
                )
            }
            R::ConsumerGroupDescribe(mut r) => {
                let (ok, no) = split(std::mem::take(&mut r.group_ids), |g| {
                    self.may_group(s, Operation::Describe, g.as_str())
                });
                r.group_ids = ok;
                let no: Vec<NewDescribed> = no
                    .into_iter()
                    .map(|g| {
                        NewDescribed::default()
                            .with_group_id(g)
                            .with_error_code(denied)
                    })
                    .collect();
                Authz::Proceed(
                    R::ConsumerGroupDescribe(r),
                    merge(move |resp| {
                        if let ResponseKind::ConsumerGroupDescribe(d) = resp {
                            d.groups.extend(no);
                        }
                    }),
                )
            }
            R::ListGroups(r) => {
                // DESCRIBE on the cluster lists every group (Kafka's rule).
                if self.may_quietly(
                    s,
                    Operation::Describe,
                    ResourceType::Cluster,
                    crate::security::acl::CLUSTER_NAME,
                ) {
                    return Authz::Proceed(R::ListGroups(r), None);
                }
                let (security, who) = (self.security.clone(), s.who());
                Authz::Proceed(
                    R::ListGroups(r),
                    merge(move |resp| {
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
                    }),
                )
            }
            R::DeleteGroups(mut r) => {
                let (ok, no) = split(std::mem::take(&mut r.groups_names), |g| {
                    self.may_group(s, Operation::Delete, g.as_str())
                });
                r.groups_names = ok;
                let no: Vec<DeletableGroupResult> = no
                    .into_iter()
                    .map(|g| {
                        DeletableGroupResult::default()
                            .with_group_id(g)
                            .with_error_code(denied)
                    })
                    .collect();
                Authz::Proceed(
                    R::DeleteGroups(r),
                    merge(move |resp| {
                        if let ResponseKind::DeleteGroups(d) = resp {
                            d.results.extend(no);
                        }
                    }),
                )
            }
            R::OffsetDelete(r) if !self.may_group(s, Operation::Delete, r.group_id.as_str()) => {
                Authz::Refuse(ResponseKind::OffsetDelete(
                    OffsetDeleteResponse::default().with_error_code(denied),
                ))
            }
            R::OffsetDelete(mut r) => {
                let (ok, no) = split(std::mem::take(&mut r.topics), |t| {
                    self.may_topic(s, Operation::Read, name_of(&t.name))
                });
                r.topics = ok;
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
                Authz::Proceed(
                    R::OffsetDelete(r),
                    merge(move |resp| {
                        if let ResponseKind::OffsetDelete(d) = resp {
                            d.topics.extend(no);
                        }
                    }),
                )
            }
            R::FindCoordinator(r) => self.authorize_find_coordinator(s, r),
            other => Authz::Proceed(other, None),
        }
    }

    fn authorize_offset_fetch(
        &self,
        s: &Session,
        mut r: kafka_protocol::messages::OffsetFetchRequest,
    ) -> Authz {
        use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
        let denied = group_denied();
        // v0-v7 name one group; v8+ a list of them.
        if r.groups.is_empty() {
            if !self.may_group(s, Operation::Describe, r.group_id.as_str()) {
                use kafka_protocol::messages::offset_fetch_response::{
                    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
                };
                // v0-v1 have no group error: each partition asked carries
                // it (`fit_to_version` keeps the form of the version).
                let topics = r
                    .topics
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| {
                        OffsetFetchResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(
                                t.partition_indexes
                                    .iter()
                                    .map(|&p| {
                                        OffsetFetchResponsePartition::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(-1)
                                            .with_error_code(denied)
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                return Authz::Refuse(ResponseKind::OffsetFetch(
                    OffsetFetchResponse::default()
                        .with_error_code(denied)
                        .with_topics(topics),
                ));
            }
        } else {
            let (ok, no) = split(std::mem::take(&mut r.groups), |g| {
                self.may_group(s, Operation::Describe, g.group_id.as_str())
            });
            r.groups = ok;
            let no: Vec<OffsetFetchResponseGroup> = no
                .into_iter()
                .map(|g| {
                    OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id)
                        .with_error_code(denied)
                })
                .collect();
            if r.groups.is_empty() {
                return Authz::Refuse(ResponseKind::OffsetFetch(
                    OffsetFetchResponse::default().with_groups(no),
                ));
            }
            let (security, who) = (self.security.clone(), s.who());
            return Authz::Proceed(
                RequestKind::OffsetFetch(r),
                merge(move |resp| {
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
                }),
            );
        }
        let (security, who) = (self.security.clone(), s.who());
        Authz::Proceed(
            RequestKind::OffsetFetch(r),
            merge(move |resp| {
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
            }),
        )
    }

    fn authorize_find_coordinator(
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
        let (ok, no) = split(std::mem::take(&mut r.coordinator_keys), |k| {
            self.may(s, Operation::Describe, resource, k.as_str())
        });
        r.coordinator_keys = ok;
        let no: Vec<Coordinator> = no
            .into_iter()
            .map(|k| {
                Coordinator::default()
                    .with_key(k)
                    .with_error_code(code)
                    .with_node_id(kafka_protocol::messages::BrokerId(-1))
                    .with_port(-1)
            })
            .collect();
        Authz::Proceed(
            RequestKind::FindCoordinator(r),
            merge(move |resp| {
                if let ResponseKind::FindCoordinator(f) = resp {
                    f.coordinators.extend(no);
                }
            }),
        )
    }
}
