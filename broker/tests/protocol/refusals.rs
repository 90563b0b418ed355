//! Every authorization refusal, at every version the broker serves, is a
//! response the client can decode, and the connection stays open: a
//! refusal that sets a field its version lacks cannot be encoded, and the
//! broker then drops the connection (librdkafka reports "all broker
//! connections are down" instead of the error).

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::*;

fn s(v: &'static str) -> StrBytes {
    StrBytes::from_static_str(v)
}

fn topic() -> TopicName {
    TopicName(s("t"))
}

fn group() -> GroupId {
    GroupId(s("g"))
}

fn txn() -> TransactionalId {
    TransactionalId(s("x"))
}

/// Forms of a request naming topic `t`, group `g` or transactional id `x`
/// (which the principal may not touch), in the order tried: the first one
/// the version can encode is sent. The last is the default request, which
/// names whatever its defaults name (an empty group, a cluster action).
fn forms(key: ApiKey) -> Vec<RequestKind> {
    let mut v = topic_forms(key)
        .or_else(|| coordinated_forms(key))
        .or_else(|| security_forms(key))
        .unwrap_or_default();
    if let Some(d) = default_request(key) {
        v.push(d);
    }
    v
}

/// [`forms`] of the requests about topics, their records and configs.
fn topic_forms(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::Produce => {
            let data = produce_request::TopicProduceData::default()
                .with_name(topic())
                .with_partition_data(vec![produce_request::PartitionProduceData::default()]);
            vec![R::Produce(
                ProduceRequest::default()
                    .with_acks(-1)
                    .with_topic_data(vec![data]),
            )]
        }
        ApiKey::Fetch => vec![R::Fetch(FetchRequest::default().with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(topic())
                .with_partitions(vec![fetch_request::FetchPartition::default()]),
        ]))],
        ApiKey::ListOffsets => vec![R::ListOffsets(ListOffsetsRequest::default().with_topics(
            vec![
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(topic())
                    .with_partitions(vec![Default::default()]),
            ],
        ))],
        ApiKey::Metadata => vec![R::Metadata(MetadataRequest::default().with_topics(Some(
            vec![metadata_request::MetadataRequestTopic::default().with_name(Some(topic()))],
        )))],
        ApiKey::ElectLeaders => vec![R::ElectLeaders(
            ElectLeadersRequest::default().with_topic_partitions(Some(vec![
                elect_leaders_request::TopicPartitions::default()
                    .with_topic(topic())
                    .with_partitions(vec![0]),
            ])),
        )],
        ApiKey::CreateTopics => vec![R::CreateTopics(CreateTopicsRequest::default().with_topics(
            vec![
                create_topics_request::CreatableTopic::default()
                    .with_name(topic())
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ],
        ))],
        ApiKey::DeleteTopics => vec![
            R::DeleteTopics(DeleteTopicsRequest::default().with_topics(vec![
                delete_topics_request::DeleteTopicState::default().with_name(Some(topic())),
            ])),
            R::DeleteTopics(DeleteTopicsRequest::default().with_topic_names(vec![topic()])),
        ],
        ApiKey::DeleteRecords => vec![R::DeleteRecords(
            DeleteRecordsRequest::default().with_topics(vec![
                delete_records_request::DeleteRecordsTopic::default()
                    .with_name(topic())
                    .with_partitions(vec![Default::default()]),
            ]),
        )],
        ApiKey::OffsetForLeaderEpoch => vec![R::OffsetForLeaderEpoch(
            OffsetForLeaderEpochRequest::default().with_topics(vec![
                offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![Default::default()]),
            ]),
        )],
        ApiKey::DescribeConfigs => vec![R::DescribeConfigs(
            DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("t")),
            ]),
        )],
        ApiKey::AlterConfigs => vec![R::AlterConfigs(
            AlterConfigsRequest::default().with_resources(vec![
                alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("t")),
            ]),
        )],
        ApiKey::IncrementalAlterConfigs => vec![R::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("t")),
            ]),
        )],
        ApiKey::CreatePartitions => vec![R::CreatePartitions(
            CreatePartitionsRequest::default().with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(topic())
                    .with_count(2),
            ]),
        )],
        ApiKey::DescribeProducers => vec![R::DescribeProducers(
            DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(topic())
                    .with_partition_indexes(vec![0]),
            ]),
        )],
        ApiKey::DescribeTopicPartitions => vec![R::DescribeTopicPartitions(
            DescribeTopicPartitionsRequest::default().with_topics(vec![
                describe_topic_partitions_request::TopicRequest::default().with_name(topic()),
            ]),
        )],
        _ => return None,
    })
}

