"""The admin APIs operators reach for, through the standard admin clients
(kafka-python's KafkaAdminClient here), with Kafka's semantics mapped onto
kaas: one log directory per broker, the shared volume."""

import os
import uuid

from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic

# How long a wait for something that should happen soon may take: the CI
# box is small and busy; waits end as soon as the condition holds.
EVENTUALLY = 120


def test_describe_log_dirs_lists_the_volume_and_the_led_partitions(broker):
    topic = f"logdirs-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.addr, request_timeout_ms=60000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
        p = Producer({"bootstrap.servers": broker.addr, "acks": "all"})
        for i in range(200):
            p.produce(topic, value=b"v" * 1000, partition=i % 2)
        assert p.flush(EVENTUALLY) == 0

        everything = admin.describe_log_dirs()
        assert len(everything) == 1, everything
        dirs = everything[0]["log_dirs"]
        assert len(dirs) == 1, dirs
        d = dirs[0]
        assert d["error_code"] == 0
        assert os.path.realpath(d["log_dir"]) == os.path.realpath(broker.dir)
        assert 0 < d["usable_bytes"] <= d["total_bytes"], d
        sizes = {p["partition_index"]: p["partition_size"]
                 for t in d["topics"] if t["name"] == topic for p in t["partitions"]}
        assert sorted(sizes) == [0, 1], d["topics"]
        # 100 records of 1,000 bytes each, plus batch headers.
        assert all(100_000 <= s < 130_000 for s in sizes.values()), sizes

        one = admin.describe_log_dirs(topic_partitions={topic: [1]})[0]["log_dirs"][0]
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in one["topics"]] == [(topic, [1])]
        none = admin.describe_log_dirs(topic_partitions={"no-such-topic": [0]})[0]["log_dirs"][0]
        assert none["topics"] == []
    finally:
        admin.close()


def test_describe_topic_partitions_pages_through_topics_in_name_order(broker):
    prefix = f"dtp-{uuid.uuid4().hex[:8]}"
    a, b = f"{prefix}-a", f"{prefix}-b"
    admin = KafkaAdminClient(bootstrap_servers=broker.addr, request_timeout_ms=60000)
    try:
        admin.create_topics([NewTopic(b, num_partitions=2, replication_factor=1),
                             NewTopic(a, num_partitions=3, replication_factor=1)])
        seen, cursor, pages = [], None, 0
        while True:
            page = admin.describe_topic_partitions([b, a], response_partition_limit=2, cursor=cursor)
            pages += 1
            for t in page["topics"]:
                assert t["error_code"] == 0, t
                for p in t["partitions"]:
                    assert p["error_code"] == 0, p
                    assert p["leader_id"] == 0 and p["replica_nodes"] == [0] and p["isr_nodes"] == [0]
                    seen.append((t["name"], p["partition_index"]))
            cursor = page["next_cursor"]
            if cursor is None:
                break
            assert pages < 10, f"the cursor never ends: {cursor}"
        assert seen == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]
        assert pages == 3

        # No topics named: every topic, in name order.
        every = [t["name"] for t in admin.describe_topic_partitions([])["topics"]]
        assert every == sorted(every) and a in every and b in every, every
        unknown = admin.describe_topic_partitions([a, f"{prefix}-none"])["topics"]
        assert [(t["name"], t["error_code"]) for t in unknown] == [(a, 0), (f"{prefix}-none", 3)]
        outside = admin.describe_topic_partitions(
            [a], cursor={"topic_name": b, "partition_index": 0})["topics"]
        assert [(t["name"], t["error_code"]) for t in outside] == [(a, 42)]
    finally:
        admin.close()
