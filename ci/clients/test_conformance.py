"""What Kafka clients expect of a broker beyond the happy path, asked at the
exact protocol versions today's clients send (kafka-python's message
codec, see kafkawire.py), against the release `kaas` binary on 127.0.0.1:

- a request that creates topics or partitions answers once they have
  leaders, so a client's first answer already names them;
- error codes and messages as Kafka sends them, per API;
- configs as Kafka reports them.
"""

import os
import sys
import time
import uuid

import pytest
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest
from kafka.protocol.metadata import MetadataRequest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from kafkawire import call  # noqa: E402

# How long a wait for something that should happen soon may take: the CI
# box is small and busy; waits end as soon as the condition holds. A
# request that creates or deletes topics may take the broker up to
# ADMIN_TIMEOUT_MS; its answer is awaited a little longer.
EVENTUALLY = 120
ADMIN_TIMEOUT_MS = 60000


def new_topic():
    return f"conf-{uuid.uuid4().hex[:10]}"


def metadata(addr, topics, version, auto_create=False):
    T = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(topics=[T(name=t) for t in topics])
    if version >= 4:
        req.allow_auto_topic_creation = auto_create
    return call(addr, req, version)


def leaders(resp):
    """topic -> [(partition, error code, leader)] of a Metadata answer."""
    return {
        t.name: sorted((p.partition_index, p.error_code, p.leader_id) for p in t.partitions)
        for t in resp.topics
    }


# 1. A request that creates topics answers with their leaders.

@pytest.mark.parametrize("version", [1, 9, 12])
def test_the_first_metadata_answer_for_an_auto_created_topic_names_its_leader(broker, version):
    topics = [new_topic(), new_topic()]
    resp = metadata(broker.addr, topics, version, auto_create=True)
    assert [t.error_code for t in resp.topics] == [0, 0], resp
    assert leaders(resp) == {t: [(0, 0, 0)] for t in topics}


def test_create_topics_answers_once_the_new_partitions_have_leaders(broker):
    topic = new_topic()
    C = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[C(name=topic, num_partitions=3, replication_factor=1)],
                              timeout_ms=ADMIN_TIMEOUT_MS, validate_only=False)
    resp = call(broker.addr, req, 7, timeout=EVENTUALLY)
    assert [(t.name, t.error_code, t.num_partitions) for t in resp.topics] == [(topic, 0, 3)]
    # No auto-creation, no retry: the very next answer names every leader.
    assert leaders(metadata(broker.addr, [topic], 12)) == {topic: [(p, 0, 0) for p in range(3)]}


def test_create_partitions_answers_once_the_added_partitions_have_leaders(broker):
    topic = new_topic()
    metadata(broker.addr, [topic], 12, auto_create=True)
    P = CreatePartitionsRequest.CreatePartitionsTopic
    req = CreatePartitionsRequest(topics=[P(name=topic, count=4, assignments=None)],
                                  timeout_ms=ADMIN_TIMEOUT_MS, validate_only=False)
    resp = call(broker.addr, req, 3, timeout=EVENTUALLY)
    assert [(r.name, r.error_code) for r in resp.results] == [(topic, 0)]
    assert leaders(metadata(broker.addr, [topic], 12)) == {topic: [(p, 0, 0) for p in range(4)]}


def test_aiokafka_first_send_to_a_new_topic_finds_its_leader_at_once(broker, caplog):
    """aiokafka reports a first Metadata answer without a leader ("not
    available during auto-create initialization") and retries the send."""
    import asyncio
    import logging

    from aiokafka import AIOKafkaProducer

    async def send():
        p = AIOKafkaProducer(bootstrap_servers=broker.addr, acks="all")
        await p.start()
        try:
            return await p.send_and_wait(new_topic(), b"first")
        finally:
            await p.stop()

    with caplog.at_level(logging.WARNING, logger="aiokafka"):
        md = asyncio.run(send())
    assert md.offset == 0
    retried = [r.getMessage() for r in caplog.records if "not available" in r.getMessage()
               or "retrying" in r.getMessage()]
    assert retried == []


