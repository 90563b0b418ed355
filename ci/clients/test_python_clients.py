"""Python Kafka clients against the release `kaas` binary on 127.0.0.1.

Covers what kaas serves today, for each of confluent-kafka, kafka-python and
aiokafka with its own default settings (idempotent producers where that is
the default): produce; consume from the earliest offset; offsets by time;
creating a topic, describing and altering its configs (Kafka's defaults
reported for what is not set), deleting it, and a recreated topic starting
empty; a broker restart (SIGTERM, then the same data directory) keeping
everything acknowledged. Consumer groups and idempotence under failures are
in test_groups.py.
"""

import asyncio
import os
import sys
import socket
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from kaasproc import Broker  # noqa: E402

# How long a wait for something that should happen soon may take: the CI
# box is small and busy; waits end as soon as the condition holds.
EVENTUALLY = 120


def topic_name():
    return f"py-{uuid.uuid4().hex[:10]}"


def wait_until(cond, timeout, what, interval=0.3):
    """Polls `cond` until it returns something true; exceptions count as not yet."""
    deadline = time.time() + timeout
    last = None
    while True:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - reported if the deadline passes
            last = e
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last!r})")
        time.sleep(interval)


def wait_for_leader(admin_list_topics, topic, timeout=EVENTUALLY):
    wait_until(lambda: admin_list_topics(topic), timeout, f"{topic} to get a leader")


