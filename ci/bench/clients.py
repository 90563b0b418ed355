"""Produce/consume figures for kaas with confluent-kafka (librdkafka), next to
the fsync'd sequential write bound of the same data directory measured in the
same run. Prints a markdown table. Not a test: nothing here passes or fails.

Run: bash ci/bench/clients.sh
"""

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KAAS = os.environ.get("KAAS_BIN", "target/release/kaas")
MESSAGES = int(os.environ.get("KAAS_BENCH_MESSAGES", "200000"))


def raw_fsync_mbps(directory, total=256 << 20, chunk=1 << 20):
    path = os.path.join(directory, ".raw-bound")
    chunks = [bytes([i % 251]) * chunk for i in range(total // chunk)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for c in chunks:
        os.write(fd, c)
        os.fdatasync(fd)
    secs = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    return total / (1 << 20) / secs


def start_broker(data):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = f"127.0.0.1:{s.getsockname()[1]}"
    s.close()
    log = open(os.path.join(data, "kaas.log"), "a")
    proc = subprocess.Popen([KAAS, "--data-dir", data, "--listen", addr], stdout=log, stderr=log)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", int(addr.split(":")[1])), timeout=0.2).close()
            return proc, addr
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("kaas did not start")


def ready(admin, topic, partitions):
    for _ in range(200):
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md and md.error is None and len(md.partitions) == partitions and all(
            p.leader >= 0 for p in md.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} has no leaders")


def produce(addr, topic, size, partitions):
    latencies = []
    p = Producer({"bootstrap.servers": addr, "acks": "all", "linger.ms": 5, "enable.idempotence": False,
                  "queue.buffering.max.messages": 1000000, "batch.size": 1 << 20})
    payload = b"x" * size

    def delivered(err, _msg, sent=None):
        if err is None:
            latencies.append(time.perf_counter() - sent)

    start = time.perf_counter()
    for i in range(MESSAGES):
        sent = time.perf_counter()
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions,
                          on_delivery=lambda e, m, s=sent: delivered(e, m, s))
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    secs = time.perf_counter() - start
    latencies.sort()
    pct = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    return MESSAGES / secs, MESSAGES * size / (1 << 20) / secs, pct(0.5), pct(0.99), len(latencies)


def consume(addr, topic, partitions, size):
    c = Consumer({"bootstrap.servers": addr, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    while got < MESSAGES:
        for m in c.consume(10000, timeout=5):
            if m.error() is None:
                got += 1
    secs = time.perf_counter() - start
    c.close()
    return got / secs, got * size / (1 << 20) / secs


def main():
    data = tempfile.mkdtemp(prefix="kaas-bench-", dir="target")
    bound = max(raw_fsync_mbps(data), raw_fsync_mbps(data))
    proc, addr = start_broker(data)
    admin = AdminClient({"bootstrap.servers": addr})
    rows = []
    try:
        for partitions in (1, 8):
            for size in (100, 1024):
                topic = f"bench-{partitions}-{size}"
                admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)
                ready(admin, topic, partitions)
                print(f"producing {MESSAGES} x {size} B to {partitions} partition(s) ...", file=sys.stderr)
                mps, mbps, p50, p99, acked = produce(addr, topic, size, partitions)
                cmps, cmbps = consume(addr, topic, partitions, size)
                rows.append((partitions, size, mps, mbps, p50, p99, acked, cmps, cmbps))
    finally:
        proc.terminate()
        proc.wait(30)
    print(f"fsync'd sequential write bound of {data}: {bound:.0f} MB/s (best of two, same run)")
    print()
    print("| partitions | message | produce msgs/s | produce MB/s | / bound | p50 ms | p99 ms | consume msgs/s | consume MB/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for partitions, size, mps, mbps, p50, p99, acked, cmps, cmbps in rows:
        assert acked == MESSAGES, f"{acked} of {MESSAGES} acknowledged"
        print(f"| {partitions} | {size} B | {mps:,.0f} | {mbps:.1f} | {mbps / bound:.2f} | {p50:.1f} | {p99:.1f} | {cmps:,.0f} | {cmbps:.1f} |")


if __name__ == "__main__":
    main()
