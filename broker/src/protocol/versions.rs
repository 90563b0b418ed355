//! Which APIs and versions this broker serves, and ApiVersions itself.
//!
//! The table grows with every API the broker implements; it is the single
//! source for both the dispatcher (what may be decoded) and what clients
//! are told.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

/// `(api, min, max)` served today.
pub(crate) const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    // v13 and Fetch v13+ name topics by id (KIP-516).
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    // v7 adds MAX_TIMESTAMP (-3), v8 and v9 the tiered-storage timestamps
    // -4 and -5 (all of a kaas log is local), v10 a timeout for them.
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::InitProducerId, 0, 5),
    // Transactions, version 1 of Kafka's protocol (KIP-98, KIP-447,
    // KIP-890 part 1). The versions of KIP-890 part 2 (EndTxn v5,
    // AddPartitionsToTxn v5, TxnOffsetCommit v5, AddOffsetsToTxn v4) bump
    // the epoch at every commit, which kaas does not do: not offered.
    (ApiKey::AddPartitionsToTxn, 0, 4),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    // A partition's one replica is its leader: reassigning it names the
    // broker to lead it (see `api::reassignments`).
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    // v0 and v1 predate KIP-320's current leader epoch; the codec lacks them.
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    // Security. After SaslHandshake v0 the SASL tokens travel as bare
    // frames, without Kafka's headers (clients before Kafka 1.0); librdkafka
    // looks for v0 in the range before it authenticates at all.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    // v0 predates prefixed ACLs (KIP-290).
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
];

pub(crate) fn supported(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == api)
        .map(|&(_, min, max)| (min, max))
}

pub fn is_supported(api: ApiKey, version: i16) -> bool {
    supported(api).is_some_and(|(min, max)| (min..=max).contains(&version))
}

fn ranges() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|&(k, min, max)| {
            ApiVersion::default()
                .with_api_key(k as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

/// The ApiVersions answer. A version this broker does not serve gets the
/// KIP-511 fallback: the caller encodes the response as v0, with
/// UNSUPPORTED_VERSION and the ranges, so the client can retry with a
/// version both sides know. Returns the response and the version to encode.
pub(crate) fn api_versions(requested: i16) -> (ApiVersionsResponse, i16) {
    let response = ApiVersionsResponse::default().with_api_keys(ranges());
    if is_supported(ApiKey::ApiVersions, requested) {
        (response, requested)
    } else {
        let code = ResponseError::UnsupportedVersion.code();
        (response.with_error_code(code), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_api_versions_fall_back_to_v0_with_the_ranges() {
        let (ok, v) = api_versions(3);
        assert_eq!((ok.error_code, v), (0, 3));
        let (fallback, v) = api_versions(99);
        assert_eq!((fallback.error_code, v), (35, 0));
        assert!(
            fallback
                .api_keys
                .iter()
                .any(|k| k.api_key == ApiKey::ApiVersions as i16)
        );
    }

    #[test]
    fn the_compatibility_table_lists_exactly_what_is_served() {
        let doc = include_str!("../../../docs/compatibility.md");
        let table = doc
            .split("| API | versions | notes |")
            .nth(1)
            .expect("the API table of docs/compatibility.md");
        let rows: Vec<&str> = table
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert_eq!(rows.len(), SUPPORTED.len(), "{rows:#?}");
        for (api, min, max) in SUPPORTED {
            let row = format!("| {api:?} | {min}-{max} |");
            assert!(
                rows.iter().any(|r| r.starts_with(&row)),
                "docs/compatibility.md lacks {row}"
            );
        }
    }
}