def test_confluent_kafka_admin_produce_and_consume(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.addr})
    topic = topic_name()
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(timeout=EVENTUALLY)

    def led(t):
        md = admin.list_topics(t, timeout=5).topics[t]
        return md.error is None and all(p.leader >= 0 for p in md.partitions.values())

    wait_for_leader(led, topic)
    cluster = admin.describe_cluster(request_timeout=EVENTUALLY).result()
    assert cluster.cluster_id, "a cluster id is reported"
    assert [n.id for n in cluster.nodes] == [0] and cluster.controller.id == 0
    assert admin.list_topics(timeout=EVENTUALLY).cluster_id == cluster.cluster_id
    p = Producer({"bootstrap.servers": broker.addr, "acks": "all"})
    for i in range(200):
        p.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % 2)
    assert p.flush(EVENTUALLY) == 0

    c = Consumer({"bootstrap.servers": broker.addr, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    got = {}
    deadline = time.time() + EVENTUALLY
    while len(got) < 200 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got[m.key().decode()] = m.value().decode()
    c.close()
    assert got == {f"k{i}": f"v{i}" for i in range(200)}, f"read {len(got)} of 200 in {EVENTUALLY} s"

    # DeleteRecords: the log now starts at offset 40 of partition 0.
    deleted = admin.delete_records([TopicPartition(topic, 0, 40)])
    low = list(deleted.values())[0].result(timeout=EVENTUALLY)
    assert low.low_watermark == 40, low
    c = Consumer({"bootstrap.servers": broker.addr, "group.id": "unused", "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=EVENTUALLY)
    assert (lo, hi) == (40, 100), (lo, hi)
    c.close()

    # CreatePartitions: two more, and they get leaders.
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=EVENTUALLY)
    wait_for_leader(lambda t: led(t) and len(admin.list_topics(t, timeout=5).topics[t].partitions) == 4, topic)
    late = Producer({"bootstrap.servers": broker.addr})
    late.produce(topic, key="late", value="late", partition=3)
    assert late.flush(EVENTUALLY) == 0

    admin.delete_topics([topic])[topic].result(timeout=EVENTUALLY)
    assert topic not in admin.list_topics(timeout=EVENTUALLY).topics


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
    ].result(timeout=EVENTUALLY)
    resource = ConfigResource("topic", topic)

    def describe():
        entries = admin.describe_configs([resource])[resource].result(timeout=EVENTUALLY)
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
    admin.incremental_alter_configs([change])[change].result(timeout=EVENTUALLY)
    configs = describe()
    assert configs["retention.bytes"] == "1048576"
    assert configs["retention.ms"] == "604800000", "deleting an override restores the default"

    bad = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "archive", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(Exception):
        admin.incremental_alter_configs([bad])[bad].result(timeout=EVENTUALLY)
    admin.delete_topics([topic])[topic].result(timeout=EVENTUALLY)


def test_confluent_kafka_offsets_for_times_restart_and_recreate(broker):
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.addr})
    topic = topic_name()
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=EVENTUALLY)

    def produce(values, timestamps=None):
        # librdkafka's defaults: acks=all, no idempotence.
        p = Producer({"bootstrap.servers": broker.addr})
        acked, failed = [], []

        def report(err, msg):
            (failed if err is not None else acked).append(err or msg.offset())

        for i, v in enumerate(values):
            ts = {"timestamp": timestamps[i]} if timestamps else {}
            p.produce(topic, value=v, partition=0, on_delivery=report, **ts)
        assert p.flush(EVENTUALLY) == 0, "everything is delivered"
        assert failed == [], failed[:5]
        return sorted(acked)

    base = int(time.time() * 1000)
    offsets = produce([f"c{i}" for i in range(50)], [base + i * 10 for i in range(50)])
    assert offsets == list(range(50)), offsets

    def consume_from_earliest(n):
        # A consumer group of its own, starting at the earliest offset.
        c = Consumer(
            {
                "bootstrap.servers": broker.addr,
                "group.id": f"grp-{uuid.uuid4().hex[:10]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic])
        out = []
        deadline = time.time() + EVENTUALLY
        while len(out) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.value().decode()))
        # Nothing more than what was acknowledged shows up.
        m = c.poll(1.0)
        assert m is None or m.error() is not None, (m.offset(), m.value())
        c.close()
        return out

    def offset_for(ts):
        c = Consumer({"bootstrap.servers": broker.addr, "group.id": "unused", "enable.auto.commit": False})
        try:
            return c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=EVENTUALLY)[0].offset
        finally:
            c.close()

    assert consume_from_earliest(50) == [(i, f"c{i}") for i in range(50)]
    assert offset_for(base + 255) == 26, "the first message at or after the time"
    assert offset_for(base) == 0

    # Restart: SIGTERM, then the same data directory. Everything
    # acknowledged is there, and the time index still answers.
    broker.stop()
    broker.start()
    assert consume_from_earliest(50) == [(i, f"c{i}") for i in range(50)]
    assert wait_until(lambda: offset_for(base + 255) == 26, EVENTUALLY, "offsets_for_times after the restart")

    # Delete, then recreate under the same name: the new topic starts empty.
    admin.delete_topics([topic])[topic].result(timeout=EVENTUALLY)
    wait_until(lambda: topic not in admin.list_topics(timeout=5).topics, EVENTUALLY, f"{topic} gone")

    def recreate():
        try:
            admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=EVENTUALLY)
            return True
        except KafkaException as e:
            # The deletion may still be in progress; anything else fails.
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise AssertionError(f"recreating {topic}: {e}") from None
            return False

    wait_until(recreate, EVENTUALLY, f"{topic} recreated")

    def led(t):
        md = admin.list_topics(t, timeout=5).topics[t]
        return md.error is None and all(p.leader >= 0 for p in md.partitions.values())

    wait_for_leader(led, topic)
    c = Consumer({"bootstrap.servers": broker.addr, "group.id": "unused", "enable.auto.commit": False})
    marks = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=EVENTUALLY)
    c.close()
    assert tuple(marks) == (0, 0), f"a recreated topic starts empty: {marks}"
    assert produce(["fresh"]) == [0]
    assert consume_from_earliest(1) == [(0, "fresh")]
    admin.delete_topics([topic])[topic].result(timeout=EVENTUALLY)


