//! Answers to a request whose version this broker does not serve.
//!
//! A dropped connection looks to a client like a network fault, so it
//! reconnects and sends the same request again, forever. An answer with
//! UNSUPPORTED_VERSION (35) in a response of the requested version is an
//! error it understands. The error goes where that response keeps errors at
//! that version: the top-level `error_code`, or else every topic, partition,
//! group or resource the request named (what Kafka's own `getErrorResponse`
//! does). `None` means no response can carry the error; the caller closes.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{self as m, ApiKey, RequestKind as Q, ResponseKind as R};

mod mirror;

pub(crate) use mirror::{alter_client_quotas_refused, elect_leaders_refused};

pub const UNSUPPORTED_VERSION: i16 = ResponseError::UnsupportedVersion.code();
const E: i16 = UNSUPPORTED_VERSION;

/// The UNSUPPORTED_VERSION answer to `request`, the decoded request of
/// `api` at `version`, to be encoded at that same version.
pub fn answer(api: ApiKey, version: i16, request: &Q) -> Option<R> {
    match request {
        Q::Produce(r) => mirror::produce(r),
        Q::Fetch(r) => Some(R::Fetch(mirror::fetch(r, version))),
        Q::ListOffsets(r) => Some(R::ListOffsets(mirror::list_offsets(r))),
        Q::Metadata(r) => mirror::metadata(r, version).map(R::Metadata),
        Q::OffsetCommit(r) => Some(R::OffsetCommit(mirror::offset_commit(r))),
        Q::OffsetFetch(r) => Some(R::OffsetFetch(mirror::offset_fetch(r, version))),
        Q::FindCoordinator(r) => Some(R::FindCoordinator(mirror::find_coordinator(r, version))),
        Q::DescribeGroups(r) => Some(R::DescribeGroups(mirror::describe_groups(r))),
        Q::CreateTopics(r) => Some(R::CreateTopics(mirror::create_topics(r))),
        Q::DeleteTopics(r) => Some(R::DeleteTopics(mirror::delete_topics(r))),
        Q::DeleteRecords(r) => Some(R::DeleteRecords(mirror::delete_records(r))),
        Q::OffsetForLeaderEpoch(r) => {
            Some(R::OffsetForLeaderEpoch(mirror::offset_for_leader_epoch(r)))
        }
        Q::AddPartitionsToTxn(r) => Some(R::AddPartitionsToTxn(mirror::add_partitions_to_txn(
            r, version,
        ))),
        Q::WriteTxnMarkers(r) => Some(R::WriteTxnMarkers(mirror::write_txn_markers(r))),
        Q::TxnOffsetCommit(r) => Some(R::TxnOffsetCommit(mirror::txn_offset_commit(r))),
        Q::CreateAcls(r) => Some(R::CreateAcls(mirror::create_acls(r))),
        Q::DeleteAcls(r) => Some(R::DeleteAcls(mirror::delete_acls(r))),
        Q::DescribeConfigs(r) => Some(R::DescribeConfigs(mirror::describe_configs(r))),
        Q::AlterConfigs(r) => Some(R::AlterConfigs(mirror::alter_configs(r))),
        Q::IncrementalAlterConfigs(r) => Some(R::IncrementalAlterConfigs(
            mirror::incremental_alter_configs(r),
        )),
        Q::AlterReplicaLogDirs(r) => {
            Some(R::AlterReplicaLogDirs(mirror::alter_replica_log_dirs(r)))
        }
        Q::CreatePartitions(r) => Some(R::CreatePartitions(mirror::create_partitions(r))),
        Q::DeleteGroups(r) => Some(R::DeleteGroups(mirror::delete_groups(r))),
        Q::ElectLeaders(r) => mirror::elect_leaders(r, version).map(R::ElectLeaders),
        Q::AlterClientQuotas(r) => Some(R::AlterClientQuotas(mirror::alter_client_quotas(r))),
        Q::AlterUserScramCredentials(r) => Some(R::AlterUserScramCredentials(
            mirror::alter_user_scram_credentials(r),
        )),
        Q::DescribeProducers(r) => Some(R::DescribeProducers(mirror::describe_producers(r))),
        Q::DescribeTransactions(r) => {
            Some(R::DescribeTransactions(mirror::describe_transactions(r)))
        }
        Q::ConsumerGroupDescribe(r) => {
            Some(R::ConsumerGroupDescribe(mirror::consumer_group_describe(r)))
        }
        Q::ShareGroupDescribe(r) => Some(R::ShareGroupDescribe(mirror::share_group_describe(r))),
        Q::DescribeTopicPartitions(r) => Some(R::DescribeTopicPartitions(
            mirror::describe_topic_partitions(r),
        )),
        Q::DescribeShareGroupOffsets(r) => Some(R::DescribeShareGroupOffsets(
            mirror::describe_share_group_offsets(r),
        )),
        Q::InitializeShareGroupState(r) => Some(R::InitializeShareGroupState(
            mirror::share_state::initialize(r),
        )),
        Q::ReadShareGroupState(r) => Some(R::ReadShareGroupState(mirror::share_state::read(r))),
        Q::WriteShareGroupState(r) => Some(R::WriteShareGroupState(mirror::share_state::write(r))),
        Q::DeleteShareGroupState(r) => {
            Some(R::DeleteShareGroupState(mirror::share_state::delete(r)))
        }
        Q::ReadShareGroupStateSummary(r) => Some(R::ReadShareGroupStateSummary(
            mirror::share_state::read_summary(r),
        )),
        _ => top_level(api, version),
    }
}

