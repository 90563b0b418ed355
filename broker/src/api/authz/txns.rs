//! Producer ids and transactions: WRITE on the transactional id (or, for an
//! idempotent producer, IDEMPOTENT_WRITE on the cluster or WRITE on some
//! topic), READ on the group whose offsets a transaction commits, DESCRIBE
//! to look.
//!
//! Brokers send each other WriteTxnMarkers and AddPartitionsToTxn (verify
//! only) over the inter-broker listener, which is PLAINTEXT: a request on
//! that listener may take CLUSTER_ACTION. The listener must be reachable by
//! brokers only (the NetworkPolicy in `deploy/`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeTransactionsRequest, EndTxnRequest, EndTxnResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest, ProducerId,
    RequestKind as R, ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

use super::{
    Authz, cluster_denied, group_denied, proceed, put_back, refused, topic_denied, txn_id_denied,
};
use crate::api::{Api, name_of};
use crate::protocol::refusal;
use crate::security::acl::Permission;
use crate::security::{Operation, ResourceType, Session};

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

    /// Why a principal may not act for `txn_id` on behalf of `group`.
    fn txn_group_refusal(&self, s: &Session, txn_id: &str, group: &str) -> Option<i16> {
        if !self.may_txn_id(s, txn_id) {
            Some(txn_id_denied())
        } else if !self.may(s, Operation::Read, ResourceType::Group, group) {
            Some(group_denied())
        } else {
            None
        }
    }

    pub(super) fn authorize_init_producer_id(
        &self,
        s: &Session,
        r: InitProducerIdRequest,
    ) -> Authz {
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
            cluster_denied()
        };
        Authz::Refuse(ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ))
    }

    pub(super) fn authorize_add_partitions(
        &self,
        s: &Session,
        mut r: AddPartitionsToTxnRequest,
    ) -> Authz {
        // v4+: a broker's batch of verifications (KIP-890).
        if !r.transactions.is_empty() {
            if self.may_cluster_action(s) {
                return Authz::Proceed(R::AddPartitionsToTxn(r), None);
            }
            return Authz::Refuse(ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_error_code(cluster_denied()),
            ));
        }
        let id_ok = self.may_txn_id(s, r.v3_and_below_transactional_id.as_str());
        let no = refused(&mut r.v3_and_below_topics, |t| {
            id_ok && self.may_topic(s, Operation::Write, name_of(&t.name))
        });
        if no.is_empty() {
            return Authz::Proceed(R::AddPartitionsToTxn(r), None);
        }
        // Kafka adds none of the partitions when any is refused: the rest
        // get OPERATION_NOT_ATTEMPTED.
        let code = if id_ok {
            topic_denied()
        } else {
            txn_id_denied()
        };
        let not_attempted = ResponseError::OperationNotAttempted.code();
        let mut all = refusal::added_partitions_to_txn(&no, code);
        all.extend(refusal::added_partitions_to_txn(
            &r.v3_and_below_topics,
            not_attempted,
        ));
        Authz::Refuse(ResponseKind::AddPartitionsToTxn(
            AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(all),
        ))
    }

    pub(super) fn authorize_add_offsets(&self, s: &Session, r: AddOffsetsToTxnRequest) -> Authz {
        match self.txn_group_refusal(s, r.transactional_id.as_str(), r.group_id.as_str()) {
            None => Authz::Proceed(R::AddOffsetsToTxn(r), None),
            Some(code) => Authz::Refuse(ResponseKind::AddOffsetsToTxn(
                AddOffsetsToTxnResponse::default().with_error_code(code),
            )),
        }
    }

    pub(super) fn authorize_txn_offset_commit(
        &self,
        s: &Session,
        mut r: TxnOffsetCommitRequest,
    ) -> Authz {
        if let Some(code) =
            self.txn_group_refusal(s, r.transactional_id.as_str(), r.group_id.as_str())
        {
            let topics = refusal::txn_offset_commit_topics(&r.topics, code);
            return Authz::Refuse(ResponseKind::TxnOffsetCommit(
                TxnOffsetCommitResponse::default().with_topics(topics),
            ));
        }
        let no = refused(&mut r.topics, |t| {
            self.may_topic(s, Operation::Read, name_of(&t.name))
        });
        let no = refusal::txn_offset_commit_topics(&no, topic_denied());
        put_back!(R::TxnOffsetCommit(r), TxnOffsetCommit.topics, no)
    }

    pub(super) fn authorize_end_txn(&self, s: &Session, r: EndTxnRequest) -> Authz {
        if self.may_txn_id(s, r.transactional_id.as_str()) {
            return Authz::Proceed(R::EndTxn(r), None);
        }
        Authz::Refuse(ResponseKind::EndTxn(
            EndTxnResponse::default().with_error_code(txn_id_denied()),
        ))
    }

    pub(super) fn authorize_write_txn_markers(
        &self,
        s: &Session,
        r: WriteTxnMarkersRequest,
    ) -> Authz {
        if self.may_cluster_action(s) {
            return Authz::Proceed(R::WriteTxnMarkers(r), None);
        }
        let markers = refusal::txn_markers(&r.markers, cluster_denied());
        Authz::Refuse(ResponseKind::WriteTxnMarkers(
            WriteTxnMarkersResponse::default().with_markers(markers),
        ))
    }

    pub(super) fn authorize_describe_transactions(
        &self,
        s: &Session,
        mut r: DescribeTransactionsRequest,
    ) -> Authz {
        let no = refused(&mut r.transactional_ids, |id| {
            self.may(
                s,
                Operation::Describe,
                ResourceType::TransactionalId,
                id.as_str(),
            )
        });
        let no = refusal::transaction_states(&no, txn_id_denied());
        put_back!(
            R::DescribeTransactions(r),
            DescribeTransactions.transaction_states,
            no
        )
    }

    pub(super) fn authorize_list_transactions(
        &self,
        s: &Session,
        r: ListTransactionsRequest,
    ) -> Authz {
        let (security, who) = (self.security.clone(), s.who());
        proceed(R::ListTransactions(r), move |resp| {
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
        })
    }
}
