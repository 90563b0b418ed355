//! The broker's answers to Kafka requests.
//!
//! Leadership comes from the controller's assignment (a single broker is a
//! cluster of one: it elects itself and assigns itself every partition);
//! data goes through the partition logs this broker leads.
//!
//! One file per API family; [`Handler::handle`] at the end of this file
//! dispatches. A new API is a new file with an `impl Api` block and one
//! dispatch line. Helpers the families share (topic lookups, the led log of
//! a partition, error codes) live here; each family file imports by name
//! what it uses of them, so its imports say what it depends on.
//!
//! | file | APIs |
//! |---|---|
//! | `metadata` | Metadata, DescribeCluster |
//! | `produce` | Produce |
//! | `fetch` | Fetch |
//! | `list_offsets` | ListOffsets |
//! | `leader_epoch` | OffsetForLeaderEpoch, the current-epoch check (KIP-320) |
//! | `topics` | CreateTopics, DeleteTopics |
//! | `topic_partitions` | DescribeTopicPartitions (KIP-966) |
//! | `partitions` | CreatePartitions |
//! | `new_leaders` | the wait of a request that created topics or partitions for their leaders |
//! | `records` | DeleteRecords |
//! | `log_dirs` | DescribeLogDirs: the volume as this broker's one log directory |
//! | `quotas` | DescribeClientQuotas, AlterClientQuotas, and the throttling of produce and fetch |
//! | `reassignments` | AlterPartitionReassignments, ListPartitionReassignments, ElectLeaders: a partition's leader moved to a named broker |
//! | `configs` | DescribeConfigs, AlterConfigs, IncrementalAlterConfigs |
//! | `producer_id` | InitProducerId |
//! | `coordinator` | FindCoordinator (the group APIs are `crate::groups::api`) |
//! | `group_topics` | ConsumerGroupHeartbeat, ConsumerGroupDescribe: the topics they assign from (the rest is `crate::groups::consumer_api`) |
//! | `txn` | InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions, DescribeProducers (TxnOffsetCommit is `crate::groups::txn_offsets`) |
//! | `txn_markers` | WriteTxnMarkers, the markers of prepared transactions, KIP-890's check before a transactional produce |
//! | `security_admin` | SaslHandshake, SaslAuthenticate, Describe/AlterUserScramCredentials, DescribeAcls, CreateAcls, DeleteAcls |
//! | `authz` | the authorization of every request (`--authorizer acl`) |

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{RequestHeader, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{Notify, watch};
use uuid::Uuid;
use vfs::Vfs;

use crate::cluster::assignment::Assignment;
use crate::groups::Coordinators;
use crate::leaders::Leaders;
use crate::log::staging::Creator;
use crate::log::topic::TopicMeta;
use crate::log::{PartitionLog, topic};
use crate::producer_ids::ProducerIds;
use crate::protocol::{Answer, Handler};
use crate::security::{Security, Session, sasl};

mod authz;
mod configs;
mod coordinator;
mod dispatch;
mod fetch;
mod group_topics;
mod leader_epoch;
mod list_offsets;
mod log_dirs;
mod metadata;
mod new_leaders;
pub use new_leaders::LEADERS_WAIT;
mod null_messages;
mod partitions;
mod produce;
mod producer_id;
mod quotas;
mod reassignments;
mod records;
mod security_admin;
mod topic_partitions;
mod topics;
mod txn;
mod txn_markers;

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
    /// This broker's settings under Kafka's names (DescribeConfigs).
    pub broker_configs: Vec<crate::config::KafkaConfig>,
    /// Producer ids per claimed block (`--producer-id-block`).
    pub producer_id_block: u32,
    /// The listener other brokers' requests come in on.
    pub inter_broker_listener: Arc<str>,
    /// This broker's listeners and their advertised addresses, when it has
    /// several (one listener: `advertised`).
    pub endpoints: BTreeMap<String, String>,
    /// The volume as DescribeLogDirs names it (the data directory).
    pub log_dir: String,
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
    /// Topic id -> name, for the topics consumer-protocol groups see.
    topic_names: std::sync::Mutex<BTreeMap<String, String>>,
    /// Woken when this broker created topics or partitions: the cluster
    /// loop then follows the controller (and, as controller, lists the
    /// topics) at once rather than at its next tick.
    created: Arc<Notify>,
    /// Topics this broker created, for its heartbeat to announce.
    announced: Arc<crate::cluster::announced::Announced>,
    /// Requests to other brokers (transaction markers, KIP-890 checks).
    peers: crate::peer::Peers,
    /// Transactional ids whose markers are being written.
    finishing: std::sync::Mutex<BTreeSet<String>>,
    /// Credentials and ACLs.
    security: Arc<Security>,
    /// Client quotas and what each budget has spent here.
    quotas: Arc<crate::quota::Quotas>,
    metrics: crate::metrics::Metrics,
}

/// Kafka's internal topics. kaas keeps what they hold (committed offsets,
/// transaction state, the cluster's metadata) as files on the volume, so
/// they do not exist: Metadata answers UNKNOWN_TOPIC_OR_PARTITION for them
/// and never auto-creates them, and CreateTopics refuses them, as Kafka
/// refuses to create an internal topic by hand.
const INTERNAL_TOPICS: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
    "__cluster_metadata",
];