# 3. Error codes and messages as Kafka sends them, API by API.

NONE, OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 2, 3
MESSAGE_TOO_LARGE, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS = 10, 17, 36
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG = 37, 38, 40
INVALID_REQUEST, POLICY_VIOLATION, UNKNOWN_TOPIC_ID, MISMATCHED_ENDPOINT_TYPE = 42, 44, 100, 114
NIL = uuid.UUID(int=0)


def batch(*values, crc_ok=True):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    for i, v in enumerate(values):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=v, headers=[])
    data = bytearray(b.build())
    if not crc_ok:
        data[-1] ^= 0xFF  # the last value byte: the CRC no longer matches
    return bytes(data)


def produce(addr, version, records, name=None, topic_id=NIL, partition=0):
    from kafka.protocol.producer import ProduceRequest

    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    topic = T(name=name or "", topic_id=topic_id, partition_data=[P(index=partition, records=records)])
    resp = call(addr, ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10000,
                                     topic_data=[topic]), version)
    return resp.responses[0]


def fetch(addr, version, offset=0, name=None, topic_id=NIL, partition=0):
    from kafka.protocol.consumer import FetchRequest

    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1,
                       topics=[T(topic=name or "", topic_id=topic_id,
                                 partitions=[P(partition=partition, fetch_offset=offset,
                                               partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    return call(addr, req, version).responses[0]


def create_topic(addr, topic, partitions=1, configs=(), replication_factor=-1, version=7):
    C = CreateTopicsRequest.CreatableTopic
    Cfg = C.CreatableTopicConfig
    req = CreateTopicsRequest(topics=[C(name=topic, num_partitions=partitions,
                                        replication_factor=replication_factor, assignments=[],
                                        configs=[Cfg(name=k, value=v) for k, v in configs])],
                              timeout_ms=ADMIN_TIMEOUT_MS, validate_only=False)
    return call(addr, req, version, timeout=EVENTUALLY).topics[0]


@pytest.fixture(scope="module")
def existing(broker):
    """A topic with two partitions and one record in partition 0: (name, id)."""
    topic = new_topic()
    created = create_topic(broker.addr, topic, partitions=2)
    assert created.error_code == NONE and created.error_message is None, created
    assert produce(broker.addr, 9, batch(b"one"), name=topic).partition_responses[0].error_code == 0
    return topic, created.topic_id


def test_api_versions_advertise_what_current_clients_send(broker):
    from kafka.protocol.metadata import ApiVersionsRequest

    resp = call(broker.addr, ApiVersionsRequest(client_software_name="kaas-conformance",
                                                client_software_version="1"), 4)
    served = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    wanted = {0: 12, 1: 17, 2: 9, 3: 13, 8: 9, 9: 9, 10: 5, 22: 5}  # Produce .. InitProducerId
    for api, version in wanted.items():
        assert served[api][1] >= version, (api, served[api])


def test_kafka_python_infers_a_current_kafka_from_the_ranges(broker):
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions
    from kafka.protocol.metadata import ApiVersionsRequest

    resp = call(broker.addr, ApiVersionsRequest(client_software_name="kaas-conformance",
                                                client_software_version="1"), 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert infer_broker_version_from_api_versions(ranges) >= (4, 0)


@pytest.mark.parametrize("version", [9, 11, 12])
def test_produce_by_name_errors(broker, existing, version):
    topic, _ = existing
    assert produce(broker.addr, version, batch(b"x"), name=topic).partition_responses[0].error_code == NONE
    cases = [
        (dict(name=new_topic()), batch(b"x"), UNKNOWN_TOPIC_OR_PARTITION),
        (dict(name=topic, partition=7), batch(b"x"), UNKNOWN_TOPIC_OR_PARTITION),
        (dict(name=topic), batch(b"x", crc_ok=False), CORRUPT_MESSAGE),
        (dict(name=topic), batch(b"x" * (1024 * 1024 + 1)), MESSAGE_TOO_LARGE),
    ]
    for where, records, want in cases:
        got = produce(broker.addr, version, records, **where).partition_responses[0]
        assert (got.error_code, got.base_offset) == (want, -1), (where, got)


def test_produce_and_fetch_by_topic_id(broker, existing):
    topic, topic_id = existing
    r = produce(broker.addr, 13, batch(b"by-id"), topic_id=topic_id, partition=1)
    assert (r.topic_id, r.partition_responses[0].error_code) == (topic_id, NONE), r
    base = r.partition_responses[0].base_offset
    for version in (13, 16, 17, 18):
        got = fetch(broker.addr, version, offset=base, topic_id=topic_id, partition=1)
        assert got.topic_id == topic_id and got.partitions[0].error_code == NONE, got
        assert b"by-id" in got.partitions[0].records
    unknown = uuid.uuid4()
    assert produce(broker.addr, 13, batch(b"x"), topic_id=unknown).partition_responses[0].error_code == UNKNOWN_TOPIC_ID
    assert fetch(broker.addr, 17, topic_id=unknown).partitions[0].error_code == UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_by_name_errors(broker, existing, version):
    topic, _ = existing
    assert fetch(broker.addr, version, name=new_topic()).partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(broker.addr, version, name=topic, partition=9).partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    out = fetch(broker.addr, version, name=topic, offset=10**9).partitions[0]
    assert out.error_code == OFFSET_OUT_OF_RANGE and out.high_watermark >= 1, out


@pytest.mark.parametrize("version", [7, 8, 9, 10])
def test_list_offsets_special_timestamps(broker, existing, version):
    from kafka.protocol.consumer import ListOffsetsRequest

    topic, _ = existing
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition

    def ask(ts, name=topic, partition=0):
        req = ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=1000,
                                 topics=[T(name=name, partitions=[P(partition_index=partition,
                                                                    current_leader_epoch=-1,
                                                                    timestamp=ts)])])
        return call(broker.addr, req, version).topics[0].partitions[0]

    latest = ask(-1)
    assert (latest.error_code, latest.offset >= 1) == (NONE, True), latest
    assert (ask(-2).error_code, ask(-2).offset) == (NONE, 0)
    if version >= 8:
        assert (ask(-4).error_code, ask(-4).offset) == (NONE, 0), "earliest local is the log start"
    if version >= 9:
        tiered = ask(-5)
        assert (tiered.error_code, tiered.offset, tiered.timestamp) == (NONE, -1, -1)
    assert ask(-1, name=new_topic()).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert ask(-1, partition=5).error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_errors(broker, existing):
    topic, topic_id = existing
    resp = metadata(broker.addr, [topic, new_topic(), "bad/name"], 13)
    assert resp.error_code == NONE
    assert [t.error_code for t in resp.topics] == [NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION]
    assert resp.topics[0].topic_id == topic_id


def test_create_topics_errors_with_messages(broker, existing):
    topic, _ = existing
    cases = [
        (dict(topic=topic), TOPIC_ALREADY_EXISTS),
        (dict(topic="bad/name"), INVALID_TOPIC_EXCEPTION),
        (dict(topic=new_topic(), partitions=0), INVALID_PARTITIONS),
        (dict(topic=new_topic(), replication_factor=0), INVALID_REPLICATION_FACTOR),
        (dict(topic=new_topic(), configs=[("no.such.config", "1")]), INVALID_CONFIG),
        (dict(topic=new_topic(), configs=[("retention.ms", "soon")]), INVALID_CONFIG),
    ]
    for args, want in cases:
        got = create_topic(broker.addr, **args)
        assert got.error_code == want, (args, got)
        assert got.error_message, (args, got)


def test_delete_topics_errors_and_null_messages(broker):
    from kafka.protocol.admin import DeleteTopicsRequest

    topic = new_topic()
    assert create_topic(broker.addr, topic).error_code == NONE
    S = DeleteTopicsRequest.DeleteTopicState
    req = DeleteTopicsRequest(topics=[S(name=topic, topic_id=NIL), S(name=new_topic(), topic_id=NIL),
                                      S(name=None, topic_id=uuid.uuid4())], timeout_ms=ADMIN_TIMEOUT_MS)
    got = [(r.error_code, r.error_message) for r in call(broker.addr, req, 6, timeout=EVENTUALLY).responses]
    assert got[0] == (NONE, None)
    assert [c for c, _ in got[1:]] == [UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID]


def test_create_partitions_errors(broker, existing):
    topic, _ = existing
    P = CreatePartitionsRequest.CreatePartitionsTopic
    req = CreatePartitionsRequest(topics=[P(name=topic, count=1, assignments=None),
                                          P(name=new_topic(), count=3, assignments=None)],
                                  timeout_ms=ADMIN_TIMEOUT_MS, validate_only=True)
    got = [(r.error_code, bool(r.error_message)) for r in call(broker.addr, req, 3, timeout=EVENTUALLY).results]
    assert got == [(INVALID_PARTITIONS, True), (UNKNOWN_TOPIC_OR_PARTITION, True)]


def test_more_than_ten_thousand_new_partitions_in_one_request_are_refused(broker, existing):
    # Kafka's limit (KAFKA-17870, KAFKA-19673), and kaas's guard against a
    # request that would fill the volume with partition directories.
    huge = create_topic(broker.addr, new_topic(), partitions=2**31 - 1)
    assert huge.error_code == POLICY_VIOLATION and "Excessively large" in huge.error_message
    T = CreateTopicsRequest[7].CreatableTopic
    pair = [new_topic(), new_topic()]
    req = CreateTopicsRequest[7](topics=[T(name=n, num_partitions=5001, replication_factor=-1,
                                           assignments=[], configs=[]) for n in pair],
                                 timeout_ms=ADMIN_TIMEOUT_MS, validate_only=False)
    got = call(broker.addr, req, 7, timeout=EVENTUALLY).topics
    assert [t.error_code for t in got] == [POLICY_VIOLATION, POLICY_VIOLATION]
    assert [t.error_code for t in metadata(broker.addr, pair, 12).topics] == [UNKNOWN_TOPIC_OR_PARTITION] * 2
    topic, _ = existing
    P = CreatePartitionsRequest.CreatePartitionsTopic
    req = CreatePartitionsRequest(topics=[P(name=topic, count=2**31 - 1, assignments=None)],
                                  timeout_ms=ADMIN_TIMEOUT_MS, validate_only=False)
    (r,) = call(broker.addr, req, 3, timeout=EVENTUALLY).results
    assert r.error_code == POLICY_VIOLATION and "Excessively large" in r.error_message


def test_offset_commit_to_a_missing_topic_or_partition_is_refused(broker, existing):
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

    topic, _ = existing
    missing = new_topic()
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    group = f"conf-{uuid.uuid4().hex[:8]}"
    for version in (2, 8, 9):
        req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, retention_time_ms=-1,
                                  topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=1),
                                                                    P(partition_index=9, committed_offset=1)]),
                                          T(name=missing, partitions=[P(partition_index=0, committed_offset=1)])])
        resp = call(broker.addr, req, version)
        got = [[p.error_code for p in t.partitions] for t in resp.topics]
        assert got == [[NONE, UNKNOWN_TOPIC_OR_PARTITION], [UNKNOWN_TOPIC_OR_PARTITION]], (version, got)
    FT = OffsetFetchRequest.OffsetFetchRequestTopic
    req = OffsetFetchRequest(group_id=group, topics=[FT(name=missing, partition_indexes=[0])],
                             require_stable=False)
    fetched = call(broker.addr, req, 7).topics[0].partitions[0]
    assert fetched.committed_offset == -1, "a refused commit left nothing behind"


