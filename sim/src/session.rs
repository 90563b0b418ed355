//! A simulated client's session: a Kafka client plus what it knows of the
//! cluster (leaders, its coordinator), and the requests the actors send
//! through it, each recorded in the history with its outcome.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest,
    FindCoordinatorRequest, GroupId, InitProducerIdRequest, MetadataRequest, OffsetCommitRequest,
    OffsetFetchRequest, ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;
use tokio::time::Instant;

use crate::client::{CallError, Client};

use crate::history::{Event, History};
use crate::workload::{GROUP, TOPIC, create_timeout_ms};

/// A produce request's answer: `(error, offset, broker)`, or why none came.
pub type ProduceAnswer = Result<(i16, i64, u32), CallError>;

/// The Produce version the simulator's clients send.
const PRODUCE_VERSION: i16 = 8;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// A client plus what it knows of the cluster.
pub struct Session {
    pub client: Client,
    brokers: u32,
    leaders: BTreeMap<(String, i32), u32>,
    pub(crate) coordinator: Option<u32>,
    /// The consumer group this session commits for.
    pub group: String,
    start: Instant,
    pub history: History,
    pub name: String,
    /// Reads the volume's creation mark (`ModelNfs::mark`), for events
    /// that later checks of the volume compare against.
    pub volume_mark: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
    /// How many I/O errors the volume has injected so far (EIO, ENOSPC,
    /// interrupted renames): an admin request that failed while this grew
    /// may have failed for that reason.
    pub volume_errors: Option<Arc<dyn Fn() -> u64 + Send + Sync>>,
    /// How long a produce or an OffsetFetch waits for its answer.
    pub request_timeout: Duration,
    /// How long an OffsetCommit waits for its answer.
    pub commit_timeout: Duration,
    /// The OffsetCommit version: 9 for consumer-protocol members (KIP-848).
    pub commit_version: i16,
    /// The transactional id its produce requests carry (`transactor`).
    pub transactional_id: Option<String>,
}

/// Kafka clients' default `request.timeout.ms`.
pub(crate) const KAFKA_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Decodes the records of a fetched record set from `from` on.
pub fn records(set: &[u8], from: i64) -> Vec<(i64, String, i32)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < set.len() {
        let h = match broker::log::batch::parse(&set[at..]) {
            Ok(h) => h,
            Err(e) => {
                // A partial batch at the end of a size-limited fetch is
                // normal; anything else is worth a line.
                tracing::debug!(at, len = set.len(), error = %e, head = ?&set[at..set.len().min(at + 24)], "unparsable batch in a fetch");
                break;
            }
        };
        if at + h.size > set.len() {
            break;
        }
        if let Some(values) = broker::log::batch::decode_values(&set[at..at + h.size]) {
            for (i, v) in values.into_iter().enumerate() {
                let offset = h.base_offset + i as i64;
                if offset >= from {
                    out.push((
                        offset,
                        String::from_utf8_lossy(&v).into_owned(),
                        h.leader_epoch,
                    ));
                }
            }
        }
        at += h.size;
    }
    out
}

impl Session {
    pub fn new(name: &str, brokers: u32, start: Instant, history: History) -> Self {
        Self {
            client: Client::new(name),
            brokers,
            leaders: BTreeMap::new(),
            coordinator: None,
            group: GROUP.to_owned(),
            start,
            history,
            name: name.to_owned(),
            volume_mark: None,
            volume_errors: None,
            request_timeout: crate::client::CALL_TIMEOUT,
            commit_timeout: COMMIT_TIMEOUT,
            commit_version: 7,
            transactional_id: None,
        }
    }

    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// A second client of the same cluster and history, for a role that
    /// sends requests in parallel.
    pub(crate) fn twin(&self, name: &str) -> Session {
        Session::new(name, self.brokers, self.start, self.history.clone())
    }

    pub(crate) fn brokers(&self) -> u32 {
        self.brokers
    }

    pub(crate) fn any_broker(&self) -> u32 {
        madsim::rand::thread_rng().gen_range(0..self.brokers)
    }

