"""The campaign's workloads (campaign.py): Kafka clients on the machine
that keep working through every fault, each remembering what the brokers
acknowledged so that the checks after a round can hold the brokers to
it. Each runs in a thread of its own with its own clients; `stop()` ends
it and waits for what it sent. What each check holds:

- Idempotent: every acknowledged record is read once, at its offset.
- Transactional: a read_committed reader sees every record of each
  committed transaction once, none of an aborted one, and all or none of
  one whose outcome the producer never learned.
- Group: the offsets a consumer group committed never go back.
- Churn: a created topic keeps what it acknowledged; a deleted one is
  gone from the metadata.
- Compacted: the newest acknowledged value of every key stays readable
  at its offset, and nothing is read where another record was
  acknowledged."""

import logging
import collections
import os
import random
import re
import threading
import time

from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

EVENTUALLY = 300
IDEM, IDEM_PARTITIONS = "c-idem", 6
TXN, TXN_PARTITIONS = "c-txn", 3
COMPACT = "c-compact"
GROUP = "c-group"
# librdkafka's errors only: its retries through every fault are expected.
QUIET = 3


# Where the long-lived producers log what librdkafka does with their
# sequences, leaders and retries (set by the campaign; None: not kept).
LOGS = None
# How long a stopped workload's producer may take to hear about what it
# sent, the cluster settled: longer is a stalled producer.
FLUSH = 120


def producer(bootstrap, trace=None, **extra):
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "log_level": QUIET,
            "linger.ms": 5, "socket.timeout.ms": 10_000,
            "message.timeout.ms": EVENTUALLY * 2 * 1000}
    conf.update(extra)
    if trace is None or LOGS is None:
        return Producer(conf)
    log = logging.getLogger(trace)
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(logging.FileHandler(os.path.join(LOGS, f"{trace}.librdkafka.log")))
    conf.update({"debug": "eos,msg,topic", "log_level": 7})
    return Producer(conf, logger=log)


