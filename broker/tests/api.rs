//! Request handlers of one broker leading one partition, called directly.
#![allow(clippy::unwrap_used)] // test helpers: a failed step is a failed test

use std::sync::Arc;

use broker::api::{Api, ApiConfig};
use broker::cluster::assignment::Assignment;
use broker::cluster::placement::Leadership;
use broker::leaders::Leaders;
use broker::log::topic::{self, TopicMeta};
use broker::log::{LogConfig, batch};
use broker::protocol::Handler;
use broker::security::Session;
use bytes::Bytes;
use kafka_protocol::messages::alter_client_quotas_request::{
    EntityData as AlterEntity, EntryData as AlterEntry, OpData,
};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, ApiKey, DescribeClientQuotasRequest, FetchRequest,
    ListOffsetsRequest, OffsetForLeaderEpochRequest, ProduceRequest, RequestHeader, RequestKind,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use vfs::{MemVfs, Vfs};

mod common;

/// The request handler of broker 0 on `vfs`, and its leaders.
fn api_on(
    vfs: Arc<dyn Vfs>,
    assignment: watch::Receiver<Option<Assignment>>,
) -> (Api, Arc<Leaders>) {
    let leaders = Arc::new(Leaders::new(vfs.clone(), 0, LogConfig::default()));
    let coordinators = Arc::new(broker::groups::Coordinators::new(
        vfs.clone(),
        0,
        broker::groups::GroupConfig::default(),
    ));
    let vfs_for_security = vfs.clone();
    let api = Api::new(
        vfs,
        ApiConfig {
            broker_id: 0,
            incarnation: 1,
            advertised: "localhost:9092".into(),
            auto_create_topics: false,
            default_partitions: 1,
            broker_configs: Vec::new(),
            producer_id_block: 1000,
            inter_broker_listener: Arc::from("PLAINTEXT"),
            endpoints: Default::default(),
            log_dir: "/data".into(),
        },
        leaders.clone(),
        coordinators,
        assignment,
        Arc::new(broker::security::Security::new(
            vfs_for_security,
            Default::default(),
        )),
    );
    (api, leaders)
}

struct Broker {
    vfs: Arc<dyn Vfs>,
    api: Api,
    leaders: Arc<Leaders>,
    meta: TopicMeta,
    publish: watch::Sender<Option<Assignment>>,
}

impl Broker {
    /// Broker 0, leading partition 0 of `orders` in `epoch`.
    async fn start(epoch: u32) -> Self {
        let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
        let meta = common::with_topic(vfs.as_ref(), "orders", 1).await;
        let (publish, assignment) = watch::channel(None);
        let (api, leaders) = api_on(vfs.clone(), assignment);
        let b = Self {
            vfs,
            api,
            leaders,
            meta,
            publish,
        };
        b.lead(epoch).await;
        b
    }

    /// Takes over the partition again in `epoch`, as after a new assignment.
    async fn lead(&self, epoch: u32) {
        self.assign(0, epoch).await;
        assert_eq!(self.leaders.get(&self.meta.id, 0).unwrap().epoch(), epoch);
    }

    /// Publishes an assignment giving the partition to `leader` in `epoch`.
    async fn assign(&self, leader: u32, epoch: u32) {
        let a = Assignment {
            controller: 0,
            partitions: vec![(
                self.meta.id.clone(),
                0,
                Leadership {
                    leader,
                    leader_epoch: epoch,
                },
            )],
            ..Assignment::default()
        };
        self.leaders.sync(&a).await;
        self.publish.send_replace(Some(a));
    }

    async fn call(&self, api: ApiKey, version: i16, request: RequestKind) -> ResponseKind {
        self.call_in(&mut Session::plaintext("127.0.0.1"), api, version, request)
            .await
    }

    /// A request on the connection whose state is `session`.
    async fn call_in(
        &self,
        session: &mut Session,
        api: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> ResponseKind {
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version);
        self.api
            .handle(session, &header, request)
            .await
            .unwrap()
            .expect("a response")
    }

    async fn produce(&self, records: Bytes) {
        assert_eq!(self.try_produce(records).await, 0);
    }

    /// The error code of a produce of `records` to partition 0.
    async fn try_produce(&self, records: Bytes) -> i16 {
        self.try_produce_in(&mut Session::plaintext("127.0.0.1"), records)
            .await
    }