def test_find_coordinator_key_types(broker):
    from kafka.protocol.metadata import FindCoordinatorRequest

    for version in (3, 4, 6):
        req = FindCoordinatorRequest(key="g", key_type=0, coordinator_keys=["g"])
        resp = call(broker.addr, req, version)
        found = resp.coordinators[0] if version >= 4 else resp
        assert (found.error_code, found.error_message, found.node_id) == (NONE, None, 0)
    share = call(broker.addr, FindCoordinatorRequest(key_type=2, coordinator_keys=["g:t:0"]), 6)
    assert share.coordinators[0].error_code == INVALID_REQUEST


def test_describe_cluster_endpoint_types(broker):
    from kafka.protocol.admin import DescribeClusterRequest

    ok = call(broker.addr, DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                  endpoint_type=1, include_fenced_brokers=True), 2)
    assert (ok.error_code, ok.error_message, [b.broker_id for b in ok.brokers]) == (NONE, None, [0])
    assert [b.is_fenced for b in ok.brokers] == [False]
    controllers = call(broker.addr, DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                           endpoint_type=2), 1)
    assert controllers.error_code == MISMATCHED_ENDPOINT_TYPE and controllers.error_message


def test_list_groups_v5_filters_by_type(broker):
    from kafka.protocol.admin import ListGroupsRequest
    from kafka.protocol.consumer import OffsetCommitRequest

    group = f"conf-{uuid.uuid4().hex[:8]}"
    topic = new_topic()
    assert create_topic(broker.addr, topic).error_code == NONE
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                              topics=[T(name=topic, partitions=[T.OffsetCommitRequestPartition(
                                  partition_index=0, committed_offset=0)])])
    assert call(broker.addr, req, 9).topics[0].partitions[0].error_code == NONE

    def listed(types):
        resp = call(broker.addr, ListGroupsRequest(states_filter=[], types_filter=types), 5)
        return {g.group_id: g.group_type for g in resp.groups}

    assert listed([]).get(group) == "classic"
    assert listed(["Classic"]).get(group) == "classic"
    assert group not in listed(["consumer"])


