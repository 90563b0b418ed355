//! Configs, transactions and the cluster-wide requests.
//!
//! Brokers send each other WriteTxnMarkers and AddPartitionsToTxn (verify
//! only) over the inter-broker listener, which is PLAINTEXT: a request on
//! that listener may take CLUSTER_ACTION. The listener must be reachable by
//! brokers only (the NetworkPolicy in `deploy/`).

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, AlterConfigsResponse,
    AlterPartitionReassignmentsResponse, AlterUserScramCredentialsResponse, CreateAclsResponse,
    DeleteAclsResponse, DescribeAclsResponse, DescribeClusterResponse, DescribeLogDirsResponse,
    DescribeUserScramCredentialsResponse, EndTxnResponse, IncrementalAlterConfigsResponse,
    InitProducerIdResponse, ListPartitionReassignmentsResponse, RequestKind, ResponseKind,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::topics::split;
use super::{Authz, Merge, cluster_denied, group_denied, topic_denied, txn_id_denied};
use crate::api::{Api, name_of};
use crate::security::acl::Permission;
use crate::security::{Operation, ResourceType, Session};

/// DescribeConfigs' resource types.
const TOPIC: i8 = 2;

fn merge(f: impl FnOnce(&mut ResponseKind) + Send + 'static) -> Option<Merge> {
    Some(Box::new(f))
}

impl Api {
    fn may_txn_id(&self, s: &Session, id: &str) -> bool {
        self.may(s, Operation::Write, ResourceType::TransactionalId, id)
    }

    /// CLUSTER_ACTION: granted on the inter-broker listener, else by ACL.
    fn may_cluster_action(&self, s: &Session) -> bool {
        *s.listener == *self.config.inter_broker_listener
            || self.may_cluster(s, Operation::ClusterAction)
    }

    /// KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the
    /// cluster, or WRITE on some topic.
    fn may_write_idempotently(&self, s: &Session) -> bool {
        let cluster = crate::security::acl::CLUSTER_NAME;
        if self.may_quietly(
            s,
            Operation::IdempotentWrite,
            ResourceType::Cluster,
            cluster,
        ) {
            return true;
        }
        let (_, acls) = self.security.acls();
        let who = s.principal.to_string();
        let wildcard = format!("{}:*", s.principal.kind);
        acls.acls.iter().any(|a| {
            a.resource_type == ResourceType::Topic
                && a.permission == Permission::Allow
                && matches!(a.operation, Operation::Write | Operation::All)
                && (a.principal == who || a.principal == wildcard)
                && (a.host == "*" || a.host == s.host)
        })
    }

    fn config_resource_allowed(&self, s: &Session, op: Operation, kind: i8, name: &str) -> bool {
        if kind == TOPIC {
            self.may_topic(s, op, name)
        } else {
            self.may_cluster(s, op)
        }
    }

    fn config_denied(kind: i8) -> i16 {
        if kind == TOPIC {
            topic_denied()
        } else {
            cluster_denied()
        }
    }

