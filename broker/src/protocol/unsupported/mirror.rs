//! Answers that repeat what the request named, each entry with the error:
//! for responses that keep errors per entry at the requested version (where
//! they also have a top-level code, that is set too).

use kafka_protocol::messages::{self as m, ResponseKind as R};

use super::E;
use crate::protocol::refusal;

pub(super) fn produce(r: &m::ProduceRequest) -> Option<R> {
    // acks=0: the client reads no response, so an answer would be taken for
    // the next request's; closing is the only signal it gets (as in Kafka).
    if r.acks == 0 {
        return None;
    }
    let responses = refusal::produce_topics(&r.topic_data, E);
    Some(R::Produce(
        m::ProduceResponse::default().with_responses(responses),
    ))
}

pub(super) fn fetch(r: &m::FetchRequest, version: i16) -> m::FetchResponse {
    let response = m::FetchResponse::default();
    let response = if version >= 7 {
        response.with_error_code(E)
    } else {
        response
    };
    // From v13 topics are named by id and Kafka sends none back. Before,
    // the partitions carry the error too, for clients that look only there.
    if version >= 13 {
        return response;
    }
    response.with_responses(refusal::fetch_topics(&r.topics, E))
}

pub(super) fn list_offsets(r: &m::ListOffsetsRequest) -> m::ListOffsetsResponse {
    m::ListOffsetsResponse::default().with_topics(refusal::list_offsets_topics(&r.topics, E))
}

pub(super) fn metadata(r: &m::MetadataRequest, version: i16) -> Option<m::MetadataResponse> {
    use m::metadata_response::MetadataResponseTopic;
    // v0 asks for every topic with an empty list, later versions with null.
    let named = r
        .topics
        .as_ref()
        .filter(|t| !(version == 0 && t.is_empty()));
    let topics: Vec<_> = named
        .into_iter()
        .flatten()
        .map(|t| {
            MetadataResponseTopic::default()
                .with_error_code(E)
                .with_name(Some(t.name.clone().unwrap_or_default()))
                .with_topic_id(t.topic_id)
        })
        .collect();
    let response = m::MetadataResponse::default().with_topics(topics);
    if version >= 13 {
        return Some(response.with_error_code(E));
    }
    // Without a top-level code only named topics can carry the error; an
    // answer with no topics and no brokers would read as an empty cluster.
    (!response.topics.is_empty()).then_some(response)
}

pub(super) fn offset_commit(r: &m::OffsetCommitRequest) -> m::OffsetCommitResponse {
    m::OffsetCommitResponse::default().with_topics(refusal::offset_commit_topics(&r.topics, E))
}

pub(super) fn offset_fetch(r: &m::OffsetFetchRequest, version: i16) -> m::OffsetFetchResponse {
    let response = m::OffsetFetchResponse::default();
    if version >= 8 {
        return response.with_groups(refusal::offset_fetch_groups(&r.groups, E));
    }
    if version >= 2 {
        return response.with_error_code(E);
    }
    let topics = r.topics.as_deref().unwrap_or_default();
    response.with_topics(refusal::offset_fetch_topics(topics, E))
}

pub(super) fn find_coordinator(
    r: &m::FindCoordinatorRequest,
    version: i16,
) -> m::FindCoordinatorResponse {
    let response = m::FindCoordinatorResponse::default();
    if version < 4 {
        return response
            .with_error_code(E)
            .with_node_id(m::BrokerId(-1))
            .with_port(-1);
    }
    response.with_coordinators(refusal::coordinators(&r.coordinator_keys, E))
}

pub(super) fn describe_groups(r: &m::DescribeGroupsRequest) -> m::DescribeGroupsResponse {
    m::DescribeGroupsResponse::default().with_groups(refusal::described_groups(&r.groups, E))
}

pub(super) fn create_topics(r: &m::CreateTopicsRequest) -> m::CreateTopicsResponse {
    m::CreateTopicsResponse::default().with_topics(refusal::created_topics(&r.topics, E))
}

pub(super) fn delete_topics(r: &m::DeleteTopicsRequest) -> m::DeleteTopicsResponse {
    // Up to v5 the request names topics; from v6 it names them or their ids.
    let mut responses = refusal::deleted_topics_by_name(&r.topic_names, E);
    responses.extend(refusal::deleted_topics(&r.topics, E));
    m::DeleteTopicsResponse::default().with_responses(responses)
}

pub(super) fn delete_records(r: &m::DeleteRecordsRequest) -> m::DeleteRecordsResponse {
    m::DeleteRecordsResponse::default().with_topics(refusal::delete_records_topics(&r.topics, E))
}