# 2. Configs as Kafka reports them.

def describe_configs(addr, resource_type, name, version=4, keys=None):
    from kafka.protocol.admin import DescribeConfigsRequest

    R = DescribeConfigsRequest.DescribeConfigsResource
    req = DescribeConfigsRequest(resources=[R(resource_type=resource_type, resource_name=name,
                                              configuration_keys=keys)],
                                 include_synonyms=True, include_documentation=True)
    return call(addr, req, version).results[0]


def test_a_new_topic_takes_the_configs_kafka_accepts(broker):
    topic = new_topic()
    settings = [("compression.type", "zstd"), ("cleanup.policy", "compact"),
                ("min.insync.replicas", "2"), ("message.timestamp.type", "CreateTime"),
                ("segment.ms", "3600000"), ("max.message.bytes", "2000000"),
                ("unclean.leader.election.enable", "false")]
    created = create_topic(broker.addr, topic, configs=settings)
    assert (created.error_code, created.error_message) == (NONE, None), created
    described = describe_configs(broker.addr, 2, topic)
    assert described.error_code == NONE
    by_name = {c.name: c for c in described.configs}
    for name, value in settings:
        assert (by_name[name].value, by_name[name].config_source) == (value, 1), by_name[name]
    # Every config Kafka knows, typed and documented, the defaults marked.
    for name in ("retention.ms", "retention.bytes", "segment.bytes", "delete.retention.ms",
                 "min.cleanable.dirty.ratio", "local.retention.ms", "flush.messages",
                 "message.timestamp.after.max.ms", "follower.replication.throttled.replicas"):
        c = by_name[name]
        assert c.config_source == 5 and c.config_type > 0 and c.documentation, c
        assert c.read_only is False and c.is_sensitive is False
    assert "no effect" in by_name["min.insync.replicas"].documentation
    retention = by_name["retention.ms"]
    assert [(s.name, s.source) for s in retention.synonyms] == [("log.retention.ms", 5)]
    assert [s.name for s in by_name["compression.type"].synonyms] == ["compression.type", "compression.type"]


