"""The admin client matrix: every operation of the two standard admin
clients (confluent-kafka's AdminClient, librdkafka underneath, and
kafka-python's KafkaAdminClient) against one broker, each checked for the
answer Kafka would give. An operation kaas does not serve must fail at
once with the client's "not supported" error, never hang or be answered
wrongly; the table in docs/compatibility.md ("Admin clients") is this
file's outcome."""

import uuid

import pytest
from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException,
                             Producer, ConsumerGroupState, ElectionType, TopicCollection,
                             TopicPartition)
from confluent_kafka import admin as ck
from kafka import admin as kp
from kafka.errors import (IncompatibleBrokerVersion, InvalidReplicationAssignmentError,
                          NoReassignmentInProgressError, SecurityDisabledError,
                          UnknownTopicOrPartitionError, UnsupportedVersionError)
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KpTopicPartition

# Seconds for each future: generous, as the CI box is small and busy (an
# operation that hangs still fails, only later; "not supported" comes at once).
T = 120


class World:
    """A topic with 50 records in each of its two partitions and a group
    that committed offsets 30 and 40 on them, made once for the module."""

    def __init__(self, addr):
        self.addr = addr
        tag = uuid.uuid4().hex[:8]
        self.topic = f"matrix-{tag}"
        self.group = f"matrix-group-{tag}"
        a = ck.AdminClient({"bootstrap.servers": addr})
        a.create_topics([ck.NewTopic(self.topic, 2, 1)])[self.topic].result(timeout=T)
        p = Producer({"bootstrap.servers": addr, "acks": "all"})
        for i in range(100):
            p.produce(self.topic, value=b"x" * 100, partition=i % 2)
        assert p.flush(T) == 0
        c = Consumer({"bootstrap.servers": addr, "group.id": self.group,
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(self.topic, 0, 30), TopicPartition(self.topic, 1, 40)],
                 asynchronous=False)
        c.close()

    def fresh(self, what):
        return f"matrix-{what}-{uuid.uuid4().hex[:8]}"

    def group_with_offsets(self):
        g = self.fresh("group")
        c = Consumer({"bootstrap.servers": self.addr, "group.id": g, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(self.topic, 0, 1)], asynchronous=False)
        c.close()
        return g


@pytest.fixture(scope="module")
def world(broker):
    return World(broker.addr)


@pytest.fixture(scope="module")
def ckadmin(broker):
    return ck.AdminClient({"bootstrap.servers": broker.addr})


@pytest.fixture(scope="module")
def kpadmin(broker):
    a = kp.KafkaAdminClient(bootstrap_servers=broker.addr, request_timeout_ms=60000)
    yield a
    a.close()


def done(futures):
    return {k: f.result(timeout=T) for k, f in futures.items()}


# confluent-kafka ----------------------------------------------------------

def ck_create_and_delete_topics(a, w):
    t = w.fresh("topic")
    done(a.create_topics([ck.NewTopic(t, 3, 1)]))
    assert t in a.list_topics(timeout=T).topics
    done(a.delete_topics([t]))


def ck_list_topics(a, w):
    md = a.list_topics(timeout=T)
    assert len(md.topics[w.topic].partitions) == 2 and len(md.brokers) == 1


def ck_describe_topics(a, w):
    d = done(a.describe_topics(TopicCollection([w.topic])))[w.topic]
    assert [p.id for p in d.partitions] == [0, 1] and not d.is_internal
    assert all(p.leader.id == 0 and [r.id for r in p.replicas] == [0] for p in d.partitions)


def ck_describe_cluster(a, w):
    c = a.describe_cluster().result(timeout=T)
    assert c.cluster_id and [n.id for n in c.nodes] == [0] and c.controller.id == 0


def ck_create_partitions(a, w):
    t = w.fresh("grow")
    done(a.create_topics([ck.NewTopic(t, 1, 1)]))
    done(a.create_partitions([ck.NewPartitions(t, 3)]))
    assert len(a.list_topics(t, timeout=T).topics[t].partitions) == 3


