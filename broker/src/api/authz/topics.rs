//! Reading and writing topics: WRITE to produce, READ to fetch, DESCRIBE
//! to look (offsets, leader epochs, metadata, producers: READ).

use std::collections::BTreeMap;

use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::produce_response::TopicProduceResponse;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
    FetchRequest, ListOffsetsRequest, MetadataRequest, MetadataResponse,
    OffsetForLeaderEpochRequest, ProduceRequest, ProduceResponse, RequestKind as R, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{Authz, proceed, put_back, refused, topic_denied, txn_id_denied};
use crate::api::{Api, name_of};
use crate::protocol::refusal;
use crate::security::{Operation, ResourceType, Session};

impl Api {
    /// Names of the topics a request names by id, where it does.
    pub(super) async fn names_of(&self, ids: impl Iterator<Item = Uuid>) -> BTreeMap<Uuid, String> {
        let mut names = BTreeMap::new();
        for id in ids.filter(|id| !id.is_nil()) {
            if let Some(n) = self.name_by_id(id).await {
                names.insert(id, n);
            }
        }
        names
    }

    /// May auto-create or create any topic: CREATE on the cluster.
    pub(super) fn may_create_any_topic(&self, s: &Session) -> bool {
        self.may_quietly(
            s,
            Operation::Create,
            ResourceType::Cluster,
            crate::security::acl::CLUSTER_NAME,
        )
    }

    pub(super) async fn authorize_produce(&self, s: &Session, mut r: ProduceRequest) -> Authz {
        if let Some(id) = &r.transactional_id
            && !self.may(
                s,
                Operation::Write,
                ResourceType::TransactionalId,
                id.as_str(),
            )
        {
            let responses = refusal::produce_topics(&r.topic_data, txn_id_denied());
            return Authz::Refuse(ResponseKind::Produce(
                ProduceResponse::default().with_responses(responses),
            ));
        }
        let names = self.names_of(r.topic_data.iter().map(|t| t.topic_id)).await;
        let who = s.who();
        let mut refused_under = BTreeMap::new();
        let denied = refused(&mut r.topic_data, |t| {
            let name = names
                .get(&t.topic_id)
                .map_or(name_of(&t.name), String::as_str);
            // An id nobody knows is the handler's to refuse.
            if !t.topic_id.is_nil() && !names.contains_key(&t.topic_id) {
                return true;
            }
            let (ok, version) =
                self.security
                    .decide_at(&who, Operation::Write, ResourceType::Topic, name, true);
            if !ok {
                refused_under.insert(name.to_owned(), version);
            }
            ok
        });
        // Each refused partition says which ACL version refused it.
        let denied: Vec<TopicProduceResponse> = denied
            .into_iter()
            .map(|t| {
                let name = names
                    .get(&t.topic_id)
                    .cloned()
                    .unwrap_or_else(|| name_of(&t.name).to_owned());
                let why = format!(
                    "not authorized to write to topic {name} (ACL version {})",
                    refused_under.get(&name).copied().unwrap_or_default()
                );
                TopicProduceResponse::default()
                    .with_name(t.name)
                    .with_topic_id(t.topic_id)
                    .with_partition_responses(
                        t.partition_data
                            .iter()
                            .map(|p| {
                                refusal::produce_partition(p.index, topic_denied())
                                    .with_error_message(Some(StrBytes::from_string(why.clone())))
                            })
                            .collect(),
                    )
            })
            .collect();
        put_back!(R::Produce(r), Produce.responses, denied)
    }

    pub(super) async fn authorize_fetch(&self, s: &Session, mut r: FetchRequest) -> Authz {
        let names = self.names_of(r.topics.iter().map(|t| t.topic_id)).await;
        let denied = refused(&mut r.topics, |t| {
            let name = names
                .get(&t.topic_id)
                .map_or(name_of(&t.topic), String::as_str);
            (!t.topic_id.is_nil() && !names.contains_key(&t.topic_id))
                || self.may_topic(s, Operation::Read, name)
        });
        let denied = refusal::fetch_topics(&denied, topic_denied());
        put_back!(R::Fetch(r), Fetch.responses, denied)
    }

    pub(super) fn authorize_list_offsets(&self, s: &Session, mut r: ListOffsetsRequest) -> Authz {
        let denied = refused(&mut r.topics, |t| {
            self.may_topic(s, Operation::Describe, name_of(&t.name))
        });
        let denied = refusal::list_offsets_topics(&denied, topic_denied());
        put_back!(R::ListOffsets(r), ListOffsets.topics, denied)
    }

