"""Topics at scale with a real admin client (confluent-kafka): three kaas
brokers on one data directory; 1,000 topics of 10 partitions created in
CreateTopics requests of 100, several requests at once, while other topics
are deleted and others grown. Every create, delete and grow must succeed
the first time: none may fail because of another (issue 26). Prints the
figures: time to create, time until every partition has a leader,
Metadata latency at 10,000 partitions, broker RSS.

Usage: python topics_at_scale.py KAAS_BINARY WORK_DIR [--topics N]
"""

import argparse
import concurrent.futures as cf
import os
import statistics
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import kaasproc  # noqa: E402

BATCH = 100
PARTITIONS = 10
IN_FLIGHT = 3


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Cluster:
    def __init__(self, kaas, work, n=3):
        self.data = os.path.join(work, "data")
        os.makedirs(self.data, exist_ok=True)
        self.ports = [kaasproc.free_port() for _ in range(n)]
        self.procs = []
        kaasproc.KAAS = kaas
        for i, port in enumerate(self.ports):
            self.procs.append(kaasproc.start(
                ["--data-dir", self.data, "--broker-id", str(i),
                 "--listen", f"127.0.0.1:{port}", "--heartbeat-interval-secs", "1",
                 "--session-timeout-secs", "6"],
                port, os.path.join(work, f"kaas-{i}.log"),
                env={**os.environ, "KAAS_LOG": "warn"}))
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def wait(what, check, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise SystemExit(f"timed out after {timeout} s waiting for {what}")


def results(futures):
    """Per topic: None on success, else the error."""
    out = {}
    for name, fut in futures.items():
        try:
            fut.result()
            out[name] = None
        except Exception as e:  # KafkaException, carrying the broker's error
            out[name] = e
    return out


def report(failures, shown):
    """Prints the failures after the first `shown` (at most 20 in all)."""
    for f in failures[shown:20]:
        print(f"FAIL {f}", flush=True)
    return len(failures)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kaas")
    ap.add_argument("work")
    ap.add_argument("--topics", type=int, default=1000)
    args = ap.parse_args()

    cluster = Cluster(args.kaas, args.work)
    failures = []
    passed = 0
    shown = 0
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap,
                             "socket.timeout.ms": 120000})
        wait("three brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, 60)

        # Topics to delete and to grow while the big creates run.
        doomed = [f"doomed-{i:03}" for i in range(200)]
        growing = [f"growing-{i:02}" for i in range(20)]
        pre = results(admin.create_topics(
            [NewTopic(t, 2) for t in doomed + growing], request_timeout=120))
        failures += [f"pre-create {t}: {e}" for t, e in pre.items() if e]

        names = [f"scale-{i:04}" for i in range(args.topics)]
        batches = [names[i:i + BATCH] for i in range(0, len(names), BATCH)]

        def create(batch):
            fs = admin.create_topics([NewTopic(t, PARTITIONS) for t in batch],
                                     request_timeout=300)
            return results(fs)

        def delete_doomed():
            out = {}
            for i in range(0, len(doomed), 20):
                out.update(results(admin.delete_topics(doomed[i:i + 20], request_timeout=120)))
            return out

        def grow():
            out = {}
            for t in growing:
                out.update(results(admin.create_partitions(
                    [NewPartitions(t, 4)], request_timeout=120)))
            return out

        cpu_before = [cpu_seconds(p.pid) for p in cluster.procs]
        client_before = sum(os.times()[:2])
        began = time.monotonic()
        with cf.ThreadPoolExecutor(IN_FLIGHT + 2) as pool:
            side = [pool.submit(delete_doomed), pool.submit(grow)]
            created = {}
            for r in pool.map(create, batches):
                created.update(r)
            create_s = time.monotonic() - began
            deleted, grown = side[0].result(), side[1].result()
        failures += [f"create {t}: {e}" for t, e in created.items() if e]
        failures += [f"delete {t}: {e}" for t, e in deleted.items() if e]
        failures += [f"grow {t}: {e}" for t, e in grown.items() if e]
        if len(created) != len(names):
            failures.append(f"{len(names) - len(created)} creates got no answer")
        answers = [created, deleted, grown]
        passed = sum(1 for r in answers for e in r.values() if e is None)

        shown = report(failures, 0)
        made = [t for t in names if created.get(t, "no answer") is None]
        total = len(made) * PARTITIONS

        def all_led():
            md = admin.list_topics(timeout=60)
            led = sum(1 for t in made if t in md.topics
                      for p in md.topics[t].partitions.values() if p.leader >= 0)
            return led == total
        wait(f"leaders for all {total} partitions", all_led, 600)
        led_s = time.monotonic() - began
        cpu = sum(cpu_seconds(p.pid) - c for p, c in zip(cluster.procs, cpu_before))
        client_cpu = sum(os.times()[:2]) - client_before
        cores = os.cpu_count() or 1
        busy = cpu / (led_s * cores)
        bottleneck = ("broker CPU" if busy > 0.5 else
                      "the volume (brokers mostly waiting on fsync and metadata calls)")

        md = admin.list_topics(timeout=60)
        left = [t for t in doomed if t in md.topics]
        if left:
            failures.append(f"{len(left)} deleted topics still listed, e.g. {left[:3]}")
        short = [t for t in growing if len(md.topics[t].partitions) != 4]
        if short:
            failures.append(f"grown topics without 4 partitions: {short[:3]}")
        partitions = sum(len(t.partitions) for t in md.topics.values())

        latencies = []
        for _ in range(7):
            t0 = time.monotonic()
            admin.list_topics(timeout=60)
            latencies.append((time.monotonic() - t0) * 1000)

        # Nothing of the creates is left staged on the volume.
        def no_staging():
            topics_dir = os.path.join(cluster.data, "topics")
            return not [e for e in os.listdir(topics_dir) if e.startswith(".staging-")]
        wait("no staging directories left", no_staging, 60)

        rss = [rss_mib(p.pid) for p in cluster.procs]
        print(f"scale: {args.topics} topics x {PARTITIONS} partitions in requests of {BATCH}, "
              f"{IN_FLIGHT} in flight, with 200 deletes and 20 grows alongside, 3 brokers")
        print(f"scale: created in {create_s:.1f} s ({args.topics / create_s:.0f} topics/s, "
              f"{total / create_s:.0f} partitions/s); every partition led after {led_s:.1f} s; "
              f"broker CPU {cpu:.1f} s (all three; {busy:.0%} of {cores} cores), client CPU "
              f"{client_cpu:.1f} s: the bottleneck is {bottleneck}")
        print(f"scale: Metadata for all topics ({partitions} partitions): median "
              f"{statistics.median(latencies):.0f} ms, max {max(latencies):.0f} ms (client: "
              f"confluent-kafka list_topics; the answering broker opens each topic's "
              f"files by path, so its CPU and the volume's metadata calls bound it)")
        print("scale: broker RSS " + ", ".join(f"{r:.0f} MiB" for r in rss))
    finally:
        cluster.stop()
    report(failures, shown)
    print(f"scale: {passed} passed, {len(failures)} failed")
    return 1 if failures or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
