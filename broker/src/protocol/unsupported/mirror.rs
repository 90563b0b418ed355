//! Answers that repeat what the request named, each entry with the error:
//! for responses that keep errors per entry at the requested version (where
//! they also have a top-level code, that is set too).

use kafka_protocol::messages::{self as m, ResponseKind as R};

use super::E;

pub(super) fn produce(r: &m::ProduceRequest) -> Option<R> {
    use m::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    // acks=0: the client reads no response, so an answer would be taken for
    // the next request's; closing is the only signal it gets (as in Kafka).
    if r.acks == 0 {
        return None;
    }
    let responses = r
        .topic_data
        .iter()
        .map(|t| {
            let partitions = t
                .partition_data
                .iter()
                .map(|p| {
                    PartitionProduceResponse::default()
                        .with_index(p.index)
                        .with_error_code(E)
                        .with_base_offset(-1)
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partition_responses(partitions)
        })
        .collect();
    Some(R::Produce(
        m::ProduceResponse::default().with_responses(responses),
    ))
}

pub(super) fn fetch(r: &m::FetchRequest, version: i16) -> m::FetchResponse {
    use m::fetch_response::{FetchableTopicResponse, PartitionData};
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
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_error_code(E)
                        .with_high_watermark(-1)
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    response.with_responses(topics)
}

pub(super) fn list_offsets(r: &m::ListOffsetsRequest) -> m::ListOffsetsResponse {
    use m::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(E)
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    m::ListOffsetsResponse::default().with_topics(topics)
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
    use m::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(E)
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    m::OffsetCommitResponse::default().with_topics(topics)
}

pub(super) fn offset_fetch(r: &m::OffsetFetchRequest, version: i16) -> m::OffsetFetchResponse {
    use m::offset_fetch_response::{
        OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
    };
    let response = m::OffsetFetchResponse::default();
    if version >= 8 {
        let groups = r
            .groups
            .iter()
            .map(|g| {
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(E)
            })
            .collect();
        return response.with_groups(groups);
    }
    if version >= 2 {
        return response.with_error_code(E);
    }
    let topics = r
        .topics
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(-1)
                        .with_error_code(E)
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    response.with_topics(topics)
}

pub(super) fn find_coordinator(
    r: &m::FindCoordinatorRequest,
    version: i16,
) -> m::FindCoordinatorResponse {
    use m::find_coordinator_response::Coordinator;
    let response = m::FindCoordinatorResponse::default();
    if version < 4 {
        return response
            .with_error_code(E)
            .with_node_id(m::BrokerId(-1))
            .with_port(-1);
    }
    let coordinators = r
        .coordinator_keys
        .iter()
        .map(|k| {
            Coordinator::default()
                .with_key(k.clone())
                .with_node_id(m::BrokerId(-1))
                .with_port(-1)
                .with_error_code(E)
        })
        .collect();
    response.with_coordinators(coordinators)
}

pub(super) fn describe_groups(r: &m::DescribeGroupsRequest) -> m::DescribeGroupsResponse {
    use m::describe_groups_response::DescribedGroup;
    let groups = r
        .groups
        .iter()
        .map(|g| {
            DescribedGroup::default()
                .with_group_id(g.clone())
                .with_error_code(E)
        })
        .collect();
    m::DescribeGroupsResponse::default().with_groups(groups)
}

pub(super) fn create_topics(r: &m::CreateTopicsRequest) -> m::CreateTopicsResponse {
    use m::create_topics_response::CreatableTopicResult;
    let topics = r
        .topics
        .iter()
        .map(|t| {
            CreatableTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(E)
        })
        .collect();
    m::CreateTopicsResponse::default().with_topics(topics)
}

pub(super) fn delete_topics(r: &m::DeleteTopicsRequest) -> m::DeleteTopicsResponse {
    use m::delete_topics_response::DeletableTopicResult;
    // Up to v5 the request names topics; from v6 it names them or their ids.
    let by_name = r.topic_names.iter().map(|n| {
        DeletableTopicResult::default()
            .with_name(Some(n.clone()))
            .with_error_code(E)
    });
    let by_state = r.topics.iter().map(|t| {
        DeletableTopicResult::default()
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id)
            .with_error_code(E)
    });
    m::DeleteTopicsResponse::default().with_responses(by_name.chain(by_state).collect())
}

pub(super) fn delete_records(r: &m::DeleteRecordsRequest) -> m::DeleteRecordsResponse {
    use m::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1)
                        .with_error_code(E)
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    m::DeleteRecordsResponse::default().with_topics(topics)
}

pub(super) fn offset_for_leader_epoch(
    r: &m::OffsetForLeaderEpochRequest,
) -> m::OffsetForLeaderEpochResponse {
    use m::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_error_code(E)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    m::OffsetForLeaderEpochResponse::default().with_topics(topics)
}

pub(super) fn add_partitions_to_txn(
    r: &m::AddPartitionsToTxnRequest,
    version: i16,
) -> m::AddPartitionsToTxnResponse {
    use m::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    let response = m::AddPartitionsToTxnResponse::default();
    if version >= 4 {
        return response.with_error_code(E);
    }
    let topics = r
        .v3_and_below_topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(E)
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(partitions)
        })
        .collect();
    response.with_results_by_topic_v3_and_below(topics)
}