fn is_internal(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// A cluster document (ACLs, SCRAM credentials, quotas, preferred leaders)
/// that could not be changed: the error code and message to answer. A
/// write not confirmed in time may still land, which the client must hear
/// as a timeout (retry, then look) rather than as a failure.
fn document_not_changed(document: &str, e: &std::io::Error) -> (i16, String) {
    tracing::warn!(error = %e, document, "not changed");
    let error = if e.kind() == std::io::ErrorKind::TimedOut {
        ResponseError::RequestTimedOut
    } else {
        ResponseError::KafkaStorageError
    };
    (code(error), e.to_string())
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

impl Api {
    pub fn new(
        vfs: Arc<dyn Vfs>,
        config: ApiConfig,
        leaders: Arc<Leaders>,
        coordinators: Arc<Coordinators>,
        assignment: watch::Receiver<Option<Assignment>>,
        security: Arc<Security>,
    ) -> Self {
        let config_broker_id = config.broker_id;
        Self {
            producer_ids: ProducerIds::new(vfs.clone(), config.broker_id, config.producer_id_block),
            quotas: Arc::new(crate::quota::Quotas::new(vfs.clone())),
            vfs,
            config,
            leaders,
            coordinators,
            assignment,
            produce_names: std::sync::Mutex::new(BTreeMap::new()),
            topic_names: std::sync::Mutex::new(BTreeMap::new()),
            created: Arc::new(Notify::new()),
            announced: Arc::default(),
            peers: crate::peer::Peers::new(config_broker_id),
            finishing: std::sync::Mutex::new(BTreeSet::new()),
            security,
            metrics: crate::metrics::Metrics::unobserved(),
        }
    }

    /// Counts requests, bytes and refusals into `metrics` (the broker's
    /// registry) instead of a private one.
    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The client quotas this broker enforces (its node keeps them fresh).
    pub fn quotas(&self) -> Arc<crate::quota::Quotas> {
        self.quotas.clone()
    }

    /// What the cluster loop waits on besides its tick: this broker
    /// created topics or partitions, whose leaders a client is waiting for.
    pub fn created(&self) -> Arc<Notify> {
        self.created.clone()
    }

    /// The topics this broker created and announces in its heartbeat.
    pub fn announced(&self) -> Arc<crate::cluster::announced::Announced> {
        self.announced.clone()
    }

    fn creator(&self) -> Creator {
        Creator {
            broker: self.config.broker_id,
            incarnation: self.config.incarnation,
        }
    }

    /// Where clients of `listener` reach this broker.
    fn own_endpoint(&self, listener: &str) -> &str {
        self.config
            .endpoints
            .get(listener)
            .map_or(&self.config.advertised, |e| e)
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
            if u32::try_from(partition).is_ok_and(|p| p < partitions) {
                if let Some(log) = self.running_log(&id, partition) {
                    return Ok((id, log));
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
        self.led_log(self.meta_named(name).await?, partition)
    }

    /// A topic's name by its id, read once per `names` (one request's
    /// memo); `None` for a topic deleted meanwhile.
    async fn memo_name_by_id(
        &self,
        names: &mut BTreeMap<String, Option<String>>,
        id: &str,
    ) -> Option<String> {
        if !names.contains_key(id) {
            let name = topic::read_meta(self.vfs.as_ref(), id)
                .await
                .ok()
                .map(|m| m.name);
            names.insert(id.to_owned(), name);
        }
        names.get(id).cloned().flatten()
    }

    /// A topic by name, or the error to answer for it.
    async fn meta_named(&self, name: &str) -> Result<TopicMeta, i16> {
        match topic::lookup(self.vfs.as_ref(), name).await {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(code(ResponseError::UnknownTopicOrPartition)),
            Err(e) => Err(lookup_error(&e)),
        }
    }

    /// The log this broker leads for `(topic id, partition)`, unless it
    /// has stopped: what produce may use without a fresh lookup.
    fn running_log(&self, id: &str, partition: i32) -> Option<Arc<PartitionLog>> {
        let p = u32::try_from(partition).ok()?;
        self.leaders.get(id, p).filter(|log| !log.has_stopped())
    }

    /// A topic by its id: its directory's meta, read fresh. `Ok(None)` when
    /// there is no such topic (never was, or deleted).
    async fn meta_by_id(&self, id: Uuid) -> Result<Option<TopicMeta>, i16> {
        match topic::read_meta(self.vfs.as_ref(), &id.hyphenated().to_string()).await {
            Ok(m) => Ok(Some(m)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(lookup_error(&e)),
        }
    }

    /// [`Self::topic_log`] for a topic named by its id (Fetch v13+,
    /// Produce v13+): its meta read fresh, so that a deleted topic is not
    /// served from a log this broker has not let go of yet.
    async fn topic_log_by_id(
        &self,
        id: Uuid,
        partition: i32,
    ) -> Result<(TopicMeta, Arc<PartitionLog>), i16> {
        let meta = self
            .meta_by_id(id)
            .await?
            .ok_or(code(ResponseError::UnknownTopicId))?;
        let (_, log) = self.led_log(meta.clone(), partition)?;
        Ok((meta, log))
    }

    /// Which of the named partitions do not exist. A lookup the volume
    /// fails counts as existing: that failure is not the client's.
    async fn unknown_partitions<'a, P: Iterator<Item = i32>>(
        &self,
        topics: impl Iterator<Item = (&'a TopicName, P)>,
    ) -> BTreeSet<(String, i32)> {
        let mut unknown = BTreeSet::new();
        for (name, partitions) in topics {
            let name = name_of(name);
            let count = match topic::lookup(self.vfs.as_ref(), name).await {
                Ok(Some(meta)) => i64::from(meta.partitions),
                Ok(None) => 0,
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => 0,
                Err(_) => i64::MAX,
            };
            unknown.extend(
                partitions
                    .filter(|&p| p < 0 || i64::from(p) >= count)
                    .map(|p| (name.to_owned(), p)),
            );
        }
        unknown
    }

    fn led_log(&self, meta: TopicMeta, partition: i32) -> Result<(String, Arc<PartitionLog>), i16> {
        let p =
            u32::try_from(partition).map_err(|_| code(ResponseError::UnknownTopicOrPartition))?;
        if p >= meta.partitions {
            return Err(code(ResponseError::UnknownTopicOrPartition));
        }
        let Some(log) = self.leaders.get(&meta.id, p) else {
            return Err(match self.leaders.offline_because(&meta.id, p) {
                Some(_) => code(ResponseError::KafkaStorageError),
                None => code(ResponseError::NotLeaderOrFollower),
            });
        };
        Ok((meta.id, log))
    }
}

#[async_trait::async_trait]
impl Handler for Api {
    fn metrics(&self) -> Option<&crate::metrics::Metrics> {
        Some(&self.metrics)
    }

    async fn handle(
        &self,
        session: &mut Session,
        header: &RequestHeader,
        request: RequestKind,
    ) -> Result<Option<ResponseKind>, String> {
        match self.answer(session, header, request).await? {
            Answer::Now(response) => Ok(response),
            Answer::Later(response) => response.await,
        }
    }

    /// A produce is answered later: its records are queued when this
    /// returns, so a connection's next produce can join their flush cycles.
    async fn answer(
        &self,
        session: &mut Session,
        header: &RequestHeader,
        request: RequestKind,
    ) -> Result<Answer, String> {
        let now = tokio::time::Instant::now();
        let api = kafka_protocol::messages::ApiKey::try_from(header.request_api_key)
            .map_err(|_| format!("unknown API key {}", header.request_api_key))?;
        if let Some(why) = session.refusal(api, now) {
            return Err(why);
        }
        let request = match request {
            RequestKind::SaslHandshake(r) => {
                let v = header.request_api_version;
                let r = sasl::handshake(&self.security, session, &r, v);
                return Ok(Answer::Now(Some(ResponseKind::SaslHandshake(r))));
            }
            RequestKind::SaslAuthenticate(r) => {
                let r = sasl::authenticate(&self.security, session, &r, now);
                return Ok(Answer::Now(Some(ResponseKind::SaslAuthenticate(r))));
            }
            other => other,
        };
        let (request, merge) = if self.security.enforcing() {
            match self.authorize(session, request).await {
                authz::Authz::Proceed(request, merge) => (request, merge),
                authz::Authz::Refuse(mut response) => {
                    authz::fit_to_version(&mut response, header.request_api_version);
                    return Ok(Answer::Now(Some(response)));
                }
            }
        } else {
            (request, None)
        };
        let finish = move |response: Option<ResponseKind>| {
            let mut response = response?;
            if let Some(merge) = merge {
                merge(&mut response);
            }
            null_messages::null_messages_on_success(&mut response);
            Some(response)
        };
        let request = match request {
            RequestKind::Produce(r) => {
                let throttle = self.charge_produce(session, header, &r);
                let produced = self
                    .produce(&mut session.produce_order, r, header.request_api_version)
                    .await;
                return Ok(Answer::Later(Box::pin(async move {
                    Ok(finish(produced.await.map(|r| {
                        ResponseKind::Produce(r.with_throttle_time_ms(throttle))
                    })))
                })));
            }
            RequestKind::Fetch(r) => match self.fetch_throttled(session, header) {
                Some(empty) => return Ok(Answer::Now(finish(Some(ResponseKind::Fetch(empty))))),
                None => RequestKind::Fetch(r),
            },
            other => other,
        };
        let mut response = self.dispatch(session, header, request).await?;
        if let Some(ResponseKind::Fetch(r)) = &mut response {
            self.charge_fetch(session, header, r);
        }
        Ok(Answer::Now(finish(response)))
    }

    async fn raw_sasl_token(
        &self,
        session: &mut Session,
        token: bytes::Bytes,
    ) -> Result<bytes::Bytes, String> {
        sasl::raw_token(&self.security, session, token, tokio::time::Instant::now())
    }
}
