//! The cluster-wide requests, each on the cluster resource: DESCRIBE to
//! look (the cluster, log dirs, reassignments, ACLs, SCRAM users), ALTER to
//! change (reassignments, leader elections, ACLs, SCRAM users),
//! DESCRIBE_CONFIGS / ALTER_CONFIGS for client quotas. Kafka refuses the
//! whole request.

use kafka_protocol::messages::{
    AlterPartitionReassignmentsResponse, AlterUserScramCredentialsResponse, CreateAclsResponse,
    DeleteAclsResponse, DescribeAclsResponse, DescribeClusterResponse, DescribeLogDirsResponse,
    DescribeUserScramCredentialsResponse, ListPartitionReassignmentsResponse, RequestKind,
    ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use super::{Authz, cluster_denied};
use crate::api::Api;
use crate::protocol::refusal;
use crate::security::{Operation, Session};

impl Api {
    pub(super) fn authorize_cluster(&self, s: &Session, request: RequestKind) -> Authz {
        use RequestKind as R;
        let Some(op) = needed_on_cluster(&request) else {
            return Authz::Proceed(request, None);
        };
        if self.may_cluster(s, op) {
            return Authz::Proceed(request, None);
        }
        let code = cluster_denied();
        let refusal = match &request {
            R::DescribeCluster(_) => ResponseKind::DescribeCluster(
                DescribeClusterResponse::default()
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "DESCRIBE on the cluster is needed",
                    ))),
            ),
            // Kafka answers with the error and no directories.
            R::DescribeLogDirs(_) => ResponseKind::DescribeLogDirs(
                DescribeLogDirsResponse::default().with_error_code(code),
            ),
            R::AlterPartitionReassignments(_) => ResponseKind::AlterPartitionReassignments(
                AlterPartitionReassignmentsResponse::default().with_error_code(code),
            ),
            R::ListPartitionReassignments(_) => ResponseKind::ListPartitionReassignments(
                ListPartitionReassignmentsResponse::default().with_error_code(code),
            ),
            R::ElectLeaders(r) => {
                ResponseKind::ElectLeaders(crate::api::reassignments::refused(r, code, None))
            }
            R::DescribeClientQuotas(_) => {
                ResponseKind::DescribeClientQuotas(crate::api::quotas::refused_describe(code))
            }
            R::AlterClientQuotas(r) => {
                ResponseKind::AlterClientQuotas(crate::api::quotas::refused_alter(r, code))
            }
            R::DescribeAcls(_) => {
                ResponseKind::DescribeAcls(DescribeAclsResponse::default().with_error_code(code))
            }
            R::CreateAcls(r) => ResponseKind::CreateAcls(
                CreateAclsResponse::default()
                    .with_results(refusal::acl_creations(r.creations.len(), code)),
            ),
            R::DeleteAcls(r) => ResponseKind::DeleteAcls(
                DeleteAclsResponse::default()
                    .with_filter_results(refusal::acl_deletions(r.filters.len(), code)),
            ),
            R::DescribeUserScramCredentials(_) => ResponseKind::DescribeUserScramCredentials(
                DescribeUserScramCredentialsResponse::default().with_error_code(code),
            ),
            R::AlterUserScramCredentials(r) => ResponseKind::AlterUserScramCredentials(
                AlterUserScramCredentialsResponse::default()
                    .with_results(refusal::scram_alterations(r, code)),
            ),
            _ => return Authz::Proceed(request, None),
        };
        Authz::Refuse(refusal)
    }
}

/// The operation on the cluster a request needs, if it is one of these.
fn needed_on_cluster(request: &RequestKind) -> Option<Operation> {
    use RequestKind as R;
    Some(match request {
        R::DescribeCluster(_)
        | R::DescribeLogDirs(_)
        | R::ListPartitionReassignments(_)
        | R::DescribeAcls(_)
        | R::DescribeUserScramCredentials(_) => Operation::Describe,
        R::AlterPartitionReassignments(_)
        | R::ElectLeaders(_)
        | R::CreateAcls(_)
        | R::DeleteAcls(_)
        | R::AlterUserScramCredentials(_) => Operation::Alter,
        R::DescribeClientQuotas(_) => Operation::DescribeConfigs,
        R::AlterClientQuotas(_) => Operation::AlterConfigs,
        _ => return None,
    })
}
