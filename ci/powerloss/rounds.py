"""Power-loss rounds: real `kaas` processes on the FUSE test volume
(testvol/), real clients (confluent-kafka, an idempotent acks=all producer
and a consumer group), and after every round the same checks: every
acknowledged record is read back exactly once at its acknowledged offset,
committed offsets never go back, brokers restart without repair.

  (a) one broker: kill -9 and a power cut of the volume together, restart;
  (b) three brokers, each on its own mount: kill -9 plus a power cut of the
      leader's mount, restart with the same id; SIGSTOP of a leader past
      the session timeout, then SIGCONT;
  (c) DeleteTopics while brokers still have the partitions open (the
      `.nfs` case), until nothing of the topic is left on the volume, and
      a recreate of the same name;
  (d) one broker under a full volume (ENOSPC), failing writes and fsyncs
      (EIO) and renames answering ESTALE;
  (e) one broker compacting a topic of keyed records and tombstones on
      small segments (a pass every few hundred ms): kill -9 and a power cut
      together, wherever a pass is, restart; the newest acknowledged
      record of every key stays at its offset, and once writes stop the
      passes leave each key once.

Prints rounds, records acknowledged and lost, and `.nfs` files seen; exits
1 when anything was lost or a check failed."""

import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import kaasproc  # noqa: E402
from testvol import TestVol  # noqa: E402

SESSION_TIMEOUT_S = 4


class Failure(Exception):
    pass


class Cluster:
    """Brokers 0..n-1, broker i on mount i of the volume."""

    def __init__(self, vol, work, n, extra=()):
        self.vol, self.work, self.n, self.extra = vol, work, n, list(extra)
        self.ports = [kaasproc.free_port() for _ in range(n)]
        self.procs = [None] * n
        self.starts = 0

    def data_dir(self, i):
        return os.path.join(self.vol.points[i], "data")

    def start(self, i):
        args = [
            "--data-dir", self.data_dir(i), "--broker-id", str(i),
            "--listen", f"127.0.0.1:{self.ports[i]}",
            "--heartbeat-interval-secs", "1",
            "--session-timeout-secs", str(SESSION_TIMEOUT_S),
            *self.extra,
        ]
        log = os.path.join(self.work, f"kaas-{i}.log")
        self.procs[i] = kaasproc.start(args, self.ports[i], log, timeout=60)
        self.starts += 1

    def start_all(self):
        for i in range(self.n):
            self.start(i)

    def kill(self, i):
        p = self.procs[i]
        p.kill()  # SIGKILL ends a stopped process too
        p.wait(timeout=30)
        self.procs[i] = None

    def stop_all(self):
        for i, p in enumerate(self.procs):
            if p is not None:
                p.kill()
                p.wait(timeout=30)
                self.procs[i] = None

    def cut_and_kill(self, i, seed, keep=0.0, mount=None):
        """Broker i and the power go together: stopped first, then the cut
        (the mount stays dark: what the process still had queued or in
        flight fails with EIO), kill -9, and power back on."""
        self.procs[i].send_signal(signal.SIGSTOP)
        cut = self.vol.cut(seed=seed, keep=keep, mount=mount)
        self.kill(i)
        self.vol.command("on" if mount is None else f"on mount={mount}")
        if mount is None and int(cut["undo_conflicts"]):
            raise Failure(f"a power cut of the whole volume could not take everything back: {cut}")
        return cut

    def bootstrap(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def admin(self):
        # Kept: a future of a collected AdminClient fails with _DESTROY.
        if getattr(self, "_admin", None) is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap(), "log_level": 0})
        return self._admin

    def leaders(self, topic, timeout=60):
        """Partition -> leader id, once every partition has a live one."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                md = self.admin().list_topics(topic, timeout=5)
                t = md.topics.get(topic)
                if t is not None and t.error is None and t.partitions:
                    found = {p: pm.leader for p, pm in t.partitions.items()}
                    if all(0 <= l < self.n and self.procs[l] is not None for l in found.values()):
                        return found
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise Failure(f"{topic}: no leader for every partition in {timeout} s")
            time.sleep(0.3)

    def create_topic(self, topic, partitions, config=None):
        fut = self.admin().create_topics([NewTopic(topic, partitions, 1, config=config or {})],
                                         operation_timeout=30)
        fut[topic].result(timeout=60)
        self.leaders(topic)


class Producing:
    """An idempotent acks=all producer writing unique values in the
    background; `acked` maps each acknowledged value to its offset."""

    def __init__(self, bootstrap, topic, partitions, tag, acked=None):
        self.topic, self.partitions, self.tag = topic, partitions, tag
        self.acked = {} if acked is None else acked
        self.errors = collections.Counter()
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "error_cb": lambda err: self.errors.update([f"error_cb {err.name()}"]),
            "log_level": 0,
        })
        self.stop = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def delivered(self, err, msg):
        if err is None:
            self.acked[msg.value().decode()] = (msg.partition(), msg.offset())
        else:
            self.errors.update([err.name()])

    def run(self):
        while not self.stop.is_set():
            try:
                self.produce_next()
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0)
            time.sleep(0.002)

    def produce_next(self):
        value = f"{self.tag}-{self.sent}"
        self.producer.produce(self.topic, value.encode(), partition=self.sent % self.partitions,
                              on_delivery=self.delivered)

    def finish(self, timeout=120):
        self.stop.set()
        self.thread.join()
        left = self.producer.flush(timeout)
        self.producer = None  # destroyed now, not at the next collection
        if left:
            raise Failure(f"{left} records still unanswered after {timeout} s")
        return self.acked


def read_to_ends(c, topic, partitions, timeout):
    """Every record of `topic` from offset 0 up to the high watermarks seen
    first, through consumer `c` (with enable.partition.eof): (partition,
    offset) -> message, and those watermarks. An end of partition at or
    past its watermark ends a partition too: compaction may have emptied
    the log's tail."""
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)}
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    log, done = {}, {p for p, e in ends.items() if e == 0}
    deadline = time.monotonic() + timeout
    while len(done) < partitions:
        if time.monotonic() > deadline:
            raise Failure(f"{topic}: could not read up to {ends} in {timeout} s")
        for m in c.consume(500, timeout=1):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= ends[m.partition()]:
                    done.add(m.partition())
                continue
            log[(m.partition(), m.offset())] = m
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
    return log, ends


