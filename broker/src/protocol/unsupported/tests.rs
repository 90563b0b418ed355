//! Every API the codec knows, at every version it reads.
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use super::*;
macro_rules! defaults {
    ($($kind:ident),* $(,)?) => {
        /// A default request of every API the codec knows.
        pub(crate) fn default_request(api: ApiKey) -> Option<Q> {
            match api {
                $(ApiKey::$kind => Some(Q::$kind(Default::default())),)*
                #[allow(unreachable_patterns)]
                _ => None,
            }
        }
    };
}

defaults!(
    Produce,
    Fetch,
    ListOffsets,
    Metadata,
    OffsetCommit,
    OffsetFetch,
    FindCoordinator,
    JoinGroup,
    Heartbeat,
    LeaveGroup,
    SyncGroup,
    DescribeGroups,
    ListGroups,
    SaslHandshake,
    ApiVersions,
    CreateTopics,
    DeleteTopics,
    DeleteRecords,
    InitProducerId,
    OffsetForLeaderEpoch,
    AddPartitionsToTxn,
    AddOffsetsToTxn,
    EndTxn,
    WriteTxnMarkers,
    TxnOffsetCommit,
    DescribeAcls,
    CreateAcls,
    DeleteAcls,
    DescribeConfigs,
    AlterConfigs,
    AlterReplicaLogDirs,
    DescribeLogDirs,
    SaslAuthenticate,
    CreatePartitions,
    CreateDelegationToken,
    RenewDelegationToken,
    ExpireDelegationToken,
    DescribeDelegationToken,
    DeleteGroups,
    ElectLeaders,
    IncrementalAlterConfigs,
    AlterPartitionReassignments,
    ListPartitionReassignments,
    OffsetDelete,
    DescribeClientQuotas,
    AlterClientQuotas,
    DescribeUserScramCredentials,
    AlterUserScramCredentials,
    Vote,
    BeginQuorumEpoch,
    EndQuorumEpoch,
    DescribeQuorum,
    AlterPartition,
    UpdateFeatures,
    Envelope,
    FetchSnapshot,
    DescribeCluster,
    DescribeProducers,
    BrokerRegistration,
    BrokerHeartbeat,
    UnregisterBroker,
    DescribeTransactions,
    ListTransactions,
    AllocateProducerIds,
    ConsumerGroupHeartbeat,
    ConsumerGroupDescribe,
    ControllerRegistration,
    GetTelemetrySubscriptions,
    PushTelemetry,
    AssignReplicasToDirs,
    ListConfigResources,
    DescribeTopicPartitions,
    ShareGroupHeartbeat,
    ShareGroupDescribe,
    ShareFetch,
    ShareAcknowledge,
    AddRaftVoter,
    RemoveRaftVoter,
    UpdateRaftVoter,
    InitializeShareGroupState,
    ReadShareGroupState,
    WriteShareGroupState,
    DeleteShareGroupState,
    ReadShareGroupStateSummary,
    DescribeShareGroupOffsets,
    AlterShareGroupOffsets,
    DeleteShareGroupOffsets,
);

/// Encodes `response` at `version` and decodes it back, as a client would.
fn round_trip(api: ApiKey, version: i16, response: R) -> R {
    let mut buf = BytesMut::new();
    response.encode(&mut buf, version).unwrap();
    let mut bytes = buf.freeze();
    R::decode(api, &mut bytes, version).unwrap()
}

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

#[test]
fn the_code_is_kafkas_unsupported_version() {
    assert_eq!(UNSUPPORTED_VERSION, 35);
}

/// APIs whose answer lists what the request named (empty for a default
/// request) instead of a top-level code, at some versions.
const MIRRORED: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::DescribeGroups,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DeleteRecords,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::AddPartitionsToTxn,
    ApiKey::WriteTxnMarkers,
    ApiKey::TxnOffsetCommit,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::AlterReplicaLogDirs,
    ApiKey::CreatePartitions,
    ApiKey::DeleteGroups,
    ApiKey::ElectLeaders,
    ApiKey::AlterClientQuotas,
    ApiKey::AlterUserScramCredentials,
    ApiKey::DescribeProducers,
    ApiKey::DescribeTransactions,
    ApiKey::ConsumerGroupDescribe,
    ApiKey::ShareGroupDescribe,
    ApiKey::DescribeTopicPartitions,
    ApiKey::DescribeShareGroupOffsets,
    ApiKey::InitializeShareGroupState,
    ApiKey::ReadShareGroupState,
    ApiKey::WriteShareGroupState,
    ApiKey::DeleteShareGroupState,
    ApiKey::ReadShareGroupStateSummary,
];