    /// [`Self::try_produce`] on the connection whose state is `session`.
    async fn try_produce_in(&self, session: &mut Session, records: Bytes) -> i16 {
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(orders())
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records)),
                    ]),
            ]);
        let ResponseKind::Produce(r) = self
            .call_in(session, ApiKey::Produce, 9, RequestKind::Produce(request))
            .await
        else {
            panic!("not a produce response");
        };
        r.responses[0].partition_responses[0].error_code
    }

    async fn list_offsets(
        &self,
        version: i16,
        partition: ListOffsetsPartition,
    ) -> ListOffsetsPartitionResponse {
        let request = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(orders())
                    .with_partitions(vec![partition]),
            ]);
        let ResponseKind::ListOffsets(mut r) = self
            .call(
                ApiKey::ListOffsets,
                version,
                RequestKind::ListOffsets(request),
            )
            .await
        else {
            panic!("not a list offsets response");
        };
        r.topics.remove(0).partitions.remove(0)
    }
}

impl Broker {
    async fn fetch(&self, version: i16, current_leader_epoch: i32) -> PartitionData {
        let request = FetchRequest::default()
            .with_max_wait_ms(5_000)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(orders())
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(current_leader_epoch)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]);
        let ResponseKind::Fetch(mut r) = self
            .call(ApiKey::Fetch, version, RequestKind::Fetch(request))
            .await
        else {
            panic!("not a fetch response");
        };
        r.responses.remove(0).partitions.remove(0)
    }

    async fn epoch_end(
        &self,
        version: i16,
        topic: TopicName,
        partition: i32,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> EpochEndOffset {
        let request = OffsetForLeaderEpochRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(topic)
                    .with_partitions(vec![
                        OffsetForLeaderPartition::default()
                            .with_partition(partition)
                            .with_current_leader_epoch(current_leader_epoch)
                            .with_leader_epoch(leader_epoch),
                    ]),
            ]);
        let ResponseKind::OffsetForLeaderEpoch(mut r) = self
            .call(
                ApiKey::OffsetForLeaderEpoch,
                version,
                RequestKind::OffsetForLeaderEpoch(request),
            )
            .await
        else {
            panic!("not an offset for leader epoch response");
        };
        r.topics.remove(0).partitions.remove(0)
    }
}

fn orders() -> TopicName {
    TopicName(StrBytes::from_static_str("orders"))
}

