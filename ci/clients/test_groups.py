"""Consumer groups and the idempotent producer, with real clients against
the release `kaas` binary on 127.0.0.1.

Every test starts its own brokers (one, or three sharing one data
directory) with short heartbeats so that failover happens within seconds.
A test that fails keeps its directory under target/ (broker logs next to
the data directory) and prints where it is.
"""

import collections
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from kaasproc import free_port, start as start_kaas  # noqa: E402

# Broker settings for fast failover: a broker that stops heartbeating for
# 4 s is gone; a new group waits 0.5 s for more members.
BROKER_FLAGS = [
    "--heartbeat-interval-secs",
    "1",
    "--session-timeout-secs",
    "4",
    "--group-initial-rebalance-delay-ms",
    "500",
    # Consumer-protocol (KIP-848) members heartbeat every second and are
    # fenced after 10 s of silence.
    "--group-consumer-heartbeat-interval-ms",
    "1000",
    "--group-consumer-session-timeout-ms",
    "10000",
]
# The broker refuses consumer sessions under 6 s.
SESSION_MS = 10000
# How long a wait for something that should happen soon may take: the CI
# box is small and busy; waits end as soon as the condition holds.
EVENTUALLY = 120


def client_errors():
    """The exceptions a Kafka client raises for a failed call (a timeout, a
    broker's error): worth another try while waiting for a condition."""
    from confluent_kafka import KafkaException
    from kafka.errors import KafkaError

    return (KafkaException, KafkaError)


# Commit refusals that only say the group is rebalancing: STALE_MEMBER_EPOCH,
# FENCED_MEMBER_EPOCH, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
# UNKNOWN_MEMBER_ID.
REFUSED_BY_A_REBALANCE = {113, 110, 22, 27, 25}


def wait_until(cond, timeout, what, interval=0.2):
    """Calls `cond` until it returns something true and returns that; a
    client's exception counts as false. Raises, naming `what` (or what it
    returns, if it is a function) and the last exception, once `timeout` s
    have passed."""
    deadline = time.time() + timeout
    retry_on = client_errors()
    while True:
        try:
            v, error = cond(), None
        except retry_on as e:
            v, error = None, e
        if v:
            return v
        if time.time() > deadline:
            last = f"; last error: {error!r}" if error is not None else ""
            what = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{last}")
        time.sleep(interval)


class Cluster:
    """`n` kaas processes sharing one data directory."""

    def __init__(self, n, name):
        self.dir = tempfile.mkdtemp(prefix=f"kaas-groups-{name}-", dir="target")
        self.data = os.path.join(self.dir, "data")
        os.mkdir(self.data)
        self.n = n
        self.ports = [free_port() for _ in range(n)]
        self.advertised = {}
        self.procs = {}

    def addr(self, i):
        return f"127.0.0.1:{self.ports[i]}"

    def bootstrap(self):
        return ",".join(self.advertised.get(i, self.addr(i)) for i in range(self.n))

    def log(self, i):
        return os.path.join(self.dir, f"kaas-{i}.log")

    def start(self, i):
        args = ["--data-dir", self.data, "--listen", self.addr(i), "--broker-id", str(i)]
        if i in self.advertised:
            args += ["--advertised-listener", self.advertised[i]]
        env = dict(os.environ)
        env.setdefault("KAAS_LOG", "info")
        self.procs[i] = start_kaas(args + BROKER_FLAGS, self.ports[i], self.log(i), env=env,
                                   timeout=60)

    def kill(self, i, sig=signal.SIGKILL, timeout=30):
        p = self.procs.pop(i)
        p.send_signal(sig)
        p.wait(timeout=timeout)

    def stop_all(self):
        for i in list(self.procs):
            self.kill(i)


@pytest.fixture
def cluster(request):
    made = []

    def make(n, name, start=True):
        c = Cluster(n, name)
        made.append(c)
        if start:
            for i in range(n):
                c.start(i)
        return c

    failed_before = request.session.testsfailed
    yield make
    for c in made:
        c.stop_all()
    if request.session.testsfailed == failed_before:
        for c in made:
            shutil.rmtree(c.dir, ignore_errors=True)
    else:
        for c in made:
            print(f"\nkept {c.dir} (broker logs kaas-<id>.log)")


