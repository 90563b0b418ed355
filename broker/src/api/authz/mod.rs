//! Authorization of every request (`--authorizer acl`), with Kafka's
//! operations and error codes.
//!
//! A request is checked before it is handled: a request the principal may
//! not make at all gets its error response at once; parts of a request it
//! may not touch (some topics of a Produce, some groups of a DescribeGroups)
//! are taken out, the rest is handled, and the refused parts are put back
//! into the response with their error code (`Merge`). Lists of everything
//! (Metadata without topics, ListGroups, ListTransactions) are filtered to
//! what the principal may describe.
//!
//! | file | requests |
//! |---|---|
//! | `topics` | Produce, Fetch, ListOffsets, Metadata, OffsetForLeaderEpoch, CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeProducers |
//! | `groups` | the group APIs, FindCoordinator |
//! | `admin` | configs, transactions, the cluster-wide APIs |

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{RequestKind, ResponseKind};
use uuid::Uuid;

use super::Api;
use crate::security::{Operation, ResourceType, Session};

mod admin;
mod groups;
mod topics;

/// Puts the refused parts of a request back into its response.
pub(super) type Merge = Box<dyn FnOnce(&mut ResponseKind) + Send>;

/// What the authorizer makes of a request.
pub(super) enum Authz {
    /// Handle this (perhaps narrowed) request, then merge.
    Proceed(RequestKind, Option<Merge>),
    /// Answer this instead: the whole request is refused.
    Refuse(ResponseKind),
}

pub(super) fn topic_denied() -> i16 {
    ResponseError::TopicAuthorizationFailed.code()
}

pub(super) fn group_denied() -> i16 {
    ResponseError::GroupAuthorizationFailed.code()
}

pub(super) fn cluster_denied() -> i16 {
    ResponseError::ClusterAuthorizationFailed.code()
}

pub(super) fn txn_id_denied() -> i16 {
    ResponseError::TransactionalIdAuthorizationFailed.code()
}

impl Api {
    pub(super) fn may(&self, s: &Session, op: Operation, t: ResourceType, name: &str) -> bool {
        self.security.allowed(s, op, t, name)
    }

    /// A probe, not a refusal: no audit line when denied.
    pub(super) fn may_quietly(
        &self,
        s: &Session,
        op: Operation,
        t: ResourceType,
        name: &str,
    ) -> bool {
        self.security.allowed_quietly(s, op, t, name)
    }

    pub(super) fn may_topic(&self, s: &Session, op: Operation, name: &str) -> bool {
        self.may(s, op, ResourceType::Topic, name)
    }

    pub(super) fn may_cluster(&self, s: &Session, op: Operation) -> bool {
        self.may(
            s,
            op,
            ResourceType::Cluster,
            crate::security::acl::CLUSTER_NAME,
        )
    }

    /// A topic's name from its id, for the requests that name topics by id;
    /// an unknown id has no name and is left to the handler to refuse.
    pub(super) async fn name_by_id(&self, id: Uuid) -> Option<String> {
        self.meta_by_id(id).await.ok().flatten().map(|m| m.name)
    }

    /// Checks `request` against the ACLs.
    pub(super) async fn authorize(&self, s: &Session, request: RequestKind) -> Authz {
        use RequestKind as R;
        match request {
            R::Produce(_)
            | R::Fetch(_)
            | R::ListOffsets(_)
            | R::Metadata(_)
            | R::OffsetForLeaderEpoch(_)
            | R::CreateTopics(_)
            | R::DeleteTopics(_)
            | R::CreatePartitions(_)
            | R::DeleteRecords(_)
            | R::DescribeProducers(_)
            | R::DescribeTopicPartitions(_) => self.authorize_topics(s, request).await,
            R::JoinGroup(_)
            | R::SyncGroup(_)
            | R::Heartbeat(_)
            | R::LeaveGroup(_)
            | R::OffsetCommit(_)
            | R::OffsetFetch(_)
            | R::ListGroups(_)
            | R::DescribeGroups(_)
            | R::DeleteGroups(_)
            | R::OffsetDelete(_)
            | R::ConsumerGroupHeartbeat(_)
            | R::ConsumerGroupDescribe(_)
            | R::FindCoordinator(_) => self.authorize_groups(s, request),
            other => self.authorize_admin(s, other),
        }
    }
}

/// Clears what a refusal set that the response cannot carry at the
/// request's version (the codec refuses to encode a field its version
/// lacks): the top-level error of ElectLeaders v0 (the partitions carry it)
/// and of DescribeLogDirs before v3 (Kafka's answer is then an empty list);
/// FindCoordinator's single coordinator before v4, its list from v4 on;
/// a refused OffsetFetch's group error per partition before v2.
pub(super) fn fit_to_version(response: &mut ResponseKind, version: i16) {
    match response {
        ResponseKind::ElectLeaders(r) if version < 1 => r.error_code = 0,
        ResponseKind::DescribeLogDirs(r) if version < 3 => r.error_code = 0,
        ResponseKind::FindCoordinator(r) if version < 4 => r.coordinators.clear(),
        // A refused group: v0-v1 say it per partition, v2+ once.
        ResponseKind::OffsetFetch(r) if r.groups.is_empty() && r.error_code != 0 => {
            if version < 2 {
                r.error_code = 0;
            } else {
                r.topics.clear();
            }
        }
        ResponseKind::FindCoordinator(r) => {
            let coordinators = std::mem::take(&mut r.coordinators);
            *r = Default::default();
            r.coordinators = coordinators;
        }
        _ => {}
    }
}
