//! The broker's answers to Kafka requests.
//!
//! Leadership comes from the controller's assignment (a single broker is a
//! cluster of one: it elects itself and assigns itself every partition);
//! data goes through the partition logs this broker leads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as AlterResponse;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse as IncrementalAlterResponse;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, BrokerId, CreatePartitionsRequest,
    CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteRecordsRequest,
    DeleteRecordsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, FetchRequest, FetchResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    RequestHeader, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::messages::{
    FindCoordinatorRequest, FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse,
    ProducerId,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use uuid::Uuid;
use vfs::Vfs;

use crate::cluster::assignment::Assignment;
use crate::groups::{self, Coordinators};
use crate::leaders::Leaders;
use crate::log::staging::Creator;
use crate::log::topic::{self, TopicError, TopicMeta};
use crate::log::topic_config::{self, Overrides};
use crate::log::{LogError, PartitionLog};
use crate::producer_ids::ProducerIds;
use crate::protocol::{Handler, versions};

mod leader_epoch;

/// Settings of the request handlers.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    pub broker_id: u32,
    /// This process's heartbeat incarnation: topics and partitions it
    /// stages are named after it, so a sweeper can tell whether it is alive.
    pub incarnation: u64,
    pub advertised: String,
    pub auto_create_topics: bool,
    pub default_partitions: u32,
    /// Largest record set accepted per partition (Kafka's message.max.bytes).
    pub max_message_bytes: usize,
}

/// The request handler of one broker.
pub struct Api {
    vfs: Arc<dyn Vfs>,
    config: ApiConfig,
    leaders: Arc<Leaders>,
    coordinators: Arc<Coordinators>,
    producer_ids: ProducerIds,
    assignment: watch::Receiver<Option<Assignment>>,
    /// Topic name -> (id, partitions) as last looked up, for produce only.
    produce_names: std::sync::Mutex<BTreeMap<String, (String, u32)>>,
}