def create_topics(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(IDEM, IDEM_PARTITIONS, 1), NewTopic(TXN, TXN_PARTITIONS, 1),
              NewTopic(COMPACT, 1, 1, config={
                  "cleanup.policy": "compact", "segment.bytes": "16384", "segment.ms": "5000",
                  "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})]
    for f in admin.create_topics(topics).values():
        f.result(EVENTUALLY)


class Worker(threading.Thread):
    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.errors = []
        # Records its producer still waited for FLUSH seconds after the
        # workload stopped.
        self.undelivered = 0

    def stop(self):
        self.halt.set()
        self.join(EVENTUALLY * 2)

    def note(self, err):
        with self.lock:
            self.errors.append(str(err))


class Reader:
    """Reads partitions forward from offset 0 and keeps every record by
    (partition, offset): one Consumer for the whole campaign, so that a
    check reads only what is new."""

    def __init__(self, bootstrap, topic, partitions, committed_only=False):
        self.topic, self.partitions = topic, partitions
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                           "log_level": QUIET, "isolation.level": "read_committed" if committed_only
                           else "read_uncommitted"})
        self.c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.seen = {}
        self.top = {}  # partition: the highest offset read
        self.reread = 0
        self.damaged = []

    def read_until(self, done, deadline_s=EVENTUALLY):
        """Polls until `done(self)` holds; False if it never did."""
        deadline = time.monotonic() + deadline_s
        while not done(self):
            if time.monotonic() > deadline:
                return False
            m = self.c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    self.damaged.append(str(m.error()))
                continue
            key = (m.partition(), m.offset())
            self.reread += key in self.seen
            self.top[key[0]] = max(self.top.get(key[0], -1), key[1])
            self.seen[key] = (m.key(), m.value().decode() if m.value() is not None else None)
        return True

    def reached(self, ends):
        """A `done` for read_until: each partition read up to its end
        (the offset below it, or past it)."""
        return lambda r: all(r.top.get(p, -1) >= end - 1 for p, end in ends.items())

    def close(self):
        self.c.close()


# librdkafka's trace of one ProduceRequest's batch (debug "msg"): which
# messages (by librdkafka's per-partition MsgId) went out under which
# producer epoch.
SENT = re.compile(r"(\S+) \[(\d+)\]: Produce MessageSet with (\d+) message\(s\) "
                  r"\([^)]*MsgId (\d+), BaseSeq -?\d+, PID\{Id:\d+,Epoch:(\d+)\}")


def epochs_sent(lines, topic):
    """{(partition, MsgId): the producer epochs it was sent under}, from
    a producer's librdkafka trace."""
    sent = {}
    for line in lines:
        m = SENT.search(line)
        if not m or m.group(1) != topic:
            continue
        p, n, first, epoch = (int(m.group(i)) for i in range(2, 6))
        for msgid in range(first, first + n):
            sent.setdefault((p, msgid), set()).add(epoch)
    return sent


def resent_after_bump(twice, partitions, sent):
    """The values of `twice` whose copies librdkafka itself wrote: a
    batch sent under one producer epoch, answered "not persisted" (the
    NOT_LEADER_OR_FOLLOWER a fenced leader gives after its write reached
    the file, as Kafka does for an acks=all produce pending when the
    leadership moves), then re-sent under a bumped epoch (KIP-360: on a
    sequence gap another partition saw in the same failover, librdkafka
    drains, bumps the epoch and re-sends everything unacknowledged). No
    broker can tell that re-send from a new record. Values are `i-N`,
    produced in turn to partition N % partitions: MsgId N // partitions + 1
    there (librdkafka counts messages per partition from 1)."""
    resent = set()
    for v in twice:
        n = int(v.split("-", 1)[1])
        if len(sent.get((n % partitions, n // partitions + 1), ())) > 1:
            resent.add(v)
    return resent


def resent_keyed(twice, sent):
    """The values of `twice` librdkafka itself wrote twice, as
    `resent_after_bump` tells them, for the compacted topic's values:
    `k<n % KEYS>=<n>`, all to partition 0, so MsgId n + 1 there."""
    return {v for v in twice if len(sent.get((0, int(v.split("=")[1]) + 1), ())) > 1}


class Idempotent(Worker):
    """Records `i-N` at RATE a second to IDEM, acks=all, idempotent."""

    RATE = 12  # two a second per partition: CI's guests are emulated

    def __init__(self, bootstrap):
        super().__init__(bootstrap)
        self.sent, self.acked = {}, {}
        self.reader = Reader(bootstrap, IDEM, IDEM_PARTITIONS)

    def run(self):
        p = producer(self.bootstrap, trace="idem-producer")
        i = 0
        while not self.halt.is_set():
            value = f"i-{i}"
            self.sent[value] = time.monotonic()

            def report(err, m, value=value):
                if err:
                    self.note(err)
                else:
                    with self.lock:
                        self.acked[value] = (time.monotonic(), m.partition(), m.offset())

            # Every partition in turn, so that each one shows when it
            # takes records again after a fault.
            p.produce(IDEM, value=value, partition=i % IDEM_PARTITIONS, on_delivery=report)
            p.poll(0)
            i += 1
            time.sleep(1 / self.RATE)
        self.undelivered = p.flush(FLUSH)

    def first_acks_after(self, t):
        """{partition: when the first record sent at or after t was
        acknowledged there}."""
        with self.lock:
            acked = list(self.acked.items())
        first = {}
        for value, (at, p, _) in acked:
            if self.sent[value] >= t and (p not in first or at < first[p]):
                first[p] = at
        return first

    def check(self):
        with self.lock:
            acked = dict(self.acked)
        want = {(p, o): v for v, (_, p, o) in acked.items() if o is not None and o >= 0}
        ends = {}
        for (p, o) in want:
            ends[p] = max(ends.get(p, 0), o + 1)
        caught_up = self.reader.read_until(self.reader.reached(ends))
        seen = self.reader.seen
        lost = [f"{v} acknowledged at {k}, read {seen.get(k, (None, None))[1]}"
                for k, v in want.items() if seen.get(k, (None, None))[1] != v]
        # Acknowledged without an offset (a duplicate sequence): by value.
        present = {v for _, v in seen.values()}
        lost += [f"{v} acknowledged without an offset, never read" for v, (_, _, o) in
                 acked.items() if (o is None or o < 0) and v not in present]
        at = {}
        for k, (_, v) in sorted(seen.items()):
            at.setdefault(v, []).append(k)
        twice = {v: ks for v, ks in at.items() if len(ks) > 1}
        resent = set()
        if twice and LOGS is not None:
            with open(os.path.join(LOGS, "idem-producer.librdkafka.log"), errors="replace") as f:
                resent = resent_after_bump(twice, IDEM_PARTITIONS, epochs_sent(f, IDEM))
        duplicated = sum(len(ks) - 1 for v, ks in twice.items() if v not in resent)
        problems = [] if caught_up else [f"{IDEM}: read only {len(seen)} records"]
        problems += lost[:10] + self.reader.damaged[:3]
        for v, ks in [(v, ks) for v, ks in twice.items() if v not in resent][:5]:
            problems.append(f"{IDEM}: {v} read at {ks}, acknowledged at "
                            f"{acked[v][1:] if v in acked else 'none'}")
        if self.reader.reread:
            problems.append(f"{IDEM}: {self.reader.reread} offsets delivered twice")
        return {"acked": len(acked), "lost": len(lost), "duplicated": duplicated,
                "resent": sum(len(twice[v]) - 1 for v in resent),
                "resent_examples": [f"{v} at {twice[v]}" for v in sorted(resent)][:3],
                "problems": problems}


class Transactional(Worker):
    """Transactions of four records over TXN's partitions, committed or
    (one in five) aborted; a read_committed Reader checks them."""

    SIZE = 4

    def __init__(self, bootstrap, seed):
        super().__init__(bootstrap)
        self.rng = random.Random(seed)
        self.outcome = {}  # transaction number: committed, aborted or unknown
        self.offsets = {}  # transaction number: [(partition, offset)]
        self.reader = Reader(bootstrap, TXN, TXN_PARTITIONS, committed_only=True)
        self.fenced = 0

    def fresh(self):
        p = producer(self.bootstrap, **{"transactional.id": "c-txn-producer",
                                        "transaction.timeout.ms": 60_000,
                                        "message.timeout.ms": 60_000})
        while not self.halt.is_set():
            try:
                p.init_transactions(120)
                return p
            except KafkaException as e:
                self.note(e)
                time.sleep(1)
        return None

    def run(self):
        p = self.fresh()
        n = 0
        while p is not None and not self.halt.is_set():
            n += 1
            offsets = []

            def report(err, m, offsets=offsets):
                if err is None:
                    offsets.append((m.partition(), m.offset()))

            commit = self.rng.random() < 0.8
            stage = "begin"
            try:
                p.begin_transaction()
                stage = "produce"
                for i in range(self.SIZE):
                    p.produce(TXN, value=f"t{n}-{i}", partition=i % TXN_PARTITIONS,
                              on_delivery=report)
                if commit:
                    stage = "commit"
                    p.commit_transaction(90)
                    self.outcome[n] = "committed"
                else:
                    stage = "abort"
                    p.abort_transaction(90)
                    self.outcome[n] = "aborted"
            except KafkaException as e:
                self.note(f"{stage}: {e}")
                err = e.args[0]
                # A failed commit may have been written: its outcome is
                # unknown. A failed produce can still be aborted.
                self.outcome[n] = "unknown"
                if stage != "commit" and err.txn_requires_abort():
                    try:
                        p.abort_transaction(90)
                        self.outcome[n] = "aborted"
                    except KafkaException as e2:
                        self.note(f"abort: {e2}")
                if err.fatal() or not err.txn_requires_abort() and stage != "abort":
                    p = self.fresh()
                    self.fenced += 1
            self.offsets[n] = offsets
            time.sleep(0.5)

    def check(self, final=False):
        outcome = dict(self.outcome)
        committed = {n for n, o in outcome.items() if o == "committed"}
        want = {f"t{n}-{i}" for n in committed for i in range(self.SIZE)}

        def done(r):
            return want <= {v for _, v in r.seen.values()}

        caught_up = self.reader.read_until(done)
        values = [v for _, v in self.reader.seen.values()]
        present = set(values)
        problems = [] if caught_up else [
            f"{TXN}: {len(want - present)} records of committed transactions never read, "
            f"e.g. {sorted(want - present)[:3]}"]
        duplicated = len(values) - len(present)
        if duplicated:
            problems.append(f"{TXN}: {duplicated} records read twice")
        for n, o in sorted(outcome.items()):
            seen = sum(f"t{n}-{i}" in present for i in range(self.SIZE))
            if o == "aborted" and seen:
                problems.append(f"{TXN}: aborted transaction {n} has {seen} records visible")
            if o == "unknown" and final and seen not in (0, self.SIZE):
                problems.append(f"{TXN}: transaction {n} (outcome unknown to the producer) "
                                f"is {seen} of {self.SIZE} visible")
        lost = len(want - present)
        return {"committed": len(committed),
                "aborted": sum(o == "aborted" for o in outcome.values()),
                "unknown": sum(o == "unknown" for o in outcome.values()),
                "lost": lost, "duplicated": duplicated, "problems": problems + self.reader.damaged[:3]}


class Group(Worker):
    """One member of GROUP reads IDEM and commits its position every two
    seconds; keeps the highest offset each commit acknowledged."""

    def __init__(self, bootstrap):
        super().__init__(bootstrap)
        self.high = {}  # partition: highest acknowledged committed offset
        self.backwards = []
        self.commits = 0

    def run(self):
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "log_level": QUIET,
                      "session.timeout.ms": 30_000})
        c.subscribe([IDEM])
        last = time.monotonic()
        while not self.halt.is_set():
            m = c.poll(0.5)
            if m is not None and m.error() and m.error().code() != KafkaError._PARTITION_EOF:
                self.note(m.error())
            if time.monotonic() - last < 2:
                continue
            last = time.monotonic()
            try:
                done = c.commit(asynchronous=False)
            except KafkaException as e:
                if e.args[0].code() != KafkaError._NO_OFFSET:
                    self.note(e)
                continue
            with self.lock:
                self.commits += 1
                for tp in done or []:
                    if tp.error is None and tp.offset >= 0:
                        if tp.offset < self.high.get(tp.partition, -1):
                            self.backwards.append(
                                f"partition {tp.partition}: commit of {tp.offset} after "
                                f"{self.high[tp.partition]} (the member resumed below it)")
                        self.high[tp.partition] = max(self.high.get(tp.partition, -1), tp.offset)
        c.close()

    def check(self):
        with self.lock:
            high = dict(self.high)
        problems = list(self.backwards)
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                      "enable.auto.commit": False, "log_level": QUIET})
        deadline = time.monotonic() + EVENTUALLY
        try:
            while True:
                try:
                    now = c.committed([TopicPartition(IDEM, p) for p in range(IDEM_PARTITIONS)],
                                      timeout=max(1, deadline - time.monotonic()))
                    break
                except KafkaException as e:
                    # librdkafka hands a coordinator's move (NOT_COORDINATOR
                    # after a coordinator gave up its slot, a load still under
                    # way) to the caller rather than asking the new one.
                    err = e.args[0]
                    moving = err.code() in (KafkaError.NOT_COORDINATOR,
                                            KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                            KafkaError.COORDINATOR_NOT_AVAILABLE)
                    if not (moving or err.retriable()) or time.monotonic() > deadline:
                        return {"commits": self.commits,
                                "problems": [f"{GROUP}: offsets unreadable: {e}"]}
                    self.note(e)
                    time.sleep(1)
        finally:
            c.close()
        for tp in now:
            if tp.partition in high and tp.offset < high[tp.partition]:
                problems.append(f"{GROUP}: partition {tp.partition} committed {tp.offset}, "
                                f"below the acknowledged {high[tp.partition]}")
        return {"commits": self.commits, "problems": problems}


