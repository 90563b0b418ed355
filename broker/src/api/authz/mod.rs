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
//! The refused entries are built by `protocol::refusal`, as the answers to
//! unsupported versions are.
//!
//! | file | requests |
//! |---|---|
//! | `topics` | Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata, DescribeTopicPartitions, DescribeProducers |
//! | `topic_admin` | CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords |
//! | `groups` | the group APIs, FindCoordinator |
//! | `configs` | DescribeConfigs, AlterConfigs, IncrementalAlterConfigs |
//! | `txns` | InitProducerId and the transaction APIs |
//! | `cluster` | the cluster-wide APIs: ACLs, SCRAM users, quotas, log dirs, reassignments |

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{RequestKind, ResponseKind};
use uuid::Uuid;

use super::Api;
use crate::security::{Operation, ResourceType, Session};

mod cluster;
mod configs;
mod groups;
mod topic_admin;
mod topics;
mod txns;

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

    /// Checks `request` against the ACLs: each API by its own rule, in the
    /// file of its family.
    pub(super) async fn authorize(&self, s: &Session, request: RequestKind) -> Authz {
        use RequestKind as R;
        match request {
            // topics
            R::Produce(r) => self.authorize_produce(s, r).await,
            R::Fetch(r) => self.authorize_fetch(s, r).await,
            R::ListOffsets(r) => self.authorize_list_offsets(s, r),
            R::OffsetForLeaderEpoch(r) => self.authorize_offset_for_leader_epoch(s, r),
            R::Metadata(r) => self.authorize_metadata(s, r).await,
            R::DescribeTopicPartitions(r) => self.authorize_describe_topic_partitions(s, r),
            R::DescribeProducers(r) => self.authorize_describe_producers(s, r),
            R::CreateTopics(r) => self.authorize_create_topics(s, r),
            R::DeleteTopics(r) => self.authorize_delete_topics(s, r).await,
            R::CreatePartitions(r) => self.authorize_create_partitions(s, r),
            R::DeleteRecords(r) => self.authorize_delete_records(s, r),
            // groups
            R::JoinGroup(_)
            | R::SyncGroup(_)
            | R::Heartbeat(_)
            | R::LeaveGroup(_)
            | R::ConsumerGroupHeartbeat(_)
            | R::OffsetDelete(_) => self.authorize_membership(s, request),
            R::OffsetCommit(r) => self.authorize_offset_commit(s, r),
            R::OffsetFetch(r) => self.authorize_offset_fetch(s, r),
            R::DescribeGroups(r) => self.authorize_describe_groups(s, r),
            R::ConsumerGroupDescribe(r) => self.authorize_consumer_group_describe(s, r),
            R::ListGroups(r) => self.authorize_list_groups(s, r),
            R::DeleteGroups(r) => self.authorize_delete_groups(s, r),
            R::FindCoordinator(r) => self.authorize_find_coordinator(s, r),
            // configs
            R::DescribeConfigs(r) => self.authorize_describe_configs(s, r),
            R::AlterConfigs(r) => self.authorize_alter_configs(s, r),
            R::IncrementalAlterConfigs(r) => self.authorize_incremental_alter_configs(s, r),
            // transactions and producer ids
            R::InitProducerId(r) => self.authorize_init_producer_id(s, r),
            R::AddPartitionsToTxn(r) => self.authorize_add_partitions(s, r),
            R::AddOffsetsToTxn(r) => self.authorize_add_offsets(s, r),
            R::TxnOffsetCommit(r) => self.authorize_txn_offset_commit(s, r),
            R::EndTxn(r) => self.authorize_end_txn(s, r),
            R::WriteTxnMarkers(r) => self.authorize_write_txn_markers(s, r),
            R::DescribeTransactions(r) => self.authorize_describe_transactions(s, r),
            R::ListTransactions(r) => self.authorize_list_transactions(s, r),
            // the cluster
            other => self.authorize_cluster(s, other),
        }
    }
}

/// Takes out of `items` the entries `allowed` refuses, and returns them.
pub(super) fn refused<T>(items: &mut Vec<T>, mut allowed: impl FnMut(&T) -> bool) -> Vec<T> {
    let (ok, no) = std::mem::take(items).into_iter().partition(|i| allowed(i));
    *items = ok;
    no
}

/// Proceeds with `request`, then `then` mends its response.
pub(super) fn proceed(
    request: RequestKind,
    then: impl FnOnce(&mut ResponseKind) + Send + 'static,
) -> Authz {
    Authz::Proceed(request, Some(Box::new(then)))
}

/// Proceeds with `$request` (narrowed), then puts `$refused` back at the
/// end of the `$field` list of its `$kind` response.
macro_rules! put_back {
    ($request:expr, $kind:ident . $field:ident, $refused:expr) => {{
        let refused = $refused;
        $crate::api::authz::proceed($request, move |response| {
            if let kafka_protocol::messages::ResponseKind::$kind(r) = response {
                r.$field.extend(refused);
            }
        })
    }};
}
pub(super) use put_back;

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