def topic_name():
    return f"g-{uuid.uuid4().hex[:10]}"


def group_name():
    return f"grp-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=EVENTUALLY)

    def led():
        md = admin.list_topics(topic, timeout=5).topics[topic]
        return (
            md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        )

    wait_until(led, EVENTUALLY, f"leaders of {topic}")


def ck_produce(bootstrap, topic, numbers, partitions):
    """Produces message `i` (value "i") to partition i % partitions, once
    each: idempotent, so that a batch librdkafka sends again (its answer
    came after request.timeout.ms, as an fsync on a busy CI disk can take)
    is not written twice. The tests count offsets."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failed = []

    def report(err, msg):
        if err is not None:
            failed.append((msg.value(), err))

    for i in numbers:
        p.produce(topic, value=str(i), partition=i % partitions, on_delivery=report)
    assert p.flush(EVENTUALLY) == 0, "everything is delivered"
    assert failed == [], failed[:5]
    return set(numbers)


def ck_consumer(bootstrap, group, protocol="classic", **extra):
    """A confluent-kafka consumer of the classic group protocol, or of the
    consumer protocol (KIP-848), whose session timeout is the broker's."""
    from confluent_kafka import Consumer

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if protocol == "classic":
        conf["session.timeout.ms"] = SESSION_MS
    conf.update(extra)
    return Consumer(conf)


def assigned(consumer):
    return {tp.partition for tp in consumer.assignment()}


def exclusive_and_complete(assignments, partitions):
    seen = [p for a in assignments for p in a]
    return (
        len(seen) == len(set(seen))
        and set(seen) == set(range(partitions))
        and all(assignments)
    )


class Ledger:
    """Everything a group consumed, with the commits it confirmed."""

    def __init__(self):
        self.count = collections.Counter()

    def pump(self, members, rounds=1, commit=True, batch=100):
        """Polls each member once per round; commits each non-empty batch
        synchronously before the member polls again."""
        size = batch
        for _ in range(rounds):
            for m in members:
                batch = m.consume(num_messages=size, timeout=0.05)
                got = [msg for msg in batch if msg.error() is None]
                for msg in got:
                    self.count[int(msg.value())] += 1
                if got and commit:
                    from confluent_kafka import KafkaException

                    try:
                        res = m.commit(asynchronous=False)
                    except KafkaException as e:
                        # The group moved on while this batch was read (a
                        # rebalance under way: KIP-848's stale member epoch,
                        # the classic protocol's generation): the batch is
                        # not committed, and its partitions' next owner
                        # reads it again, so it is not counted as read.
                        if e.args[0].code() not in REFUSED_BY_A_REBALANCE:
                            raise
                        for msg in got:
                            self.count[int(msg.value())] -= 1
                        continue
                    bad = [tp for tp in res or [] if tp.error is not None]
                    assert not bad, f"commit refused: {bad}"

    def consume_some(self, member, timeout=EVENTUALLY):
        """Pumps one member until it has consumed something (a refused
        commit is a failure here, not a reason to try again)."""
        before = sum(self.count.values())
        deadline = time.time() + timeout
        while sum(self.count.values()) == before:
            assert time.time() < deadline, f"the member consumed nothing in {timeout} s"
            self.pump([member])

    def duplicates(self):
        return {k: v for k, v in self.count.items() if v > 1}


def pump_until(ledger, members, partitions, cond, timeout, what):
    """Pumps until `cond(assignments)`; asserts at every step that no
    partition is owned by two members."""
    deadline = time.time() + timeout
    while True:
        ledger.pump(members)
        a = [assigned(m) for m in members]
        seen = [p for x in a for p in x]
        assert len(seen) == len(set(seen)), f"a partition has two owners: {a}"
        if cond(a):
            return a
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; assignments {a}")


