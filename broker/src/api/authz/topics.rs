//! The topic requests: WRITE to produce, READ to fetch, DESCRIBE to look,
//! CREATE (on the cluster or the topic) to create, DELETE and ALTER.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, TopicResponse};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceResponse, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{Authz, Merge, topic_denied, txn_id_denied};
use crate::api::{Api, name_of};
use crate::security::{Operation, ResourceType, Session};

/// Splits `items` into the ones `ok` keeps and the rest.
pub(super) fn split<T>(items: Vec<T>, mut ok: impl FnMut(&T) -> bool) -> (Vec<T>, Vec<T>) {
    items.into_iter().partition(|i| ok(i))
}

fn merge(f: impl FnOnce(&mut ResponseKind) + Send + 'static) -> Option<Merge> {
    Some(Box::new(f))
}

impl Api {
    /// Names of the topics a request names by id, where it does.
    async fn names_of(&self, ids: impl Iterator<Item = Uuid>) -> BTreeMap<Uuid, String> {
        let mut names = BTreeMap::new();
        for id in ids.filter(|id| !id.is_nil()) {
            if let Some(n) = self.name_by_id(id).await {
                names.insert(id, n);
            }
        }
        names
    }

    pub(super) async fn authorize_topics(&self, s: &Session, request: RequestKind) -> Authz {
        use RequestKind as R;
        match request {
            R::Produce(mut r) => {
                if let Some(id) = &r.transactional_id
                    && !self.may(
                        s,
                        Operation::Write,
                        ResourceType::TransactionalId,
                        id.as_str(),
                    )
                {
                    let code = txn_id_denied();
                    let responses = r
                        .topic_data
                        .iter()
                        .map(|t| {
                            TopicProduceResponse::default()
                                .with_name(t.name.clone())
                                .with_topic_id(t.topic_id)
                                .with_partition_responses(
                                    t.partition_data
                                        .iter()
                                        .map(|p| produce_error(p.index, code))
                                        .collect(),
                                )
                        })
                        .collect();
                    return Authz::Refuse(ResponseKind::Produce(
                        ProduceResponse::default().with_responses(responses),
                    ));
                }
                let names = self.names_of(r.topic_data.iter().map(|t| t.topic_id)).await;
                let who = s.who();
                let mut refused_under = BTreeMap::new();
                let (ok, denied) = split(std::mem::take(&mut r.topic_data), |t| {
                    let name = names
                        .get(&t.topic_id)
                        .map_or(name_of(&t.name), String::as_str);
                    // An id nobody knows is the handler's to refuse.
                    if !t.topic_id.is_nil() && !names.contains_key(&t.topic_id) {
                        return true;
                    }
                    let (ok, version) = self.security.decide_at(
                        &who,
                        Operation::Write,
                        ResourceType::Topic,
                        name,
                        true,
                    );
                    if !ok {
                        refused_under.insert(name.to_owned(), version);
                    }
                    ok
                });
                r.topic_data = ok;
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
                                        produce_error(p.index, topic_denied()).with_error_message(
                                            Some(StrBytes::from_string(why.clone())),
                                        )
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                Authz::Proceed(
                    R::Produce(r),
                    merge(move |resp| {
                        if let ResponseKind::Produce(p) = resp {
                            p.responses.extend(denied);
                        }
                    }),
                )
            }
            R::Fetch(mut r) => {
                let names = self.names_of(r.topics.iter().map(|t| t.topic_id)).await;
                let (ok, denied) = split(std::mem::take(&mut r.topics), |t| {
                    let name = names
                        .get(&t.topic_id)
                        .map_or(name_of(&t.topic), String::as_str);
                    (!t.topic_id.is_nil() && !names.contains_key(&t.topic_id))
                        || self.may_topic(s, Operation::Read, name)
                });
                r.topics = ok;
                let denied: Vec<FetchableTopicResponse> = denied
                    .into_iter()
                    .map(|t| {
                        FetchableTopicResponse::default()
                            .with_topic(t.topic)
                            .with_topic_id(t.topic_id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        PartitionData::default()
                                            .with_partition_index(p.partition)
                                            .with_error_code(topic_denied())
                                            .with_high_watermark(-1)
                                            .with_last_stable_offset(-1)
                                            .with_log_start_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                Authz::Proceed(
                    R::Fetch(r),
                    merge(move |resp| {
                        if let ResponseKind::Fetch(f) = resp {
                            f.responses.extend(denied);
                        }
                    }),
                )
            }
            R::ListOffsets(mut r) => {
                let (ok, denied) = split(std::mem::take(&mut r.topics), |t| {
                    self.may_topic(s, Operation::Describe, name_of(&t.name))
                });
                r.topics = ok;
                let denied: Vec<ListOffsetsTopicResponse> = denied
                    .into_iter()
                    .map(|t| {
                        ListOffsetsTopicResponse::default()
                            .with_name(t.name)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        ListOffsetsPartitionResponse::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(topic_denied())
                                            .with_timestamp(-1)
                                            .with_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                Authz::Proceed(
                    R::ListOffsets(r),
                    merge(move |resp| {
                        if let ResponseKind::ListOffsets(l) = resp {
                            l.topics.extend(denied);
                        }
                    }),
                )
            }
            R::DescribeTopicPartitions(mut r) => {
                use kafka_protocol::messages::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
                let (security, who) = (self.security.clone(), s.who());
                if r.topics.is_empty() {
                    // Every topic: only those the principal may describe.
                    return Authz::Proceed(
                        R::DescribeTopicPartitions(r),
                        merge(move |resp| {
                            if let ResponseKind::DescribeTopicPartitions(d) = resp {
                                d.topics
                                    .retain(|t| describable(&security, &who, t.name.as_ref()));
                            }
                        }),
                    );
                }
                let (ok, no) = split(std::mem::take(&mut r.topics), |t| {
                    self.may_topic(s, Operation::Describe, name_of(&t.name))
                });
                let denied: Vec<DescribeTopicPartitionsResponseTopic> = no
                    .into_iter()
                    .map(|t| {
                        DescribeTopicPartitionsResponseTopic::default()
                            .with_name(Some(t.name))
                            .with_error_code(topic_denied())
                    })
                    .collect();
                if ok.is_empty() {
                    return Authz::Refuse(ResponseKind::DescribeTopicPartitions(
                        kafka_protocol::messages::DescribeTopicPartitionsResponse::default()
                            .with_topics(denied),
                    ));
                }
                r.topics = ok;
                Authz::Proceed(
                    R::DescribeTopicPartitions(r),
                    merge(move |resp| {
                        if let ResponseKind::DescribeTopicPartitions(d) = resp {
                            d.topics.extend(denied);
                            d.topics.sort_by(|a, b| a.name.cmp(&b.name));
                        }
                    }),
                )
            }
            R::Metadata(mut r) => {
                // Auto-creation needs CREATE on the cluster or the topic.
                let create_all = self.may_quietly(
                    s,
                    Operation::Create,
                    ResourceType::Cluster,
                    crate::security::acl::CLUSTER_NAME,
                );
                if let Some(topics) = r.topics.take() {
                    let names = self.names_of(topics.iter().map(|t| t.topic_id)).await;
                    let (ok, no) = split(topics, |t| {
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
                    if !create_all
                        && ok.iter().any(|t| {
                            t.name.as_ref().is_some_and(|n| {
                                !self.may_quietly(
                                    s,
                                    Operation::Create,
                                    ResourceType::Topic,
                                    name_of(n),
                                )
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
                    r.topics = Some(ok);
                    // An emptied list would mean "all topics" to v0.
                    let emptied = r.topics.as_ref().is_some_and(Vec::is_empty);
                    if emptied && !denied.is_empty() {
                        return Authz::Refuse(ResponseKind::Metadata(
                            self.metadata_refusal(s, denied).await,
                        ));
                    }
                    return Authz::Proceed(
                        R::Metadata(r),
                        merge(move |resp| {
                            if let ResponseKind::Metadata(m) = resp {
                                m.topics.extend(denied);
                            }
                        }),
                    );
                }
                // All topics: only those the principal may describe.
                let (security, who) = (self.security.clone(), s.who());
                Authz::Proceed(
                    R::Metadata(r),
                    merge(move |resp| {
                        if let ResponseKind::Metadata(m) = resp {
                            m.topics
                                .retain(|t| describable(&security, &who, t.name.as_ref()));
                        }
                    }),
                )
            }
            R::OffsetForLeaderEpoch(mut r) => {
                let (ok, denied) = split(std::mem::take(&mut r.topics), |t| {
                    self.may_topic(s, Operation::Describe, name_of(&t.topic))
                });
                r.topics = ok;
                let denied: Vec<OffsetForLeaderTopicResult> = denied
                    .into_iter()
                    .map(|t| {
                        OffsetForLeaderTopicResult::default()
                            .with_topic(t.topic)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        EpochEndOffset::default()
                                            .with_partition(p.partition)
                                            .with_error_code(topic_denied())
                                            .with_leader_epoch(-1)
                                            .with_end_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                Authz::Proceed(
                    R::OffsetForLeaderEpoch(r),
                    merge(move |resp| {
                        if let ResponseKind::OffsetForLeaderEpoch(o) = resp {
                            o.topics.extend(denied);
                        }
                    }),
                )
            }
            R::CreateTopics(mut r) => {
                let all = self.may_quietly(
                    s,
                    Operation::Create,
                    ResourceType::Cluster,
                    crate::security::acl::CLUSTER_NAME,
                );
                let (ok, denied) = split(std::mem::take(&mut r.topics), |t| {
                    all || self.may_topic(s, Operation::Create, name_of(&t.name))
                });
                r.topics = ok;
                let denied: Vec<CreatableTopicResult> = denied
                    .into_iter()
                    .map(|t| {
                        CreatableTopicResult::default()
                            .with_name(t.name)
                            .with_error_code(topic_denied())
                            .with_num_partitions(-1)
                            .with_replication_factor(-1)
                    })
                    .collect();
                Authz::Proceed(
                    R::CreateTopics(r),
                    merge(move |resp| {
                        if let ResponseKind::CreateTopics(c) = resp {
                            c.topics.extend(denied);
                        }
                    }),
                )
            }
            R::DeleteTopics(mut r) => {
                let names = self.names_of(r.topics.iter().map(|t| t.topic_id)).await;
                let name_of_state =
                    |t: &kafka_protocol::messages::delete_topics_request::DeleteTopicState| {
                        t.name
                            .as_ref()
                            .map(|n| name_of(n).to_owned())
                            .or_else(|| names.get(&t.topic_id).cloned())
                    };
                let (ok, denied_states) = split(std::mem::take(&mut r.topics), |t| {
                    name_of_state(t).is_none_or(|n| self.may_topic(s, Operation::Delete, &n))
                });
                r.topics = ok;
                let (ok_names, denied_names) = split(std::mem::take(&mut r.topic_names), |n| {
                    self.may_topic(s, Operation::Delete, name_of(n))
                });
                r.topic_names = ok_names;
                let mut denied: Vec<DeletableTopicResult> = denied_states
                    .into_iter()
                    .map(|t| {
                        DeletableTopicResult::default()
                            .with_name(t.name)
                            .with_topic_id(t.topic_id)
                            .with_error_code(topic_denied())
                    })
                    .collect();
                denied.extend(denied_names.into_iter().map(|n| {
                    DeletableTopicResult::default()
                        .with_name(Some(n))
                        .with_error_code(topic_denied())
                }));
                Authz::Proceed(
                    R::DeleteTopics(r),
                    merge(move |resp| {
                        if let ResponseKind::DeleteTopics(d) = resp {
                            d.responses.extend(denied);
                        }
                    }),
                )
            }
            R::CreatePartitions(mut r) => {
                let (ok, denied) = split(std::mem::take(&mut r.topics), |t| {
                    self.may_topic(s, Operation::Alter, name_of(&t.name))
                });
                r.topics = ok;
                let denied: Vec<CreatePartitionsTopicResult> = denied
                    .into_iter()
                    .map(|t| {
                        CreatePartitionsTopicResult::default()
                            .with_name(t.name)
                            .with_error_code(topic_denied())
                    })
                    .collect();
                Authz::Proceed(
                    R::CreatePartitions(r),
                    merge(move |resp| {
                        if let ResponseKind::CreatePartitions(c) = resp {
                            c.results.extend(denied);
                        }
                    }),
                )
            }
            R::DeleteRecords(mut r) => {
                let (ok, denied) = split(std::mem::take(&mut r.topics), |t| {
                    self.may_topic(s, Operation::Delete, name_of(&t.name))
                });
                r.topics = ok;
                let denied: Vec<DeleteRecordsTopicResult> = denied
                    .into_iter()
                    .map(|t| {
                        DeleteRecordsTopicResult::default()
                            .with_name(t.name)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        DeleteRecordsPartitionResult::default()
                                            .with_partition_index(p.partition_index)
                                            .with_low_watermark(-1)
                                            .with_error_code(topic_denied())
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                Authz::Proceed(
                    R::DeleteRecords(r),
                    merge(move |resp| {
                        if let ResponseKind::DeleteRecords(d) = resp {
                            d.topics.extend(denied);
                        }
                    }),
                )
            }
            R::DescribeProducers(mut r) => {
                let (ok, denied) = split(std::mem::take(&mut r.topics), |t| {
                    self.may_topic(s, Operation::Read, name_of(&t.name))
                });
                r.topics = ok;
                let denied: Vec<TopicResponse> = denied
                    .into_iter()
                    .map(|t| {
                        TopicResponse::default().with_name(t.name).with_partitions(
                            t.partition_indexes
                                .iter()
                                .map(|p| {
                                    PartitionResponse::default()
                                        .with_partition_index(*p)
                                        .with_error_code(topic_denied())
                                })
                                .collect(),
                        )
                    })
                    .collect();
                Authz::Proceed(
                    R::DescribeProducers(r),
                    merge(move |resp| {
                        if let ResponseKind::DescribeProducers(d) = resp {
                            d.topics.extend(denied);
                        }
                    }),
                )
            }
            other => Authz::Proceed(other, None),
        }
    }

    /// A Metadata answer naming only refused topics (and the brokers).
    async fn metadata_refusal(
        &self,
        s: &Session,
        denied: Vec<MetadataResponseTopic>,
    ) -> kafka_protocol::messages::MetadataResponse {
        let empty = kafka_protocol::messages::MetadataRequest::default().with_topics(Some(vec![]));
        let mut m = self.metadata(empty, 12, &s.listener).await;
        m.topics = denied;
        m
    }
}

fn produce_error(index: i32, code: i16) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
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