    /// Refreshes the leaders of `topic` from any broker.
    pub async fn refresh(&mut self, topic: &str) {
        let to = self.any_broker();
        let req = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(TopicName(s(topic)))),
            ]))
            .with_allow_auto_topic_creation(false);
        let sent = self.now();
        if let Ok(ResponseKind::Metadata(m)) = self
            .client
            .call(to, ApiKey::Metadata, 12, RequestKind::Metadata(req))
            .await
        {
            for t in m.topics {
                if t.error_code == 0 && !t.topic_id.is_nil() {
                    self.history.record(
                        self.now(),
                        Event::Metadata {
                            client: self.name.clone(),
                            sent,
                            broker: to,
                            topic_id: t.topic_id.to_string(),
                            partitions: t
                                .partitions
                                .iter()
                                .map(|p| (p.partition_index, p.leader_id.0, p.leader_epoch))
                                .collect(),
                        },
                    );
                }
                for p in t.partitions {
                    if p.error_code == 0 && p.leader_id.0 >= 0 {
                        self.leaders
                            .insert((topic.to_owned(), p.partition_index), p.leader_id.0 as u32);
                    } else {
                        self.leaders.remove(&(topic.to_owned(), p.partition_index));
                    }
                }
            }
        }
    }

    pub(crate) async fn leader(&mut self, topic: &str, partition: i32) -> Option<u32> {
        if !self.leaders.contains_key(&(topic.to_owned(), partition)) {
            self.refresh(topic).await;
        }
        self.leaders.get(&(topic.to_owned(), partition)).copied()
    }

    pub(crate) fn forget(&mut self, topic: &str, partition: i32) {
        self.leaders.remove(&(topic.to_owned(), partition));
    }

    pub async fn create_topic(&mut self, topic: &str, partitions: i32) -> bool {
        self.create_topic_id(topic, partitions).await.is_some()
    }

    /// Creates a topic: `Some(id)` once it exists (the id is empty when it
    /// existed already), `None` when that is not known.
    pub(crate) async fn create_topic_id(&mut self, topic: &str, partitions: i32) -> Option<String> {
        let req = CreateTopicsRequest::default()
            .with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_num_partitions(partitions)
                    .with_replication_factor(1),
            ])
            .with_timeout_ms(create_timeout_ms());
        let to = self.any_broker();
        match self
            .client
            .call(to, ApiKey::CreateTopics, 7, RequestKind::CreateTopics(req))
            .await
        {
            Ok(ResponseKind::CreateTopics(r)) => match r.topics.first() {
                Some(t) if t.error_code == 0 => Some(t.topic_id.to_string()),
                // TOPIC_ALREADY_EXISTS is as good.
                Some(t) if t.error_code == 36 => Some(String::new()),
                _ => None,
            },
            Ok(other) => {
                tracing::debug!(client = %self.name, ?other, "unexpected CreateTopics answer");
                None
            }
            Err(e) => {
                tracing::debug!(client = %self.name, error = %e.what, "CreateTopics");
                None
            }
        }
    }

    /// Deletes a topic: the error code of the answer (0 on success), or
    /// `None` without an answer.
    pub(crate) async fn delete_topic(&mut self, topic: &str) -> Option<i16> {
        let req = DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(s(topic))])
            .with_timeout_ms(5000);
        let to = self.any_broker();
        match self
            .client
            .call(to, ApiKey::DeleteTopics, 4, RequestKind::DeleteTopics(req))
            .await
        {
            Ok(ResponseKind::DeleteTopics(r)) => Some(
                r.responses
                    .iter()
                    .map(|t| t.error_code)
                    .find(|&c| c != 0)
                    .unwrap_or(0),
            ),
            _ => None,
        }
    }

    /// One produce request of `batch` to the partition's leader:
    /// `Ok((error, offset, broker))` or `Err` when there was no answer.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        batch: Bytes,
    ) -> Result<(i16, i64, u32), ()> {
        let Some(to) = self.leader(topic, partition).await else {
            return Ok((5, -1, 0)); // LEADER_NOT_AVAILABLE
        };
        let req = self.produce_request(topic, partition, batch);
        let answer = self
            .client
            .call_within(
                self.request_timeout,
                to,
                ApiKey::Produce,
                PRODUCE_VERSION,
                RequestKind::Produce(req),
            )
            .await;
        self.produce_answer(topic, partition, to, answer)
            .map_err(|_| ())
    }

    /// One produce request per batch of `batches` (partition, batch),
    /// pipelined as librdkafka sends them: every request to one leader is
    /// sent on its connection before any answer is read (leaders one after
    /// another). The answers, in the order of `batches`:
    /// `Ok((error, offset, broker))`, or why there was none.
    pub async fn produce_pipelined(
        &mut self,
        topic: &str,
        batches: Vec<(i32, Bytes)>,
    ) -> Vec<ProduceAnswer> {
        let mut answers: Vec<Option<ProduceAnswer>> = (0..batches.len()).map(|_| None).collect();
        let mut by_leader: BTreeMap<u32, Vec<(usize, i32, Bytes)>> = BTreeMap::new();
        for (k, (partition, batch)) in batches.into_iter().enumerate() {
            match self.leader(topic, partition).await {
                Some(to) => by_leader.entry(to).or_default().push((k, partition, batch)),
                None => answers[k] = Some(Ok((5, -1, 0))), // LEADER_NOT_AVAILABLE
            }
        }
        for (to, sent) in by_leader {
            let requests = sent
                .iter()
                .map(|(_, partition, batch)| {
                    let req = self.produce_request(topic, *partition, batch.clone());
                    (ApiKey::Produce, PRODUCE_VERSION, RequestKind::Produce(req))
                })
                .collect();
            let got = self
                .client
                .call_pipelined(self.request_timeout, to, requests)
                .await;
            for ((k, partition, _), answer) in sent.into_iter().zip(got) {
                answers[k] = Some(self.produce_answer(topic, partition, to, answer));
            }
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err(CallError::failed("not sent"))))
            .collect()
    }

    fn produce_request(&self, topic: &str, partition: i32, batch: Bytes) -> ProduceRequest {
        ProduceRequest::default()
            .with_transactional_id(
                self.transactional_id
                    .as_deref()
                    .map(|t| kafka_protocol::messages::TransactionalId(s(t))),
            )
            .with_acks(-1)
            .with_timeout_ms(3000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(s(topic)))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(Some(batch)),
                    ]),
            ])
    }

    /// A produce answer as `(error, offset, broker)`; the leader is
    /// forgotten after an error or no answer.
    fn produce_answer(
        &mut self,
        topic: &str,
        partition: i32,
        to: u32,
        answer: Result<ResponseKind, CallError>,
    ) -> ProduceAnswer {
        let (code, offset) = match answer {
            Ok(ResponseKind::Produce(r)) => r
                .responses
                .first()
                .and_then(|t| t.partition_responses.first())
                .map(|p| (p.error_code, p.base_offset))
                .unwrap_or((-1, -1)),
            Ok(_) => (-1, -1),
            Err(e) => {
                self.forget(topic, partition);
                return Err(e);
            }
        };
        if code != 0 {
            self.forget(topic, partition);
        }
        Ok((code, offset, to))
    }

    /// Fetches from `from`: the records and the high watermark, or `None`.
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        from: i64,
    ) -> Option<(Vec<(i64, String, i32)>, i64)> {
        let p = self.fetch_partition(topic, partition, from, 0).await?;
        let set = p.records.clone().unwrap_or_default();
        Some((records(&set, from), p.high_watermark))
    }

    /// One Fetch of `partition` from `from` at `isolation` (0:
    /// read_uncommitted, 1: read_committed) from its leader: the
    /// partition's answer, `None` without one or on an error (the leader
    /// is looked up again next time).
    pub(crate) async fn fetch_partition(
        &mut self,
        topic: &str,
        partition: i32,
        from: i64,
        isolation: i8,
    ) -> Option<PartitionData> {
        let Some(to) = self.leader(topic, partition).await else {
            tracing::debug!(client = %self.name, topic, partition, "no leader known");
            return None;
        };
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_isolation_level(isolation)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(TopicName(s(topic)))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(from)
                            .with_partition_max_bytes(256 << 10),
                    ]),
            ]);
        match self
            .client
            .call(to, ApiKey::Fetch, 11, RequestKind::Fetch(req))
            .await
        {
            Ok(ResponseKind::Fetch(r)) => {
                let p = r
                    .responses
                    .into_iter()
                    .next()?
                    .partitions
                    .into_iter()
                    .next()?;
                if p.error_code != 0 {
                    tracing::debug!(client = %self.name, topic, partition, from, code = p.error_code, "fetch refused");
                    self.forget(topic, partition);
                    return None;
                }
                Some(p)
            }
            other => {
                tracing::debug!(client = %self.name, topic, partition, from, ?other, "fetch failed");
                self.forget(topic, partition);
                None
            }
        }
    }

    pub async fn coordinator(&mut self) -> Option<u32> {
        if self.coordinator.is_none() {
            let req = FindCoordinatorRequest::default().with_key(s(&self.group));
            let to = self.any_broker();
            if let Ok(ResponseKind::FindCoordinator(r)) = self
                .client
                .call(
                    to,
                    ApiKey::FindCoordinator,
                    3,
                    RequestKind::FindCoordinator(req),
                )
                .await
            {
                if r.error_code == 0 && r.node_id.0 >= 0 {
                    self.coordinator = Some(r.node_id.0 as u32);
                }
            }
        }
        self.coordinator
    }

    /// Forgets the coordinator, so the next call looks it up again.
    pub(crate) fn lost_coordinator(&mut self) {
        self.coordinator = None;
    }

    /// Commits `offset` for `partition`, as `member` of `generation`
    /// (manual assignment: generation -1, no member); the attempt and its
    /// outcome are recorded in the history.
    pub async fn commit(
        &mut self,
        partition: i32,
        offset: i64,
        generation: i32,
        member: &str,
    ) -> bool {
        let acked = match self.coordinator().await {
            Some(to) => {
                self.send_commit(to, partition, offset, generation, member)
                    .await
            }
            // Never sent, yet recorded as in doubt like one without an
            // answer (more lenient than it needs to be).
            None => false,
        };
        self.history.record(
            self.now(),
            Event::Commit {
                group: self.group.clone(),
                partition,
                offset,
                acked,
            },
        );
        acked
    }

    async fn send_commit(
        &mut self,
        to: u32,
        partition: i32,
        offset: i64,
        generation: i32,
        member: &str,
    ) -> bool {
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(&self.group)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(s(member))
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(partition)
                            .with_committed_offset(offset),
                    ]),
            ]);
        // As long as a Kafka client waits (request.timeout.ms): the answer
        // of a coordinator frozen past its successor's takeover still comes.
        let ok = match self
            .client
            .call_within(
                self.commit_timeout,
                to,
                ApiKey::OffsetCommit,
                self.commit_version,
                RequestKind::OffsetCommit(req),
            )
            .await
        {
            Ok(ResponseKind::OffsetCommit(r)) => r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.error_code == 0),
            _ => false,
        };
        if !ok {
            self.coordinator = None;
        }
        ok
    }

    /// The committed offset of `partition` (-1 for none), if the
    /// coordinator answered; recorded in the history.
    pub async fn committed(&mut self, partition: i32) -> Option<i64> {
        let sent = self.now();
        let to = self.coordinator().await?;
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(s(&self.group)))
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partition_indexes(vec![partition]),
            ]));
        match self
            .client
            .call_within(
                self.request_timeout,
                to,
                ApiKey::OffsetFetch,
                7,
                RequestKind::OffsetFetch(req),
            )
            .await
        {
            Ok(ResponseKind::OffsetFetch(r)) if r.error_code == 0 => {
                let p = r.topics.first()?.partitions.first()?;
                let offset = (p.error_code == 0).then_some(p.committed_offset)?;
                self.history.record(
                    self.now(),
                    Event::Committed {
                        group: self.group.clone(),
                        partition,
                        offset,
                        sent,
                    },
                );
                Some(offset)
            }
            _ => {
                self.coordinator = None;
                None
            }
        }
    }

    pub(crate) async fn init_producer_id(&mut self) -> (i64, i16) {
        loop {
            let to = self.any_broker();
            let req = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                .with_producer_epoch(-1);
            match self
                .client
                .call(
                    to,
                    ApiKey::InitProducerId,
                    3,
                    RequestKind::InitProducerId(req),
                )
                .await
            {
                Ok(ResponseKind::InitProducerId(r)) if r.error_code == 0 => {
                    self.history.record(
                        self.now(),
                        Event::ProducerId {
                            client: self.name.clone(),
                            broker: to,
                            id: r.producer_id.0,
                        },
                    );
                    return (r.producer_id.0, r.producer_epoch);
                }
                other => tracing::debug!(client = %self.name, ?other, "InitProducerId"),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);