    pub(super) fn authorize_offset_for_leader_epoch(
        &self,
        s: &Session,
        mut r: OffsetForLeaderEpochRequest,
    ) -> Authz {
        let denied = refused(&mut r.topics, |t| {
            self.may_topic(s, Operation::Describe, name_of(&t.topic))
        });
        let denied = refusal::offset_for_leader_epoch_topics(&denied, topic_denied());
        put_back!(
            R::OffsetForLeaderEpoch(r),
            OffsetForLeaderEpoch.topics,
            denied
        )
    }

    pub(super) fn authorize_describe_producers(
        &self,
        s: &Session,
        mut r: DescribeProducersRequest,
    ) -> Authz {
        let denied = refused(&mut r.topics, |t| {
            self.may_topic(s, Operation::Read, name_of(&t.name))
        });
        let denied = refusal::described_producers(&denied, topic_denied());
        put_back!(R::DescribeProducers(r), DescribeProducers.topics, denied)
    }

    pub(super) fn authorize_describe_topic_partitions(
        &self,
        s: &Session,
        mut r: DescribeTopicPartitionsRequest,
    ) -> Authz {
        let (security, who) = (self.security.clone(), s.who());
        if r.topics.is_empty() {
            // Every topic: only those the principal may describe.
            return proceed(R::DescribeTopicPartitions(r), move |resp| {
                if let ResponseKind::DescribeTopicPartitions(d) = resp {
                    d.topics
                        .retain(|t| describable(&security, &who, t.name.as_ref()));
                }
            });
        }
        let no = refused(&mut r.topics, |t| {
            self.may_topic(s, Operation::Describe, name_of(&t.name))
        });
        let denied = refusal::described_topic_partitions(&no, topic_denied());
        if r.topics.is_empty() {
            return Authz::Refuse(ResponseKind::DescribeTopicPartitions(
                DescribeTopicPartitionsResponse::default().with_topics(denied),
            ));
        }
        proceed(R::DescribeTopicPartitions(r), move |resp| {
            if let ResponseKind::DescribeTopicPartitions(d) = resp {
                d.topics.extend(denied);
                d.topics.sort_by(|a, b| a.name.cmp(&b.name));
            }
        })
    }

    pub(super) async fn authorize_metadata(&self, s: &Session, mut r: MetadataRequest) -> Authz {
        let Some(mut topics) = r.topics.take() else {
            // All topics: only those the principal may describe.
            let (security, who) = (self.security.clone(), s.who());
            return proceed(R::Metadata(r), move |resp| {
                if let ResponseKind::Metadata(m) = resp {
                    m.topics
                        .retain(|t| describable(&security, &who, t.name.as_ref()));
                }
            });
        };
        let names = self.names_of(topics.iter().map(|t| t.topic_id)).await;
        let no = refused(&mut topics, |t| {
            let name = t
                .name
                .as_ref()
                .map(|n| name_of(n).to_owned())
                .or_else(|| names.get(&t.topic_id).cloned());
            match name {
                Some(n) => self.may_topic(s, Operation::Describe, &n),
                None => true,
            }
        });
        // Auto-creation needs CREATE on the cluster or the topic.
        if !self.may_create_any_topic(s)
            && topics.iter().any(|t| {
                t.name.as_ref().is_some_and(|n| {
                    !self.may_quietly(s, Operation::Create, ResourceType::Topic, name_of(n))
                })
            })
        {
            r.allow_auto_topic_creation = false;
        }
        let denied: Vec<MetadataResponseTopic> = no
            .into_iter()
            .map(|t| {
                MetadataResponseTopic::default()
                    .with_name(t.name)
                    .with_topic_id(t.topic_id)
                    .with_error_code(topic_denied())
            })
            .collect();
        // An emptied list would mean "all topics" to v0.
        if topics.is_empty() && !denied.is_empty() {
            return Authz::Refuse(ResponseKind::Metadata(
                self.metadata_refusal(s, denied).await,
            ));
        }
        r.topics = Some(topics);
        put_back!(R::Metadata(r), Metadata.topics, denied)
    }

    /// A Metadata answer naming only refused topics (and the brokers).
    async fn metadata_refusal(
        &self,
        s: &Session,
        denied: Vec<MetadataResponseTopic>,
    ) -> MetadataResponse {
        let empty = MetadataRequest::default().with_topics(Some(vec![]));
        let mut m = self.metadata(empty, 12, &s.listener).await;
        m.topics = denied;
        m
    }
}

/// Whether `who` may see a topic an every-topic answer lists (an entry
/// without a name is left as the handler answered it).
fn describable(
    security: &crate::security::Security,
    who: &crate::security::Who,
    name: Option<&kafka_protocol::messages::TopicName>,
) -> bool {
    name.is_none_or(|n| {
        security.allowed_for(who, Operation::Describe, ResourceType::Topic, name_of(n))
    })
}