def ck_describe_configs(a, w):
    r = ck.ConfigResource(ck.ConfigResource.Type.TOPIC, w.topic)
    entries = done(a.describe_configs([r]))[r]
    assert entries["cleanup.policy"].value == "delete"


def ck_incremental_alter_configs(a, w):
    t = w.fresh("configs")
    done(a.create_topics([ck.NewTopic(t, 1, 1)]))
    r = ck.ConfigResource(ck.ConfigResource.Type.TOPIC, t, incremental_configs=[
        ck.ConfigEntry("retention.ms", "3600000",
                       incremental_operation=ck.AlterConfigOpType.SET)])
    done(a.incremental_alter_configs([r]))
    got = done(a.describe_configs([ck.ConfigResource(ck.ConfigResource.Type.TOPIC, t)]))
    assert list(got.values())[0]["retention.ms"].value == "3600000"


def ck_alter_configs(a, w):
    t = w.fresh("configs")
    done(a.create_topics([ck.NewTopic(t, 1, 1)]))
    r = ck.ConfigResource(ck.ConfigResource.Type.TOPIC, t, set_config={"segment.bytes": "1048576"})
    done(a.alter_configs([r]))
    got = done(a.describe_configs([ck.ConfigResource(ck.ConfigResource.Type.TOPIC, t)]))
    assert list(got.values())[0]["segment.bytes"].value == "1048576"


def ck_delete_records(a, w):
    t = w.fresh("trim")
    done(a.create_topics([ck.NewTopic(t, 1, 1)]))
    p = Producer({"bootstrap.servers": w.addr})
    for _ in range(20):
        p.produce(t, b"v", partition=0)
    assert p.flush(T) == 0
    r = done(a.delete_records([TopicPartition(t, 0, 15)]))
    assert list(r.values())[0].low_watermark == 15


def ck_list_offsets(a, w):
    tp = TopicPartition(w.topic, 1)
    r = done(a.list_offsets({tp: ck.OffsetSpec.latest()}))
    assert r[tp].offset == 50
    r = done(a.list_offsets({tp: ck.OffsetSpec.earliest()}))
    assert r[tp].offset == 0


def ck_list_consumer_groups(a, w):
    r = a.list_consumer_groups().result(timeout=T)
    assert w.group in [g.group_id for g in r.valid]


def ck_describe_consumer_groups(a, w):
    d = done(a.describe_consumer_groups([w.group]))[w.group]
    assert d.state == ConsumerGroupState.EMPTY and d.members == []


def ck_list_consumer_group_offsets(a, w):
    r = done(a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(w.group)]))
    got = {tp.partition: tp.offset for tp in r[w.group].topic_partitions}
    assert got == {0: 30, 1: 40}


def ck_alter_consumer_group_offsets(a, w):
    g = w.group_with_offsets()
    done(a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        g, [TopicPartition(w.topic, 0, 7)])]))
    r = done(a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)]))
    assert [(tp.partition, tp.offset) for tp in r[g].topic_partitions] == [(0, 7)]


def ck_delete_consumer_groups(a, w):
    g = w.group_with_offsets()
    done(a.delete_consumer_groups([g]))
    r = a.list_consumer_groups().result(timeout=T)
    assert g not in [x.group_id for x in r.valid]


def ck_describe_user_scram_credentials(a, w):
    # No user has credentials on this broker: Kafka answers RESOURCE_NOT_FOUND per user.
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND|not found|No SCRAM"):
        done(a.describe_user_scram_credentials(["nobody"]))


def ck_describe_acls(a, w):
    # Without an authorizer Kafka answers SECURITY_DISABLED, and so does
    # kaas (kafka-python raises it, below); librdkafka 2.16 drops that
    # error and gives an empty list. ACLs with an authorizer: test_security.
    f = ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY, None, None,
                            ck.AclOperation.ANY, ck.AclPermissionType.ANY)
    assert a.describe_acls(f).result(timeout=T) == []


