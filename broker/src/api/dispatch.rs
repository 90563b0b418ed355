//! Which handler answers each request, by API family.

use kafka_protocol::messages::{RequestHeader, RequestKind, ResponseKind};

use super::Api;
use crate::produce_order;
use crate::protocol::versions;
use crate::security::Session;

impl Api {
    pub(super) async fn dispatch(
        &self,
        session: &Session,
        header: &RequestHeader,
        request: RequestKind,
    ) -> Result<Option<ResponseKind>, String> {
        let v = header.request_api_version;
        Ok(Some(match request {
            RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(versions::api_versions(v).0),
            RequestKind::Metadata(r) => {
                ResponseKind::Metadata(self.metadata(r, v, &session.listener).await)
            }
            RequestKind::Produce(r) => match self
                .produce(&mut produce_order::ProduceOrder::default(), r, v)
                .await
                .await
            {
                Some(resp) => ResponseKind::Produce(resp),
                None => return Ok(None),
            },
            RequestKind::Fetch(r) => ResponseKind::Fetch(self.fetch(r, v).await),
            RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(self.list_offsets(r, v).await),
            RequestKind::CreateTopics(r) => {
                ResponseKind::CreateTopics(self.create_topics(r, v).await)
            }
            RequestKind::DeleteTopics(r) => {
                ResponseKind::DeleteTopics(self.delete_topics(r, v).await)
            }
            RequestKind::DescribeCluster(r) => {
                ResponseKind::DescribeCluster(self.describe_cluster(r, &session.listener))
            }
            RequestKind::DescribeConfigs(r) => {
                ResponseKind::DescribeConfigs(self.describe_configs(r).await)
            }
            RequestKind::IncrementalAlterConfigs(r) => {
                ResponseKind::IncrementalAlterConfigs(self.incremental_alter_configs(r).await)
            }
            RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(self.alter_configs(r).await),
            RequestKind::CreatePartitions(r) => {
                ResponseKind::CreatePartitions(self.create_partitions(r).await)
            }
            RequestKind::DeleteRecords(r) => {
                ResponseKind::DeleteRecords(self.delete_records(r).await)
            }
            RequestKind::FindCoordinator(r) => {
                ResponseKind::FindCoordinator(self.find_coordinator(r, v, &session.listener))
            }
            RequestKind::InitProducerId(r) => {
                ResponseKind::InitProducerId(self.init_producer_id(r).await)
            }
            RequestKind::OffsetForLeaderEpoch(r) => {
                ResponseKind::OffsetForLeaderEpoch(self.offset_for_leader_epoch(r).await)
            }
            RequestKind::DescribeTopicPartitions(r) => {
                ResponseKind::DescribeTopicPartitions(self.describe_topic_partitions(r).await)
            }
            RequestKind::DescribeLogDirs(r) => {
                ResponseKind::DescribeLogDirs(self.describe_log_dirs(r).await)
            }
            RequestKind::AlterPartitionReassignments(r) => {
                ResponseKind::AlterPartitionReassignments(
                    self.alter_partition_reassignments(r).await,
                )
            }
            RequestKind::ListPartitionReassignments(r) => {
                ResponseKind::ListPartitionReassignments(self.list_partition_reassignments(r).await)
            }
            RequestKind::ElectLeaders(r) => {
                ResponseKind::ElectLeaders(self.elect_leaders(r, v).await)
            }
            other => return self.dispatch_coordinated(header, other).await,
        }))
    }