class Checker:
    """What every round checks, and the running totals."""

    def __init__(self, cluster, group="powerloss"):
        self.cluster, self.group = cluster, group
        self.committed = {}
        self.acked_total = 0
        self.unique = set()
        self.lost = []
        self.duplicated = []

    def read_all(self, topic, partitions, timeout=60):
        c = Consumer({
            "bootstrap.servers": self.cluster.bootstrap(),
            "group.id": self.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "log_level": 0,
        })
        try:
            msgs, ends = read_to_ends(c, topic, partitions, timeout)
            return {at: m.value().decode() for at, m in msgs.items()}, ends, c
        except BaseException:
            c.close()
            raise

    def check(self, topic, partitions, acked, what):
        log, ends, consumer = self.read_all(topic, partitions)
        try:
            lost = [(v, at) for v, at in acked.items() if log.get(at) != v]
            counts = collections.Counter(log.values())
            dup = [v for v in acked if counts[v] > 1]
            self.acked_total += len(acked)
            self.unique.update(acked)
            self.lost += lost
            self.duplicated += dup
            # Committed offsets never go back, then commit the ends.
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            now = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=30)}
            back = {p: (self.committed[(topic, p)], now.get(p)) for p in range(partitions)
                    if (topic, p) in self.committed and now.get(p, -1) < self.committed[(topic, p)]}
            consumer.commit(offsets=[TopicPartition(topic, p, ends[p]) for p in range(partitions)],
                            asynchronous=False)
            for p in range(partitions):
                self.committed[(topic, p)] = ends[p]
        finally:
            consumer.close()
        print(f"  {what}: {len(acked)} acknowledged, {len(lost)} lost, {len(dup)} duplicated, "
              f"log ends {ends}", flush=True)
        if lost:
            raise Failure(f"{what}: acknowledged records lost, e.g. {lost[:5]} "
                          f"(at those offsets: {[log.get(at) for _v, at in lost[:5]]})")
        if dup:
            raise Failure(f"{what}: acknowledged records read more than once, e.g. {dup[:5]}")
        if back:
            raise Failure(f"{what}: committed offsets went back (partition: was, now): {back}")

    def forget(self, topic):
        self.committed = {k: v for k, v in self.committed.items() if k[0] != topic}