def test_kafka_python_offsets_for_times_and_recreate(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=broker.addr)
    topic = topic_name()
    admin.create_topics([NewTopic(topic, 1, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.addr, acks="all")
    base = int(time.time() * 1000)
    for i in range(50):
        producer.send(topic, key=b"k", value=f"m{i}".encode(), timestamp_ms=base + i * 10)
    producer.flush(timeout=EVENTUALLY)

    consumer = KafkaConsumer(bootstrap_servers=broker.addr, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = []
    deadline = time.time() + EVENTUALLY
    while len(values) < 50 and time.time() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value.decode() for r in records)
    assert values == [f"m{i}" for i in range(50)], f"read {values} in {EVENTUALLY} s"
    found = consumer.offsets_for_times({tp: base + 255})[tp]
    assert found.offset == 26, found
    consumer.close()

    admin.delete_topics([topic])
    wait_until(lambda: topic not in admin.list_topics(), EVENTUALLY, f"{topic} gone")

    def recreate():
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])
            return True
        except TopicAlreadyExistsError:
            # The deletion may still be in progress.
            return False

    wait_until(recreate, EVENTUALLY, f"{topic} recreated")
    consumer = KafkaConsumer(bootstrap_servers=broker.addr, group_id=None)
    deadline = time.time() + EVENTUALLY
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


def test_kafka_python_topic_configs_and_restart(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.addr)
    topic = topic_name()
    admin.create_topics([NewTopic(topic, 1, 1)])

    def describe():
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        return {k: (v["value"], v["config_source"]) for k, v in described["topic"][topic].items()}

    configs = describe()
    assert configs["segment.bytes"] == ("1073741824", "DEFAULT_CONFIG"), "Kafka's default is reported"
    assert configs["retention.ms"] == ("604800000", "DEFAULT_CONFIG")
    assert configs["cleanup.policy"] == ("delete", "DEFAULT_CONFIG")

    # The client's default: IncrementalAlterConfigs (the broker offers it).
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "7200000"})])
    assert result == {"topic": {topic: "OK"}}, result
    configs = describe()
    assert configs["retention.ms"] == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["segment.bytes"] == ("1073741824", "DEFAULT_CONFIG")
    # The legacy AlterConfigs (the client re-sends the other overrides).
    result = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.bytes": "1048576"})], incremental=False
    )
    assert result == {"topic": {topic: "OK"}}, result
    configs = describe()
    assert configs["retention.bytes"] == ("1048576", "DYNAMIC_TOPIC_CONFIG")
    assert configs["retention.ms"] == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"cleanup.policy": "archive"})])
    assert result["topic"][topic] != "OK", "a policy Kafka does not know is refused"
    assert describe()["cleanup.policy"] == ("delete", "DEFAULT_CONFIG")

    # kafka-python's defaults: acks=all, idempotent.
    producer = KafkaProducer(bootstrap_servers=broker.addr)
    futures = [producer.send(topic, value=f"p{i}".encode()) for i in range(100)]
    offsets = sorted(f.get(timeout=EVENTUALLY).offset for f in futures)
    producer.close()
    assert offsets == list(range(100)), offsets

    tp = TopicPartition(topic, 0)

    def consume_from_earliest():
        consumer = KafkaConsumer(
            bootstrap_servers=broker.addr, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        consumer.assign([tp])
        values = []
        deadline = time.time() + EVENTUALLY
        while len(values) < 100 and time.time() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value.decode() for r in records)
        consumer.close()
        return values

    assert consume_from_earliest() == [f"p{i}" for i in range(100)]
    admin.close()
    # Restart: SIGTERM, then the same data directory.
    broker.stop()
    broker.start()
    assert consume_from_earliest() == [f"p{i}" for i in range(100)]
    admin = KafkaAdminClient(bootstrap_servers=broker.addr)
    configs = describe()
    assert configs["retention.ms"] == ("7200000", "DYNAMIC_TOPIC_CONFIG"), "configs survive the restart"
    assert configs["retention.bytes"] == ("1048576", "DYNAMIC_TOPIC_CONFIG")
    admin.delete_topics([topic])
    wait_until(lambda: topic not in admin.list_topics(), EVENTUALLY, f"{topic} gone")
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
    assert asyncio.run(asyncio.wait_for(consume(), EVENTUALLY)) == [f"a{i}" for i in range(100)]
    broker.stop()
    broker.start()
    assert asyncio.run(asyncio.wait_for(consume(), EVENTUALLY)) == [f"a{i}" for i in range(100)]


