"""Python Kafka clients against the release `kaas` binary on 127.0.0.1.

Covers what kaas serves today: metadata, produce, consume by assignment
offsets by time, and creating / deleting topics, each client with its own
default settings (idempotent producers where that is the default).
Consumer groups and idempotence under failures are in test_groups.py.
"""

import asyncio
import os
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

KAAS = os.environ.get("KAAS_BIN", "target/release/kaas")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Broker:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="kaas-py-", dir="target")
        self.addr = f"127.0.0.1:{free_port()}"
        self.proc = None

    def start(self):
        log = open(os.path.join(self.dir, "kaas.log"), "a")
        self.proc = subprocess.Popen(
            [KAAS, "--data-dir", self.dir, "--listen", self.addr],
            stdout=log,
            stderr=log,
        )
        host, port = self.addr.split(":")
        for _ in range(100):
            try:
                socket.create_connection((host, int(port)), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("kaas did not start")

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=20)
            self.proc = None


@pytest.fixture(scope="module")
def broker():
    b = Broker()
    b.start()
    yield b
    b.stop()


def topic_name():
    return f"py-{uuid.uuid4().hex[:10]}"


def wait_for_leader(admin_list_topics, topic, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if admin_list_topics(topic):
            return
        time.sleep(0.3)
    raise AssertionError(f"{topic} got no leader")


def test_confluent_kafka_admin_produce_and_consume(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.addr})
    topic = topic_name()
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(timeout=20)

    def led(t):
        md = admin.list_topics(t, timeout=5).topics[t]
        return md.error is None and all(p.leader >= 0 for p in md.partitions.values())

    wait_for_leader(led, topic)
    cluster = admin.describe_cluster(request_timeout=10).result()
    assert cluster.cluster_id, "a cluster id is reported"
    assert [n.id for n in cluster.nodes] == [0] and cluster.controller.id == 0
    assert admin.list_topics(timeout=5).cluster_id == cluster.cluster_id
    p = Producer({"bootstrap.servers": broker.addr, "acks": "all"})
    for i in range(200):
        p.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % 2)
    assert p.flush(20) == 0

    c = Consumer({"bootstrap.servers": broker.addr, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    got = {}
    deadline = time.time() + 20
    while len(got) < 200 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got[m.key().decode()] = m.value().decode()
    c.close()
    assert got == {f"k{i}": f"v{i}" for i in range(200)}

    # DeleteRecords: the log now starts at offset 40 of partition 0.
    deleted = admin.delete_records([TopicPartition(topic, 0, 40)])
    low = list(deleted.values())[0].result(timeout=20)
    assert low.low_watermark == 40, low
    c = Consumer({"bootstrap.servers": broker.addr, "group.id": "unused", "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (lo, hi) == (40, 100), (lo, hi)
    c.close()

    # CreatePartitions: two more, and they get leaders.
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=20)
    wait_for_leader(lambda t: led(t) and len(admin.list_topics(t, timeout=5).topics[t].partitions) == 4, topic)
    late = Producer({"bootstrap.servers": broker.addr})
    late.produce(topic, key="late", value="late", partition=3)
    assert late.flush(20) == 0

    admin.delete_topics([topic])[topic].result(timeout=20)
    assert topic not in admin.list_topics(timeout=5).topics


def test_confluent_kafka_topic_configs(broker):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": broker.addr})
    topic = topic_name()
    admin.create_topics([NewTopic(topic, num_partitions=1, config={"retention.ms": "3600000"})])[
        topic
    ].result(timeout=20)
    resource = ConfigResource("topic", topic)

    def describe():
        entries = admin.describe_configs([resource])[resource].result(timeout=10)
        return {k: v.value for k, v in entries.items()}

    configs = describe()
    assert configs["retention.ms"] == "3600000"
    assert configs["cleanup.policy"] == "delete"
    assert configs["segment.bytes"] == "1073741824", "Kafka's default is reported"

    change = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([change])[change].result(timeout=10)
    configs = describe()
    assert configs["retention.bytes"] == "1048576"
    assert configs["retention.ms"] == "604800000", "deleting an override restores the default"

    bad = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(Exception):
        admin.incremental_alter_configs([bad])[bad].result(timeout=10)
    admin.delete_topics([topic])[topic].result(timeout=20)


def test_kafka_python_offsets_for_times_and_recreate(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.addr)
    topic = topic_name()
    admin.create_topics([NewTopic(topic, 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.addr, acks="all")
    base = int(time.time() * 1000)
    for i in range(50):
        producer.send(topic, key=b"k", value=f"m{i}".encode(), timestamp_ms=base + i * 10)
    producer.flush(timeout=20)

    consumer = KafkaConsumer(bootstrap_servers=broker.addr, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = []
    deadline = time.time() + 20
    while len(values) < 50 and time.time() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value.decode() for r in records)
    assert values == [f"m{i}" for i in range(50)]
    found = consumer.offsets_for_times({tp: base + 255})[tp]
    assert found.offset == 26, found
    consumer.close()

    admin.delete_topics([topic])
    time.sleep(1)
    admin.create_topics([NewTopic(topic, 1, 1)])
    consumer = KafkaConsumer(bootstrap_servers=broker.addr, group_id=None)
    deadline = time.time() + 20
    while True:
        try:
            assert consumer.end_offsets([tp])[tp] == 0, "a recreated topic starts empty"
            break
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.5)
    consumer.close()
    admin.close()


def test_aiokafka_produce_consume_and_survive_a_restart(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    topic = topic_name()

    async def produce():
        p = AIOKafkaProducer(bootstrap_servers=broker.addr, acks="all")
        await p.start()
        try:
            for i in range(100):
                await p.send_and_wait(topic, f"a{i}".encode())
        finally:
            await p.stop()

    async def consume():
        c = AIOKafkaConsumer(bootstrap_servers=broker.addr, group_id=None, auto_offset_reset="earliest")
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out = []
            while len(out) < 100:
                batch = await c.getmany(tp, timeout_ms=1000)
                for records in batch.values():
                    out.extend(r.value.decode() for r in records)
            return out
        finally:
            await c.stop()

    asyncio.run(produce())
    assert asyncio.run(asyncio.wait_for(consume(), 30)) == [f"a{i}" for i in range(100)]
    broker.stop()
    broker.start()
    assert asyncio.run(asyncio.wait_for(consume(), 60)) == [f"a{i}" for i in range(100)]
