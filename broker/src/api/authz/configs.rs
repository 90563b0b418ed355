//! Configs: DESCRIBE_CONFIGS to read, ALTER_CONFIGS to change, on the
//! topic or (for a broker's configs) the cluster.

use kafka_protocol::messages::{
    AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, RequestKind as R,
};

use super::{Authz, cluster_denied, put_back, refused, topic_denied};
use crate::api::Api;
use crate::protocol::refusal;
use crate::security::{Operation, Session};

/// The resource type of a topic in the config APIs.
const TOPIC: i8 = 2;

/// The error of a refused resource of `kind`.
fn denied(kind: i8) -> i16 {
    if kind == TOPIC {
        topic_denied()
    } else {
        cluster_denied()
    }
}

impl Api {
    fn config_resource_allowed(&self, s: &Session, op: Operation, kind: i8, name: &str) -> bool {
        if kind == TOPIC {
            self.may_topic(s, op, name)
        } else {
            self.may_cluster(s, op)
        }
    }

    pub(super) fn authorize_describe_configs(
        &self,
        s: &Session,
        mut r: DescribeConfigsRequest,
    ) -> Authz {
        let no = refused(&mut r.resources, |c| {
            self.config_resource_allowed(
                s,
                Operation::DescribeConfigs,
                c.resource_type,
                c.resource_name.as_str(),
            )
        });
        let no = refusal::described_configs(&no, denied);
        put_back!(R::DescribeConfigs(r), DescribeConfigs.results, no)
    }

    pub(super) fn authorize_alter_configs(&self, s: &Session, mut r: AlterConfigsRequest) -> Authz {
        let no = refused(&mut r.resources, |c| {
            self.config_resource_allowed(
                s,
                Operation::AlterConfigs,
                c.resource_type,
                c.resource_name.as_str(),
            )
        });
        let no = refusal::altered_configs(&no, denied);
        put_back!(R::AlterConfigs(r), AlterConfigs.responses, no)
    }

    pub(super) fn authorize_incremental_alter_configs(
        &self,
        s: &Session,
        mut r: IncrementalAlterConfigsRequest,
    ) -> Authz {
        let no = refused(&mut r.resources, |c| {
            self.config_resource_allowed(
                s,
                Operation::AlterConfigs,
                c.resource_type,
                c.resource_name.as_str(),
            )
        });
        let no = refusal::incrementally_altered_configs(&no, denied);
        put_back!(
            R::IncrementalAlterConfigs(r),
            IncrementalAlterConfigs.responses,
            no
        )
    }
}