def test_aiokafka_admin_offsets_for_times_and_recreate(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.structs import TopicPartition

    topic = topic_name()
    tp = TopicPartition(topic, 0)
    TOPIC_ALREADY_EXISTS = 36

    def ok(errors):
        # (name, error_code, ...) per topic or per resource.
        bad = [e for e in errors if e[1] != 0]
        assert bad == [], bad

    async def create(admin, **configs):
        deadline = time.time() + EVENTUALLY
        while True:
            r = await admin.create_topics([NewTopic(topic, 1, 1, topic_configs=configs)])
            (name, code, *_) = r.topic_errors[0]
            # The deletion of a topic of that name may still be in progress.
            if code == TOPIC_ALREADY_EXISTS and time.time() < deadline:
                await asyncio.sleep(0.3)
                continue
            ok(r.topic_errors)
            return

    async def describe(admin):
        (r,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        (res,) = r.resources
        # (error_code, error_message, resource_type, resource_name, entries)
        assert res[0] == 0, res
        return {e[0]: e[1] for e in res[4]}

    async def admin_part():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.addr)
        await admin.start()
        try:
            await create(admin, **{"retention.bytes": "1048576"})
            configs = await describe(admin)
            assert configs["retention.bytes"] == "1048576"
            assert configs["segment.bytes"] == "1073741824", "Kafka's default is reported"
            assert configs["retention.ms"] == "604800000"
            # aiokafka only has the legacy AlterConfigs, which replaces the
            # topic's whole set of overrides: retention.bytes goes back to
            # its default.
            (r,) = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "7200000"})])
            assert [(x[0], x[3]) for x in r.resources] == [(0, topic)], r
            configs = await describe(admin)
            assert configs["retention.ms"] == "7200000"
            assert configs["retention.bytes"] == "-1", "AlterConfigs replaces every override"
            assert configs["segment.bytes"] == "1073741824"
        finally:
            await admin.close()

    async def produce(values, base):
        # aiokafka's defaults: acks=1, no idempotence.
        p = AIOKafkaProducer(bootstrap_servers=broker.addr)
        await p.start()
        try:
            offsets = []
            for i, v in enumerate(values):
                md = await p.send_and_wait(topic, v.encode(), partition=0, timestamp_ms=base + i * 10)
                offsets.append(md.offset)
            return offsets
        finally:
            await p.stop()

    async def consume(n):
        c = AIOKafkaConsumer(bootstrap_servers=broker.addr, group_id=None, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out = []
            while len(out) < n:
                batch = await c.getmany(tp, timeout_ms=1000)
                for records in batch.values():
                    out.extend((r.offset, r.value.decode()) for r in records)
            return out
        finally:
            await c.stop()

    async def offsets_for_times(*times):
        c = AIOKafkaConsumer(bootstrap_servers=broker.addr, group_id=None)
        await c.start()
        try:
            found = [(await c.offsets_for_times({tp: t}))[tp] for t in times]
            ends = await c.beginning_offsets([tp]), await c.end_offsets([tp])
            # No record at or after the time: Kafka answers -1, aiokafka None.
            return [f.offset if f else None for f in found], ends
        finally:
            await c.stop()

    async def delete_and_recreate():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.addr)
        await admin.start()
        try:
            r = await admin.delete_topics([topic])
            ok(r.topic_error_codes)
            deadline = time.time() + EVENTUALLY
            while topic in await admin.list_topics():
                assert time.time() < deadline, f"{topic} still listed after its deletion"
                await asyncio.sleep(0.3)
            await create(admin)
            configs = await describe(admin)
            assert configs["retention.ms"] == "604800000", "a recreated topic has no old overrides"
        finally:
            await admin.close()

    async def delete():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.addr)
        await admin.start()
        try:
            ok((await admin.delete_topics([topic])).topic_error_codes)
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(admin_part(), 2 * EVENTUALLY))
    base = int(time.time() * 1000)
    assert asyncio.run(asyncio.wait_for(produce([f"t{i}" for i in range(50)], base), EVENTUALLY)) == list(range(50))
    assert asyncio.run(asyncio.wait_for(consume(50), EVENTUALLY)) == [(i, f"t{i}") for i in range(50)]
    found, ends = asyncio.run(asyncio.wait_for(offsets_for_times(base + 255, base), EVENTUALLY))
    assert found == [26, 0], found
    assert ends == ({tp: 0}, {tp: 50}), ends

    asyncio.run(asyncio.wait_for(delete_and_recreate(), 2 * EVENTUALLY))

    async def empty():
        deadline = time.time() + EVENTUALLY
        while True:
            try:
                found, ends = await offsets_for_times(base)
                assert found == [None], found
                return ends
            except Exception:
                if time.time() > deadline:
                    raise
                await asyncio.sleep(0.5)

    assert asyncio.run(asyncio.wait_for(empty(), 2 * EVENTUALLY)) == ({tp: 0}, {tp: 0}), "a recreated topic starts empty"
    assert asyncio.run(asyncio.wait_for(produce(["fresh"], base), EVENTUALLY)) == [0]
    assert asyncio.run(asyncio.wait_for(consume(1), EVENTUALLY)) == [(0, "fresh")]
    asyncio.run(asyncio.wait_for(delete(), EVENTUALLY))