fn at(timestamp: i64) -> ListOffsetsPartition {
    ListOffsetsPartition::default()
        .with_partition_index(0)
        .with_timestamp(timestamp)
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn list_offsets_v7_answers_max_timestamp() {
    let b = Broker::start(1).await;
    let empty = b.list_offsets(7, at(-3)).await;
    assert_eq!(
        (empty.error_code, empty.offset, empty.timestamp),
        (0, -1, -1),
        "an empty partition has no largest timestamp"
    );
    b.produce(batch::build_timed(
        (-1, -1, -1),
        &[(100, b"a"), (900, b"b"), (300, b"c")],
    ))
    .await;
    b.lead(2).await;
    b.produce(batch::build_timed(
        (-1, -1, -1),
        &[(500, b"d"), (900, b"e")],
    ))
    .await;

    let max = b.list_offsets(7, at(-3)).await;
    assert_eq!(
        (max.error_code, max.offset, max.timestamp, max.leader_epoch),
        (0, 1, 900, 1),
        "the first record at the largest timestamp, with its batch's epoch"
    );
    let by_time = b.list_offsets(7, at(400)).await;
    assert_eq!(
        (by_time.offset, by_time.timestamp, by_time.leader_epoch),
        (1, 900, 1)
    );
    let latest = b.list_offsets(7, at(-1)).await;
    assert_eq!((latest.offset, latest.leader_epoch), (5, 2));
    // Before v4 there is no leader epoch to report.
    let old = b.list_offsets(3, at(-3)).await;
    assert_eq!((old.offset, old.leader_epoch), (1, -1));
}

const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn fetch_and_list_offsets_check_the_current_leader_epoch() {
    let b = Broker::start(1).await;
    b.produce(common::plain(1, &[b"a"])).await;
    b.lead(3).await;
    for (current, expected) in [
        (-1, 0),
        (3, 0),
        (2, FENCED_LEADER_EPOCH),
        (0, FENCED_LEADER_EPOCH),
        (4, UNKNOWN_LEADER_EPOCH),
    ] {
        let started = tokio::time::Instant::now();
        let d = b.fetch(12, current).await;
        assert_eq!(d.error_code, expected, "fetch with epoch {current}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "answered without waiting for data"
        );
        if expected == 0 {
            assert!(!d.records.unwrap().is_empty());
        }
        let l = b
            .list_offsets(7, at(-1).with_current_leader_epoch(current))
            .await;
        assert_eq!(l.error_code, expected, "list offsets with epoch {current}");
    }
    // Before Fetch v9 and ListOffsets v4 the field does not exist: a stale
    // value never reaches the handler as anything but -1.
    assert_eq!(b.fetch(8, -1).await.error_code, 0);
    assert_eq!(b.list_offsets(3, at(-1)).await.error_code, 0);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn offset_for_leader_epoch_answers_where_each_epoch_ends() {
    assert!(broker::protocol::versions::is_supported(
        ApiKey::OffsetForLeaderEpoch,
        2
    ));
    let b = Broker::start(1).await;
    b.produce(common::plain(1, &[b"a", b"b", b"c"])).await;
    b.lead(2).await; // writes nothing
    b.lead(4).await;
    b.produce(common::plain(1, &[b"d", b"e"])).await;
    for version in 2..=4 {
        for (requested, epoch, end) in [(1, 1, 3), (2, 1, 3), (3, 1, 3), (4, 4, 5), (5, -1, -1)] {
            let r = b.epoch_end(version, orders(), 0, 4, requested).await;
            assert_eq!(
                (r.error_code, r.leader_epoch, r.end_offset),
                (0, epoch, end),
                "v{version}, epoch {requested}"
            );
        }
        assert_eq!(b.epoch_end(version, orders(), 0, -1, 1).await.end_offset, 3);
        let stale = b.epoch_end(version, orders(), 0, 2, 1).await;
        assert_eq!(
            (stale.error_code, stale.end_offset),
            (FENCED_LEADER_EPOCH, -1)
        );
        let ahead = b.epoch_end(version, orders(), 0, 5, 1).await;
        assert_eq!(ahead.error_code, UNKNOWN_LEADER_EPOCH);
        let unknown = TopicName(StrBytes::from_static_str("nope"));
        assert_eq!(b.epoch_end(version, unknown, 0, -1, 1).await.error_code, 3);
        assert_eq!(b.epoch_end(version, orders(), 7, -1, 1).await.error_code, 3);
    }
    // Leadership moves to broker 1: this one answers NOT_LEADER_OR_FOLLOWER.
    b.assign(1, 5).await;
    let moved = b.epoch_end(4, orders(), 0, 5, 4).await;
    assert_eq!((moved.error_code, moved.end_offset), (6, -1));
}

/// DeleteTopics on a volume that fails every read: the answer must be a
/// retriable storage error, never UNKNOWN_TOPIC_OR_PARTITION (a client
/// takes that as "already gone" while the topic is still there).
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn delete_topics_does_not_call_an_unreadable_topic_unknown() {
    use kafka_protocol::messages::DeleteTopicsRequest;
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    let mem: Arc<dyn Vfs> = Arc::new(MemVfs::new());
    let meta = common::with_topic(mem.as_ref(), "orders", 1).await;
    let cut = vfs::testkit::Interrupting::new(mem.clone(), 0);
    // The first change is refused, and from then on every read too.
    assert!(cut.mkdir(std::path::Path::new("x")).await.is_err());
    assert!(cut.tripped());
    let broken: Arc<dyn Vfs> = Arc::new(cut);
    let (_publish, assignment) = watch::channel(None);
    let (api, _) = api_on(broken, assignment);
    let id = uuid::Uuid::parse_str(&meta.id).unwrap();
    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![orders()])
        .with_topics(vec![DeleteTopicState::default().with_topic_id(id)]);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::DeleteTopics as i16)
        .with_request_api_version(6);
    let ResponseKind::DeleteTopics(r) = api
        .handle(
            &mut Session::plaintext("127.0.0.1"),
            &header,
            RequestKind::DeleteTopics(request),
        )
        .await
        .unwrap()
        .expect("a response")
    else {
        panic!("not a DeleteTopics response");
    };
    let codes: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![56, 56],
        "KAFKA_STORAGE_ERROR for the name and the id"
    );
    assert!(
        topic::lookup(mem.as_ref(), "orders")
            .await
            .unwrap()
            .is_some()
    );
}