pub(super) fn offset_for_leader_epoch(
    r: &m::OffsetForLeaderEpochRequest,
) -> m::OffsetForLeaderEpochResponse {
    let topics = refusal::offset_for_leader_epoch_topics(&r.topics, E);
    m::OffsetForLeaderEpochResponse::default().with_topics(topics)
}

pub(super) fn add_partitions_to_txn(
    r: &m::AddPartitionsToTxnRequest,
    version: i16,
) -> m::AddPartitionsToTxnResponse {
    let response = m::AddPartitionsToTxnResponse::default();
    if version >= 4 {
        return response.with_error_code(E);
    }
    let topics = refusal::added_partitions_to_txn(&r.v3_and_below_topics, E);
    response.with_results_by_topic_v3_and_below(topics)
}

pub(super) fn write_txn_markers(r: &m::WriteTxnMarkersRequest) -> m::WriteTxnMarkersResponse {
    m::WriteTxnMarkersResponse::default().with_markers(refusal::txn_markers(&r.markers, E))
}

pub(super) fn txn_offset_commit(r: &m::TxnOffsetCommitRequest) -> m::TxnOffsetCommitResponse {
    let topics = refusal::txn_offset_commit_topics(&r.topics, E);
    m::TxnOffsetCommitResponse::default().with_topics(topics)
}

pub(super) fn create_acls(r: &m::CreateAclsRequest) -> m::CreateAclsResponse {
    m::CreateAclsResponse::default().with_results(refusal::acl_creations(r.creations.len(), E))
}

pub(super) fn delete_acls(r: &m::DeleteAclsRequest) -> m::DeleteAclsResponse {
    let results = refusal::acl_deletions(r.filters.len(), E);
    m::DeleteAclsResponse::default().with_filter_results(results)
}

pub(super) fn describe_configs(r: &m::DescribeConfigsRequest) -> m::DescribeConfigsResponse {
    let results = refusal::described_configs(&r.resources, |_| E);
    m::DescribeConfigsResponse::default().with_results(results)
}

pub(super) fn alter_configs(r: &m::AlterConfigsRequest) -> m::AlterConfigsResponse {
    let responses = refusal::altered_configs(&r.resources, |_| E);
    m::AlterConfigsResponse::default().with_responses(responses)
}

pub(super) fn incremental_alter_configs(
    r: &m::IncrementalAlterConfigsRequest,
) -> m::IncrementalAlterConfigsResponse {
    let responses = refusal::incrementally_altered_configs(&r.resources, |_| E);
    m::IncrementalAlterConfigsResponse::default().with_responses(responses)
}

pub(super) fn alter_replica_log_dirs(
    r: &m::AlterReplicaLogDirsRequest,
) -> m::AlterReplicaLogDirsResponse {
    use m::alter_replica_log_dirs_response::{
        AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
    };
    let results = r
        .dirs
        .iter()
        .flat_map(|d| d.topics.iter())
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(E)
                })
                .collect();
            AlterReplicaLogDirTopicResult::default()
                .with_topic_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    m::AlterReplicaLogDirsResponse::default().with_results(results)
}

pub(super) fn create_partitions(r: &m::CreatePartitionsRequest) -> m::CreatePartitionsResponse {
    m::CreatePartitionsResponse::default().with_results(refusal::created_partitions(&r.topics, E))
}

pub(super) fn delete_groups(r: &m::DeleteGroupsRequest) -> m::DeleteGroupsResponse {
    m::DeleteGroupsResponse::default().with_results(refusal::deleted_groups(&r.groups_names, E))
}

pub(super) fn elect_leaders(
    r: &m::ElectLeadersRequest,
    version: i16,
) -> Option<m::ElectLeadersResponse> {
    let mut response = elect_leaders_refused(r, E, None);
    response.error_code = 0;
    if version >= 1 {
        return Some(response.with_error_code(E));
    }
    // v0 keeps errors per partition only, and null asks for all of them.
    r.topic_partitions.is_some().then_some(response)
}

/// ElectLeaders refused as a whole: the error at the top level and, since
/// v0 has no top-level error, on every partition named too.
pub(crate) fn elect_leaders_refused(
    r: &m::ElectLeadersRequest,
    error: i16,
    message: Option<String>,
) -> m::ElectLeadersResponse {
    use m::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
    let results = r
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    PartitionResult::default()
                        .with_partition_id(p)
                        .with_error_code(error)
                        .with_error_message(
                            message
                                .clone()
                                .map(kafka_protocol::protocol::StrBytes::from_string),
                        )
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(partitions)
        })
        .collect();
    m::ElectLeadersResponse::default()
        .with_error_code(error)
        .with_replica_election_results(results)
}

pub(super) fn alter_client_quotas(r: &m::AlterClientQuotasRequest) -> m::AlterClientQuotasResponse {
    alter_client_quotas_refused(r, E)
}