    /// Groups' and transactions' requests: their coordinators answer.
    async fn dispatch_coordinated(
        &self,
        header: &RequestHeader,
        request: RequestKind,
    ) -> Result<Option<ResponseKind>, String> {
        let v = header.request_api_version;
        Ok(Some(match request {
            RequestKind::JoinGroup(r) => {
                let client = header.client_id.as_ref().map_or("", |c| c.as_str());
                ResponseKind::JoinGroup(self.coordinators.join_group(r, v, client).await)
            }
            RequestKind::SyncGroup(r) => {
                ResponseKind::SyncGroup(self.coordinators.sync_group(r, v).await)
            }
            RequestKind::Heartbeat(r) => {
                ResponseKind::Heartbeat(self.coordinators.heartbeat(r).await)
            }
            RequestKind::LeaveGroup(r) => {
                ResponseKind::LeaveGroup(self.coordinators.leave_group(r, v).await)
            }
            RequestKind::OffsetCommit(r) => {
                let names = r
                    .topics
                    .iter()
                    .map(|t| (&t.name, t.partitions.iter().map(|p| p.partition_index)));
                let unknown = self.unknown_partitions(names).await;
                ResponseKind::OffsetCommit(self.coordinators.offset_commit(r, v, &unknown).await)
            }
            RequestKind::OffsetFetch(r) => {
                ResponseKind::OffsetFetch(self.coordinators.offset_fetch(r, v).await)
            }
            RequestKind::ListGroups(r) => {
                ResponseKind::ListGroups(self.coordinators.list_groups(r, v).await)
            }
            RequestKind::DescribeGroups(r) => {
                ResponseKind::DescribeGroups(self.coordinators.describe_groups(r, v).await)
            }
            RequestKind::DeleteGroups(r) => {
                ResponseKind::DeleteGroups(self.coordinators.delete_groups(r).await)
            }
            RequestKind::OffsetDelete(r) => {
                ResponseKind::OffsetDelete(self.coordinators.offset_delete(r).await)
            }
            RequestKind::ConsumerGroupHeartbeat(r) => {
                let client = header.client_id.as_ref().map_or("", |c| c.as_str());
                ResponseKind::ConsumerGroupHeartbeat(
                    self.consumer_group_heartbeat(r, v, client).await,
                )
            }
            RequestKind::ConsumerGroupDescribe(r) => {
                ResponseKind::ConsumerGroupDescribe(self.consumer_group_describe(r).await)
            }
            RequestKind::AddPartitionsToTxn(r) => {
                ResponseKind::AddPartitionsToTxn(self.add_partitions_to_txn(r, v).await)
            }
            RequestKind::AddOffsetsToTxn(r) => {
                ResponseKind::AddOffsetsToTxn(self.add_offsets_to_txn(r).await)
            }
            RequestKind::EndTxn(r) => ResponseKind::EndTxn(self.end_txn(r).await),
            RequestKind::WriteTxnMarkers(r) => {
                ResponseKind::WriteTxnMarkers(self.write_txn_markers(r).await)
            }
            RequestKind::TxnOffsetCommit(r) => {
                let names = r
                    .topics
                    .iter()
                    .map(|t| (&t.name, t.partitions.iter().map(|p| p.partition_index)));
                let unknown = self.unknown_partitions(names).await;
                ResponseKind::TxnOffsetCommit(self.txn_offset_commit(r, unknown).await)
            }
            RequestKind::DescribeTransactions(r) => {
                ResponseKind::DescribeTransactions(self.describe_transactions(r).await)
            }
            RequestKind::ListTransactions(r) => {
                ResponseKind::ListTransactions(self.list_transactions(r).await)
            }
            RequestKind::DescribeProducers(r) => {
                ResponseKind::DescribeProducers(self.describe_producers(r).await)
            }
            other => return self.dispatch_security(other).await,
        }))
    }

    /// Credentials, ACLs and client quotas.
    async fn dispatch_security(
        &self,
        request: RequestKind,
    ) -> Result<Option<ResponseKind>, String> {
        Ok(Some(match request {
            RequestKind::DescribeUserScramCredentials(r) => {
                ResponseKind::DescribeUserScramCredentials(
                    self.describe_user_scram_credentials(r).await,
                )
            }
            RequestKind::AlterUserScramCredentials(r) => {
                ResponseKind::AlterUserScramCredentials(self.alter_user_scram_credentials(r).await)
            }
            RequestKind::DescribeAcls(r) => ResponseKind::DescribeAcls(self.describe_acls(r)),
            RequestKind::DescribeClientQuotas(r) => {
                ResponseKind::DescribeClientQuotas(self.describe_client_quotas(r).await)
            }
            RequestKind::AlterClientQuotas(r) => {
                ResponseKind::AlterClientQuotas(self.alter_client_quotas(r).await)
            }
            RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(self.create_acls(r).await),
            RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(self.delete_acls(r).await),
            other => return Err(format!("no handler for {other:?}")),
        }))
    }
}