class Churn(Worker):
    """Creates topic after topic (two partitions, ten records each) and
    deletes each one two creations later."""

    def __init__(self, bootstrap):
        super().__init__(bootstrap)
        self.created, self.deleted = {}, set()  # name: {value: (partition, offset)}
        # Deletions asked for: until one is confirmed the topic may be
        # anywhere between listed and gone, its partitions unled.
        self.deleting = set()

    def run(self):
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        n = 0
        while not self.halt.is_set():
            n += 1
            name = f"c-churn-{n}"
            if self.attempt(lambda: admin.create_topics([NewTopic(name, 2, 1)])[name].result(60),
                            KafkaError.TOPIC_ALREADY_EXISTS):
                acked = {}
                # Not librdkafka's producer default (true): a metadata
                # request of this producer that a broker cut off from the
                # server held for 49 s was answered after the topic's
                # deletion by creating it again (seed 1, round 19 of the
                # long run); topics here come and go through the admin.
                p = producer(self.bootstrap, **{"message.timeout.ms": 120_000,
                                                "allow.auto.create.topics": False})
                for i in range(10):
                    p.produce(name, value=f"{name}-{i}", partition=i % 2,
                              on_delivery=lambda err, m: err or acked.__setitem__(
                                  m.value().decode(), (m.partition(), m.offset())))
                p.flush(150)
                with self.lock:
                    self.created[name] = acked
            old = f"c-churn-{n - 2}"
            if n > 2 and old in self.created:
                with self.lock:
                    self.deleting.add(old)
            if n > 2 and old in self.created and self.attempt(
                    lambda: admin.delete_topics([old])[old].result(60),
                    KafkaError.UNKNOWN_TOPIC_OR_PART):
                with self.lock:
                    self.deleted.add(old)
            self.halt.wait(6)

    def attempt(self, call, done_code):
        """True once `call` succeeded or failed with `done_code` (what an
        earlier attempt already did); gives up after a few tries."""
        for _ in range(5):
            try:
                call()
                return True
            except KafkaException as e:
                if e.args[0].code() == done_code:
                    return True
                self.note(e)
            except Exception as e:  # noqa: BLE001 - a timeout of the future
                self.note(e)
            if self.halt.wait(2):
                return False
        return False

    def doomed(self, name):
        with self.lock:
            return name in self.deleting

    def check(self, final=False):
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        problems = []
        if final:
            # A deletion whose answer never came is asked again: it must
            # finish (or find the topic gone), never stay half done.
            for name in sorted(self.deleting - self.deleted):
                try:
                    admin.delete_topics([name])[name].result(EVENTUALLY)
                except KafkaException as e:
                    if e.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                        problems.append(f"churn: deleting {name} again failed: {e}")
                        continue
                self.deleted.add(name)
        with self.lock:
            created, deleted = dict(self.created), set(self.deleted)
            deleting = set(self.deleting)
        deadline = time.monotonic() + EVENTUALLY
        while True:
            try:
                names = set(admin.list_topics(timeout=30).topics)
            except KafkaException as e:
                names = None
                self.note(e)
            if names is not None:
                undead = deleted & names
                missing = {n for n in created if not self.doomed(n) and n not in names}
                if not undead and not missing:
                    break
            if time.monotonic() > deadline:
                problems.append(f"churn: deleted topics still listed {sorted(undead)[:3]}, "
                                f"created topics missing {sorted(missing)[:3]}")
                break
            time.sleep(2)
        lost = 0
        for name, acked in created.items():
            if name in deleting or not acked:
                continue
            r = Reader(self.bootstrap, name, 2)
            ends = {}
            for p, o in acked.values():
                ends[p] = max(ends.get(p, 0), o + 1)
            reached = r.reached(ends)
            # The worker goes on meanwhile: a topic it starts deleting
            # during the read is no longer owed its records.
            r.read_until(lambda rd, name=name: reached(rd) or self.doomed(name), 120)
            r.close()
            if self.doomed(name):
                continue
            for v, k in acked.items():
                if r.seen.get(k, (None, None))[1] != v:
                    lost += 1
                    problems.append(f"churn: {v} acknowledged at {name} {k}, not read there")
        return {"created": len(created), "deleted": len(deleted), "lost": lost,
                "problems": problems[:10]}