def test_configs_kafka_refuses_and_kaas_cannot_honour_are_refused(broker):
    for name, value in [("cleanup.policy", "archive"), ("compression.type", "brotli"),
                        ("min.insync.replicas", "0"), ("message.timestamp.type", "LogAppendTime"),
                        ("remote.storage.enable", "true"), ("no.such.config", "1")]:
        got = create_topic(broker.addr, new_topic(), configs=[(name, value)])
        assert got.error_code == INVALID_CONFIG and name in got.error_message, (name, got)


def test_broker_configs_name_what_clients_and_tools_look_for(broker):
    described = describe_configs(broker.addr, 4, "0")
    assert described.error_code == NONE, described
    by_name = {c.name: c for c in described.configs}
    host, port = broker.addr.rsplit(":", 1)
    assert by_name["advertised.listeners"].value == f"PLAINTEXT://{broker.addr}"
    assert by_name["listeners"].value == f"PLAINTEXT://{broker.addr}"
    assert by_name["listeners"].config_source == 4, "set by --listen"
    assert by_name["broker.id"].value == "0"
    assert by_name["log.dirs"].value.endswith(os.path.basename(broker.dir))
    for name in ("num.partitions", "auto.create.topics.enable", "log.retention.ms",
                 "log.retention.hours", "log.retention.bytes", "log.segment.bytes",
                 "message.max.bytes", "default.replication.factor", "min.insync.replicas"):
        c = by_name[name]
        assert c.read_only and c.config_type > 0 and c.documentation and c.synonyms, c
    assert describe_configs(broker.addr, 4, "7").error_code == INVALID_REQUEST
    only = describe_configs(broker.addr, 4, "0", keys=["log.retention.ms"])
    assert [c.name for c in only.configs] == ["log.retention.ms"]


