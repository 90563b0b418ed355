//! The error codes a response carries, wherever the message puts them
//! (top level, per topic, per partition, per group...), for the request
//! metrics: each distinct non-zero code once.

use kafka_protocol::messages::ResponseKind;

/// The distinct non-zero error codes in `response`, in the order first
/// seen.
pub fn error_codes(response: &ResponseKind) -> Vec<i16> {
    let mut all = Vec::new();
    collect(response, &mut all);
    let mut out: Vec<i16> = Vec::new();
    for c in all {
        if c != 0 && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

fn collect(response: &ResponseKind, out: &mut Vec<i16>) {
    use ResponseKind as R;
    match response {
        R::Produce(r) => {
            for t in &r.responses {
                out.extend(t.partition_responses.iter().map(|p| p.error_code));
            }
        }
        R::Fetch(r) => {
            out.push(r.error_code);
            for t in &r.responses {
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::ListOffsets(r) => {
            for t in &r.topics {
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::Metadata(r) => {
            out.push(r.error_code);
            for t in &r.topics {
                out.push(t.error_code);
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::SaslHandshake(r) => out.push(r.error_code),
        R::ApiVersions(r) => out.push(r.error_code),
        R::CreateTopics(r) => out.extend(r.topics.iter().map(|t| t.error_code)),
        R::DeleteTopics(r) => out.extend(r.responses.iter().map(|t| t.error_code)),
        R::DeleteRecords(r) => {
            for t in &r.topics {
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::OffsetForLeaderEpoch(r) => {
            for t in &r.topics {
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::DescribeAcls(r) => out.push(r.error_code),
        R::CreateAcls(r) => out.extend(r.results.iter().map(|a| a.error_code)),
        R::DeleteAcls(r) => {
            for f in &r.filter_results {
                out.push(f.error_code);
                out.extend(f.matching_acls.iter().map(|a| a.error_code));
            }
        }
        R::DescribeConfigs(r) => out.extend(r.results.iter().map(|c| c.error_code)),
        R::AlterConfigs(r) => out.extend(r.responses.iter().map(|c| c.error_code)),
        R::IncrementalAlterConfigs(r) => out.extend(r.responses.iter().map(|c| c.error_code)),
        R::SaslAuthenticate(r) => out.push(r.error_code),
        R::CreatePartitions(r) => out.extend(r.results.iter().map(|t| t.error_code)),
        R::DescribeUserScramCredentials(r) => {
            out.push(r.error_code);
            out.extend(r.results.iter().map(|u| u.error_code));
        }
        R::AlterUserScramCredentials(r) => out.extend(r.results.iter().map(|u| u.error_code)),
        R::DescribeCluster(r) => out.push(r.error_code),
        R::DescribeTopicPartitions(r) => {
            for t in &r.topics {
                out.push(t.error_code);
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::DescribeLogDirs(r) => {
            out.push(r.error_code);
            out.extend(r.results.iter().map(|d| d.error_code));
        }
        other => collect_coordinated(other, out),
    }
}

/// The groups' and transactions' responses.
fn collect_coordinated(response: &ResponseKind, out: &mut Vec<i16>) {
    use ResponseKind as R;
    match response {
        R::OffsetCommit(r) => {
            for t in &r.topics {
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::OffsetFetch(r) => {
            out.push(r.error_code);
            for t in &r.topics {
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
            for g in &r.groups {
                out.push(g.error_code);
                for t in &g.topics {
                    out.extend(t.partitions.iter().map(|p| p.error_code));
                }
            }
        }
        R::FindCoordinator(r) => {
            out.push(r.error_code);
            out.extend(r.coordinators.iter().map(|c| c.error_code));
        }
        R::JoinGroup(r) => out.push(r.error_code),
        R::Heartbeat(r) => out.push(r.error_code),
        R::LeaveGroup(r) => {
            out.push(r.error_code);
            out.extend(r.members.iter().map(|m| m.error_code));
        }
        R::SyncGroup(r) => out.push(r.error_code),
        R::DescribeGroups(r) => out.extend(r.groups.iter().map(|g| g.error_code)),
        R::ListGroups(r) => out.push(r.error_code),
        R::InitProducerId(r) => out.push(r.error_code),
        R::AddPartitionsToTxn(r) => {
            out.push(r.error_code);
            let topics = r
                .results_by_transaction
                .iter()
                .flat_map(|t| &t.topic_results)
                .chain(&r.results_by_topic_v3_and_below);
            for t in topics {
                out.extend(
                    t.results_by_partition
                        .iter()
                        .map(|p| p.partition_error_code),
                );
            }
        }
        R::AddOffsetsToTxn(r) => out.push(r.error_code),
        R::EndTxn(r) => out.push(r.error_code),
        R::WriteTxnMarkers(r) => {
            for m in &r.markers {
                for t in &m.topics {
                    out.extend(t.partitions.iter().map(|p| p.error_code));
                }
            }
        }
        R::TxnOffsetCommit(r) => {
            for t in &r.topics {
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::DeleteGroups(r) => out.extend(r.results.iter().map(|g| g.error_code)),
        R::OffsetDelete(r) => {
            out.push(r.error_code);
            for t in &r.topics {
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::DescribeProducers(r) => {
            for t in &r.topics {
                out.extend(t.partitions.iter().map(|p| p.error_code));
            }
        }
        R::DescribeTransactions(r) => {
            out.extend(r.transaction_states.iter().map(|t| t.error_code));
        }
        R::ListTransactions(r) => out.push(r.error_code),
        R::ConsumerGroupHeartbeat(r) => out.push(r.error_code),
        R::ConsumerGroupDescribe(r) => out.extend(r.groups.iter().map(|g| g.error_code)),
        // Not served by kaas: answered with UNSUPPORTED_VERSION or not at
        // all, which `unsupported` accounts for.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::{HeartbeatResponse, ProduceResponse};

    use super::*;

    #[test]
    fn nested_codes_are_found_once_each() {
        let parts = [6, 0, 6, 3]
            .into_iter()
            .map(|c| PartitionProduceResponse::default().with_error_code(c))
            .collect();
        let r = ProduceResponse::default().with_responses(vec![
            TopicProduceResponse::default().with_partition_responses(parts),
        ]);
        assert_eq!(error_codes(&ResponseKind::Produce(r)), [6, 3]);
        let ok = HeartbeatResponse::default();
        assert!(error_codes(&ResponseKind::Heartbeat(ok)).is_empty());
        let rebalancing = HeartbeatResponse::default().with_error_code(27);
        assert_eq!(error_codes(&ResponseKind::Heartbeat(rebalancing)), [27]);
    }
}
