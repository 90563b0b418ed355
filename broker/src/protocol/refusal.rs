//! The entries of a response that answer each entry a request named (a
//! topic and its partitions, a group, a resource) with one error code.
//! Two callers refuse that way: the answer to a version this broker does
//! not serve (every entry, UNSUPPORTED_VERSION; `unsupported`) and the
//! authorizer (the entries the principal may not touch, with their
//! authorization error; `api::authz`). One builder per shape keeps the two
//! from drifting: a client reads both the same way.
//!
//! Offsets, timestamps and epochs a refusal cannot know are -1, as in Kafka.

use kafka_protocol::messages::{self as m, BrokerId, GroupId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

pub fn produce_topics(
    topics: &[m::produce_request::TopicProduceData],
    code: i16,
) -> Vec<m::produce_response::TopicProduceResponse> {
    use m::produce_response::TopicProduceResponse;
    topics
        .iter()
        .map(|t| {
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partition_responses(
                    t.partition_data
                        .iter()
                        .map(|p| produce_partition(p.index, code))
                        .collect(),
                )
        })
        .collect()
}

pub fn produce_partition(index: i32, code: i16) -> m::produce_response::PartitionProduceResponse {
    m::produce_response::PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}

pub fn fetch_topics(
    topics: &[m::fetch_request::FetchTopic],
    code: i16,
) -> Vec<m::fetch_response::FetchableTopicResponse> {
    use m::fetch_response::{FetchableTopicResponse, PartitionData};
    topics
        .iter()
        .map(|t| {
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            PartitionData::default()
                                .with_partition_index(p.partition)
                                .with_error_code(code)
                                .with_high_watermark(-1)
                                .with_last_stable_offset(-1)
                                .with_log_start_offset(-1)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub fn list_offsets_topics(
    topics: &[m::list_offsets_request::ListOffsetsTopic],
    code: i16,
) -> Vec<m::list_offsets_response::ListOffsetsTopicResponse> {
    use m::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
    topics
        .iter()
        .map(|t| {
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            ListOffsetsPartitionResponse::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                                .with_timestamp(-1)
                                .with_offset(-1)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub fn offset_for_leader_epoch_topics(
    topics: &[m::offset_for_leader_epoch_request::OffsetForLeaderTopic],
    code: i16,
) -> Vec<m::offset_for_leader_epoch_response::OffsetForLeaderTopicResult> {
    use m::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
    topics
        .iter()
        .map(|t| {
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            EpochEndOffset::default()
                                .with_partition(p.partition)
                                .with_error_code(code)
                                .with_leader_epoch(-1)
                                .with_end_offset(-1)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub fn created_topics(
    topics: &[m::create_topics_request::CreatableTopic],
    code: i16,
) -> Vec<m::create_topics_response::CreatableTopicResult> {
    topics
        .iter()
        .map(|t| {
            m::create_topics_response::CreatableTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(code)
                .with_num_partitions(-1)
                .with_replication_factor(-1)
        })
        .collect()
}

/// DeleteTopics up to v5 names topics.
pub fn deleted_topics_by_name(
    names: &[TopicName],
    code: i16,
) -> Vec<m::delete_topics_response::DeletableTopicResult> {
    names
        .iter()
        .map(|n| {
            m::delete_topics_response::DeletableTopicResult::default()
                .with_name(Some(n.clone()))
                .with_error_code(code)
        })
        .collect()
}

/// DeleteTopics from v6 names topics or their ids.
pub fn deleted_topics(
    topics: &[m::delete_topics_request::DeleteTopicState],
    code: i16,
) -> Vec<m::delete_topics_response::DeletableTopicResult> {
    topics
        .iter()
        .map(|t| {
            m::delete_topics_response::DeletableTopicResult::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_error_code(code)
        })
        .collect()
}

pub fn delete_records_topics(
    topics: &[m::delete_records_request::DeleteRecordsTopic],
    code: i16,
) -> Vec<m::delete_records_response::DeleteRecordsTopicResult> {
    use m::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
    topics
        .iter()
        .map(|t| {
            DeleteRecordsTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            DeleteRecordsPartitionResult::default()
                                .with_partition_index(p.partition_index)
                                .with_low_watermark(-1)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub fn created_partitions(
    topics: &[m::create_partitions_request::CreatePartitionsTopic],
    code: i16,
) -> Vec<m::create_partitions_response::CreatePartitionsTopicResult> {
    topics
        .iter()
        .map(|t| {
            m::create_partitions_response::CreatePartitionsTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(code)
        })
        .collect()
}

pub fn described_producers(
    topics: &[m::describe_producers_request::TopicRequest],
    code: i16,
) -> Vec<m::describe_producers_response::TopicResponse> {
    use m::describe_producers_response::{PartitionResponse, TopicResponse};
    topics
        .iter()
        .map(|t| {
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partition_indexes
                        .iter()
                        .map(|&p| {
                            PartitionResponse::default()
                                .with_partition_index(p)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub fn described_topic_partitions(
    topics: &[m::describe_topic_partitions_request::TopicRequest],
    code: i16,
) -> Vec<m::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic> {
    topics
        .iter()
        .map(|t| {
            m::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(t.name.clone()))
                .with_error_code(code)
        })
        .collect()
}

pub fn offset_commit_topics(
    topics: &[m::offset_commit_request::OffsetCommitRequestTopic],
    code: i16,
) -> Vec<m::offset_commit_response::OffsetCommitResponseTopic> {
    use m::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    topics
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
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// OffsetFetch v0-v1: no group error, each partition asked carries it.
pub fn offset_fetch_topics(
    topics: &[m::offset_fetch_request::OffsetFetchRequestTopic],
    code: i16,
) -> Vec<m::offset_fetch_response::OffsetFetchResponseTopic> {
    use m::offset_fetch_response::{OffsetFetchResponsePartition, OffsetFetchResponseTopic};
    topics
        .iter()
        .map(|t| {
            OffsetFetchResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partition_indexes
                        .iter()
                        .map(|&p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// OffsetFetch v8+: a list of groups.
pub fn offset_fetch_groups(
    groups: &[m::offset_fetch_request::OffsetFetchRequestGroup],
    code: i16,
) -> Vec<m::offset_fetch_response::OffsetFetchResponseGroup> {
    groups
        .iter()
        .map(|g| {
            m::offset_fetch_response::OffsetFetchResponseGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(code)
        })
        .collect()
}

pub fn described_groups(
    groups: &[GroupId],
    code: i16,
) -> Vec<m::describe_groups_response::DescribedGroup> {
    groups
        .iter()
        .map(|g| {
            m::describe_groups_response::DescribedGroup::default()
                .with_group_id(g.clone())
                .with_error_code(code)
        })
        .collect()
}

pub fn described_consumer_groups(
    groups: &[GroupId],
    code: i16,
) -> Vec<m::consumer_group_describe_response::DescribedGroup> {
    groups
        .iter()
        .map(|g| {
            m::consumer_group_describe_response::DescribedGroup::default()
                .with_group_id(g.clone())
                .with_error_code(code)
        })
        .collect()
}

pub fn deleted_groups(
    groups: &[GroupId],
    code: i16,
) -> Vec<m::delete_groups_response::DeletableGroupResult> {
    groups
        .iter()
        .map(|g| {
            m::delete_groups_response::DeletableGroupResult::default()
                .with_group_id(g.clone())
                .with_error_code(code)
        })
        .collect()
}

/// FindCoordinator v4+: one coordinator per key asked.
pub fn coordinators(
    keys: &[StrBytes],
    code: i16,
) -> Vec<m::find_coordinator_response::Coordinator> {
    keys.iter()
        .map(|k| {
            m::find_coordinator_response::Coordinator::default()
                .with_key(k.clone())
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(code)
        })
        .collect()
}

pub fn txn_offset_commit_topics(
    topics: &[m::txn_offset_commit_request::TxnOffsetCommitRequestTopic],
    code: i16,
) -> Vec<m::txn_offset_commit_response::TxnOffsetCommitResponseTopic> {
    use m::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };
    topics
        .iter()
        .map(|t| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// AddPartitionsToTxn v0-v3: one transaction's topics.
pub fn added_partitions_to_txn(
    topics: &[m::add_partitions_to_txn_request::AddPartitionsToTxnTopic],
    code: i16,
) -> Vec<m::add_partitions_to_txn_response::AddPartitionsToTxnTopicResult> {
    use m::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub fn txn_markers(
    markers: &[m::write_txn_markers_request::WritableTxnMarker],
    code: i16,
) -> Vec<m::write_txn_markers_response::WritableTxnMarkerResult> {
    use m::write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    markers
        .iter()
        .map(|mk| {
            let topics = mk
                .topics
                .iter()
                .map(|t| {
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partition_indexes
                                .iter()
                                .map(|&p| {
                                    WritableTxnMarkerPartitionResult::default()
                                        .with_partition_index(p)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(mk.producer_id)
                .with_topics(topics)
        })
        .collect()
}

pub fn transaction_states(
    ids: &[TransactionalId],
    code: i16,
) -> Vec<m::describe_transactions_response::TransactionState> {
    ids.iter()
        .map(|id| {
            m::describe_transactions_response::TransactionState::default()
                .with_transactional_id(id.clone())
                .with_error_code(code)
        })
        .collect()
}

pub fn acl_creations(n: usize, code: i16) -> Vec<m::create_acls_response::AclCreationResult> {
    (0..n)
        .map(|_| m::create_acls_response::AclCreationResult::default().with_error_code(code))
        .collect()
}

pub fn acl_deletions(n: usize, code: i16) -> Vec<m::delete_acls_response::DeleteAclsFilterResult> {
    (0..n)
        .map(|_| m::delete_acls_response::DeleteAclsFilterResult::default().with_error_code(code))
        .collect()
}

/// One result per user an AlterUserScramCredentials names (deletions
/// first), as Kafka sends, however many changes name it.
pub fn scram_alterations(
    r: &m::AlterUserScramCredentialsRequest,
    code: i16,
) -> Vec<m::alter_user_scram_credentials_response::AlterUserScramCredentialsResult> {
    let mut users = Vec::new();
    let names = r.deletions.iter().map(|d| &d.name);
    for name in names.chain(r.upsertions.iter().map(|u| &u.name)) {
        if !users.contains(name) {
            users.push(name.clone());
        }
    }
    users
        .into_iter()
        .map(|u| {
            m::alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                .with_user(u)
                .with_error_code(code)
        })
        .collect()
}

/// DescribeConfigs; `code` by resource type (a topic's or the cluster's).
pub fn described_configs(
    resources: &[m::describe_configs_request::DescribeConfigsResource],
    code: impl Fn(i8) -> i16,
) -> Vec<m::describe_configs_response::DescribeConfigsResult> {
    resources
        .iter()
        .map(|c| {
            m::describe_configs_response::DescribeConfigsResult::default()
                .with_error_code(code(c.resource_type))
                .with_resource_type(c.resource_type)
                .with_resource_name(c.resource_name.clone())
        })
        .collect()
}

pub fn altered_configs(
    resources: &[m::alter_configs_request::AlterConfigsResource],
    code: impl Fn(i8) -> i16,
) -> Vec<m::alter_configs_response::AlterConfigsResourceResponse> {
    resources
        .iter()
        .map(|c| {
            m::alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code(c.resource_type))
                .with_resource_type(c.resource_type)
                .with_resource_name(c.resource_name.clone())
        })
        .collect()
}

pub fn incrementally_altered_configs(
    resources: &[m::incremental_alter_configs_request::AlterConfigsResource],
    code: impl Fn(i8) -> i16,
) -> Vec<m::incremental_alter_configs_response::AlterConfigsResourceResponse> {
    resources
        .iter()
        .map(|c| {
            m::incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code(c.resource_type))
                .with_resource_type(c.resource_type)
                .with_resource_name(c.resource_name.clone())
        })
        .collect()
}