def fsck(vol, name, out):
    """`kaas fsck` of the volume the rounds left (brokers stopped): no
    damage. Warnings (a segment a cut left unnamed) and notices (temps,
    `.nfs` files) are what power cuts leave; they are counted, not fatal."""
    data = os.path.join(vol.points[0], "data")
    r = subprocess.run([kaasproc.KAAS, "--data-dir", data, "fsck", "--json"], capture_output=True, text=True,
                       timeout=300)
    if r.returncode not in (0, 1):
        raise Failure(f"kaas fsck of ({name}) could not read the volume: {r.stderr.strip()}")
    report = json.loads(r.stdout)
    by = {}
    for f in report["findings"]:
        by[f["severity"]] = by.get(f["severity"], 0) + 1
    out.append(f"kaas fsck after ({name}): {report['topics']} topics, {report['partitions']} partitions, "
               f"{report['files']} files: {by.get('error', 0)} errors, {by.get('warning', 0)} warnings, "
               f"{by.get('notice', 0)} notices")
    kinds = {}
    for f in report["findings"]:
        if f["severity"] != "error":
            key = (f["severity"], f["what"].split(":")[0][:70])
            kinds[key] = kinds.get(key, 0) + 1
    for (severity, what), n in sorted(kinds.items()):
        out.append(f"  {n} x {severity}: {what}")
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    if errors:
        raise Failure(f"kaas fsck after ({name}) found damage: "
                      + "; ".join(f"{f['path']}: {f['what']}" for f in errors[:5]))


def round_a(vol, work, rounds, rng, checker_out):
    cluster = Cluster(vol, work, 1)
    checker = Checker(cluster)
    checker_out.append(checker)
    topic, parts = "powerloss-a", 3
    acked = {}
    try:
        cluster.start(0)
        cluster.create_topic(topic, parts)
        for r in range(rounds):
            prod = Producing(cluster.bootstrap(), topic, parts, f"a{r}")
            time.sleep(rng.uniform(0.3, 1.5))
            keep = rng.choice([0.0, 0.0, 0.5])
            cut = cluster.cut_and_kill(0, rng.randrange(1 << 32), keep)
            cluster.start(0)
            time.sleep(0.5)
            acked.update(prod.finish())
            checker.check(topic, parts, acked, f"(a) round {r + 1}/{rounds} (cut keep={keep}: "
                          f"{cut['pages_lost']} pages and {cut['changes_undone']} changes lost)")
    finally:
        cluster.stop_all()
    return rounds