/// Produce remembers where a topic name led; once the topic is deleted and
/// a new one takes the name, nothing is acknowledged into the old log, and
/// the new topic gets the records once this broker leads it.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn produce_does_not_write_a_deleted_topic_through_its_remembered_name() {
    let b = Broker::start(1).await;
    let batch = || batch::build((-1, -1, -1), 1_000, &[b"v".as_slice()]);
    b.produce(batch()).await;
    topic::delete_topic(b.vfs.as_ref(), &b.meta).await.unwrap();
    let again = topic::create_topic(b.vfs.as_ref(), "orders", 1)
        .await
        .unwrap();
    assert_ne!(again.id, b.meta.id);
    // The old log is still open here (no assignment came yet): its fence
    // sees the topic gone and acknowledges nothing.
    assert_ne!(b.try_produce(batch()).await, 0);
    let a = Assignment {
        controller: 0,
        partitions: vec![(
            again.id.clone(),
            0,
            Leadership {
                leader: 0,
                leader_epoch: 1,
            },
        )],
        ..Assignment::default()
    };
    b.leaders.sync(&a).await;
    b.publish.send_replace(Some(a));
    assert_eq!(b.try_produce(batch()).await, 0);
    assert_eq!(b.leaders.get(&again.id, 0).unwrap().high_watermark(), 1);
}

/// A takeover that ends between two pipelined batches of a producer: the
/// first was refused (not the leader yet), so the second is refused too,
/// not answered OUT_OF_ORDER_SEQUENCE_NUMBER (librdkafka would take that
/// for lost records, start a new epoch and write the records twice); the
/// first sent again and then the second are taken in order.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_batch_pipelined_behind_a_refused_one_is_refused_too() {
    let (b, mut connection) = a_batch_refused_while_another_broker_led().await;
    assert_eq!(b.try_produce_in(&mut connection, seq(2)).await, NOT_LEADER);
    assert_eq!(b.try_produce_in(&mut connection, seq(3)).await, NOT_LEADER);
    assert_eq!(b.try_produce_in(&mut connection, seq(1)).await, 0);
    assert_eq!(b.try_produce_in(&mut connection, seq(2)).await, 0);
    assert_eq!(b.try_produce_in(&mut connection, seq(3)).await, 0);
    let log = b.leaders.get(&b.meta.id, 0).unwrap();
    assert_eq!(log.high_watermark(), 4, "each batch once, in order");
    // Another connection never saw the refusal: a gap there is a gap.
    let mut other = Session::plaintext("127.0.0.1");
    assert_eq!(b.try_produce_in(&mut other, seq(9)).await, 45);
}

#[tokio::test]
async fn a_refusal_ends_once_the_log_took_the_refused_batch_another_way() {
    // What wedged a librdkafka producer on real NFS: its refused batch was
    // acknowledged through another connection while the leadership moved,
    // so it never came back on this one, and every later batch here was
    // refused NOT_LEADER_OR_FOLLOWER by the partition's own leader.
    let (b, mut connection) = a_batch_refused_while_another_broker_led().await;
    let mut other = Session::plaintext("127.0.0.1");
    assert_eq!(b.try_produce_in(&mut other, seq(1)).await, 0);
    assert_eq!(b.try_produce_in(&mut connection, seq(2)).await, 0);
    assert_eq!(b.try_produce_in(&mut connection, seq(3)).await, 0);
    let log = b.leaders.get(&b.meta.id, 0).unwrap();
    assert_eq!(log.high_watermark(), 4, "each batch once, in order");
}

const NOT_LEADER: i16 = 6;

/// Batch `n` of producer 42, epoch 0.
fn seq(n: i32) -> Bytes {
    batch::build((42, 0, n), 1_000, &[b"v".as_slice()])
}

/// A broker that took batch 0 on a connection, refused batch 1 there
/// while another broker led for a while, and leads again (its takeover
/// done).
async fn a_batch_refused_while_another_broker_led() -> (Broker, Session) {
    let b = Broker::start(1).await;
    let mut connection = Session::plaintext("127.0.0.1");
    assert_eq!(b.try_produce_in(&mut connection, seq(0)).await, 0);
    b.assign(1, 2).await;
    assert_eq!(b.try_produce_in(&mut connection, seq(1)).await, NOT_LEADER);
    b.lead(3).await;
    (b, connection)
}