def test_confluent_kafka_group_rebalances_and_resumes(cluster):
    c = cluster(1, "ck")
    bootstrap = c.bootstrap()
    topic, group, P = topic_name(), group_name(), 6
    create_topic(bootstrap, topic, P)
    produced = ck_produce(bootstrap, topic, range(0, 600), P)

    # A long session, so that a rebalance after a leave is told from one
    # after a session expiry by a wide margin even on a slow machine.
    session_ms = 60000

    def member():
        return ck_consumer(bootstrap, group, **{"session.timeout.ms": session_ms})

    ledger = Ledger()
    members = [member() for _ in range(3)]
    for m in members:
        m.subscribe([topic])
    a = pump_until(
        ledger, members, P, lambda a: exclusive_and_complete(a, P), EVENTUALLY, "3 members to share 6 partitions"
    )
    assert sorted(len(x) for x in a) == [2, 2, 2], a

    # A 4th member joins: the group rebalances over all four.
    produced |= ck_produce(bootstrap, topic, range(600, 1200), P)
    fourth = member()
    fourth.subscribe([topic])
    members.append(fourth)
    a = pump_until(
        ledger, members, P, lambda a: exclusive_and_complete(a, P), EVENTUALLY, "a 4th member to get partitions"
    )
    assert sorted(len(x) for x in a) == [1, 1, 2, 2], a

    # A member that consumed a little leaves (LeaveGroup on close): the
    # others take its partitions over well before its session would expire,
    # and resume them from its committed offsets.
    produced |= ck_produce(bootstrap, topic, range(1200, 1800), P)
    leaving = members.pop(0)
    ledger.consume_some(leaving)
    left_at = time.time()
    leaving.close()
    a = pump_until(
        ledger, members, P, lambda a: exclusive_and_complete(a, P), EVENTUALLY, "the others to take over after a leave"
    )
    took = time.time() - left_at
    assert took < session_ms / 1000 - 1, f"the leave, not a session expiry, rebalanced ({took:.1f} s)"
    assert sorted(len(x) for x in a) == [2, 2, 2], a
    pump_until(ledger, members, P, lambda a: ledger.count.keys() >= produced, EVENTUALLY, "all messages consumed")

    # Everyone consumes a little of a new batch, commits and stops; a new
    # consumer of the group resumes from the committed offsets.
    produced |= ck_produce(bootstrap, topic, range(1800, 2400), P)
    for m in members:
        ledger.consume_some(m)
        m.close()
    partly = len(ledger.count.keys() & set(range(1800, 2400)))
    assert 0 < partly < 600, partly
    restarted = member()
    restarted.subscribe([topic])
    pump_until(ledger, [restarted], P, lambda a: ledger.count.keys() >= produced, EVENTUALLY, "the rest consumed")
    ledger.pump([restarted], rounds=10)  # nothing more may arrive

    from confluent_kafka import TopicPartition

    committed = restarted.committed([TopicPartition(topic, p) for p in range(P)], timeout=EVENTUALLY)
    restarted.close()
    assert ledger.duplicates() == {}, "no message consumed twice"
    assert set(ledger.count) == produced, "none skipped, none invented"
    assert {tp.partition: tp.offset for tp in committed} == {p: 400 for p in range(P)}


SINK_LOCK = threading.Lock()


class KpMember(threading.Thread):
    """A kafka-python group member polling in its own thread and committing
    synchronously after each batch."""

    def __init__(self, bootstrap, group, topic, sink):
        super().__init__(daemon=True)
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
        )
        self.sink = sink
        self.lock = threading.Lock()
        self.assignment = set()
        self.error = None
        self.stopping = threading.Event()
        self.start()

    def run(self):
        try:
            while not self.stopping.is_set():
                records = self.consumer.poll(timeout_ms=100)
                got = [int(r.value) for rs in records.values() for r in rs]
                if got:
                    self.consumer.commit()
                    with SINK_LOCK:
                        self.sink.extend(got)
                with self.lock:
                    self.assignment = {tp.partition for tp in self.consumer.assignment()}
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            self.consumer.close(autocommit=False)

    def stop(self):
        self.stopping.set()
        self.join(timeout=EVENTUALLY)
        assert not self.is_alive()