def ck_elect_leaders(a, w):
    # A partition's one replica leads it: nothing to elect. Moves between
    # brokers: test_reassignments.
    tp = TopicPartition(w.topic, 0)
    res = a.elect_leaders(ElectionType.PREFERRED, [tp]).result(timeout=T)
    assert res[tp].code() == KafkaError.ELECTION_NOT_NEEDED, res
    res = a.elect_leaders(ElectionType.UNCLEAN, [tp]).result(timeout=T)
    assert res[tp].code() == KafkaError.ELECTION_NOT_NEEDED, res


# kafka-python -------------------------------------------------------------

def kp_create_and_delete_topics(a, w):
    t = w.fresh("topic")
    a.create_topics([kp.NewTopic(t, num_partitions=3, replication_factor=1)])
    assert t in a.list_topics()
    a.delete_topics([t])


def kp_list_topics(a, w):
    assert w.topic in a.list_topics()


def kp_describe_topics(a, w):
    (d,) = a.describe_topics([w.topic])
    assert d["error_code"] == 0 and [p["partition_index"] for p in d["partitions"]] == [0, 1]
    assert all(p["leader_id"] == 0 and p["replica_nodes"] == [0] for p in d["partitions"])


def kp_describe_cluster(a, w):
    c = a.describe_cluster()
    assert c["cluster_id"] and [b["broker_id"] for b in c["brokers"]] == [0] and c["controller_id"] == 0


def kp_create_partitions(a, w):
    t = w.fresh("grow")
    a.create_topics([kp.NewTopic(t, num_partitions=1, replication_factor=1)])
    a.create_partitions({t: kp.NewPartitions(total_count=4)})
    (d,) = a.describe_topics([t])
    assert len(d["partitions"]) == 4


def kp_describe_configs(a, w):
    r = a.describe_configs([kp.ConfigResource(kp.ConfigResourceType.TOPIC, w.topic)],
                           config_filter="all")
    assert r["topic"][w.topic]["cleanup.policy"]["value"] == "delete"


def kp_alter_configs(a, w):
    t = w.fresh("configs")
    a.create_topics([kp.NewTopic(t, num_partitions=1, replication_factor=1)])
    a.alter_configs([kp.ConfigResource(kp.ConfigResourceType.TOPIC, t,
                                       configs={"retention.bytes": "1048576"})])
    r = a.describe_configs([kp.ConfigResource(kp.ConfigResourceType.TOPIC, t)])
    assert r["topic"][t]["retention.bytes"]["value"] == "1048576"


def kp_delete_records(a, w):
    t = w.fresh("trim")
    a.create_topics([kp.NewTopic(t, num_partitions=1, replication_factor=1)])
    p = Producer({"bootstrap.servers": w.addr})
    for _ in range(20):
        p.produce(t, b"v", partition=0)
    assert p.flush(T) == 0
    r = a.delete_records({KpTopicPartition(t, 0): 12})
    assert list(r.values())[0]["low_watermark"] == 12


def kp_list_partition_offsets(a, w):
    tp = KpTopicPartition(w.topic, 0)
    r = a.list_partition_offsets({tp: kp.OffsetSpec.LATEST})
    assert r[tp].offset == 50


def kp_list_groups(a, w):
    assert w.group in [g["group_id"] for g in a.list_groups()]


def kp_describe_groups(a, w):
    d = a.describe_groups([w.group])[w.group]
    assert d["group_state"] == "Empty" and d["members"] == [] and d["error"] is None


def kp_list_group_offsets(a, w):
    r = a.list_group_offsets({w.group: None})[w.group]
    assert {tp.partition: o.offset for tp, o in r.items()} == {0: 30, 1: 40}


def kp_alter_group_offsets(a, w):
    g = w.group_with_offsets()
    tp = KpTopicPartition(w.topic, 0)
    a.alter_group_offsets(g, {tp: OffsetAndMetadata(9, "", -1)})
    r = a.list_group_offsets({g: None})[g]
    assert r[tp].offset == 9


def kp_delete_group_offsets(a, w):
    g = w.group_with_offsets()
    tp = KpTopicPartition(w.topic, 0)
    assert tp in a.list_group_offsets({g: None})[g]
    a.delete_group_offsets(g, [tp])
    assert a.list_group_offsets({g: None})[g] == {}