impl Broker {
    /// A request as client `client` sends it on `session`.
    async fn call_as(
        &self,
        session: &mut Session,
        client: &str,
        api: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> ResponseKind {
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_client_id(Some(StrBytes::from_string(client.to_owned())));
        self.api
            .handle(session, &header, request)
            .await
            .unwrap()
            .expect("a response")
    }

    /// A produce of `records` to partition 0 as client `client`.
    async fn produce_as(
        &self,
        session: &mut Session,
        client: &str,
        records: Bytes,
    ) -> kafka_protocol::messages::ProduceResponse {
        let ResponseKind::Produce(r) = self
            .call_as(session, client, ApiKey::Produce, 9, produce_of(records))
            .await
        else {
            panic!("not a produce response");
        };
        r
    }

    async fn alter_quotas(&self, entries: Vec<AlterEntry>) -> Vec<(i16, Option<String>)> {
        let request = AlterClientQuotasRequest::default().with_entries(entries);
        let ResponseKind::AlterClientQuotas(r) = self
            .call(
                ApiKey::AlterClientQuotas,
                1,
                RequestKind::AlterClientQuotas(request),
            )
            .await
        else {
            panic!("not an alter client quotas response");
        };
        r.entries
            .into_iter()
            .map(|e| (e.error_code, e.error_message.map(|m| m.to_string())))
            .collect()
    }

    /// (entity as (type, name), values as (key, value)) of every entry the
    /// filter matches.
    async fn describe_quotas(&self, components: Vec<ComponentData>, strict: bool) -> QuotaEntries {
        let request = DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict);
        let ResponseKind::DescribeClientQuotas(r) = self
            .call(
                ApiKey::DescribeClientQuotas,
                1,
                RequestKind::DescribeClientQuotas(request),
            )
            .await
        else {
            panic!("not a describe client quotas response");
        };
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        r.entries
            .unwrap()
            .into_iter()
            .map(|e| {
                (
                    e.entity
                        .into_iter()
                        .map(|x| {
                            (
                                x.entity_type.to_string(),
                                x.entity_name.map(|n| n.to_string()),
                            )
                        })
                        .collect(),
                    e.values
                        .into_iter()
                        .map(|v| (v.key.to_string(), v.value))
                        .collect(),
                )
            })
            .collect()
    }
}

type QuotaEntries = Vec<(Vec<(String, Option<String>)>, Vec<(String, f64)>)>;

fn quota_entry(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> AlterEntry {
    AlterEntry::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    AlterEntity::default()
                        .with_entity_type(StrBytes::from_string((*t).into()))
                        .with_entity_name(n.map(|n| StrBytes::from_string(n.into())))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(StrBytes::from_string((*k).into()))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

fn component(entity_type: &str, match_type: i8, name: Option<&str>) -> ComponentData {
    ComponentData::default()
        .with_entity_type(StrBytes::from_string(entity_type.into()))
        .with_match_type(match_type)
        .with_match(name.map(|n| StrBytes::from_string(n.into())))
}

fn produce_of(records: Bytes) -> RequestKind {
    RequestKind::Produce(
        ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(orders())
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records)),
                    ]),
            ]),
    )
}

fn fetch_all() -> RequestKind {
    RequestKind::Fetch(
        FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(orders())
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(0)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]),
    )
}