    pub(super) fn authorize_admin(&self, s: &Session, request: RequestKind) -> Authz {
        use RequestKind as R;
        let cluster = cluster_denied();
        match request {
            R::DescribeConfigs(mut r) => {
                let (ok, no) = split(std::mem::take(&mut r.resources), |c| {
                    self.config_resource_allowed(
                        s,
                        Operation::DescribeConfigs,
                        c.resource_type,
                        c.resource_name.as_str(),
                    )
                });
                r.resources = ok;
                let no: Vec<DescribeConfigsResult> = no
                    .into_iter()
                    .map(|c| {
                        DescribeConfigsResult::default()
                            .with_error_code(Self::config_denied(c.resource_type))
                            .with_resource_type(c.resource_type)
                            .with_resource_name(c.resource_name)
                    })
                    .collect();
                Authz::Proceed(
                    R::DescribeConfigs(r),
                    merge(move |resp| {
                        if let ResponseKind::DescribeConfigs(d) = resp {
                            d.results.extend(no);
                        }
                    }),
                )
            }
            R::AlterConfigs(mut r) => {
                use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
                let (ok, no) = split(std::mem::take(&mut r.resources), |c| {
                    self.config_resource_allowed(
                        s,
                        Operation::AlterConfigs,
                        c.resource_type,
                        c.resource_name.as_str(),
                    )
                });
                r.resources = ok;
                let no: Vec<AlterConfigsResourceResponse> = no
                    .into_iter()
                    .map(|c| {
                        AlterConfigsResourceResponse::default()
                            .with_error_code(Self::config_denied(c.resource_type))
                            .with_resource_type(c.resource_type)
                            .with_resource_name(c.resource_name)
                    })
                    .collect();
                Authz::Proceed(
                    R::AlterConfigs(r),
                    merge(move |resp| {
                        if let ResponseKind::AlterConfigs(AlterConfigsResponse {
                            responses, ..
                        }) = resp
                        {
                            responses.extend(no);
                        }
                    }),
                )
            }
            R::IncrementalAlterConfigs(mut r) => {
                use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
                let (ok, no) = split(std::mem::take(&mut r.resources), |c| {
                    self.config_resource_allowed(
                        s,
                        Operation::AlterConfigs,
                        c.resource_type,
                        c.resource_name.as_str(),
                    )
                });
                r.resources = ok;
                let no: Vec<AlterConfigsResourceResponse> = no
                    .into_iter()
                    .map(|c| {
                        AlterConfigsResourceResponse::default()
                            .with_error_code(Self::config_denied(c.resource_type))
                            .with_resource_type(c.resource_type)
                            .with_resource_name(c.resource_name)
                    })
                    .collect();
                Authz::Proceed(
                    R::IncrementalAlterConfigs(r),
                    merge(move |resp| {
                        if let ResponseKind::IncrementalAlterConfigs(
                            IncrementalAlterConfigsResponse { responses, .. },
                        ) = resp
                        {
                            responses.extend(no);
                        }
                    }),
                )
            }
            R::InitProducerId(r) => {
                let ok = match &r.transactional_id {
                    Some(id) => self.may_txn_id(s, id.as_str()),
                    None => self.may_write_idempotently(s),
                };
                if ok {
                    return Authz::Proceed(R::InitProducerId(r), None);
                }
                let code = if r.transactional_id.is_some() {
                    txn_id_denied()
                } else {
                    cluster
                };
                Authz::Refuse(ResponseKind::InitProducerId(
                    InitProducerIdResponse::default()
                        .with_error_code(code)
                        .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                        .with_producer_epoch(-1),
                ))
            }
            R::AddPartitionsToTxn(r) => self.authorize_add_partitions(s, r),
            R::AddOffsetsToTxn(r) => {
                let code = if !self.may_txn_id(s, r.transactional_id.as_str()) {
                    txn_id_denied()
                } else if !self.may(s, Operation::Read, ResourceType::Group, r.group_id.as_str()) {
                    group_denied()
                } else {
                    return Authz::Proceed(R::AddOffsetsToTxn(r), None);
                };
                Authz::Refuse(ResponseKind::AddOffsetsToTxn(
                    AddOffsetsToTxnResponse::default().with_error_code(code),
                ))
            }
            R::EndTxn(r) if !self.may_txn_id(s, r.transactional_id.as_str()) => Authz::Refuse(
                ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(txn_id_denied())),
            ),
            R::TxnOffsetCommit(mut r) => {
                let whole = if !self.may_txn_id(s, r.transactional_id.as_str()) {
                    Some(txn_id_denied())
                } else if !self.may(s, Operation::Read, ResourceType::Group, r.group_id.as_str()) {
                    Some(group_denied())
                } else {
                    None
                };
                let (ok, no) = split(std::mem::take(&mut r.topics), |t| {
                    whole.is_none() && self.may_topic(s, Operation::Read, name_of(&t.name))
                });
                let code = whole.unwrap_or_else(topic_denied);
                let no: Vec<TxnOffsetCommitResponseTopic> = no
                    .into_iter()
                    .map(|t| {
                        TxnOffsetCommitResponseTopic::default()
                            .with_name(t.name)
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
                    .collect();
                if whole.is_some() {
                    return Authz::Refuse(ResponseKind::TxnOffsetCommit(
                        TxnOffsetCommitResponse::default().with_topics(no),
                    ));
                }
                r.topics = ok;
                Authz::Proceed(
                    R::TxnOffsetCommit(r),
                    merge(move |resp| {
                        if let ResponseKind::TxnOffsetCommit(t) = resp {
                            t.topics.extend(no);
                        }
                    }),
                )
            }
            R::WriteTxnMarkers(r) if !self.may_cluster_action(s) => {
                use kafka_protocol::messages::write_txn_markers_response::*;
                let markers = r
                    .markers
                    .iter()
                    .map(|m| {
                        WritableTxnMarkerResult::default()
                            .with_producer_id(m.producer_id)
                            .with_topics(
                                m.topics
                                    .iter()
                                    .map(|t| {
                                        WritableTxnMarkerTopicResult::default()
                                            .with_name(t.name.clone())
                                            .with_partitions(
                                                t.partition_indexes
                                                    .iter()
                                                    .map(|p| {
                                                        WritableTxnMarkerPartitionResult::default()
                                                            .with_partition_index(*p)
                                                            .with_error_code(cluster)
                                                    })
                                                    .collect(),
                                            )
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                Authz::Refuse(ResponseKind::WriteTxnMarkers(
                    WriteTxnMarkersResponse::default().with_markers(markers),
                ))
            }
            R::DescribeTransactions(mut r) => {
                let (ok, no) = split(std::mem::take(&mut r.transactional_ids), |id| {
                    self.may(
                        s,
                        Operation::Describe,
                        ResourceType::TransactionalId,
                        id.as_str(),
                    )
                });
                r.transactional_ids = ok;
                let no: Vec<TransactionState> = no
                    .into_iter()
                    .map(|id| {
                        TransactionState::default()
                            .with_transactional_id(id)
                            .with_error_code(txn_id_denied())
                    })
                    .collect();
                Authz::Proceed(
                    R::DescribeTransactions(r),
                    merge(move |resp| {
                        if let ResponseKind::DescribeTransactions(d) = resp {
                            d.transaction_states.extend(no);
                        }
                    }),
                )
            }
            R::ListTransactions(r) => {
                let (security, who) = (self.security.clone(), s.who());
                Authz::Proceed(
                    R::ListTransactions(r),
                    merge(move |resp| {
                        if let ResponseKind::ListTransactions(l) = resp {
                            l.transaction_states.retain(|t| {
                                security.allowed_for(
                                    &who,
                                    Operation::Describe,
                                    ResourceType::TransactionalId,
                                    t.transactional_id.as_str(),
                                )
                            });
                        }
                    }),
                )
            }
            R::DescribeCluster(_) if !self.may_cluster(s, Operation::Describe) => {
                Authz::Refuse(ResponseKind::DescribeCluster(
                    DescribeClusterResponse::default()
                        .with_error_code(cluster)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "DESCRIBE on the cluster is needed",
                        ))),
                ))
            }
            // Kafka asks for DESCRIBE on the cluster, and answers an
            // unauthorised request with the error and no directories.
            R::DescribeLogDirs(_) if !self.may_cluster(s, Operation::Describe) => {
                Authz::Refuse(ResponseKind::DescribeLogDirs(
                    DescribeLogDirsResponse::default().with_error_code(cluster),
                ))
            }
            // Kafka asks for ALTER on the cluster to move partitions or
            // elect leaders, DESCRIBE to list the moves.
            R::AlterPartitionReassignments(_) if !self.may_cluster(s, Operation::Alter) => {
                Authz::Refuse(ResponseKind::AlterPartitionReassignments(
                    AlterPartitionReassignmentsResponse::default().with_error_code(cluster),
                ))
            }
            R::ListPartitionReassignments(_) if !self.may_cluster(s, Operation::Describe) => {
                Authz::Refuse(ResponseKind::ListPartitionReassignments(
                    ListPartitionReassignmentsResponse::default().with_error_code(cluster),
                ))
            }
            R::ElectLeaders(r) if !self.may_cluster(s, Operation::Alter) => Authz::Refuse(
                ResponseKind::ElectLeaders(crate::api::reassignments::refused(&r, cluster, None)),
            ),
            // Kafka asks for DESCRIBE_CONFIGS on the cluster to read client
            // quotas, ALTER_CONFIGS to change them.
            R::DescribeClientQuotas(_) if !self.may_cluster(s, Operation::DescribeConfigs) => {
                Authz::Refuse(ResponseKind::DescribeClientQuotas(
                    crate::api::quotas::refused_describe(cluster),
                ))
            }
            R::AlterClientQuotas(r) if !self.may_cluster(s, Operation::AlterConfigs) => {
                Authz::Refuse(ResponseKind::AlterClientQuotas(
                    crate::api::quotas::refused_alter(&r, cluster),
                ))
            }
            R::DescribeAcls(_) if !self.may_cluster(s, Operation::Describe) => {
                Authz::Refuse(ResponseKind::DescribeAcls(
                    DescribeAclsResponse::default().with_error_code(cluster),
                ))
            }
            R::CreateAcls(r) if !self.may_cluster(s, Operation::Alter) => {
                use kafka_protocol::messages::create_acls_response::AclCreationResult;
                let results = r
                    .creations
                    .iter()
                    .map(|_| AclCreationResult::default().with_error_code(cluster))
                    .collect();
                Authz::Refuse(ResponseKind::CreateAcls(
                    CreateAclsResponse::default().with_results(results),
                ))
            }
            R::DeleteAcls(r) if !self.may_cluster(s, Operation::Alter) => {
                use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
                let results = r
                    .filters
                    .iter()
                    .map(|_| DeleteAclsFilterResult::default().with_error_code(cluster))
                    .collect();
                Authz::Refuse(ResponseKind::DeleteAcls(
                    DeleteAclsResponse::default().with_filter_results(results),
                ))
            }
            R::DescribeUserScramCredentials(_) if !self.may_cluster(s, Operation::Describe) => {
                Authz::Refuse(ResponseKind::DescribeUserScramCredentials(
                    DescribeUserScramCredentialsResponse::default().with_error_code(cluster),
                ))
            }
            R::AlterUserScramCredentials(r) if !self.may_cluster(s, Operation::Alter) => {
                use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
                let users = r
                    .deletions
                    .iter()
                    .map(|d| d.name.clone())
                    .chain(r.upsertions.iter().map(|u| u.name.clone()));
                let results = users
                    .map(|u| {
                        AlterUserScramCredentialsResult::default()
                            .with_user(u)
                            .with_error_code(cluster)
                    })
                    .collect();
                Authz::Refuse(ResponseKind::AlterUserScramCredentials(
                    AlterUserScramCredentialsResponse::default().with_results(results),
                ))
            }
            other => Authz::Proceed(other, None),
        }
    }

    fn authorize_add_partitions(
        &self,
        s: &Session,
        mut r: kafka_protocol::messages::AddPartitionsToTxnRequest,
    ) -> Authz {
        // v4+: a broker's batch of verifications (KIP-890).
        if !r.transactions.is_empty() {
            if self.may_cluster_action(s) {
                return Authz::Proceed(RequestKind::AddPartitionsToTxn(r), None);
            }
            return Authz::Refuse(ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_error_code(cluster_denied()),
            ));
        }
        let id_ok = self.may_txn_id(s, r.v3_and_below_transactional_id.as_str());
        let (ok, no) = split(std::mem::take(&mut r.v3_and_below_topics), |t| {
            id_ok && self.may_topic(s, Operation::Write, name_of(&t.name))
        });
        if no.is_empty() {
            r.v3_and_below_topics = ok;
            return Authz::Proceed(RequestKind::AddPartitionsToTxn(r), None);
        }
        // Kafka adds none of the partitions when any is refused: the rest
        // get OPERATION_NOT_ATTEMPTED.
        let refused = if id_ok {
            topic_denied()
        } else {
            txn_id_denied()
        };
        let results = |topics: Vec<
            kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic,
        >,
                       code: i16| {
            topics
                .into_iter()
                .map(move |t| {
                    AddPartitionsToTxnTopicResult::default()
                        .with_name(t.name)
                        .with_results_by_partition(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    AddPartitionsToTxnPartitionResult::default()
                                        .with_partition_index(*p)
                                        .with_partition_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect::<Vec<_>>()
        };
        let not_attempted = kafka_protocol::error::ResponseError::OperationNotAttempted.code();
        let mut all = results(no, refused);
        all.extend(results(ok, not_attempted));
        Authz::Refuse(ResponseKind::AddPartitionsToTxn(
            AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(all),
        ))
    }
}