class Compacted(Worker):
    """Keyed records to COMPACT (16 keys), which the leader compacts."""

    KEYS, RATE = 16, 4

    def __init__(self, bootstrap):
        super().__init__(bootstrap)
        self.acked = {}  # value: offset

    def run(self):
        p = producer(self.bootstrap, trace="compact-producer")
        i = 0
        while not self.halt.is_set():
            key = f"k{i % self.KEYS}"
            value = f"{key}={i}"
            p.produce(COMPACT, key=key, value=value,
                      on_delivery=lambda err, m, value=value: self.note(err) if err else
                      self.acked.__setitem__(value, m.offset()))
            p.poll(0)
            i += 1
            time.sleep(1 / self.RATE)
        self.undelivered = p.flush(FLUSH)

    def check(self):
        acked = dict(self.acked)
        newest = {}
        for value, o in acked.items():
            if o is None or o < 0:
                continue
            key = value.split("=")[0]
            if key not in newest or o > newest[key][0]:
                newest[key] = (o, value)
        end = max((o for o, _ in newest.values()), default=-1) + 1
        # A fresh reader each time: compaction removes what an old one read.
        r = Reader(self.bootstrap, COMPACT, 1)
        # Up to the end of the log, not only of what was acknowledged: a
        # record the log took whose answer is still on its way (or was
        # lost with a leader) is newer than the acknowledged one of its
        # key, which compaction then rightly removes.
        try:
            end = max(end, r.c.get_watermark_offsets(TopicPartition(COMPACT, 0),
                                                     timeout=30)[1])
        except KafkaException as e:
            self.note(e)
        caught_up = r.read_until(r.reached({0: end}))
        r.close()
        problems = [] if caught_up else [f"{COMPACT}: never read up to offset {end - 1}"]
        later = {}  # key: the highest index read of a value of it
        for (_, o), (_, value) in r.seen.items():
            if value and "=" in value:
                key, i = value.split("=")
                later[key] = max(later.get(key, -1), int(i))
        lost = 0
        for key, (o, value) in newest.items():
            if r.seen.get((0, o), (None, None))[1] == value:
                continue
            if later.get(key, -1) > int(value.split("=")[1]):
                continue  # superseded by a newer record of the key in the log
            lost += 1
            problems.append(f"{COMPACT}: newest {value} acknowledged at {o}, read "
                            f"{r.seen.get((0, o), (None, None))[1]}")
        # librdkafka acknowledges without an offset the messages a later
        # batch's success implied (possibly persisted, then implicitly
        # acknowledged): those are checked by value.
        read_values = {value for _, value in r.seen.values()}
        for value, o in acked.items():
            if o is not None and o >= 0 or value in read_values:
                continue
            key, i = value.split("=")
            if later.get(key, -1) > int(i):
                continue
            lost += 1
            problems.append(f"{COMPACT}: {value} acknowledged without an offset, never read "
                            f"nor superseded")
        values = [v for _, v in r.seen.values()]
        twice = {v for v, n in collections.Counter(values).items() if n > 1}
        resent = set()
        if twice and LOGS is not None:
            with open(os.path.join(LOGS, "compact-producer.librdkafka.log"),
                      errors="replace") as f:
                sent = epochs_sent(f, COMPACT)
            resent = resent_keyed(twice, sent)
        for (_, o), (_, value) in r.seen.items():
            if value in resent:
                continue
            if acked.get(value) is not None and acked[value] >= 0 and acked[value] != o:
                problems.append(f"{COMPACT}: {value} acknowledged at {acked[value]}, read at {o}")
        duplicated = sum(n - 1 for v, n in collections.Counter(values).items()
                         if n > 1 and v not in resent)
        if duplicated:
            problems.append(f"{COMPACT}: {duplicated} values read twice")
        return {"acked": len(acked), "read": len(r.seen), "lost": lost,
                "duplicated": duplicated, "resent": len(resent),
                "resent_examples": sorted(resent)[:3],
                "problems": problems[:10] + r.damaged[:3]}
