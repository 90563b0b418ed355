"""kaas's figures on real NFS, each next to a bound measured in the same
run from the same client host (emulated hosts inflate absolute times, so
read the ratios): produce throughput of 1 KB records, acks=all, over 8
partitions, against the host's fsync'd sequential write bandwidth to the
mount; produce latency at a paced rate (p50/p99) against one commit (a 1
KiB write + fdatasync) on the mount; the time to take over 100 partitions
after a power loss. Two broker hosts, so the survivor takes the other's
half of a 200-partition topic. Says where the CPU went (the brokers'
CPU-seconds from their /proc, the client's from this process). Run by
`ci/realnfs/run figures [--buffered]`; `--buffered` starts the brokers
with --nfs-direct-io=false, to see what O_DIRECT costs."""

import argparse
import os
import re
import resource
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(__file__))
from cluster import Cluster  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RECORD = b"x" * 1000
THROUGHPUT_RECORDS = 20_000
PACED_RATE, PACED_SECONDS = 100, 20
TAKEOVER_PARTITIONS = 200
EVENTUALLY = 600

COMMIT_PROBE = """
import os, time
fd = os.open('/mnt/kaas/commit-probe', os.O_CREAT | os.O_WRONLY, 0o644)
lat = []
for i in range(200):
    t = time.monotonic()
    os.pwrite(fd, b'x' * 1024, i * 1024)
    os.fdatasync(fd)
    lat.append(time.monotonic() - t)
os.close(fd)
os.unlink('/mnt/kaas/commit-probe')
lat.sort()
print(lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000)
"""


def broker_cpu(cluster):
    """CPU-seconds each broker process used so far (utime + stime)."""
    total = {}
    for c in cluster.clients:
        if c.proc is None:
            continue
        out = c.must("cat /proc/$(pidof kaas)/stat")
        fields = out.rsplit(")", 1)[1].split()
        total[c.broker_id] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def client_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def raw_bandwidth(host):
    """MB/s of 64 MiB written sequentially and fdatasync'd to the mount."""
    out = host.must("dd if=/dev/zero of=/mnt/kaas/raw-bw bs=1M count=64 conv=fdatasync 2>&1;"
                    " rm -f /mnt/kaas/raw-bw", timeout=900)
    m = re.search(r"copied, ([0-9.]+) s", out)
    if not m:
        raise RuntimeError(f"dd said: {out}")
    return 64 * 1.048576 / float(m.group(1))


def commit_latency(host):
    p50, p99 = host.must(f"python3 -c \"{COMMIT_PROBE}\"", timeout=900).split()
    return float(p50), float(p99)


def produce(bootstrap, topic, n, rate=None):
    """Sends n records (at `rate` a second, or as fast as the client goes);
    (seconds, acknowledgement latencies in ms, errors)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": EVENTUALLY * 1000})
    lat, errors = [], []

    def report(err, _m, sent):
        if err:
            errors.append(str(err))
        else:
            lat.append((time.monotonic() - sent) * 1000)

    began = time.monotonic()
    for i in range(n):
        sent = time.monotonic()
        while True:
            try:
                p.produce(topic, RECORD, on_delivery=lambda e, m, s=sent: report(e, m, s))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        if rate:
            time.sleep(max(0.0, began + (i + 1) / rate - time.monotonic()))
    p.flush(EVENTUALLY)
    return time.monotonic() - began, lat, errors


def led(admin, topic, alive):
    md = admin.list_topics(topic, timeout=30).topics[topic]
    return sum(1 for part in md.partitions.values() if part.leader in alive)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--buffered", action="store_true")
    args = a.parse_args()
    cluster = Cluster(ROOT, clients=2)
    if args.buffered:
        cluster.broker_args = "--nfs-direct-io=false"
        print("realnfs figures: brokers open their files buffered (--nfs-direct-io=false)")
    try:
        cluster.up()
        host = cluster.clients[0]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        bw = raw_bandwidth(host)
        c50, c99 = commit_latency(host)
        print(f"realnfs figures: the mount from {host.name}: {bw:.1f} MB/s fsync'd sequential "
              f"writes (64 MiB), one commit (1 KiB + fdatasync) p50 {c50:.1f} ms, p99 {c99:.1f} ms")

        admin.create_topics([NewTopic("figures", 8, 1)])["figures"].result(EVENTUALLY)
        cpu0, client0 = broker_cpu(cluster), client_cpu()
        secs, lat, errors = produce(cluster.bootstrap(), "figures", THROUGHPUT_RECORDS)
        cpu1, client1 = broker_cpu(cluster), client_cpu()
        assert not errors, errors[:3]
        mbs = THROUGHPUT_RECORDS * len(RECORD) / 1e6 / secs
        brokers = {b: cpu1[b] - cpu0[b] for b in cpu1}
        print(f"realnfs figures: produce {THROUGHPUT_RECORDS} x 1 KB, acks=all, 8 partitions: "
              f"{mbs:.2f} MB/s = {mbs / bw:.2f}x the raw fsync'd bandwidth; in {secs:.1f} s the "
              f"brokers used {', '.join(f'{v:.1f}' for v in brokers.values())} CPU-s (each guest "
              f"has one emulated CPU), the client {client1 - client0:.1f} CPU-s")

        secs, lat, errors = produce(cluster.bootstrap(), "figures", PACED_RATE * PACED_SECONDS,
                                    rate=PACED_RATE)
        assert not errors, errors[:3]
        p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
        print(f"realnfs figures: produce latency at {PACED_RATE} records/s: p50 {p50:.1f} ms "
              f"({p50 / c50:.1f}x one commit), p99 {p99:.1f} ms ({p99 / c99:.1f}x one commit's p99)")

        admin.create_topics([NewTopic("takeover", TAKEOVER_PARTITIONS, 1)])["takeover"].result(
            EVENTUALLY)
        ids = {c.broker_id for c in cluster.clients}
        deadline = time.monotonic() + EVENTUALLY
        while led(admin, "takeover", ids) < TAKEOVER_PARTITIONS:
            if time.monotonic() > deadline:
                raise AssertionError("the new topic's partitions never all had leaders")
            time.sleep(1)
        md = admin.list_topics("takeover", timeout=30).topics["takeover"]
        victim = cluster.clients[1]
        survivor = cluster.clients[0]
        theirs = sum(1 for p in md.partitions.values() if p.leader == victim.broker_id)
        admin = AdminClient({"bootstrap.servers": survivor.kafka})
        fault = time.monotonic()
        victim.power_off()
        while led(admin, "takeover", {survivor.broker_id}) < TAKEOVER_PARTITIONS:
            if time.monotonic() - fault > EVENTUALLY:
                raise AssertionError("the survivor never led every partition")
            time.sleep(0.5)
        took = time.monotonic() - fault
        print(f"realnfs figures: power loss of {victim.name}, which led {theirs} of "
              f"{TAKEOVER_PARTITIONS} partitions: the survivor led all of them {took:.1f} s later "
              f"(session timeout 10 s; {max(0.0, took - 10) / max(theirs, 1) * 1000:.0f} ms a "
              f"partition beyond it)")
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