def test_confluent_admin_describes_and_alters_configs(broker):
    from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, AlterConfigOpType

    admin = AdminClient({"bootstrap.servers": broker.addr})
    topic = new_topic()
    assert create_topic(broker.addr, topic).error_code == NONE
    res = ConfigResource(ConfigResource.Type.TOPIC, topic,
                         incremental_configs=[ConfigEntry("compression.type", "lz4",
                                                          incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=EVENTUALLY)
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    entries = list(configs.values())[0].result(timeout=EVENTUALLY)
    assert entries["compression.type"].value == "lz4"
    assert not entries["compression.type"].is_default
    assert entries["retention.ms"].is_default
    broker_entries = list(admin.describe_configs(
        [ConfigResource(ConfigResource.Type.BROKER, "0")]).values())[0].result(timeout=EVENTUALLY)
    assert broker_entries["advertised.listeners"].value == f"PLAINTEXT://{broker.addr}"
    assert broker_entries["advertised.listeners"].is_read_only


def test_incremental_alter_configs_appends_to_and_subtracts_from_list_configs(broker):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, AlterConfigOpType

    admin = AdminClient({"bootstrap.servers": broker.addr})
    topic = new_topic()
    assert create_topic(broker.addr, topic).error_code == NONE

    def alter(name, value, op):
        res = ConfigResource(ConfigResource.Type.TOPIC, topic,
                             incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])
        for f in admin.incremental_alter_configs([res]).values():
            f.result(timeout=EVENTUALLY)

    def value(name):
        configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        return list(configs.values())[0].result(timeout=EVENTUALLY)[name].value

    alter("cleanup.policy", "compact", AlterConfigOpType.APPEND)
    assert value("cleanup.policy") == "delete,compact"  # appended to the default
    alter("cleanup.policy", "compact", AlterConfigOpType.APPEND)
    assert value("cleanup.policy") == "delete,compact"  # already there
    alter("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)
    assert value("cleanup.policy") == "compact"
    with pytest.raises(KafkaException) as e:
        alter("retention.ms", "5", AlterConfigOpType.APPEND)
    assert e.value.args[0].code() == 40, e.value  # INVALID_CONFIG: not a list
    with pytest.raises(KafkaException):
        alter("cleanup.policy", "tidy", AlterConfigOpType.APPEND)  # not a policy
    # Empty is allowed (Kafka 4.1, KIP-1161): nothing is deleted or compacted.
    alter("cleanup.policy", "compact", AlterConfigOpType.SUBTRACT)
    assert value("cleanup.policy") == ""


# 4. Static membership (KIP-345).

def test_a_static_member_restarting_gets_its_partitions_back_without_a_rebalance(broker):
    from confluent_kafka import Consumer

    topic = new_topic()
    assert create_topic(broker.addr, topic, partitions=2).error_code == NONE
    group = f"static-{uuid.uuid4().hex[:8]}"
    assigned = {"a": [], "b": []}

    def consumer(name):
        c = Consumer({"bootstrap.servers": broker.addr, "group.id": group,
                      "group.instance.id": f"instance-{name}", "session.timeout.ms": 30000,
                      "auto.offset.reset": "earliest"})
        c.subscribe([topic], on_assign=lambda _, parts: assigned[name].append(
            sorted(p.partition for p in parts)))
        return c

    def pump(consumers, until, timeout=EVENTUALLY):
        deadline = time.time() + timeout
        while not until():
            assert time.time() < deadline, f"not yet after {timeout} s: {assigned}"
            for c in consumers:
                c.poll(0.1)

    a, b = consumer("a"), consumer("b")
    pump([a, b], lambda: assigned["a"] and assigned["b"] and
         sorted(assigned["a"][-1] + assigned["b"][-1]) == [0, 1])
    rounds_of_a = len(assigned["a"])
    b_had = assigned["b"][-1]
    b.close()  # a static member leaves no LeaveGroup behind: its session stays
    b = consumer("b")
    pump([a, b], lambda: len(assigned["b"]) >= 2)
    for _ in range(30):  # three more seconds of a's polls: no rebalance reaches it
        a.poll(0.1)
    assert assigned["b"][-1] == b_had, "the restarted member got its partitions back"
    assert len(assigned["a"]) == rounds_of_a, f"the other member rebalanced: {assigned}"
    a.close()
    b.close()


def test_a_pattern_subscription_sees_topics_made_after_it(broker):
    from confluent_kafka import Consumer, Producer

    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": broker.addr, "group.id": prefix,
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
    c.subscribe([f"^{prefix}-.*"])
    for _ in range(20):
        c.poll(0.1)
    # One created by CreateTopics, one auto-created by a producer's first send.
    assert create_topic(broker.addr, f"{prefix}-made").error_code == NONE
    p = Producer({"bootstrap.servers": broker.addr})
    for t in (f"{prefix}-made", f"{prefix}-auto"):
        p.produce(t, t.encode())
    assert p.flush(EVENTUALLY) == 0
    seen = set()
    deadline = time.time() + EVENTUALLY
    while len(seen) < 2 and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen.add(m.topic())
    c.close()
    assert seen == {f"{prefix}-made", f"{prefix}-auto"}, f"read from {seen} in {EVENTUALLY} s"


# 7. Internal topics: kaas keeps their content as files; they do not exist.

def test_internal_topics_are_neither_listed_nor_auto_created(broker):
    for name in ("__consumer_offsets", "__transaction_state"):
        resp = metadata(broker.addr, [name], 12, auto_create=True)
        assert [t.error_code for t in resp.topics] == [UNKNOWN_TOPIC_OR_PARTITION], resp
        got = create_topic(broker.addr, name)
        assert got.error_code == INVALID_REQUEST and "internal" in got.error_message, got
    everything = call(broker.addr, MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    assert not [t.name for t in everything.topics if t.name.startswith("__") or t.is_internal]


def test_admin_tools_list_topics_with_and_without_internal_ones(broker, existing):
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    topic, _ = existing
    listed = AdminClient({"bootstrap.servers": broker.addr}).list_topics(timeout=EVENTUALLY).topics
    assert topic in listed and not any(t.startswith("__") for t in listed)
    admin = KafkaAdminClient(bootstrap_servers=broker.addr)
    try:
        assert topic in admin.list_topics()
        described = admin.describe_topics([topic])
        assert described[0]["is_internal"] is False and len(described[0]["partitions"]) == 2
    finally:
        admin.close()