def test_kafka_python_group_exclusive_and_resumes(cluster):
    from kafka import KafkaProducer

    c = cluster(1, "kp")
    bootstrap = c.bootstrap()
    topic, group, P = topic_name(), group_name(), 6
    create_topic(bootstrap, topic, P)

    producer = KafkaProducer(bootstrap_servers=bootstrap)  # idempotent by default
    produced = set()

    def produce(numbers):
        futures = [producer.send(topic, value=str(i).encode(), partition=i % P) for i in numbers]
        producer.flush(timeout=EVENTUALLY)
        for f in futures:
            f.get(timeout=1)
        produced.update(numbers)

    produce(range(0, 600))
    sink = []
    members = [KpMember(bootstrap, group, topic, sink) for _ in range(3)]

    def state():
        for m in members:
            assert m.error is None, f"member failed: {m.error!r}"
        snap = []
        for m in members:
            with m.lock:
                snap.append(set(m.assignment))
        return snap

    def consumed():
        with SINK_LOCK:
            return set(sink)

    def settled():
        a = state()
        return exclusive_and_complete(a, P) and consumed() >= produced and a

    a = wait_until(settled, EVENTUALLY, "3 kafka-python members to share 6 partitions and consume")
    assert sorted(len(x) for x in a) == [2, 2, 2], a

    # One member restarts while more is produced: its partitions resume from
    # the committed offsets, wherever they are served.
    members.pop(0).stop()
    produce(range(600, 1200))
    members.append(KpMember(bootstrap, group, topic, sink))
    a = wait_until(settled, EVENTUALLY, "the restarted member to rejoin and everything to be consumed")
    assert sorted(len(x) for x in a) == [2, 2, 2], a
    time.sleep(1)  # anything consumed twice would show up now
    for m in members:
        m.stop()
    assert [m.error for m in members] == [None] * 3

    # A brand-new member of the group after everyone left reads only what
    # was produced since.
    produce(range(1200, 1500))
    members = [KpMember(bootstrap, group, topic, sink)]
    wait_until(lambda: state() and consumed() >= produced, EVENTUALLY, "the new member to consume the rest")
    time.sleep(1)
    members[0].stop()
    producer.close()
    dups = {k: v for k, v in collections.Counter(sink).items() if v > 1}
    assert dups == {}, f"consumed twice: {sorted(dups)[:20]} ({len(dups)} in all)"
    assert set(sink) == produced


def test_committed_offsets_survive_a_broker_restart(cluster):
    from confluent_kafka import TopicPartition

    c = cluster(1, "restart")
    bootstrap = c.bootstrap()
    topic, group, P = topic_name(), group_name(), 3
    create_topic(bootstrap, topic, P)
    produced = ck_produce(bootstrap, topic, range(0, 3000), P)
    tps = [TopicPartition(topic, p) for p in range(P)]

    ledger = Ledger()
    m = ck_consumer(bootstrap, group)
    m.subscribe([topic])
    deadline = time.time() + EVENTUALLY
    while len(ledger.count) < 1100:
        assert time.time() < deadline, f"consumed {len(ledger.count)} of 1100 in {EVENTUALLY} s"
        ledger.pump([m], batch=50)
    before = {tp.partition: tp.offset for tp in m.committed(tps, timeout=EVENTUALLY)}
    m.close()
    # A partition the consumer has not reached yet has no committed offset
    # (-1001) and is read from the beginning.
    resume_at = {p: max(o, 0) for p, o in before.items()}
    assert 1100 <= sum(resume_at.values()) < 3000, before

    c.kill(0, signal.SIGTERM)
    c.start(0)

    checker = ck_consumer(bootstrap, group)
    after = wait_until(
        lambda: _committed_or_none(checker, tps), EVENTUALLY, "the offsets of the group after the restart"
    )
    checker.close()
    assert after == before, "committed offsets survive the restart"

    produced |= ck_produce(bootstrap, topic, range(3000, 3300), P)
    m = ck_consumer(bootstrap, group)
    m.subscribe([topic])
    first = {}
    deadline = time.time() + EVENTUALLY
    while not ledger.count.keys() >= produced:
        assert time.time() < deadline, f"consuming the rest: {len(produced - ledger.count.keys())} missing"
        for msg in m.consume(num_messages=100, timeout=0.1):
            if msg.error() is None:
                first.setdefault(msg.partition(), msg.offset())
                ledger.count[int(msg.value())] += 1
    m.close()
    assert first == resume_at, "the consumer resumed exactly at the committed offsets"
    assert ledger.duplicates() == {}
    assert set(ledger.count) == produced


