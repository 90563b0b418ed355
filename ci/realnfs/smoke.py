"""The real-NFS cluster's first round: bring it up, check each client
mounted the export as deploy/README.md says and each broker accepted the
mount, produce idempotently with acks=all to a topic whose partitions the
brokers share, read every acknowledged record back exactly once at its
offset, check that the server delegated no file to any broker host,
kill -9 the broker leading the most partitions and check the
records it acknowledged are read back through the others, then `kaas
fsck` of the export. Prints what it measured. Run by ci/realnfs/run inside
its network namespace."""

import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(__file__))
from cluster import Cluster, check_setup  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOPIC = "smoke"
PARTITIONS = 6
EVENTUALLY = 180


def produce(bootstrap, n, tag):
    """Sends n records (values `tag-i`); {value: (partition, offset)} of
    those acknowledged, and the errors of the others."""
    acked, errors = {}, []

    def report(err, m):
        if err:
            errors.append(str(err))
        else:
            acked[m.value().decode()] = (m.partition(), m.offset())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": EVENTUALLY * 1000})
    for i in range(n):
        p.produce(TOPIC, value=f"{tag}-{i}", on_delivery=report)
        p.poll(0)
    p.flush(EVENTUALLY)
    return acked, errors


def read_all(bootstrap, expected):
    """Every record of the topic, by (partition, offset), once the
    partitions' ends reach what was acknowledged."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"smoke-{time.time()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ends = {}
    for (p, o) in expected.values():
        ends[p] = max(ends.get(p, 0), o + 1)
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen = {}
    deadline = time.monotonic() + EVENTUALLY
    while any(max((o for (q, o) in seen if q == p), default=-1) + 1 < e for p, e in ends.items()):
        if time.monotonic() > deadline:
            raise AssertionError(f"read {len(seen)} records of {len(expected)} acknowledged")
        m = c.poll(1)
        if m is None or m.error():
            continue
        key = (m.partition(), m.offset())
        assert key not in seen, f"offset {key} read twice"
        seen[key] = m.value().decode()
    c.close()
    return seen


def leaders(admin):
    md = admin.list_topics(TOPIC, timeout=30).topics[TOPIC]
    return {p: part.leader for p, part in md.partitions.items()}


def main():
    cluster = Cluster(ROOT)
    try:
        booted = cluster.up()
        print(f"realnfs: {len(cluster.hosts)} hosts up, brokers listening, in {booted:.0f} s")
        check_setup(cluster)

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(EVENTUALLY)
        began = time.monotonic()
        acked, errors = produce(cluster.bootstrap(), 2000, "a")
        took = time.monotonic() - began
        assert not errors, errors[:3]
        seen = read_all(cluster.bootstrap(), acked)
        for value, key in acked.items():
            assert seen.get(key) == value, f"{value} acknowledged at {key}, read {seen.get(key)}"
        print(f"realnfs: 2000 records acknowledged in {took:.1f} s and read back at their offsets")
        by = leaders(admin)
        busiest = max(set(by.values()), key=lambda b: sum(1 for x in by.values() if x == b))
        victim = next(c for c in cluster.clients if c.broker_id == busiest)
        cluster.kill_broker(victim)
        killed = time.monotonic()
        others = ",".join(c.kafka for c in cluster.clients if c is not victim)
        more, errors = produce(others, 1000, "b")
        assert not errors, errors[:3]
        failover = time.monotonic() - killed
        acked.update(more)
        seen = read_all(others, acked)
        for value, key in acked.items():
            assert seen.get(key) == value, f"{value} acknowledged at {key}, read {seen.get(key)}"
        lost = len(acked) - sum(1 for v, k in acked.items() if seen.get(k) == v)
        print(f"realnfs: broker {busiest} killed (kill -9, leading {sum(1 for x in by.values() if x == busiest)}"
              f" partitions); 1000 more acknowledged {failover:.1f} s later; {len(acked)} read back, "
              f"{lost} lost")
        cluster.start_broker(victim)
        cluster.wait_broker(victim)
        rc, report = cluster.fsck()
        assert rc == 0, report
        print(f"realnfs: fsck {report.strip().splitlines()[-1]}")
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