/// AlterClientQuotas refused whole: each entity the request named, with
/// `error`.
pub(crate) fn alter_client_quotas_refused(
    r: &m::AlterClientQuotasRequest,
    error: i16,
) -> m::AlterClientQuotasResponse {
    use m::alter_client_quotas_response::{EntityData, EntryData};
    let entries = r
        .entries
        .iter()
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|x| {
                    EntityData::default()
                        .with_entity_type(x.entity_type.clone())
                        .with_entity_name(x.entity_name.clone())
                })
                .collect();
            EntryData::default()
                .with_error_code(error)
                .with_entity(entity)
        })
        .collect();
    m::AlterClientQuotasResponse::default().with_entries(entries)
}

pub(super) fn alter_user_scram_credentials(
    r: &m::AlterUserScramCredentialsRequest,
) -> m::AlterUserScramCredentialsResponse {
    m::AlterUserScramCredentialsResponse::default().with_results(refusal::scram_alterations(r, E))
}

pub(super) fn describe_producers(r: &m::DescribeProducersRequest) -> m::DescribeProducersResponse {
    m::DescribeProducersResponse::default().with_topics(refusal::described_producers(&r.topics, E))
}

pub(super) fn describe_transactions(
    r: &m::DescribeTransactionsRequest,
) -> m::DescribeTransactionsResponse {
    let states = refusal::transaction_states(&r.transactional_ids, E);
    m::DescribeTransactionsResponse::default().with_transaction_states(states)
}

pub(super) fn consumer_group_describe(
    r: &m::ConsumerGroupDescribeRequest,
) -> m::ConsumerGroupDescribeResponse {
    let groups = refusal::described_consumer_groups(&r.group_ids, E);
    m::ConsumerGroupDescribeResponse::default().with_groups(groups)
}

pub(super) fn share_group_describe(
    r: &m::ShareGroupDescribeRequest,
) -> m::ShareGroupDescribeResponse {
    use m::share_group_describe_response::DescribedGroup;
    let groups = r
        .group_ids
        .iter()
        .map(|g| {
            DescribedGroup::default()
                .with_group_id(g.clone())
                .with_error_code(E)
        })
        .collect();
    m::ShareGroupDescribeResponse::default().with_groups(groups)
}

pub(super) fn describe_topic_partitions(
    r: &m::DescribeTopicPartitionsRequest,
) -> m::DescribeTopicPartitionsResponse {
    let topics = refusal::described_topic_partitions(&r.topics, E);
    m::DescribeTopicPartitionsResponse::default().with_topics(topics)
}

pub(super) fn describe_share_group_offsets(
    r: &m::DescribeShareGroupOffsetsRequest,
) -> m::DescribeShareGroupOffsetsResponse {
    use m::describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup;
    let groups = r
        .groups
        .iter()
        .map(|g| {
            DescribeShareGroupOffsetsResponseGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(E)
        })
        .collect();
    m::DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}

/// The share-group state RPCs all name partitions by topic id and answer
/// per partition.
pub(super) mod share_state {
    use super::super::E;
    use kafka_protocol::messages as m;

    macro_rules! per_partition {
        ($name:ident, $req:ident, $resp:ident, $module:ident, $result:ident) => {
            pub fn $name(r: &m::$req) -> m::$resp {
                use m::$module::{PartitionResult, $result};
                let results = r
                    .topics
                    .iter()
                    .map(|t| {
                        let partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                PartitionResult::default()
                                    .with_partition(p.partition)
                                    .with_error_code(E)
                            })
                            .collect();
                        $result::default()
                            .with_topic_id(t.topic_id)
                            .with_partitions(partitions)
                    })
                    .collect();
                m::$resp::default().with_results(results)
            }
        };
    }

    per_partition!(
        initialize,
        InitializeShareGroupStateRequest,
        InitializeShareGroupStateResponse,
        initialize_share_group_state_response,
        InitializeStateResult
    );
    per_partition!(
        read,
        ReadShareGroupStateRequest,
        ReadShareGroupStateResponse,
        read_share_group_state_response,
        ReadStateResult
    );
    per_partition!(
        write,
        WriteShareGroupStateRequest,
        WriteShareGroupStateResponse,
        write_share_group_state_response,
        WriteStateResult
    );
    per_partition!(
        delete,
        DeleteShareGroupStateRequest,
        DeleteShareGroupStateResponse,
        delete_share_group_state_response,
        DeleteStateResult
    );
    per_partition!(
        read_summary,
        ReadShareGroupStateSummaryRequest,
        ReadShareGroupStateSummaryResponse,
        read_share_group_state_summary_response,
        ReadStateSummaryResult
    );
}