def _committed_or_none(consumer, tps):
    from confluent_kafka import KafkaException

    try:
        res = consumer.committed(tps, timeout=5)
    except KafkaException:
        return None
    if any(tp.error is not None for tp in res):
        return None
    return {tp.partition: tp.offset for tp in res}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_survives_its_coordinator_being_killed(cluster, protocol):
    from confluent_kafka import ConsumerGroupState, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    c = cluster(3, "coord")
    bootstrap = c.bootstrap()
    topic, group, P = topic_name(), group_name(), 6
    create_topic(bootstrap, topic, P)
    tps = [TopicPartition(topic, p) for p in range(P)]
    produced = ck_produce(bootstrap, topic, range(0, 600), P)

    # Per partition: offsets delivered and the newest confirmed commit.
    delivered = collections.defaultdict(list)
    confirmed = {p: 0 for p in range(P)}
    commit_failures = []
    pending = set()  # members with consumed but unconfirmed messages

    def pump(members):
        for m in members:
            batch = [x for x in m.consume(num_messages=100, timeout=0.05) if x.error() is None]
            for msg in batch:
                p, o = msg.partition(), msg.offset()
                # Redelivery is allowed only of what was never committed.
                assert o >= confirmed[p], (
                    f"partition {p} offset {o} delivered again after offset {confirmed[p]} was committed"
                )
                delivered[p].append((o, int(msg.value())))
                pending.add(m)
            if m not in pending:
                continue
            try:
                res = m.commit(asynchronous=False)
            except KafkaException as e:
                commit_failures.append(e)
                continue
            ok = True
            for tp in res:
                if tp.error is None and tp.offset >= 0:
                    assert tp.offset >= confirmed[tp.partition], "a commit went backwards"
                    confirmed[tp.partition] = tp.offset
                elif tp.error is not None:
                    commit_failures.append(tp.error)
                    ok = False
            if ok:
                pending.discard(m)

    def consumed_all():
        return {v for d in delivered.values() for _, v in d} >= produced and not pending

    def consume_everything(members, timeout, what):
        deadline = time.time() + timeout
        while not (consumed_all() and exclusive_and_complete([assigned(m) for m in members], P)):
            assert time.time() < deadline, f"{what} (commit failures: {commit_failures[:5]})"
            pump(members)

    members = [ck_consumer(bootstrap, group, protocol) for _ in range(2)]
    for m in members:
        m.subscribe([topic])
    consume_everything(members, EVENTUALLY, "the group consuming the first batch")
    assert confirmed == {p: 100 for p in range(P)}

    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = []

    def stable_with_two():
        # Polled: the brokers' 4 s sessions may lapse on a busy machine,
        # which moves the coordinator and rebalances the group for a moment.
        pump(members)
        desc = admin.describe_consumer_groups([group])[group].result(timeout=EVENTUALLY)
        described[:] = [desc]
        return desc.state == ConsumerGroupState.STABLE and len(desc.members) == 2 and desc

    desc = wait_until(stable_with_two, EVENTUALLY, lambda: f"the group stable with 2 members (last: {described})")
    victim = desc.coordinator.id

    # Kill the coordinator with messages waiting; the members go on
    # consuming and committing (commits fail until the slot has moved).
    produced |= ck_produce(bootstrap, topic, range(600, 1200), P)
    c.kill(victim)
    consume_everything(members, EVENTUALLY, "the group consuming after its coordinator was killed")

    # The new coordinator has every confirmed commit.
    checker = ck_consumer(bootstrap, group)
    after = wait_until(lambda: _committed_or_none(checker, tps), EVENTUALLY, "the offsets at the new coordinator")
    checker.close()
    assert after == confirmed == {p: 200 for p in range(P)}, "no committed offset is lost"
    desc = wait_until(stable_with_two, EVENTUALLY, lambda: f"the group stable with 2 members (last: {described})")
    print(f"coordinator {victim} killed, now {desc.coordinator.id}; commit failures: {commit_failures[:5]}")
    assert desc.coordinator.id != victim

    # New members fetch their start offsets from the new coordinator:
    # nothing committed is read again.
    for m in members:
        m.close()
    produced |= ck_produce(bootstrap, topic, range(1200, 1800), P)
    members = [ck_consumer(bootstrap, group, protocol) for _ in range(2)]
    for m in members:
        m.subscribe([topic])
    consume_everything(members, EVENTUALLY, "new members consuming the rest")
    end = time.time() + 1
    while time.time() < end:
        pump(members)  # nothing more may arrive
    for m in members:
        m.close()

    for p in range(P):
        # Every offset of the partition was delivered, with one value.
        by_offset = {}
        for o, v in delivered[p]:
            assert by_offset.setdefault(o, v) == v
        assert sorted(by_offset) == list(range(300)), f"partition {p}: offsets {sorted(by_offset)[:10]}..."
    assert {v for d in delivered.values() for _, v in d} == produced
    assert confirmed == {p: 300 for p in range(P)}