def kp_delete_groups(a, w):
    g = w.group_with_offsets()
    a.delete_groups([g])
    assert g not in [x["group_id"] for x in a.list_groups()]


def kp_describe_log_dirs(a, w):
    (b,) = a.describe_log_dirs()
    assert len(b["log_dirs"]) == 1 and b["log_dirs"][0]["error_code"] == 0


def kp_describe_topic_partitions(a, w):
    r = a.describe_topic_partitions([w.topic])
    assert [p["partition_index"] for p in r["topics"][0]["partitions"]] == [0, 1]


def kp_list_transactions(a, w):
    assert a.list_transactions() == {0: []}


def kp_describe_producers(a, w):
    t = w.fresh("idempotent")
    a.create_topics([kp.NewTopic(t, num_partitions=1, replication_factor=1)])
    p = Producer({"bootstrap.servers": w.addr, "enable.idempotence": True})
    for _ in range(5):
        p.produce(t, b"v", partition=0)
    assert p.flush(T) == 0
    tp = KpTopicPartition(t, 0)
    (only,) = a.describe_producers([tp])[tp].active_producers
    assert only.producer_id >= 0 and only.last_sequence == 4
    assert a.describe_producers([KpTopicPartition(w.topic, 0)])[
        KpTopicPartition(w.topic, 0)].active_producers == []


def kp_describe_features(a, w):
    # kaas finalizes no feature flags (it has no KRaft metadata.version).
    assert a.describe_features() == {}


def kp_describe_acls(a, w):
    f = kp.ACLFilter(principal=None, host="*", operation=kp.ACLOperation.ANY,
                     permission_type=kp.ACLPermissionType.ANY,
                     resource_pattern=kp.ResourcePatternFilter(kp.ResourceType.ANY, None,
                                                               kp.ACLResourcePatternType.ANY))
    with pytest.raises(SecurityDisabledError, match="no authorizer"):
        a.describe_acls(f)


UNSUPPORTED = (UnsupportedVersionError, IncompatibleBrokerVersion)


def kp_elect_leaders(a, w):
    r = a.elect_leaders(0, {w.topic: [0, 1]})  # 0: PREFERRED
    codes = [p.error_code for t in r.replica_election_results for p in t.partition_result]
    assert codes == [84, 84], r  # ELECTION_NOT_NEEDED
    with pytest.raises(UnknownTopicOrPartitionError):
        a.elect_leaders(0, {w.topic: [9]})


def kp_list_partition_reassignments(a, w):
    assert a.list_partition_reassignments() == {}


def kp_alter_partition_reassignments(a, w):
    tp = KpTopicPartition(w.topic, 1)
    # To the broker that leads it: accepted and done at once.
    assert a.alter_partition_reassignments({tp: [0]}) == {tp: None}
    assert a.list_partition_reassignments() == {}
    # A broker that is not live, or two replicas: refused.
    assert a.alter_partition_reassignments({tp: [7]}) == {tp: InvalidReplicationAssignmentError}
    assert a.alter_partition_reassignments({tp: [0, 1]}) == {tp: InvalidReplicationAssignmentError}
    # Cancelled: once, then there is nothing left to cancel.
    assert a.alter_partition_reassignments({tp: None}) == {tp: None}
    assert a.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}


def kp_describe_metadata_quorum(a, w):
    # kaas has no KRaft quorum: the volume is the coordination point.
    with pytest.raises(UNSUPPORTED):
        a.describe_metadata_quorum()


CK = [f for n, f in sorted(globals().items()) if n.startswith("ck_")]
KP = [f for n, f in sorted(globals().items()) if n.startswith("kp_")]


@pytest.mark.parametrize("op", CK, ids=lambda f: f.__name__[3:])
def test_confluent_kafka(ckadmin, world, op):
    op(ckadmin, world)


@pytest.mark.parametrize("op", KP, ids=lambda f: f.__name__[3:])
def test_kafka_python(kpadmin, world, op):
    op(kpadmin, world)