pub(super) fn write_txn_markers(r: &m::WriteTxnMarkersRequest) -> m::WriteTxnMarkersResponse {
    use m::write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    let markers = r
        .markers
        .iter()
        .map(|mk| {
            let topics = mk
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(E)
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(mk.producer_id)
                .with_topics(topics)
        })
        .collect();
    m::WriteTxnMarkersResponse::default().with_markers(markers)
}

pub(super) fn txn_offset_commit(r: &m::TxnOffsetCommitRequest) -> m::TxnOffsetCommitResponse {
    use m::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(E)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    m::TxnOffsetCommitResponse::default().with_topics(topics)
}

pub(super) fn create_acls(r: &m::CreateAclsRequest) -> m::CreateAclsResponse {
    use m::create_acls_response::AclCreationResult;
    let results = r
        .creations
        .iter()
        .map(|_| AclCreationResult::default().with_error_code(E))
        .collect();
    m::CreateAclsResponse::default().with_results(results)
}

pub(super) fn delete_acls(r: &m::DeleteAclsRequest) -> m::DeleteAclsResponse {
    use m::delete_acls_response::DeleteAclsFilterResult;
    let results = r
        .filters
        .iter()
        .map(|_| DeleteAclsFilterResult::default().with_error_code(E))
        .collect();
    m::DeleteAclsResponse::default().with_filter_results(results)
}

pub(super) fn describe_configs(r: &m::DescribeConfigsRequest) -> m::DescribeConfigsResponse {
    use m::describe_configs_response::DescribeConfigsResult;
    let results = r
        .resources
        .iter()
        .map(|c| {
            DescribeConfigsResult::default()
                .with_error_code(E)
                .with_resource_type(c.resource_type)
                .with_resource_name(c.resource_name.clone())
        })
        .collect();
    m::DescribeConfigsResponse::default().with_results(results)
}

pub(super) fn alter_configs(r: &m::AlterConfigsRequest) -> m::AlterConfigsResponse {
    use m::alter_configs_response::AlterConfigsResourceResponse;
    let responses = r
        .resources
        .iter()
        .map(|c| {
            AlterConfigsResourceResponse::default()
                .with_error_code(E)
                .with_resource_type(c.resource_type)
                .with_resource_name(c.resource_name.clone())
        })
        .collect();
    m::AlterConfigsResponse::default().with_responses(responses)
}

pub(super) fn incremental_alter_configs(
    r: &m::IncrementalAlterConfigsRequest,
) -> m::IncrementalAlterConfigsResponse {
    use m::incremental_alter_configs_response::AlterConfigsResourceResponse;
    let responses = r
        .resources
        .iter()
        .map(|c| {
            AlterConfigsResourceResponse::default()
                .with_error_code(E)
                .with_resource_type(c.resource_type)
                .with_resource_name(c.resource_name.clone())
        })
        .collect();
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
    use m::create_partitions_response::CreatePartitionsTopicResult;
    let results = r
        .topics
        .iter()
        .map(|t| {
            CreatePartitionsTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(E)
        })
        .collect();
    m::CreatePartitionsResponse::default().with_results(results)
}

pub(super) fn delete_groups(r: &m::DeleteGroupsRequest) -> m::DeleteGroupsResponse {
    use m::delete_groups_response::DeletableGroupResult;
    let results = r
        .groups_names
        .iter()
        .map(|g| {
            DeletableGroupResult::default()
                .with_group_id(g.clone())
                .with_error_code(E)
        })
        .collect();
    m::DeleteGroupsResponse::default().with_results(results)
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
    use m::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
    // One result per user, as Kafka sends, however many changes named it.
    let mut users = Vec::new();
    let names = r.deletions.iter().map(|d| &d.name);
    for name in names.chain(r.upsertions.iter().map(|u| &u.name)) {
        if !users.contains(name) {
            users.push(name.clone());
        }
    }
    let results = users
        .into_iter()
        .map(|user| {
            AlterUserScramCredentialsResult::default()
                .with_user(user)
                .with_error_code(E)
        })
        .collect();
    m::AlterUserScramCredentialsResponse::default().with_results(results)
}

pub(super) fn describe_producers(r: &m::DescribeProducersRequest) -> m::DescribeProducersResponse {
    use m::describe_producers_response::{PartitionResponse, TopicResponse};
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    PartitionResponse::default()
                        .with_partition_index(p)
                        .with_error_code(E)
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    m::DescribeProducersResponse::default().with_topics(topics)
}

pub(super) fn describe_transactions(
    r: &m::DescribeTransactionsRequest,
) -> m::DescribeTransactionsResponse {
    use m::describe_transactions_response::TransactionState;
    let states = r
        .transactional_ids
        .iter()
        .map(|id| {
            TransactionState::default()
                .with_transactional_id(id.clone())
                .with_error_code(E)
        })
        .collect();
    m::DescribeTransactionsResponse::default().with_transaction_states(states)
}

pub(super) fn consumer_group_describe(
    r: &m::ConsumerGroupDescribeRequest,
) -> m::ConsumerGroupDescribeResponse {
    use m::consumer_group_describe_response::DescribedGroup;
    let groups = r
        .group_ids
        .iter()
        .map(|g| {
            DescribedGroup::default()
                .with_group_id(g.clone())
                .with_error_code(E)
        })
        .collect();
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
    use m::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
    let topics = r
        .topics
        .iter()
        .map(|t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(t.name.clone()))
                .with_error_code(E)
        })
        .collect();
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