def round_b(vol, work, iterations, rng, checker_out):
    cluster = Cluster(vol, work, 3)
    checker = Checker(cluster)
    checker_out.append(checker)
    topic, parts = "powerloss-b", 3
    acked = {}
    done = 0
    try:
        cluster.start_all()
        cluster.create_topic(topic, parts)
        for k in range(iterations):
            prod = Producing(cluster.bootstrap(), topic, parts, f"b{k}")
            time.sleep(rng.uniform(0.5, 1.5))
            leader = cluster.leaders(topic)[0]
            cut = cluster.cut_and_kill(leader, rng.randrange(1 << 32), mount=leader)
            time.sleep(rng.uniform(0, SESSION_TIMEOUT_S + 1))
            cluster.start(leader)
            time.sleep(1)
            acked.update(prod.finish())
            done += 1
            checker.check(topic, parts, acked,
                          f"(b) kill -9 + power cut of broker {leader}'s mount "
                          f"({cut['pages_lost']} pages, {cut['changes_undone']} changes lost), restart")

            prod = Producing(cluster.bootstrap(), topic, parts, f"b{k}z")
            time.sleep(0.5)
            leader = cluster.leaders(topic)[0]
            cluster.procs[leader].send_signal(signal.SIGSTOP)
            time.sleep(SESSION_TIMEOUT_S + 3)
            cluster.procs[leader].send_signal(signal.SIGCONT)
            time.sleep(1.5)
            acked.update(prod.finish())
            done += 1
            checker.check(topic, parts, acked, f"(b) SIGSTOP of leader {leader} past the session "
                          f"timeout, SIGCONT")
    finally:
        cluster.stop_all()
    return done


def round_d(vol, work, rng, checker_out):
    """A full volume and failing writes and fsyncs under one broker: the
    producer gets errors or waits, nothing acknowledged is lost, the broker
    stays up (or, if it stops, starts again without repair)."""
    cluster = Cluster(vol, work, 1)
    checker = Checker(cluster, group="powerloss-d")
    checker_out.append(checker)
    topic, parts = "powerloss-d", 3
    acked = {}
    done = 0
    faults = [
        ("full on", "the volume full (ENOSPC on every write, create and mkdir)"),
        ("fail op=fsync errno=EIO count=3", "three fsyncs failing with EIO"),
        ("fail op=write errno=EIO count=5", "five writes failing with EIO"),
        ("fail op=rename errno=ESTALE count=2", "two renames answering ESTALE"),
    ]
    try:
        cluster.start(0)
        cluster.create_topic(topic, parts)
        for k, (command, what) in enumerate(faults):
            prod = Producing(cluster.bootstrap(), topic, parts, f"d{k}")
            time.sleep(0.5)
            injected = vol.stats()["faults_injected"]
            vol.command(command)
            # On until an operation met it (however slow the machine), then
            # a moment more, so that the broker's retries meet it too.
            met_by = time.monotonic() + 120
            while vol.stats()["faults_injected"] <= injected:
                if time.monotonic() > met_by:
                    vol.command("clear")
                    raise Failure(f"(d) {what}: no operation met the fault in 120 s")
                time.sleep(0.1)
            time.sleep(1.0)
            vol.command("clear")
            time.sleep(1.0)
            restarted = ""
            if cluster.procs[0].poll() is not None:
                restarted = f"; the broker exited with {cluster.procs[0].returncode} and was started again"
                cluster.procs[0] = None
                cluster.start(0)
            acked.update(prod.finish())
            done += 1
            errors = ", ".join(f"{n} {e}" for e, n in prod.errors.most_common(3)) or "none"
            checker.check(topic, parts, acked, f"(d) {what} (producer errors: {errors}{restarted})")
    finally:
        cluster.stop_all()
    return done


class KeyedProducing(Producing):
    """Producing's producer overwriting a few keys per partition instead,
    one record in eight a tombstone; `acked` lists each acknowledged record
    as (partition, offset, key, value)."""

    def __init__(self, bootstrap, topic, partitions, keys, tag):
        self.keys, self.sent_values = keys, set()
        super().__init__(bootstrap, topic, partitions, tag, acked=[])

    def produce_next(self):
        n = self.sent
        partition = n % self.partitions
        key = f"k{(n // self.partitions) * 7 % self.keys}"
        value = None if n % 8 == 7 else f"{self.tag}-{n}-{key}"

        def delivered(err, msg):
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), key, value))
            else:
                self.errors.update([err.name()])
        self.producer.produce(self.topic, key=key.encode(),
                              value=None if value is None else value.encode(),
                              partition=partition, on_delivery=delivered)
        self.sent_values.add(value)


