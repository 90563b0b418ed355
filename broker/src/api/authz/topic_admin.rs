//! Making and unmaking topics: CREATE (on the cluster or the topic) to
//! create, ALTER to add partitions, DELETE to delete topics or records.

use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    RequestKind as R,
};

use super::{Authz, put_back, refused, topic_denied};
use crate::api::{Api, name_of};
use crate::protocol::refusal;
use crate::security::{Operation, Session};

impl Api {
    pub(super) fn authorize_create_topics(&self, s: &Session, mut r: CreateTopicsRequest) -> Authz {
        let all = self.may_create_any_topic(s);
        let denied = refused(&mut r.topics, |t| {
            all || self.may_topic(s, Operation::Create, name_of(&t.name))
        });
        let denied = refusal::created_topics(&denied, topic_denied());
        put_back!(R::CreateTopics(r), CreateTopics.topics, denied)
    }

    pub(super) async fn authorize_delete_topics(
        &self,
        s: &Session,
        mut r: DeleteTopicsRequest,
    ) -> Authz {
        let names = self.names_of(r.topics.iter().map(|t| t.topic_id)).await;
        // By name or (v6+) by id; an id nobody knows is the handler's.
        let by_state = refused(&mut r.topics, |t| {
            t.name
                .as_ref()
                .map(|n| name_of(n).to_owned())
                .or_else(|| names.get(&t.topic_id).cloned())
                .is_none_or(|n| self.may_topic(s, Operation::Delete, &n))
        });
        let by_name = refused(&mut r.topic_names, |n| {
            self.may_topic(s, Operation::Delete, name_of(n))
        });
        let mut denied = refusal::deleted_topics(&by_state, topic_denied());
        denied.extend(refusal::deleted_topics_by_name(&by_name, topic_denied()));
        put_back!(R::DeleteTopics(r), DeleteTopics.responses, denied)
    }

    pub(super) fn authorize_create_partitions(
        &self,
        s: &Session,
        mut r: CreatePartitionsRequest,
    ) -> Authz {
        let denied = refused(&mut r.topics, |t| {
            self.may_topic(s, Operation::Alter, name_of(&t.name))
        });
        let denied = refusal::created_partitions(&denied, topic_denied());
        put_back!(R::CreatePartitions(r), CreatePartitions.results, denied)
    }

    pub(super) fn authorize_delete_records(
        &self,
        s: &Session,
        mut r: DeleteRecordsRequest,
    ) -> Authz {
        let denied = refused(&mut r.topics, |t| {
            self.may_topic(s, Operation::Delete, name_of(&t.name))
        });
        let denied = refusal::delete_records_topics(&denied, topic_denied());
        put_back!(R::DeleteRecords(r), DeleteRecords.topics, denied)
    }
}