/// [`forms`] of the groups' and transactions' requests.
fn coordinated_forms(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::OffsetCommit => vec![R::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(group())
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![Default::default()]),
                ]),
        )],
        ApiKey::OffsetFetch => vec![
            R::OffsetFetch(OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(group()),
            ])),
            R::OffsetFetch(
                OffsetFetchRequest::default()
                    .with_group_id(group())
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopic::default()
                            .with_name(topic())
                            .with_partition_indexes(vec![0]),
                    ])),
            ),
        ],
        ApiKey::WriteTxnMarkers => vec![R::WriteTxnMarkers(
            WriteTxnMarkersRequest::default().with_markers(vec![
                write_txn_markers_request::WritableTxnMarker::default().with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0]),
                ]),
            ]),
        )],
        ApiKey::FindCoordinator => vec![
            R::FindCoordinator(
                FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")]),
            ),
            R::FindCoordinator(FindCoordinatorRequest::default().with_key(s("g"))),
            R::FindCoordinator(
                FindCoordinatorRequest::default()
                    .with_key_type(1)
                    .with_key(s("x")),
            ),
        ],
        ApiKey::DescribeGroups => vec![R::DescribeGroups(
            DescribeGroupsRequest::default().with_groups(vec![group()]),
        )],
        ApiKey::DeleteGroups => vec![R::DeleteGroups(
            DeleteGroupsRequest::default().with_groups_names(vec![group()]),
        )],
        ApiKey::InitProducerId => vec![R::InitProducerId(
            InitProducerIdRequest::default()
                .with_transactional_id(Some(txn()))
                .with_transaction_timeout_ms(60_000),
        )],
        ApiKey::AddPartitionsToTxn => {
            let topics = vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(topic())
                    .with_partitions(vec![0]),
            ];
            vec![
                R::AddPartitionsToTxn(AddPartitionsToTxnRequest::default().with_transactions(
                    vec![
                        add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                            .with_transactional_id(txn())
                            .with_topics(topics.clone()),
                    ],
                )),
                R::AddPartitionsToTxn(
                    AddPartitionsToTxnRequest::default()
                        .with_v3_and_below_transactional_id(txn())
                        .with_v3_and_below_topics(topics),
                ),
            ]
        }
        ApiKey::AddOffsetsToTxn => vec![R::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn())
                .with_group_id(group()),
        )],
        ApiKey::EndTxn => vec![R::EndTxn(
            EndTxnRequest::default().with_transactional_id(txn()),
        )],
        ApiKey::TxnOffsetCommit => vec![R::TxnOffsetCommit(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(txn())
                .with_group_id(group())
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![Default::default()]),
                ]),
        )],
        ApiKey::OffsetDelete => vec![R::OffsetDelete(
            OffsetDeleteRequest::default()
                .with_group_id(group())
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![Default::default()]),
                ]),
        )],
        ApiKey::DescribeTransactions => vec![R::DescribeTransactions(
            DescribeTransactionsRequest::default().with_transactional_ids(vec![txn()]),
        )],
        ApiKey::ConsumerGroupDescribe => vec![R::ConsumerGroupDescribe(
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![group()]),
        )],
        _ => return None,
    })
}

/// [`forms`] of the ACL, credential and quota requests.
fn security_forms(key: ApiKey) -> Option<Vec<RequestKind>> {
    use RequestKind as R;
    Some(match key {
        ApiKey::AlterClientQuotas => vec![R::AlterClientQuotas(
            AlterClientQuotasRequest::default().with_entries(vec![
                alter_client_quotas_request::EntryData::default()
                    .with_entity(vec![
                        alter_client_quotas_request::EntityData::default()
                            .with_entity_type(s("user"))
                            .with_entity_name(Some(s("nobody"))),
                    ])
                    .with_ops(vec![
                        alter_client_quotas_request::OpData::default()
                            .with_key(s("producer_byte_rate"))
                            .with_value(1e9),
                    ]),
            ]),
        )],
        ApiKey::AlterUserScramCredentials => vec![R::AlterUserScramCredentials(
            AlterUserScramCredentialsRequest::default().with_deletions(vec![
                alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                    .with_name(s("nobody"))
                    .with_mechanism(1),
            ]),
        )],
        ApiKey::CreateAcls => vec![R::CreateAcls(CreateAclsRequest::default().with_creations(
            vec![
                create_acls_request::AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(s("t"))
                    .with_resource_pattern_type(3)
                    .with_principal(s("User:nobody"))
                    .with_host(s("*"))
                    .with_operation(2)
                    .with_permission_type(3),
            ],
        ))],
        ApiKey::DeleteAcls => vec![R::DeleteAcls(DeleteAclsRequest::default().with_filters(
            vec![
                delete_acls_request::DeleteAclsFilter::default()
                    .with_resource_type_filter(1)
                    .with_pattern_type_filter(1)
                    .with_operation(1)
                    .with_permission_type(1),
            ],
        ))],
        _ => return None,
    })
}