#[test]
fn every_api_and_version_the_codec_reads_gets_an_answer_that_encodes() {
    let mut answered = 0;
    for api in ApiKey::iter() {
        let request = default_request(api).unwrap();
        let range = api.valid_versions();
        for version in range.min..=range.max {
            // The codec's key range is wider than some of its messages
            // (OffsetCommit v10, say): such a request never decodes.
            let mut buf = BytesMut::new();
            if request.encode(&mut buf, version).is_err() {
                continue;
            }
            let decoded = Q::decode(api, &mut buf.freeze(), version).unwrap();
            let Some(response) = answer(api, version, &decoded) else {
                let expected = match api {
                    ApiKey::ApiVersions => true,
                    ApiKey::Produce => true, // acks=0 by default
                    ApiKey::Metadata => version < 13,
                    ApiKey::DescribeLogDirs => version < 3,
                    _ => false,
                };
                assert!(expected, "{api:?} v{version} has no answer");
                continue;
            };
            let back = round_trip(api, version, response);
            let text = format!("{back:?}");
            assert!(
                text.contains("error_code: 35") || MIRRORED.contains(&api),
                "{api:?} v{version}: {text}"
            );
            answered += 1;
        }
    }
    assert!(answered > 200, "{answered}");
}

#[test]
fn partitions_carry_the_error_where_there_is_no_top_level_code() {
    use m::fetch_request::{FetchPartition, FetchTopic};
    let request = m::FetchRequest::default().with_topics(vec![
        FetchTopic::default()
            .with_topic(name("orders"))
            .with_partitions(vec![
                FetchPartition::default().with_partition(0),
                FetchPartition::default().with_partition(3),
            ]),
    ]);
    for (version, top) in [(5, 0), (9, 35)] {
        let R::Fetch(r) = round_trip(
            ApiKey::Fetch,
            version,
            answer(ApiKey::Fetch, version, &Q::Fetch(request.clone())).unwrap(),
        ) else {
            panic!("not a fetch response");
        };
        assert_eq!(r.error_code, top, "v{version}");
        let parts: Vec<_> = r.responses[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(parts, [(0, 35), (3, 35)], "v{version}");
    }
    let v1 = m::OffsetFetchRequest::default().with_topics(Some(vec![
        m::offset_fetch_request::OffsetFetchRequestTopic::default()
            .with_name(name("orders"))
            .with_partition_indexes(vec![2]),
    ]));
    let Some(R::OffsetFetch(r)) = answer(ApiKey::OffsetFetch, 1, &Q::OffsetFetch(v1)) else {
        panic!("no offset fetch answer");
    };
    assert_eq!(r.topics[0].partitions[0].error_code, 35);
    assert_eq!(r.topics[0].partitions[0].committed_offset, -1);
}

#[test]
fn no_answer_where_nothing_could_carry_the_error() {
    // Metadata for every topic below v13: an empty answer would say the
    // cluster has no topics and no brokers.
    let all = m::MetadataRequest::default().with_topics(None);
    assert!(answer(ApiKey::Metadata, 5, &Q::Metadata(all.clone())).is_none());
    assert!(answer(ApiKey::Metadata, 13, &Q::Metadata(all)).is_some());
    let named = m::MetadataRequest::default().with_topics(Some(vec![
        m::metadata_request::MetadataRequestTopic::default().with_name(Some(name("a"))),
    ]));
    let Some(R::Metadata(r)) = answer(ApiKey::Metadata, 5, &Q::Metadata(named)) else {
        panic!("no metadata answer");
    };
    assert_eq!((r.topics.len(), r.topics[0].error_code), (1, 35));
    // ElectLeaders v0 for every partition.
    let every = m::ElectLeadersRequest::default().with_topic_partitions(None);
    assert!(answer(ApiKey::ElectLeaders, 0, &Q::ElectLeaders(every.clone())).is_none());
    assert!(answer(ApiKey::ElectLeaders, 1, &Q::ElectLeaders(every)).is_some());
    // A produce with acks=0 expects no response at all.
    let silent = m::ProduceRequest::default().with_acks(0);
    assert!(answer(ApiKey::Produce, 10, &Q::Produce(silent)).is_none());
}