def test_offsets_for_times_past_the_last_record_finds_nothing(broker):
    """Kafka answers a ListOffsets for a timestamp later than every record
    with offset -1 and timestamp -1 (no error), which each client turns into
    "no such offset"."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CkTopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    topic = topic_name()
    base = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": broker.addr})
    for i in range(10):
        p.produce(topic, value=f"x{i}", partition=0, timestamp=base + i)
    assert p.flush(EVENTUALLY) == 0
    late = base + 60_000

    c = Consumer({"bootstrap.servers": broker.addr, "group.id": "unused", "enable.auto.commit": False})
    found = c.offsets_for_times([CkTopicPartition(topic, 0, late)], timeout=EVENTUALLY)[0]
    c.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.addr, group_id=None)
    kp = consumer.offsets_for_times({KpTopicPartition(topic, 0): late})
    consumer.close()

    async def aio():
        c = AIOKafkaConsumer(bootstrap_servers=broker.addr, group_id=None)
        await c.start()
        try:
            return await c.offsets_for_times({AioTopicPartition(topic, 0): late})
        finally:
            await c.stop()

    aio_found = asyncio.run(asyncio.wait_for(aio(), EVENTUALLY))
    answers = {
        "confluent-kafka": found.offset,
        "kafka-python": list(kp.values())[0],
        "aiokafka": list(aio_found.values())[0],
    }
    assert answers == {"confluent-kafka": -1, "kafka-python": None, "aiokafka": None}, (
        f"offsets_for_times({late}) with the last record at {base + 9}: {answers}"
    )


def metadata_v1_controller(addr):
    """Sends a Metadata v1 request (no topics) on a fresh connection and
    returns the controller id of the answer."""
    import struct

    host, port = addr.split(":")
    client = b"kaas-test"
    body = struct.pack(">hhih", 3, 1, 7, len(client)) + client + struct.pack(">i", 0)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed before the Metadata answer"
            buf += chunk
    at = 8  # size, correlation id
    (n,) = struct.unpack_from(">i", buf, at)
    at += 4
    for _ in range(n):
        at += 4  # node id
        (hl,) = struct.unpack_from(">h", buf, at)
        at += 2 + hl + 4  # host, port
        (rl,) = struct.unpack_from(">h", buf, at)
        at += 2 + max(rl, 0)  # rack (nullable)
    return struct.unpack_from(">i", buf, at)[0]


def test_admin_client_connecting_at_start_up_can_create_a_topic():
    """A client may connect as soon as the broker listens. Kafka opens its
    listeners once it knows the cluster; a kaas broker that answers before
    its first assignment says there is no controller (-1), and librdkafka's
    admin client, told so, waits for a broker change that never comes (a
    CreateTopics hangs until its timeout although the controller is known
    a moment later)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    b = Broker()
    b.start(poll=0.001)
    try:
        controller = metadata_v1_controller(b.addr)
        admin = AdminClient({"bootstrap.servers": b.addr})
        topic = topic_name()
        try:
            admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=EVENTUALLY)
            created = "ok"
        except Exception as e:  # noqa: BLE001 - the assertion below reports it
            created = repr(e)
        assert controller >= 0, (
            f"the first Metadata answer says controller_id={controller}; "
            f"a confluent-kafka CreateTopics right after start-up: {created}"
        )
        assert created == "ok", created
    finally:
        b.stop()