/// Quotas set by AlterClientQuotas are described back, refuse what kaas
/// does not enforce, and throttle produce and fetch of the client they
/// name (throttle_time_ms, and the connection muted), no one else.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn client_quotas_are_kept_and_throttle_their_clients() {
    let b = Broker::start(1).await;
    let outcomes = b
        .alter_quotas(vec![
            quota_entry(
                &[("client-id", Some("app"))],
                &[
                    ("producer_byte_rate", Some(1000.0)),
                    ("consumer_byte_rate", Some(500.0)),
                ],
            ),
            quota_entry(&[("user", None)], &[("request_percentage", Some(50.0))]),
            quota_entry(
                &[("ip", Some("10.0.0.1"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            quota_entry(
                &[("client-id", Some("x"))],
                &[("producer_byte_rate", Some(0.5))],
            ),
        ])
        .await;
    assert_eq!(outcomes[0], (0, None));
    for (error, why) in &outcomes[1..] {
        assert_eq!(*error, 42, "INVALID_REQUEST: {why:?}");
    }
    assert!(
        outcomes[1]
            .1
            .as_ref()
            .unwrap()
            .contains("request_percentage")
    );
    let app = vec![("client-id".to_owned(), Some("app".to_owned()))];
    let described = b
        .describe_quotas(vec![component("client-id", 0, Some("app"))], false)
        .await;
    assert_eq!(
        described,
        vec![(
            app.clone(),
            vec![
                ("producer_byte_rate".to_owned(), 1000.0),
                ("consumer_byte_rate".to_owned(), 500.0)
            ]
        )]
    );
    assert_eq!(b.describe_quotas(vec![], false).await.len(), 1);
    assert!(
        b.describe_quotas(vec![component("user", 2, None)], false)
            .await
            .is_empty()
    );

    // 1,000 B/s with a second's burst: a 1,500-byte produce owes 0.5 s.
    let mut session = Session::plaintext("127.0.0.1");
    let big = batch::build((-1, -1, -1), 1_000, &[vec![b'x'; 1_400].as_slice()]);
    let r = b.produce_as(&mut session, "app", big.clone()).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let owed = big.len() as i32 - 1000;
    assert_eq!(r.throttle_time_ms, owed);
    assert!(session.muted_until.is_some(), "the connection is muted");
    // Another client id is not throttled.
    let mut other = Session::plaintext("127.0.0.1");
    let r = b.produce_as(&mut other, "other", big.clone()).await;
    assert_eq!(r.throttle_time_ms, 0);
    assert!(other.muted_until.is_none());

    // Fetch: the first response is sent and throttles; while in debt a
    // fetch is answered empty with the time left.
    let ResponseKind::Fetch(r) = b
        .call_as(&mut session, "app", ApiKey::Fetch, 12, fetch_all())
        .await
    else {
        panic!("not a fetch response");
    };
    let sent = r.responses[0].partitions[0].records.as_ref().unwrap().len();
    assert!(sent > 2 * big.len() - 1, "{sent} bytes fetched");
    assert_eq!(r.throttle_time_ms, (sent as i32 - 500) * 2);
    let ResponseKind::Fetch(r) = b
        .call_as(&mut session, "app", ApiKey::Fetch, 12, fetch_all())
        .await
    else {
        panic!("not a fetch response");
    };
    assert!(r.responses.is_empty(), "a throttled fetch carries nothing");
    assert!(r.throttle_time_ms > 0);
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    let ResponseKind::Fetch(r) = b
        .call_as(&mut session, "app", ApiKey::Fetch, 12, fetch_all())
        .await
    else {
        panic!("not a fetch response");
    };
    assert_eq!(r.responses.len(), 1, "paid off: records again");

    // Removing the quotas lifts them.
    let outcomes = b
        .alter_quotas(vec![quota_entry(
            &[("client-id", Some("app"))],
            &[("producer_byte_rate", None), ("consumer_byte_rate", None)],
        )])
        .await;
    assert_eq!(outcomes, vec![(0, None)]);
    assert!(b.describe_quotas(vec![], false).await.is_empty());
    let r = b.produce_as(&mut session, "app", big).await;
    assert_eq!(r.throttle_time_ms, 0);
}

/// A full Metadata (no topics asked for) lists each topic that holds its
/// name, once, with its partitions; a topic directory whose name is held
/// by a newer topic (an unnamed leftover) is not listed: it is never led.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_full_metadata_lists_each_named_topic_once() {
    use kafka_protocol::messages::MetadataRequest;
    let b = Broker::start(1).await;
    let old = topic::create_topic(b.vfs.as_ref(), "audit", 2)
        .await
        .unwrap();
    // The old `audit` lost its name but kept its directory; a new one has it.
    assert!(
        broker::log::names::release(b.vfs.as_ref(), "audit", &old.id)
            .await
            .unwrap()
    );
    let new = topic::create_topic(b.vfs.as_ref(), "audit", 3)
        .await
        .unwrap();
    let ResponseKind::Metadata(r) = b
        .call(
            ApiKey::Metadata,
            12,
            RequestKind::Metadata(MetadataRequest::default().with_topics(None)),
        )
        .await
    else {
        panic!("not a Metadata response");
    };
    let listed: Vec<(String, uuid::Uuid, usize, i16)> = r
        .topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            (name, t.topic_id, t.partitions.len(), t.error_code)
        })
        .collect();
    let id = |s: &str| uuid::Uuid::parse_str(s).unwrap();
    assert_eq!(
        listed,
        vec![
            ("audit".to_owned(), id(&new.id), 3, 0),
            ("orders".to_owned(), id(&b.meta.id), 1, 0),
        ]
    );
    // The leader of `orders` is in the answer.
    assert_eq!(r.topics[1].partitions[0].leader_id.0, 0);
}