def read_keyed(cluster, topic, partitions, timeout=60):
    """Every record of a compacted topic from its log start to its end:
    (partition, offset) -> (key, value)."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": f"pl-e-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 0})
    try:
        msgs, _ends = read_to_ends(c, topic, partitions, timeout)
        return {at: (m.key().decode(), None if m.value() is None else m.value().decode())
                for at, m in msgs.items()}
    finally:
        c.close()


def check_compacted(log, acked, sent_values, what):
    """The newest acknowledged record of each key is at its offset, or a
    newer record of the key is in the log (a write whose answer was an
    error may have landed); every record read was sent."""
    newest = {}
    for p, o, k, v in acked:
        if (p, k) not in newest or newest[(p, k)][0] < o:
            newest[(p, k)] = (o, v)
    lost = [(p, k, o, v) for (p, k), (o, v) in newest.items()
            if log.get((p, o)) != (k, v)
            and not any(lp == p and lk == k and lo > o for (lp, lo), (lk, _) in log.items())]
    invented = [(at, kv) for at, kv in log.items() if kv[1] not in sent_values]
    if lost:
        raise Failure(f"{what}: acknowledged records lost (the newest of their keys), e.g. {lost[:5]} "
                      f"(at those offsets: {[log.get((p, o)) for p, _k, o, _v in lost[:5]]})")
    if invented:
        raise Failure(f"{what}: records nobody sent, e.g. {invented[:5]}")
    return len(newest)


def round_e(vol, work, iterations, rng, checker_out):
    cluster = Cluster(vol, work, 1, ["--log-cleaner-backoff-ms", "100"])
    checker = Checker(cluster, group="powerloss-e")
    checker_out.append(checker)
    topic, parts, keys = "powerloss-e", 2, 24
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "300",
              "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3600000"}
    acked, sent_values = [], set()
    log_path = os.path.join(work, "kaas-0.log")

    def passes():
        with open(log_path, errors="replace") as f:
            return sum(1 for line in f if "compacted topic_id" in line)

    try:
        cluster.start(0)
        cluster.create_topic(topic, parts, config)
        for k in range(iterations):
            prod = KeyedProducing(cluster.bootstrap(), topic, parts, keys, f"e{k}")
            time.sleep(rng.uniform(1.0, 3.0))
            before = passes()
            keep = rng.choice([0.0, 0.0, 0.5])
            cut = cluster.cut_and_kill(0, rng.randrange(1 << 32), keep)
            # What the cut left, before a restart re-drives anything: a
            # cleaned segment the manifest names is whole (a record it held
            # may be superseded, so no reader could tell it went missing).
            fsck(vol, f"e, cut {k + 1}", [])
            cluster.start(0)
            time.sleep(0.5)
            acked += prod.finish()
            sent_values |= prod.sent_values
            n = check_compacted(read_keyed(cluster, topic, parts), acked, sent_values, f"(e) round {k + 1}")
            checker.acked_total += len(acked)
            checker.unique.update((p, o) for p, o, _k, _v in acked)
            print(f"  (e) round {k + 1}/{iterations}: {len(acked)} keyed records acknowledged, the newest of "
                  f"{n} keys all there; {before} compaction passes so far, cut (keep={keep}: {cut['pages_lost']} "
                  f"pages and {cut['changes_undone']} changes lost)", flush=True)
        # Writes stopped: the passes go on after the restart and leave each
        # key once (the tombstones stay delete.retention.ms, an hour).
        deadline = time.monotonic() + 30
        while True:
            log = read_keyed(cluster, topic, parts)
            seen = collections.Counter((p, kv[0]) for (p, _o), kv in log.items())
            if max(seen.values(), default=1) == 1:
                break
            if time.monotonic() > deadline:
                raise Failure(f"(e) keys still more than once 30 s after the writes stopped: "
                              f"{[k for k, n in seen.items() if n > 1][:5]}")
            time.sleep(0.5)
        check_compacted(log, acked, sent_values, "(e) settled")
        print(f"  (e) settled: {len(log)} records, each key once, {passes()} compaction passes in all",
              flush=True)
    finally:
        cluster.stop_all()
    return iterations


def topic_dirs(vol):
    topics = os.path.join(vol.backing, "data", "topics")
    return {e for e in os.listdir(topics) if e != "names"} if os.path.isdir(topics) else set()


def round_c(vol, work, iterations, rng, checker_out, nfs_seen):
    cluster = Cluster(vol, work, 3)
    checker = Checker(cluster, group="powerloss-c")
    checker_out.append(checker)
    topic, parts = "powerloss-c", 3
    done = 0
    try:
        cluster.start_all()
        for k in range(iterations):
            before = topic_dirs(vol)
            cluster.create_topic(topic, parts)
            ids = topic_dirs(vol) - before
            if not ids:
                raise Failure(f"(c) creating {topic} made no directory under topics/")
            prod = Producing(cluster.bootstrap(), topic, parts, f"c{k}")
            time.sleep(1.0)
            acked = prod.finish()
            checker.forget(topic)
            checker.check(topic, parts, acked, f"(c) generation {k + 1} of {topic} written")
            # A consumer keeps fetching while the topic goes: the leaders
            # hold their segments open.
            c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": f"pl-c-reader-{k}",
                          "auto.offset.reset": "earliest", "log_level": 0})
            c.subscribe([topic])
            c.consume(200, timeout=3)
            watching = threading.Event()

            def watch():
                while not watching.is_set():
                    nfs_seen.update(os.path.relpath(p, vol.backing) for p in vol.nfs_files())
                    time.sleep(0.02)

            w = threading.Thread(target=watch, daemon=True)
            w.start()
            try:
                fut = cluster.admin().delete_topics([topic], operation_timeout=30)
                fut[topic].result(timeout=60)
                c.consume(100, timeout=1)
            finally:
                c.close()
            deadline = time.monotonic() + 60
            try:
                while True:
                    left = [d for d in topic_dirs(vol) if any(i in d for i in ids)]
                    nfs = [p for p in vol.nfs_files() if "/topics/" in p]
                    if not left and not nfs:
                        break
                    if time.monotonic() > deadline:
                        raise Failure(f"(c) deleted {topic} still on the volume after 60 s: {left} {nfs}")
                    time.sleep(0.2)
            finally:
                watching.set()
                w.join()
            done += 1
            print(f"  (c) generation {k + 1} of {topic} deleted: nothing of it left on the volume "
                  f"(.nfs names seen so far: {len(nfs_seen)})", flush=True)
        # The name once more: only the new generation's records.
        cluster.create_topic(topic, parts)
        prod = Producing(cluster.bootstrap(), topic, parts, "c-last")
        time.sleep(0.5)
        acked = prod.finish()
        checker.forget(topic)
        log, _ends, consumer = checker.read_all(topic, parts)
        consumer.close()
        old = [v for v in log.values() if not v.startswith("c-last-")]
        if old:
            raise Failure(f"(c) the recreated {topic} shows records of a deleted one: {old[:5]}")
        checker.check(topic, parts, acked, f"(c) {topic} recreated")
        done += 1
    finally:
        cluster.stop_all()
    return done


def demo_lookupcache(work, binary):
    """What `lookupcache=positive` prevents, shown on two mounts with real
    kernel caches: with negative lookups cached (`lookupcache=all`), a host
    that looked for the next epoch's claim keeps believing it absent after
    another host created it; answered afresh, it sees the claim at once."""
    seen = {}
    for negative_ms, label in ((30000, "lookupcache=all"), (0, "lookupcache=positive")):
        w = os.path.join(work, label)
        os.makedirs(w)
        vol = TestVol(w, 2, binary, ["--negative-ttl-ms", str(negative_ms)])
        try:
            claim = "epoch-0000000002"
            host_a, host_b = (os.path.join(p, "data") for p in vol.points)
            os.path.exists(os.path.join(host_b, claim))  # the zombie looks once
            fd = os.open(os.path.join(host_a, claim), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.fsync(fd)
            os.close(fd)
            seen[label] = os.path.exists(os.path.join(host_b, claim))
        finally:
            vol.stop()
    print(f"  mount options: another host's new claim seen at once with lookupcache=positive: "
          f"{seen['lookupcache=positive']}; with lookupcache=all: {seen['lookupcache=all']}", flush=True)
    if not seen["lookupcache=positive"] or seen["lookupcache=all"]:
        raise Failure(f"the negative lookup cache did not behave as NFS's: {seen}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--testvol", default="target/release/testvol")
    ap.add_argument("--rounds-a", type=int, default=20)
    ap.add_argument("--iterations-b", type=int, default=2)
    ap.add_argument("--iterations-c", type=int, default=2)
    ap.add_argument("--iterations-e", type=int, default=6)
    ap.add_argument("--only", choices=["a", "b", "c", "d", "e", "mount-options"])
    ap.add_argument("--seed", type=int, default=int(os.environ.get("POWERLOSS_SEED", "1")))
    ap.add_argument("--commit-ms", default="2.5")
    ap.add_argument("--metadata-ms", default="1")
    ap.add_argument("--entry-ttl-ms", default="1000",
                    help="how long each mount's kernel trusts a name it looked up")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    checkers, nfs_seen, rounds, fsck_out = [], set(), 0, []
    started = time.monotonic()
    failure = None
    work_root = tempfile.mkdtemp(prefix="powerloss-", dir="target")
    print(f"power-loss rounds, seed {args.seed}, commit {args.commit_ms} ms, metadata "
          f"{args.metadata_ms} ms, work in {work_root}", flush=True)
    vol = None
    stats = {}
    try:
        if args.only in (None, "mount-options"):
            demo_lookupcache(os.path.join(work_root, "mount-options"), args.testvol)
        for name in ["a", "b", "c", "d", "e"]:
            if args.only and name != args.only:
                continue
            work = os.path.join(work_root, name)
            os.makedirs(work)
            vol = TestVol(work, 1 if name in ("a", "d", "e") else 3, args.testvol,
                          ["--commit-ms", args.commit_ms, "--metadata-ms", args.metadata_ms,
                           "--entry-ttl-ms", args.entry_ttl_ms])
            try:
                if name == "a":
                    rounds += round_a(vol, work, args.rounds_a, rng, checkers)
                elif name == "b":
                    rounds += round_b(vol, work, args.iterations_b, rng, checkers)
                elif name == "c":
                    rounds += round_c(vol, work, args.iterations_c, rng, checkers, nfs_seen)
                elif name == "d":
                    rounds += round_d(vol, work, rng, checkers)
                else:
                    rounds += round_e(vol, work, args.iterations_e, rng, checkers)
                fsck(vol, name, fsck_out)
                for k, v in vol.stats().items():
                    stats[k] = stats.get(k, 0) + v
            finally:
                vol.stop()
    except Exception as e:  # noqa: BLE001 - every failure gets the summary below
        failure = f"{type(e).__name__}: {e}"
    acked = sum(len(c.unique) for c in checkers)
    checked = sum(c.acked_total for c in checkers)
    lost = sum(len(c.lost) for c in checkers)
    dup = sum(len(c.duplicated) for c in checkers)
    print(f"rounds: {rounds}; records acknowledged: {acked} (checked {checked} times in all); "
          f"lost: {lost}; duplicated: {dup}; .nfs files seen: {len(nfs_seen)}; "
          f"in {time.monotonic() - started:.0f} s", flush=True)
    if stats:
        print("volume: " + ", ".join(f"{k}={int(v)}" for k, v in sorted(stats.items())), flush=True)
    for line in fsck_out:
        print(line, flush=True)
    if failure or lost or dup:
        print(f"FAILED: {failure}; logs kept in {work_root}", file=sys.stderr, flush=True)
        sys.exit(1)
    if os.environ.get("POWERLOSS_KEEP"):
        print(f"logs kept in {work_root} (POWERLOSS_KEEP)")
    else:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main()