/// APIs whose response has a top-level error code at the versions that
/// reach here.
fn top_level(api: ApiKey, version: i16) -> Option<R> {
    macro_rules! top {
        ($kind:ident, $ty:ident) => {
            R::$kind(m::$ty::default().with_error_code(E))
        };
    }
    Some(match api {
        // KIP-511: the connection answers these itself, as v0 with the
        // ranges, since the client may not know the version it asked for.
        ApiKey::ApiVersions => return None,
        // Before v3 the error lived only in per-directory results, and the
        // request names topics, not directories.
        ApiKey::DescribeLogDirs if version < 3 => return None,
        ApiKey::DescribeLogDirs => top!(DescribeLogDirs, DescribeLogDirsResponse),
        ApiKey::JoinGroup => top!(JoinGroup, JoinGroupResponse),
        ApiKey::Heartbeat => top!(Heartbeat, HeartbeatResponse),
        ApiKey::LeaveGroup => top!(LeaveGroup, LeaveGroupResponse),
        ApiKey::SyncGroup => top!(SyncGroup, SyncGroupResponse),
        ApiKey::ListGroups => top!(ListGroups, ListGroupsResponse),
        ApiKey::SaslHandshake => top!(SaslHandshake, SaslHandshakeResponse),
        ApiKey::SaslAuthenticate => top!(SaslAuthenticate, SaslAuthenticateResponse),
        ApiKey::InitProducerId => top!(InitProducerId, InitProducerIdResponse),
        ApiKey::AddOffsetsToTxn => top!(AddOffsetsToTxn, AddOffsetsToTxnResponse),
        ApiKey::EndTxn => top!(EndTxn, EndTxnResponse),
        ApiKey::DescribeAcls => top!(DescribeAcls, DescribeAclsResponse),
        ApiKey::CreateDelegationToken => {
            top!(CreateDelegationToken, CreateDelegationTokenResponse)
        }
        ApiKey::RenewDelegationToken => top!(RenewDelegationToken, RenewDelegationTokenResponse),
        ApiKey::ExpireDelegationToken => {
            top!(ExpireDelegationToken, ExpireDelegationTokenResponse)
        }
        ApiKey::DescribeDelegationToken => {
            top!(DescribeDelegationToken, DescribeDelegationTokenResponse)
        }
        ApiKey::AlterPartitionReassignments => {
            top!(
                AlterPartitionReassignments,
                AlterPartitionReassignmentsResponse
            )
        }
        ApiKey::ListPartitionReassignments => {
            top!(
                ListPartitionReassignments,
                ListPartitionReassignmentsResponse
            )
        }
        ApiKey::OffsetDelete => top!(OffsetDelete, OffsetDeleteResponse),
        ApiKey::DescribeClientQuotas => top!(DescribeClientQuotas, DescribeClientQuotasResponse),
        ApiKey::DescribeUserScramCredentials => {
            top!(
                DescribeUserScramCredentials,
                DescribeUserScramCredentialsResponse
            )
        }
        ApiKey::Vote => top!(Vote, VoteResponse),
        ApiKey::BeginQuorumEpoch => top!(BeginQuorumEpoch, BeginQuorumEpochResponse),
        ApiKey::EndQuorumEpoch => top!(EndQuorumEpoch, EndQuorumEpochResponse),
        ApiKey::DescribeQuorum => top!(DescribeQuorum, DescribeQuorumResponse),
        ApiKey::AlterPartition => top!(AlterPartition, AlterPartitionResponse),
        ApiKey::UpdateFeatures => top!(UpdateFeatures, UpdateFeaturesResponse),
        ApiKey::Envelope => top!(Envelope, EnvelopeResponse),
        ApiKey::FetchSnapshot => top!(FetchSnapshot, FetchSnapshotResponse),
        ApiKey::DescribeCluster => top!(DescribeCluster, DescribeClusterResponse),
        ApiKey::BrokerRegistration => top!(BrokerRegistration, BrokerRegistrationResponse),
        ApiKey::BrokerHeartbeat => top!(BrokerHeartbeat, BrokerHeartbeatResponse),
        ApiKey::UnregisterBroker => top!(UnregisterBroker, UnregisterBrokerResponse),
        ApiKey::ListTransactions => top!(ListTransactions, ListTransactionsResponse),
        ApiKey::AllocateProducerIds => top!(AllocateProducerIds, AllocateProducerIdsResponse),
        ApiKey::ConsumerGroupHeartbeat => {
            top!(ConsumerGroupHeartbeat, ConsumerGroupHeartbeatResponse)
        }
        ApiKey::ControllerRegistration => {
            top!(ControllerRegistration, ControllerRegistrationResponse)
        }
        ApiKey::GetTelemetrySubscriptions => {
            top!(GetTelemetrySubscriptions, GetTelemetrySubscriptionsResponse)
        }
        ApiKey::PushTelemetry => top!(PushTelemetry, PushTelemetryResponse),
        ApiKey::AssignReplicasToDirs => top!(AssignReplicasToDirs, AssignReplicasToDirsResponse),
        ApiKey::ListConfigResources => top!(ListConfigResources, ListConfigResourcesResponse),
        ApiKey::ShareGroupHeartbeat => top!(ShareGroupHeartbeat, ShareGroupHeartbeatResponse),
        ApiKey::ShareFetch => top!(ShareFetch, ShareFetchResponse),
        ApiKey::ShareAcknowledge => top!(ShareAcknowledge, ShareAcknowledgeResponse),
        ApiKey::AddRaftVoter => top!(AddRaftVoter, AddRaftVoterResponse),
        ApiKey::RemoveRaftVoter => top!(RemoveRaftVoter, RemoveRaftVoterResponse),
        ApiKey::UpdateRaftVoter => top!(UpdateRaftVoter, UpdateRaftVoterResponse),
        ApiKey::AlterShareGroupOffsets => {
            top!(AlterShareGroupOffsets, AlterShareGroupOffsetsResponse)
        }
        ApiKey::DeleteShareGroupOffsets => {
            top!(DeleteShareGroupOffsets, DeleteShareGroupOffsetsResponse)
        }
        // Every other key is answered from its request in `answer`.
        _ => return None,
    })
}

#[cfg(test)]
pub(crate) mod tests;
