//! Metadata and DescribeCluster: brokers, topics, leaders.

use std::collections::BTreeMap;

use futures_util::stream::{self, StreamExt};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;
use uuid::Uuid;

use crate::cluster::assignment::Assignment;
use crate::log::topic;
use crate::log::topic::{TopicError, TopicMeta};

use super::new_leaders::LEADERS_WAIT;
use super::{Api, code, is_internal, lookup_error, name_of, split_host_port, topic_name, uuid_of};

/// How many topic reads a full Metadata has in flight.
const READS_AT_ONCE: usize = 32;

/// A requested topic, as found (or made) by this request.
enum Found {
    Exists(TopicMeta),
    Created(TopicMeta),
    Error(i16),
}

impl Api {
    pub(super) async fn metadata(
        &self,
        req: MetadataRequest,
        version: i16,
        listener: &str,
    ) -> MetadataResponse {
        let a = self.current();
        let mut brokers: Vec<MetadataResponseBroker> = match &a {
            Some(a) => a
                .brokers
                .iter()
                .filter_map(|(id, b)| Some((id, b.endpoint(listener)?)))
                .map(|(id, endpoint)| {
                    let (host, port) = split_host_port(endpoint);
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(*id as i32))
                        .with_host(StrBytes::from_string(host))
                        .with_port(port)
                })
                .collect(),
            None => Vec::new(),
        };
        if !brokers
            .iter()
            .any(|b| b.node_id.0 == self.config.broker_id as i32)
        {
            let (host, port) = split_host_port(self.own_endpoint(listener));
            brokers.push(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(self.config.broker_id as i32))
                    .with_host(StrBytes::from_string(host))
                    .with_port(port),
            );
        }
        // v10+ may name a topic by its id alone (KIP-516); librdkafka does
        // for the topics a consumer-protocol group assigned it.
        let mut ids = Vec::new();
        let requested: Option<Vec<String>> = match req.topics {
            None => None,
            Some(t) if t.is_empty() && version == 0 => None,
            Some(t) => Some(
                t.into_iter()
                    .filter_map(|t| match t.name {
                        Some(n) => Some(name_of(&n).to_owned()),
                        None => {
                            ids.extend(Some(t.topic_id).filter(|id| !id.is_nil()));
                            None
                        }
                    })
                    .collect(),
            ),
        };
        let auto_create =
            self.config.auto_create_topics && (version < 4 || req.allow_auto_topic_creation);
        let mut found = Vec::new();
        let mut created = Vec::new();
        match requested {
            Some(names) => {
                for name in names {
                    let meta = self.find_or_create(&name, auto_create).await;
                    if let Found::Created(m) = &meta {
                        created.push((m.id.clone(), m.partitions));
                    }
                    found.push((name, meta));
                }
            }
            None => {
                found = self
                    .all_topic_metas()
                    .await
                    .into_iter()
                    .map(|m| (m.name.clone(), Found::Exists(m)))
                    .collect();
            }
        }
        // Topics this request created are answered with their leaders.
        self.announce(&created);
        self.await_leaders(&created, Instant::now() + LEADERS_WAIT)
            .await;
        let a = self.current();
        let mut topics: Vec<MetadataResponseTopic> = found
            .into_iter()
            .map(|(name, meta)| self.topic_metadata(&name, meta, a.as_ref(), version))
            .collect();
        for id in ids {
            topics.push(match self.meta_by_id(id).await {
                Ok(Some(m)) => {
                    let name = m.name.clone();
                    self.topic_metadata(&name, Found::Exists(m), a.as_ref(), version)
                }
                Ok(None) => MetadataResponseTopic::default()
                    .with_topic_id(id)
                    .with_error_code(code(ResponseError::UnknownTopicId)),
                Err(e) => MetadataResponseTopic::default()
                    .with_topic_id(id)
                    .with_error_code(e),
            });
        }
        MetadataResponse::default()
            .with_brokers(brokers)
            .with_controller_id(BrokerId(match &a {
                Some(a) if version >= 1 => a.controller as i32,
                _ => -1,
            }))
            .with_cluster_id(
                a.as_ref()
                    .filter(|_| version >= 2)
                    .map(|a| StrBytes::from_string(a.cluster_id.clone())),
            )
            .with_topics(topics)
    }

    /// Every topic that holds its name, sorted by name, each meta read
    /// once (a full Metadata used to read every meta twice: once for the
    /// names, again to look each name up). A topic directory whose name
    /// is held by another topic, or by none (its creator's claim lost or
    /// undecided), is not listed: it is never led.
    pub(super) async fn all_topic_metas(&self) -> Vec<TopicMeta> {
        let vfs = self.vfs.as_ref();
        let Ok(listing) = vfs.read_dir(std::path::Path::new(topic::TOPICS_DIR)).await else {
            return Vec::new();
        };
        // Reads run a few dozen at a time: each is a round trip to the
        // volume (a thread hand-off locally, milliseconds on NFS), and one
        // after another they made a full Metadata of 100 topics take 40 ms.
        let metas: Vec<Option<TopicMeta>> = stream::iter(
            listing
                .into_iter()
                .filter(|e| !e.name.starts_with('.') && e.name != "names"),
        )
        .map(|e| async move { topic::read_meta(vfs, &e.name).await.ok() })
        .buffered(READS_AT_ONCE)
        .collect()
        .await;
        let mut by_name: BTreeMap<String, Vec<TopicMeta>> = BTreeMap::new();
        for meta in metas.into_iter().flatten() {
            by_name.entry(meta.name.clone()).or_default().push(meta);
        }
        let held: Vec<(Vec<TopicMeta>, Option<String>)> = stream::iter(by_name)
            .map(|(name, candidates)| async move {
                let holder = crate::log::names::holder(vfs, &name).await.ok().flatten();
                (candidates, holder)
            })
            .buffered(READS_AT_ONCE)
            .collect()
            .await;
        let mut out = Vec::with_capacity(held.len());
        for (candidates, holder) in held {
            let Some(holder) = holder else { continue };
            match candidates.into_iter().find(|m| m.id == holder) {
                Some(m) => out.push(m),
                // The holder's directory is not in a listing NFS served
                // stale: a fresh read by path decides.
                None => {
                    if let Ok(m) = topic::read_meta(vfs, &holder).await {
                        out.push(m);
                    }
                }
            }
        }
        out
    }

    /// A topic's metadata, created first where that is asked for.
    async fn find_or_create(&self, name: &str, auto_create: bool) -> Found {
        match topic::lookup(self.vfs.as_ref(), name).await {
            Ok(Some(m)) => Found::Exists(m),
            Ok(None) if auto_create && !is_internal(name) => {
                let created = topic::create_topic_with(
                    self.vfs.as_ref(),
                    &self.creator(),
                    name,
                    self.config.default_partitions,
                    &BTreeMap::new(),
                )
                .await;
                match created {
                    Ok(m) => Found::Created(m),
                    // Another request made it first: it is as new.
                    Err(TopicError::Exists(_)) => {
                        match topic::lookup(self.vfs.as_ref(), name).await {
                            Ok(Some(m)) => Found::Created(m),
                            Ok(None) => Found::Error(code(ResponseError::LeaderNotAvailable)),
                            Err(e) => Found::Error(lookup_error(&e)),
                        }
                    }
                    Err(TopicError::InvalidName(..)) => {
                        Found::Error(code(ResponseError::InvalidTopicException))
                    }
                    Err(_) => Found::Error(code(ResponseError::KafkaStorageError)),
                }
            }
            Ok(None) => Found::Error(code(ResponseError::UnknownTopicOrPartition)),
            Err(e) => Found::Error(lookup_error(&e)),
        }
    }

    fn topic_metadata(
        &self,
        name: &str,
        found: Found,
        a: Option<&Assignment>,
        version: i16,
    ) -> MetadataResponseTopic {
        let base = MetadataResponseTopic::default().with_name(Some(topic_name(name)));
        let meta = match found {
            Found::Exists(m) | Found::Created(m) => m,
            Found::Error(c) => return base.with_error_code(c),
        };
        let partitions = (0..meta.partitions)
            .map(|p| {
                let part = MetadataResponsePartition::default().with_partition_index(p as i32);
                let epoch = |l: &crate::cluster::placement::Leadership| {
                    if version >= 7 {
                        l.leader_epoch as i32
                    } else {
                        -1
                    }
                };
                match a.and_then(|a| a.leadership(&meta.id, p)) {
                    // As Kafka answers for a partition whose only replica
                    // is offline: no leader, the replica named offline.
                    Some(l) if a.is_some_and(|a| a.is_offline(&meta.id, p)) => part
                        .with_error_code(code(ResponseError::LeaderNotAvailable))
                        .with_leader_id(BrokerId(-1))
                        .with_leader_epoch(epoch(&l))
                        .with_replica_nodes(vec![BrokerId(l.leader as i32)])
                        .with_offline_replicas(vec![BrokerId(l.leader as i32)]),
                    Some(l) => part
                        .with_leader_id(BrokerId(l.leader as i32))
                        .with_leader_epoch(if version >= 7 {
                            l.leader_epoch as i32
                        } else {
                            -1
                        })
                        .with_replica_nodes(vec![BrokerId(l.leader as i32)])
                        .with_isr_nodes(vec![BrokerId(l.leader as i32)]),
                    None => {
                        tracing::debug!(
                            topic = name,
                            partition = p,
                            assignment = ?a.map(|a| (a.controller_epoch, a.version)),
                            "metadata: no leader in this broker's assignment"
                        );
                        part.with_error_code(code(ResponseError::LeaderNotAvailable))
                            .with_leader_id(BrokerId(-1))
                    }
                }
            })
            .collect();
        let id = if version >= 10 {
            uuid_of(&meta)
        } else {
            Uuid::nil()
        };
        base.with_topic_id(id).with_partitions(partitions)
    }

    pub(super) fn describe_cluster(
        &self,
        req: DescribeClusterRequest,
        listener: &str,
    ) -> DescribeClusterResponse {
        // v1+: 1 asks for the brokers, 2 for the controllers, which Kafka
        // answers on a controller's listener only; kaas has no such
        // listener (every broker can become the controller).
        if req.endpoint_type == 2 {
            return DescribeClusterResponse::default()
                .with_error_code(code(ResponseError::MismatchedEndpointType))
                .with_error_message(Some(StrBytes::from_static_str(
                    "kaas has no controller listener; ask for brokers (endpoint type 1)",
                )))
                .with_endpoint_type(2);
        }
        let a = self.current();
        let brokers = a
            .iter()
            .flat_map(|a| a.brokers.iter())
            .filter_map(|(id, b)| Some((id, b.endpoint(listener)?)))
            .map(|(id, endpoint)| {
                let (host, port) = split_host_port(endpoint);
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(*id as i32))
                    .with_host(StrBytes::from_string(host))
                    .with_port(port)
            })
            .collect();
        DescribeClusterResponse::default()
            .with_cluster_id(StrBytes::from_string(
                a.as_ref().map(|a| a.cluster_id.clone()).unwrap_or_default(),
            ))
            .with_controller_id(BrokerId(a.as_ref().map_or(-1, |a| a.controller as i32)))
            .with_brokers(brokers)
    }
}