/// The default request of `key`, for the requests [`forms`] fills in
/// nothing for (the cluster's admin requests, group membership with an
/// empty group id).
fn default_request(key: ApiKey) -> Option<RequestKind> {
    macro_rules! defaults {
        ($($k:ident),* $(,)?) => {
            match key {
                $(ApiKey::$k => Some(RequestKind::$k(Default::default())),)*
                _ => None,
            }
        };
    }
    defaults!(
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        ListGroups,
        WriteTxnMarkers,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        AlterReplicaLogDirs,
        DescribeLogDirs,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeQuorum,
        UpdateFeatures,
        DescribeCluster,
        ListTransactions,
        AllocateProducerIds,
        ConsumerGroupHeartbeat,
        GetTelemetrySubscriptions,
        PushTelemetry,
        ListConfigResources,
        CreateDelegationToken,
        RenewDelegationToken,
        ExpireDelegationToken,
        DescribeDelegationToken,
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        DescribeGroups,
        DeleteGroups,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        OffsetForLeaderEpoch,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        DescribeConfigs,
        AlterConfigs,
        IncrementalAlterConfigs,
        CreatePartitions,
        OffsetDelete,
        DescribeProducers,
        DescribeTransactions,
        ConsumerGroupDescribe,
        DescribeTopicPartitions,
    )
}

/// The first form of `key` that `version` can encode.
fn encodable(key: ApiKey, version: i16) -> Option<RequestKind> {
    forms(key).into_iter().find(|r| {
        let mut buf = BytesMut::new();
        r.encode(&mut buf, version).is_ok()
    })
}

/// The authorization errors a refusal carries: topic, group, cluster,
/// transactional id, delegation token.
const DENIED: [i16; 5] = [29, 30, 31, 53, 65];

fn carries_a_refusal(response: &ResponseKind) -> bool {
    let text = format!("{response:?}");
    DENIED.iter().any(|c| {
        text.contains(&format!("error_code: {c},")) || text.contains(&format!("error_code: {c} "))
    })
}

#[tokio::test]
async fn every_refusal_encodes_at_every_served_version_and_keeps_the_connection() {
    let config = SecurityConfig {
        authorizer: AuthorizerConfig {
            enabled: true,
            super_users: [Principal::user("admin")].into(),
            allow_if_no_acl: false,
        },
        ..SecurityConfig::default()
    };
    let (addr, security) = start_secured(
        ProtocolConfig::default(),
        SecurityProtocol::SaslPlaintext,
        config,
    )
    .await;
    with_user(&security, "nobody", "n").await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    assert_eq!(plain(&mut conn, "nobody", "n").await, Some(0));
    let Some(ResponseKind::ApiVersions(served)) = call(
        &mut conn,
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    )
    .await
    else {
        panic!("no ApiVersions answer")
    };
    let mut refused = 0;
    let mut unrefused = Vec::new();
    for k in &served.api_keys {
        let Ok(key) = ApiKey::try_from(k.api_key) else {
            continue;
        };
        if matches!(
            key,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        ) {
            continue;
        }
        for version in k.min_version..=k.max_version {
            let request = encodable(key, version)
                .unwrap_or_else(|| panic!("no form of {key:?} encodes at v{version}"));
            let response = call(&mut conn, key, version, request)
                .await
                .unwrap_or_else(|| {
                    panic!("{key:?} v{version}: the connection was dropped instead of an answer")
                });
            if std::env::var_os("KAAS_SHOW_REFUSALS").is_some() {
                eprintln!("{key:?} v{version}: {response:?}");
            }
            if carries_a_refusal(&response) {
                refused += 1;
            } else {
                unrefused.push(format!("{key:?} v{version}"));
            }
        }
    }
    // Answers that name no refusal: the listings, which show a principal
    // without ACLs what it may see (nothing), and DescribeLogDirs before
    // v3, whose refusal is an empty list as Kafka answers it. Every other
    // request names a topic, group, transactional id or the cluster.
    let expected_unrefused = |r: &String| {
        [
            "ListGroups v",
            "ListTransactions v",
            "DescribeLogDirs v1",
            "DescribeLogDirs v2",
        ]
        .iter()
        .any(|p| r.starts_with(p))
    };
    let surprising: Vec<&String> = unrefused
        .iter()
        .filter(|r| !expected_unrefused(r))
        .collect();
    assert!(refused > 100, "only {refused} refusals answered");
    assert!(
        surprising.is_empty(),
        "answered without a refusal: {surprising:?}"
    );
}