class DroppingProxy:
    """A TCP proxy in front of one broker that cuts connections: once a
    connection has lived its (random, short) lifetime, the next response
    from the broker is thrown away and both sides are closed, so the
    request was handled but the client never hears about it. A lifetime is
    counted in responses passed on (3 to 20), not in seconds, so that every
    connection gets some work done however slow the machine is."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.dropping = False
        self.dropped = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=30)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        life = random.randint(3, 20)
        passed = 0
        pending = bytearray()  # from the broker: the start of a response not yet whole
        try:
            while not self.closed:
                r, _, _ = select.select([client, upstream], [], [], 0.5)
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    if s is not upstream:
                        upstream.sendall(data)
                        continue
                    # Responses are size-prefixed frames: pass on the whole
                    # ones, each counted.
                    pending += data
                    while len(pending) >= 4:
                        end = 4 + int.from_bytes(pending[:4], "big")
                        if len(pending) < end:
                            break
                        if self.dropping and passed >= life:
                            self.dropped += 1
                            return
                        client.sendall(pending[:end])
                        del pending[:end]
                        passed += 1
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    def close(self):
        self.closed = True
        self.sock.close()


def test_idempotent_producer_across_kills_and_dropped_connections(cluster):
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    c = cluster(3, "idem", start=False)
    proxies = [DroppingProxy(c.ports[i]) for i in range(3)]
    for i in range(3):
        c.advertised[i] = f"127.0.0.1:{proxies[i].port}"
        c.start(i)
    bootstrap = c.bootstrap()
    topic, P, N = topic_name(), 3, 20000
    create_topic(bootstrap, topic, P)

    delivered = {}
    failures = []
    errors = []

    def report(err, msg):
        if err is None:
            delivered[int(msg.value())] = (msg.partition(), msg.offset())
        else:
            failures.append((int(msg.value()), err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "error_cb": lambda e: errors.append(e),
        }
    )

    def send(numbers):
        for i in numbers:
            while True:
                try:
                    producer.produce(topic, value=str(i), partition=i % P, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)

    # Produce in slices so that the kill lands with requests in flight; go
    # on producing while the victim's partitions move, start it again and
    # produce the rest.
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def leaders_now():
        md = admin.list_topics(topic, timeout=30).topics[topic]
        return {p.id: p.leader for p in md.partitions.values()}

    # (A broker may still answer -1 for a moment: the brokers read the
    # assignment from the volume each at its own pace.)
    victim = wait_until(lambda: [x for x in [leaders_now()[0]] if x >= 0], EVENTUALLY, "a leader of partition 0")[0]
    for p in proxies:
        p.dropping = True
    step = 500
    for start in range(0, 7000, step):
        send(range(start, start + step))
        producer.poll(0.02)
    c.kill(victim)
    for start in range(7000, 14000, step):
        send(range(start, start + step))
        producer.poll(0.02)

    def moved():
        producer.poll(0.1)
        ls = leaders_now().values()
        return victim not in ls and min(ls) >= 0

    wait_until(moved, EVENTUALLY, "the killed broker's partitions to move")
    c.start(victim)
    for start in range(14000, N, step):
        send(range(start, start + step))
        producer.poll(0.02)
    remaining = producer.flush(EVENTUALLY)
    assert remaining == 0, f"{remaining} messages neither acknowledged nor failed after {EVENTUALLY} s"
    fatal = [e for e in errors if e.fatal()]
    assert fatal == [], f"fatal producer errors: {fatal}"
    assert failures == [], f"{len(failures)} messages failed, e.g. {failures[:5]}"
    assert len(delivered) == N
    dropped = sum(p.dropped for p in proxies)
    print(f"proxies dropped {dropped} responses; client errors: {[str(e) for e in errors][:10]}")
    assert dropped > 0, "the proxies dropped connections"

    for p in proxies:
        p.dropping = False
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})

    def high(p):
        # Leadership may be moving back to the restarted broker: a stale
        # leader answers NOT_LEADER, which this call does not retry itself.
        try:
            return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]]
        except KafkaException:
            return None

    his = {p: wait_until(lambda: high(p), EVENTUALLY, f"the end offset of partition {p}")[0] for p in range(P)}
    consumer.assign([TopicPartition(topic, p, 0) for p in range(P)])
    got = collections.defaultdict(list)
    deadline = time.time() + EVENTUALLY
    while sum(len(v) for v in got.values()) < sum(his.values()):
        assert time.time() < deadline, (
            f"consumed {sum(len(v) for v in got.values())} of {sum(his.values())} in {EVENTUALLY} s"
        )
        for msg in consumer.consume(num_messages=1000, timeout=0.2):
            if msg.error() is None:
                got[msg.partition()].append((msg.offset(), int(msg.value())))
            elif msg.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(msg.error())
    consumer.close()
    for p in proxies:
        p.close()

    for p in range(P):
        values = [v for _, v in got[p]]
        dups = [v for v, n in collections.Counter(values).items() if n > 1]
        assert dups == [], f"partition {p}: {len(dups)} duplicates, e.g. {sorted(dups)[:10]}"
        # Every message present once, in the order it was produced, at the
        # offset its acknowledgement gave.
        assert values == list(range(p, N, P)), f"partition {p}: gaps or reordering"
        for o, v in got[p]:
            assert delivered[v] == (p, o), f"message {v} acknowledged at {delivered[v]}, found at {(p, o)}"


def run_kcat(bootstrap, group, topic, timeout=EVENTUALLY):
    # Not `-o beginning`: with -G, kcat 1.7 applies it to every assigned
    # partition, overriding the committed offsets.
    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\\n", topic],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr
    return [int(x) for x in out.stdout.split()]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_group_consumer_commits_and_resumes(cluster):
    c = cluster(1, "kcat")
    bootstrap = c.bootstrap()
    topic, group, P = topic_name(), group_name(), 3
    create_topic(bootstrap, topic, P)
    first = ck_produce(bootstrap, topic, range(0, 300), P)
    got = run_kcat(bootstrap, group, topic)
    assert sorted(got) == sorted(first)

    second = ck_produce(bootstrap, topic, range(300, 450), P)
    got = run_kcat(bootstrap, group, topic)
    assert sorted(got) == sorted(second), "the second run resumes from the committed offsets"

    assert run_kcat(bootstrap, group, topic) == [], "a third run has nothing left to read"
