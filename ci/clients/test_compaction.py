"""Compacted topics against the release broker, with confluent-kafka: many
versions of many keys and tombstones go in (uncompressed, and with each of
Kafka's codecs), the leader compacts the sealed
segments, and a consumer reading from the start gets exactly the newest
value of every live key, at the offset its producer was told, and nothing
of a deleted one. A record without a key is refused, as Kafka refuses it."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import admin as ck

from kaasproc import Broker

# How long a wait for something that should happen soon may take: the CI
# box is small and busy; waits end as soon as the condition holds.
EVENTUALLY = 120
T = EVENTUALLY
KEYS = 40
VERSIONS = 25
DELETED = {f"key-{i:03}" for i in range(0, KEYS, 7)}


@pytest.fixture(scope="module")
def broker():
    b = Broker()
    b.start(extra=["--log-cleaner-backoff-ms", "300"])
    yield b
    b.stop()


def create(addr, name, config):
    a = ck.AdminClient({"bootstrap.servers": addr})
    fs = a.create_topics([ck.NewTopic(name, num_partitions=1, replication_factor=1, config=config)],
                         operation_timeout=T)
    fs[name].result(timeout=T)


def read_all(addr, topic):
    """Every record from the start to the high watermark: (offset, key, value)."""
    c = Consumer({"bootstrap.servers": addr, "group.id": f"g-{uuid.uuid4()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=T)
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.time() + T
        while time.time() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    if not out or out[-1][0] >= high - 1 or m.offset() >= high:
                        return out, high
                    continue
                raise KafkaException(m.error())
            key = m.key().decode() if m.key() is not None else None
            value = m.value().decode() if m.value() is not None else None
            out.append((m.offset(), key, value))
        raise AssertionError(f"read {len(out)} records of {high} in {T} s")
    finally:
        c.close()


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_a_compacted_topic_reads_back_the_newest_value_of_every_key(broker, compression):
    topic = f"table-{compression}-{uuid.uuid4().hex[:8]}"
    create(broker.addr, topic, {
        "cleanup.policy": "compact",
        "segment.bytes": "8192",
        "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0",
    })
    p = Producer({"bootstrap.servers": broker.addr, "linger.ms": 2, "acks": "all",
                  "compression.type": compression})
    newest = {}
    failures = []

    def report(err, m):
        if err is not None:
            failures.append(err)
            return
        newest[m.key().decode()] = (m.offset(), m.value().decode() if m.value() is not None else None)

    for v in range(VERSIONS):
        for i in range(KEYS):
            key = f"key-{i:03}"
            value = f"{key}-v{v:03}-" + "x" * 60
            p.produce(topic, key=key, value=value, on_delivery=report)
        p.poll(0)
    for key in sorted(DELETED):
        p.produce(topic, key=key, value=None, on_delivery=report)
    assert p.flush(T) == 0
    assert not failures, failures
    written = KEYS * VERSIONS + len(DELETED)
    live = {k: v for k, v in newest.items() if v[1] is not None}
    assert len(live) == KEYS - len(DELETED)

    # The leader rolls the active segment after segment.ms and compacts at
    # its next round; until then a reader may still see older versions.
    deadline = time.time() + EVENTUALLY
    while True:
        records, high = read_all(broker.addr, topic)
        keys = [k for _, k, _ in records]
        done = len(keys) == len(set(keys)) and not DELETED & set(keys)
        if done or time.time() > deadline:
            break
        time.sleep(1)
    assert high == written, "offsets never move: the log end stays"
    assert done, f"{len(records)} records, {len(set(keys))} keys after {EVENTUALLY} s"
    assert {k: (o, v) for o, k, v in records} == live


def test_a_record_without_a_key_is_refused(broker):
    topic = f"table-{uuid.uuid4().hex[:8]}"
    create(broker.addr, topic, {"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": broker.addr, "acks": "all", "retries": 0})
    errors = []
    # Apart: a batch with a keyless record is refused whole, as in Kafka.
    p.produce(topic, value=b"no key", on_delivery=lambda err, m: errors.append(err))
    assert p.flush(T) == 0
    p.produce(topic, key=b"k", value=b"keyed", on_delivery=lambda err, m: errors.append(err))
    assert p.flush(T) == 0
    assert errors[0] is not None and errors[0].name() == "INVALID_RECORD", errors
    assert errors[1] is None, errors