/// Kafka's ConfigResource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// A failed topic lookup: a name Kafka would refuse, or the volume failing.
fn lookup_error(e: &std::io::Error) -> i16 {
    if e.kind() == std::io::ErrorKind::InvalidInput {
        code(ResponseError::InvalidTopicException)
    } else {
        tracing::warn!(error = %e, "topic lookup failed");
        code(ResponseError::KafkaStorageError)
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn name_of(t: &TopicName) -> &str {
    t.0.as_str()
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn uuid_of(meta: &TopicMeta) -> Uuid {
    Uuid::parse_str(&meta.id).unwrap_or(Uuid::nil())
}

fn split_host_port(addr: &str) -> (String, i32) {
    match addr.rsplit_once(':') {
        Some((h, p)) => (
            h.trim_matches(['[', ']']).to_owned(),
            p.parse().unwrap_or(9092),
        ),
        None => (addr.to_owned(), 9092),
    }
}

/// ListOffsets' special timestamps.
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// One partition's ListOffsets answer from the log this broker leads.
async fn offset_at(
    log: &PartitionLog,
    timestamp: i64,
    version: i16,
    r: ListOffsetsPartitionResponse,
) -> ListOffsetsPartitionResponse {
    // The leader epoch field exists from v4; before, it stays unknown.
    let epoch = |e: i32| if version >= 4 { e } else { -1 };
    let current = epoch(log.epoch() as i32);
    let found = match timestamp {
        EARLIEST_TIMESTAMP => {
            return r
                .with_offset(log.log_start_offset())
                .with_leader_epoch(current);
        }
        LATEST_TIMESTAMP => {
            return r
                .with_offset(log.high_watermark())
                .with_leader_epoch(current);
        }
        MAX_TIMESTAMP => log.offset_of_max_timestamp().await,
        ts => log.offset_for_timestamp(ts).await,
    };
    match found {
        Ok(Some(f)) => r
            .with_offset(f.offset)
            .with_timestamp(f.timestamp)
            .with_leader_epoch(epoch(f.leader_epoch)),
        // No record at or after the timestamp (or, for MAX_TIMESTAMP, an
        // empty log): Kafka answers offset -1, timestamp -1, no error.
        Ok(None) => r.with_offset(-1).with_timestamp(-1),
        Err(e) => {
            tracing::warn!(dir = %log.dir().display(), error = %e, "offset lookup by time failed");
            r.with_error_code(code(ResponseError::KafkaStorageError))
        }
    }
}

impl Api {
    pub fn new(
        vfs: Arc<dyn Vfs>,
        config: ApiConfig,
        leaders: Arc<Leaders>,
        coordinators: Arc<Coordinators>,
        assignment: watch::Receiver<Option<Assignment>>,
    ) -> Self {
        Self {
            producer_ids: ProducerIds::new(vfs.clone(), config.broker_id),
            vfs,
            config,
            leaders,
            coordinators,
            assignment,
            produce_names: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Deletes a topic, then keeps removing its files in the background
    /// (for up to ten minutes; the controller's sweep does the rest).
    async fn delete_and_reap(&self, meta: &TopicMeta) -> std::io::Result<()> {
        let deleted = topic::delete_topic(self.vfs.as_ref(), meta).await;
        // Even a failed call may have renamed the topic to its tombstone
        // (the name's release is what failed, or a reply was lost); reaping
        // a tombstone that is not there is a no-op.
        let vfs = self.vfs.clone();
        let id = meta.id.clone();
        tokio::spawn(async move { topic::reap_tombstone(vfs.as_ref(), &id, 300).await });
        deleted
    }

    /// FindCoordinator: the broker leading the key's coordinator slot.
    /// Groups and transactional ids share the slots.
    fn find_coordinator(
        &self,
        req: FindCoordinatorRequest,
        version: i16,
    ) -> FindCoordinatorResponse {
        let a = self.current();
        let locate = |key: &str| -> Result<(i32, String, i32), i16> {
            let a = a
                .as_ref()
                .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
            let l = a
                .coordinator(groups::slot_of(key))
                .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
            let b = a
                .brokers
                .get(&l.leader)
                .ok_or(code(ResponseError::CoordinatorNotAvailable))?;
            let (host, port) = split_host_port(&b.advertised);
            Ok((l.leader as i32, host, port))
        };
        if version >= 4 {
            let coordinators = req
                .coordinator_keys
                .iter()
                .map(|k| {
                    let c = Coordinator::default().with_key(k.clone());
                    match locate(k.as_str()) {
                        Ok((id, host, port)) => c
                            .with_node_id(BrokerId(id))
                            .with_host(StrBytes::from_string(host))
                            .with_port(port),
                        Err(e) => c
                            .with_error_code(e)
                            .with_node_id(BrokerId(-1))
                            .with_port(-1),
                    }
                })
                .collect();
            return FindCoordinatorResponse::default().with_coordinators(coordinators);
        }
        match locate(req.key.as_str()) {
            Ok((id, host, port)) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(id))
                .with_host(StrBytes::from_string(host))
                .with_port(port),
            Err(e) => FindCoordinatorResponse::default()
                .with_error_code(e)
                .with_node_id(BrokerId(-1))
                .with_port(-1),
        }
    }

    /// InitProducerId for idempotent producers: a fresh id, or (KIP-360)
    /// the same id with the next epoch when the producer asks to bump.
    /// Transactions are not served.
    async fn init_producer_id(&self, req: InitProducerIdRequest) -> InitProducerIdResponse {
        let resp = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        if req.transactional_id.is_some() {
            tracing::warn!(
                "InitProducerId with a transactional id: transactions are not supported"
            );
            return resp.with_error_code(code(ResponseError::InvalidRequest));
        }
        if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1 {
            return resp
                .with_producer_id(req.producer_id)
                .with_producer_epoch(req.producer_epoch + 1);
        }
        match self.producer_ids.allocate().await {
            Ok(id) => resp.with_producer_id(ProducerId(id)).with_producer_epoch(0),
            Err(e) => {
                tracing::warn!(error = %e, "no producer id");
                resp.with_error_code(code(ResponseError::CoordinatorNotAvailable))
            }
        }
    }

    fn creator(&self) -> Creator {
        Creator {
            broker: self.config.broker_id,
            incarnation: self.config.incarnation,
        }
    }

    fn current(&self) -> Option<Assignment> {
        self.assignment.borrow().clone()
    }

    /// The log of a partition this broker leads, or the error to answer.
    async fn log_for(&self, name: &str, partition: i32) -> Result<Arc<PartitionLog>, i16> {
        self.topic_log(name, partition).await.map(|(_, log)| log)
    }

    /// [`Self::topic_log`] for produce, from the name last looked up while
    /// this broker still leads that partition: a fresh lookup costs four
    /// opens per request. Safe without one: no append is acknowledged
    /// before the log's fence check, which fails once the topic was deleted
    /// (its directory renamed) or the epoch moved on; the leader then steps
    /// down and the next request looks the name up again.
    async fn produce_log(
        &self,
        name: &str,
        partition: i32,
    ) -> Result<(String, Arc<PartitionLog>), i16> {
        let cached = lock(&self.produce_names).get(name).cloned();
        if let Some((id, partitions)) = cached {
            if let Ok(p) = u32::try_from(partition) {
                if p < partitions {
                    if let Some(log) = self.leaders.get(&id, p) {
                        if !log.has_stopped() {
                            return Ok((id, log));
                        }
                    }
                }
            }
        }
        let meta = match topic::lookup(self.vfs.as_ref(), name).await {
            Ok(Some(m)) => m,
            Ok(None) => {
                lock(&self.produce_names).remove(name);
                return Err(code(ResponseError::UnknownTopicOrPartition));
            }
            Err(e) => return Err(lookup_error(&e)),
        };
        lock(&self.produce_names).insert(name.to_owned(), (meta.id.clone(), meta.partitions));
        self.led_log(meta, partition)
    }

    /// The topic id and the log of a partition this broker leads.
    async fn topic_log(
        &self,
        name: &str,
        partition: i32,
    ) -> Result<(String, Arc<PartitionLog>), i16> {
        let meta = match topic::lookup(self.vfs.as_ref(), name).await {
            Ok(Some(m)) => m,
            Ok(None) => return Err(code(ResponseError::UnknownTopicOrPartition)),
            Err(e) => return Err(lookup_error(&e)),
        };
        self.led_log(meta, partition)
    }

    fn led_log(&self, meta: TopicMeta, partition: i32) -> Result<(String, Arc<PartitionLog>), i16> {
        let p =
            u32::try_from(partition).map_err(|_| code(ResponseError::UnknownTopicOrPartition))?;
        if p >= meta.partitions {
            return Err(code(ResponseError::UnknownTopicOrPartition));
        }
        let log = self
            .leaders
            .get(&meta.id, p)
            .ok_or(code(ResponseError::NotLeaderOrFollower))?;
        Ok((meta.id, log))
    }

    async fn metadata(&self, req: MetadataRequest, version: i16) -> MetadataResponse {
        let a = self.current();
        let mut brokers: Vec<MetadataResponseBroker> = match &a {
            Some(a) => a
                .brokers
                .iter()
                .map(|(id, b)| {
                    let (host, port) = split_host_port(&b.advertised);
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
            let (host, port) = split_host_port(&self.config.advertised);
            brokers.push(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(self.config.broker_id as i32))
                    .with_host(StrBytes::from_string(host))
                    .with_port(port),
            );
        }
        let requested: Option<Vec<String>> = match req.topics {
            None => None,
            Some(t) if t.is_empty() && version == 0 => None,
            Some(t) => Some(
                t.into_iter()
                    .filter_map(|t| t.name.map(|n| name_of(&n).to_owned()))
                    .collect(),
            ),
        };
        let auto_create =
            self.config.auto_create_topics && (version < 4 || req.allow_auto_topic_creation);
        let mut topics = Vec::new();
        let names = match requested {
            Some(names) => names,
            None => self.all_topic_names().await,
        };
        for name in names {
            topics.push(
                self.topic_metadata(&name, a.as_ref(), auto_create, version)
                    .await,
            );
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

    async fn all_topic_names(&self) -> Vec<String> {
        let Ok(listing) = self
            .vfs
            .read_dir(std::path::Path::new(topic::TOPICS_DIR))
            .await
        else {
            return Vec::new();
        };
        let mut names = Vec::new();
        for e in listing {
            if e.name.starts_with('.') || e.name == "names" {
                continue;
            }
            if let Ok(meta) = topic::read_meta(self.vfs.as_ref(), &e.name).await {
                names.push(meta.name);
            }
        }
        names.sort();
        names
    }

    async fn topic_metadata(
        &self,
        name: &str,
        a: Option<&Assignment>,
        auto_create: bool,
        version: i16,
    ) -> MetadataResponseTopic {
        let base = MetadataResponseTopic::default().with_name(Some(topic_name(name)));
        let meta = match topic::lookup(self.vfs.as_ref(), name).await {
            Ok(Some(m)) => m,
            Ok(None) if auto_create => {
                return match topic::create_topic_with(
                    self.vfs.as_ref(),
                    &self.creator(),
                    name,
                    self.config.default_partitions,
                    &BTreeMap::new(),
                )
                .await
                {
                    // Leaders come with the controller's next assignment.
                    Ok(_) | Err(TopicError::Exists(_)) => {
                        base.with_error_code(code(ResponseError::LeaderNotAvailable))
                    }
                    Err(TopicError::InvalidName(..)) => {
                        base.with_error_code(code(ResponseError::InvalidTopicException))
                    }
                    Err(_) => base.with_error_code(code(ResponseError::KafkaStorageError)),
                };
            }
            Ok(None) => return base.with_error_code(code(ResponseError::UnknownTopicOrPartition)),
            Err(e) => return base.with_error_code(lookup_error(&e)),
        };
        let partitions = (0..meta.partitions)
            .map(|p| {
                let part = MetadataResponsePartition::default().with_partition_index(p as i32);
                match a.and_then(|a| a.leadership(&meta.id, p)) {
                    Some(l) => part
                        .with_leader_id(BrokerId(l.leader as i32))
                        .with_leader_epoch(if version >= 7 {
                            l.leader_epoch as i32
                        } else {
                            -1
                        })
                        .with_replica_nodes(vec![BrokerId(l.leader as i32)])
                        .with_isr_nodes(vec![BrokerId(l.leader as i32)]),
                    None => part
                        .with_error_code(code(ResponseError::LeaderNotAvailable))
                        .with_leader_id(BrokerId(-1)),
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

    fn describe_cluster(&self) -> DescribeClusterResponse {
        let a = self.current();
        let brokers = a
            .iter()
            .flat_map(|a| a.brokers.iter())
            .map(|(id, b)| {
                let (host, port) = split_host_port(&b.advertised);
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

    async fn produce(&self, req: ProduceRequest, version: i16) -> Option<ProduceResponse> {
        let mut responses = Vec::new();
        for t in req.topic_data {
            let name = name_of(&t.name).to_owned();
            let mut parts = Vec::new();
            for p in t.partition_data {
                let r = PartitionProduceResponse::default()
                    .with_index(p.index)
                    .with_base_offset(-1)
                    .with_log_append_time_ms(-1);
                let records = p.records.unwrap_or_default();
                let r = match self.produce_log(&name, p.index).await {
                    Err(c) => r.with_error_code(c),
                    Ok((id, _)) if records.len() > self.leaders.max_message_bytes(&id) => {
                        r.with_error_code(code(ResponseError::MessageTooLarge))
                    }
                    Ok((_, log)) => self.append(&log, records, r, version).await,
                };
                parts.push(r);
            }
            responses.push(
                TopicProduceResponse::default()
                    .with_name(t.name)
                    .with_partition_responses(parts),
            );
        }
        // acks=0: the client waits for nothing, so nothing is sent.
        (req.acks != 0).then(|| ProduceResponse::default().with_responses(responses))
    }

    async fn append(
        &self,
        log: &PartitionLog,
        records: Bytes,
        r: PartitionProduceResponse,
        version: i16,
    ) -> PartitionProduceResponse {
        match log.append(records).await {
            Ok(a) => {
                tracing::trace!(dir = %log.dir().display(), epoch = log.epoch(), base = a.base_offset, "acknowledged");
                self.leaders.appended.notify_waiters();
                let start = if version >= 5 {
                    log.log_start_offset()
                } else {
                    -1
                };
                r.with_base_offset(a.base_offset)
                    .with_log_start_offset(start)
            }
            Err(LogError::Corrupt(_)) => r.with_error_code(code(ResponseError::CorruptMessage)),
            Err(LogError::OutOfOrderSequence) => {
                r.with_error_code(code(ResponseError::OutOfOrderSequenceNumber))
            }
            Err(LogError::InvalidProducerEpoch) => {
                r.with_error_code(code(ResponseError::InvalidProducerEpoch))
            }
            Err(LogError::Fenced(_)) => {
                let dir = log.dir().to_path_buf();
                tracing::info!(dir = %dir.display(), "fenced: stepping down");
                r.with_error_code(code(ResponseError::NotLeaderOrFollower))
            }
            Err(e) => {
                tracing::warn!(error = %e, "append failed");
                r.with_error_code(code(ResponseError::KafkaStorageError))
            }
        }
    }

    async fn fetch(&self, req: FetchRequest, version: i16) -> FetchResponse {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
        loop {
            // Registered before reading, so an append in between is not
            // missed: a `Notified` counts only from `enable` (or its first
            // poll), not from its creation.
            let appended = self.leaders.appended.notified();
            tokio::pin!(appended);
            appended.as_mut().enable();
            let (response, bytes) = self.fetch_once(&req, version).await;
            let enough = bytes >= req.min_bytes.max(0) as usize;
            // As in Kafka, an error answers at once: waiting cannot fix a
            // fenced epoch or a partition led elsewhere.
            let failed = response
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code != 0);
            if enough || failed || tokio::time::Instant::now() >= deadline {
                return response;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let _ = tokio::time::timeout(left, appended).await;
        }
    }

    async fn fetch_once(&self, req: &FetchRequest, version: i16) -> (FetchResponse, usize) {
        let start_of = |s: i64| if version >= 5 { s } else { -1 };
        let mut budget = if req.max_bytes > 0 {
            req.max_bytes as usize
        } else {
            usize::MAX
        };
        let mut total = 0;
        let mut topics = Vec::new();
        for t in &req.topics {
            let name = name_of(&t.topic).to_owned();
            let mut parts = Vec::new();
            for p in &t.partitions {
                let d = PartitionData::default()
                    .with_partition_index(p.partition)
                    .with_high_watermark(-1)
                    .with_last_stable_offset(-1)
                    .with_log_start_offset(-1)
                    .with_preferred_read_replica(BrokerId(-1));
                let led = self.log_for(&name, p.partition).await.and_then(|log| {
                    leader_epoch::check_current(p.current_leader_epoch, &log).map(|()| log)
                });
                let d = match led {
                    Err(c) => d.with_error_code(c),
                    Ok(log) => {
                        let max = (p.partition_max_bytes.max(0) as usize).min(budget);
                        match log.read(p.fetch_offset, max.max(1)).await {
                            Ok(r) => {
                                let n = r.records.len();
                                budget = budget.saturating_sub(n);
                                total += n;
                                d.with_high_watermark(r.high_watermark)
                                    .with_last_stable_offset(r.high_watermark)
                                    .with_log_start_offset(start_of(r.log_start_offset))
                                    .with_aborted_transactions(Some(Vec::new()))
                                    .with_records(Some(r.records))
                            }
                            Err(LogError::OutOfRange { start, end, .. }) => d
                                .with_error_code(code(ResponseError::OffsetOutOfRange))
                                .with_high_watermark(end)
                                .with_log_start_offset(start_of(start)),
                            Err(e) => {
                                tracing::warn!(dir = %log.dir().display(), offset = p.fetch_offset, error = %e, "read failed");
                                d.with_error_code(code(ResponseError::KafkaStorageError))
                            }
                        }
                    }
                };
                parts.push(d);
            }
            topics.push(
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(parts),
            );
        }
        (FetchResponse::default().with_responses(topics), total)
    }

    async fn list_offsets(&self, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
        let mut topics = Vec::new();
        for t in req.topics {
            let name = name_of(&t.name).to_owned();
            let mut parts = Vec::new();
            for p in t.partitions {
                let r = ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_timestamp(-1)
                    .with_offset(-1)
                    .with_leader_epoch(-1);
                let led = self
                    .log_for(&name, p.partition_index)
                    .await
                    .and_then(|log| {
                        leader_epoch::check_current(p.current_leader_epoch, &log).map(|()| log)
                    });
                let r = match led {
                    Err(c) => r.with_error_code(c),
                    Ok(log) => offset_at(&log, p.timestamp, version, r).await,
                };
                parts.push(r);
            }
            topics.push(
                ListOffsetsTopicResponse::default()
                    .with_name(t.name)
                    .with_partitions(parts),
            );
        }
        ListOffsetsResponse::default().with_topics(topics)
    }

    async fn create_topics(&self, req: CreateTopicsRequest, version: i16) -> CreateTopicsResponse {
        let mut results = Vec::new();
        for t in req.topics {
            let name = name_of(&t.name).to_owned();
            let partitions = if t.num_partitions == -1 {
                self.config.default_partitions as i32
            } else {
                t.num_partitions
            };
            let result = CreatableTopicResult::default().with_name(t.name.clone());
            let result = if version >= 5 {
                result
                    .with_num_partitions(partitions)
                    .with_replication_factor(1)
            } else {
                result
            };
            let overrides: Overrides = t
                .configs
                .iter()
                .filter_map(|c| {
                    c.value
                        .as_ref()
                        .map(|v| (c.name.as_str().to_owned(), v.as_str().to_owned()))
                })
                .collect();
            let bad_config = overrides
                .iter()
                .find_map(|(k, v)| topic_config::validate(k, v).err());
            let error = if let Err(e) = topic::validate_name(&name) {
                Some((ResponseError::InvalidTopicException, e.to_string()))
            } else if partitions < 1 {
                Some((
                    ResponseError::InvalidPartitions,
                    format!("{partitions} partitions"),
                ))
            } else if let Some(why) = bad_config {
                Some((ResponseError::InvalidConfig, why))
            } else if t.replication_factor == 0 || t.replication_factor < -1 {
                Some((
                    ResponseError::InvalidReplicationFactor,
                    format!("replication factor {}", t.replication_factor),
                ))
            } else {
                None
            };
            let result = match error {
                Some((e, msg)) => result
                    .with_error_code(code(e))
                    .with_error_message(Some(StrBytes::from_string(msg))),
                None if req.validate_only => match topic::lookup(self.vfs.as_ref(), &name).await {
                    Ok(Some(_)) => result.with_error_code(code(ResponseError::TopicAlreadyExists)),
                    _ => result,
                },
                None => {
                    match topic::create_topic_with(
                        self.vfs.as_ref(),
                        &self.creator(),
                        &name,
                        partitions as u32,
                        &overrides,
                    )
                    .await
                    {
                        Ok(meta) if version >= 7 => result.with_topic_id(uuid_of(&meta)),
                        Ok(_) => result,
                        Err(TopicError::Exists(_)) => {
                            result.with_error_code(code(ResponseError::TopicAlreadyExists))
                        }
                        Err(e) => result
                            .with_error_code(code(ResponseError::KafkaStorageError))
                            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                    }
                }
            };
            results.push(result);
        }
        CreateTopicsResponse::default().with_topics(results)
    }

    async fn describe_configs(&self, req: DescribeConfigsRequest) -> DescribeConfigsResponse {
        let mut results = Vec::new();
        for r in req.resources {
            let name = r.resource_name.as_str().to_owned();
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let result = match r.resource_type {
                TOPIC => match topic::lookup(self.vfs.as_ref(), &name).await {
                    Ok(Some(meta)) => match topic_config::read(self.vfs.as_ref(), &meta.id).await {
                        Ok((_, overrides)) => {
                            let wanted = r.configuration_keys.as_ref().map(|keys| {
                                keys.iter()
                                    .map(|k| k.as_str().to_owned())
                                    .collect::<Vec<_>>()
                            });
                            let configs = topic_config::effective(&overrides)
                                .into_iter()
                                .filter(|(k, _, _)| wanted.as_ref().is_none_or(|w| w.contains(k)))
                                .map(|(k, v, default)| {
                                    DescribeConfigsResourceResult::default()
                                        .with_name(StrBytes::from_string(k))
                                        .with_value(Some(StrBytes::from_string(v)))
                                        .with_config_source(if default { 5 } else { 1 })
                                })
                                .collect();
                            result.with_configs(configs)
                        }
                        Err(_) => result.with_error_code(code(ResponseError::KafkaStorageError)),
                    },
                    Ok(None) => {
                        result.with_error_code(code(ResponseError::UnknownTopicOrPartition))
                    }
                    Err(_) => result.with_error_code(code(ResponseError::KafkaStorageError)),
                },
                // Broker configs: none are settable; an empty list is the truth.
                BROKER => result,
                _ => result.with_error_code(code(ResponseError::InvalidRequest)),
            };
            results.push(result);
        }
        DescribeConfigsResponse::default().with_results(results)
    }

    /// Validates and stores a config change of one topic; `Err` is the code
    /// and message to answer.
    async fn alter_topic(
        &self,
        name: &str,
        changes: Vec<(String, Option<String>)>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), (i16, String)> {
        let meta = match topic::lookup(self.vfs.as_ref(), name).await {
            Ok(Some(m)) => m,
            Ok(None) => {
                return Err((
                    code(ResponseError::UnknownTopicOrPartition),
                    format!("no topic {name}"),
                ));
            }
            Err(e) => return Err((code(ResponseError::KafkaStorageError), e.to_string())),
        };
        for (k, v) in &changes {
            if let Some(v) = v {
                topic_config::validate(k, v)
                    .map_err(|why| (code(ResponseError::InvalidConfig), why))?;
            }
        }
        if validate_only {
            return Ok(());
        }
        topic_config::update(self.vfs.as_ref(), &meta.id, |o| {
            if replace_all {
                o.clear();
            }
            for (k, v) in &changes {
                match v {
                    Some(v) => o.insert(k.clone(), v.clone()),
                    None => o.remove(k),
                };
            }
        })
        .await
        .map(|_| ())
        .map_err(|e| (code(ResponseError::KafkaStorageError), e.to_string()))
    }

    /// Alters one config resource of either AlterConfigs flavour: only
    /// topics have settable configs.
    async fn alter_resource(
        &self,
        name: &StrBytes,
        resource_type: i8,
        changes: Vec<(String, Option<String>)>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), (i16, String)> {
        if resource_type != TOPIC {
            return Err((
                code(ResponseError::InvalidRequest),
                "only topic configs can be altered".into(),
            ));
        }
        self.alter_topic(name.as_str(), changes, replace_all, validate_only)
            .await
    }

    async fn incremental_alter_configs(
        &self,
        req: IncrementalAlterConfigsRequest,
    ) -> IncrementalAlterConfigsResponse {
        let mut responses = Vec::new();
        for r in req.resources {
            let mut response = IncrementalAlterResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let changes: Result<Vec<_>, String> = r
                .configs
                .iter()
                .map(|c| match c.config_operation {
                    0 => Ok((
                        c.name.as_str().to_owned(),
                        c.value.as_ref().map(|v| v.as_str().to_owned()),
                    )),
                    1 => Ok((c.name.as_str().to_owned(), None)),
                    op => Err(format!(
                        "operation {op} on {} is not supported",
                        c.name.as_str()
                    )),
                })
                .collect();
            let outcome = match changes {
                Err(why) => Err((code(ResponseError::InvalidRequest), why)),
                Ok(changes) => {
                    self.alter_resource(
                        &r.resource_name,
                        r.resource_type,
                        changes,
                        false,
                        req.validate_only,
                    )
                    .await
                }
            };
            if let Err((c, why)) = outcome {
                response = response
                    .with_error_code(c)
                    .with_error_message(Some(StrBytes::from_string(why)));
            }
            responses.push(response);
        }
        IncrementalAlterConfigsResponse::default().with_responses(responses)
    }

    async fn alter_configs(&self, req: AlterConfigsRequest) -> AlterConfigsResponse {
        let mut responses = Vec::new();
        for r in req.resources {
            let mut response = AlterResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let changes = r
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.as_str().to_owned(),
                        c.value.as_ref().map(|v| v.as_str().to_owned()),
                    )
                })
                .collect();
            let outcome = self
                .alter_resource(
                    &r.resource_name,
                    r.resource_type,
                    changes,
                    true,
                    req.validate_only,
                )
                .await;
            if let Err((c, why)) = outcome {
                response = response
                    .with_error_code(c)
                    .with_error_message(Some(StrBytes::from_string(why)));
            }
            responses.push(response);
        }
        AlterConfigsResponse::default().with_responses(responses)
    }

    async fn create_partitions(&self, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
        let mut results = Vec::new();
        for t in req.topics {
            let name = name_of(&t.name).to_owned();
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            let fail = |e: ResponseError, why: String| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(code(e))
                    .with_error_message(Some(StrBytes::from_string(why)))
            };
            let result = match topic::lookup(self.vfs.as_ref(), &name).await {
                Ok(None) => fail(
                    ResponseError::UnknownTopicOrPartition,
                    format!("no topic {name}"),
                ),
                Err(e) => fail(ResponseError::KafkaStorageError, e.to_string()),
                Ok(Some(meta)) if t.count <= meta.partitions as i32 => fail(
                    ResponseError::InvalidPartitions,
                    format!(
                        "{name} has {} partitions; the count can only grow",
                        meta.partitions
                    ),
                ),
                Ok(Some(_)) if req.validate_only => result,
                Ok(Some(meta)) => {
                    let live = self.current().map(|a| a.brokers).unwrap_or_default();
                    let creator = self.creator();
                    let added = topic::add_partitions(
                        self.vfs.as_ref(),
                        &creator,
                        &live,
                        &meta,
                        t.count as u32,
                    );
                    match added.await {
                        Ok(()) => result,
                        Err(e) => fail(ResponseError::KafkaStorageError, e.to_string()),
                    }
                }
            };
            results.push(result);
        }
        CreatePartitionsResponse::default().with_results(results)
    }

    async fn delete_records(&self, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
        let mut topics = Vec::new();
        for t in req.topics {
            let name = name_of(&t.name).to_owned();
            let mut parts = Vec::new();
            for p in t.partitions {
                let r = DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_low_watermark(-1);
                let r = match self.log_for(&name, p.partition_index).await {
                    Err(c) => r.with_error_code(c),
                    Ok(log) => match log.delete_records(p.offset).await {
                        Ok(start) => r.with_low_watermark(start),
                        Err(LogError::OutOfRange { .. }) => {
                            r.with_error_code(code(ResponseError::OffsetOutOfRange))
                        }
                        Err(_) => r.with_error_code(code(ResponseError::KafkaStorageError)),
                    },
                };
                parts.push(r);
            }
            topics.push(
                DeleteRecordsTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(parts),
            );
        }
        DeleteRecordsResponse::default().with_topics(topics)
    }

    async fn delete_topics(&self, req: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
        let mut wanted: Vec<(Option<String>, Uuid)> = req
            .topic_names
            .iter()
            .map(|n| (Some(name_of(n).to_owned()), Uuid::nil()))
            .collect();
        wanted.extend(
            req.topics
                .iter()
                .map(|t| (t.name.as_ref().map(|n| name_of(n).to_owned()), t.topic_id)),
        );
        let mut results = Vec::new();
        for (name, id) in wanted {
            // A lookup that failed says nothing about the topic: the client
            // must retry, not conclude that it does not exist.
            let meta = match &name {
                Some(n) => topic::lookup(self.vfs.as_ref(), n)
                    .await
                    .map_err(|e| lookup_error(&e)),
                // By id: the topic's own directory, read fresh.
                None => {
                    match topic::read_meta(self.vfs.as_ref(), &id.hyphenated().to_string()).await {
                        Ok(m) => Ok(Some(m)),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                        Err(e) => Err(lookup_error(&e)),
                    }
                }
            };
            let result = DeletableTopicResult::default()
                .with_name(name.as_deref().map(topic_name))
                .with_topic_id(id);
            let result = match meta {
                Err(c) => result.with_error_code(c),
                Ok(None) => result.with_error_code(if name.is_some() {
                    code(ResponseError::UnknownTopicOrPartition)
                } else {
                    code(ResponseError::UnknownTopicId)
                }),
                Ok(Some(m)) => match self.delete_and_reap(&m).await {
                    Ok(()) if version >= 6 => result
                        .with_name(Some(topic_name(&m.name)))
                        .with_topic_id(uuid_of(&m)),
                    Ok(()) => result.with_name(Some(topic_name(&m.name))),
                    Err(e) if version >= 5 => result
                        .with_error_code(code(ResponseError::KafkaStorageError))
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                    Err(_) => result.with_error_code(code(ResponseError::KafkaStorageError)),
                },
            };
            results.push(result);
        }
        DeleteTopicsResponse::default().with_responses(results)
    }
}

#[async_trait::async_trait]
impl Handler for Api {
    async fn handle(
        &self,
        header: &RequestHeader,
        request: RequestKind,
    ) -> Result<Option<ResponseKind>, String> {
        let v = header.request_api_version;
        Ok(Some(match request {
            RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(versions::api_versions(v).0),
            RequestKind::Metadata(r) => ResponseKind::Metadata(self.metadata(r, v).await),
            RequestKind::Produce(r) => match self.produce(r, v).await {
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
            RequestKind::DescribeCluster(_) => {
                ResponseKind::DescribeCluster(self.describe_cluster())
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
                ResponseKind::FindCoordinator(self.find_coordinator(r, v))
            }
            RequestKind::InitProducerId(r) => {
                ResponseKind::InitProducerId(self.init_producer_id(r).await)
            }
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
                ResponseKind::OffsetCommit(self.coordinators.offset_commit(r, v).await)
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
            RequestKind::OffsetForLeaderEpoch(r) => {
                ResponseKind::OffsetForLeaderEpoch(self.offset_for_leader_epoch(r).await)
            }
            other => return Err(format!("no handler for {other:?}")),
        }))
    }
}
