"""The consumer group protocol of KIP-848 (`group.protocol=consumer`) with
confluent-kafka (librdkafka 2.16): the coordinator assigns, members
reconcile by heartbeat. The coordinator failover test is
test_groups.py's, run for both protocols."""

import time

import pytest

from test_groups import (
    EVENTUALLY,
    Ledger,
    assigned,
    cluster,  # noqa: F401 (the fixture)
    ck_consumer,
    ck_produce,
    create_topic,
    exclusive_and_complete,
    group_name,
    pump_until,
    topic_name,
    wait_until,
)


def test_members_split_rebalance_and_commit(cluster):
    """Three members join one after another and one leaves; at every step
    no partition has two owners, every partition ends up owned, and with
    synchronous commits after every batch nothing is consumed twice."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    c = cluster(1, "kip848")
    bootstrap = c.bootstrap()
    topic, group, P = topic_name(), group_name(), 6
    create_topic(bootstrap, topic, P)
    produced = ck_produce(bootstrap, topic, range(600), P)
    ledger = Ledger()
    members = []
    started = time.time()
    for n in range(1, 4):
        m = ck_consumer(bootstrap, group, "consumer")
        m.subscribe([topic])
        members.append(m)
        a = pump_until(ledger, members, P, lambda a: exclusive_and_complete(a, P)
                       and max(map(len, a)) - min(map(len, a)) <= 1, EVENTUALLY, f"{n} members sharing")
        print(f"{n} member(s) {a} after {time.time() - started:.1f} s")
    pump_until(ledger, members, P, lambda a: set(ledger.count) >= produced, EVENTUALLY, "everything consumed")

    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(timeout=EVENTUALLY)
    assert desc.type == ConsumerGroupType.CONSUMER, desc
    assert desc.state == ConsumerGroupState.STABLE and len(desc.members) == 3, desc
    owned = sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions)
    assert owned == list(range(P)), desc
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=EVENTUALLY)
    assert group in {g.group_id for g in listed.valid}, listed.valid
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(timeout=EVENTUALLY)
    assert group not in {g.group_id for g in listed.valid}

    # A member leaves: the other two take its partitions.
    members.pop().close()
    produced |= ck_produce(bootstrap, topic, range(600, 1200), P)
    pump_until(ledger, members, P, lambda a: exclusive_and_complete(a, P)
               and set(ledger.count) >= produced, EVENTUALLY, "two members after a leave")
    assert ledger.duplicates() == {}, "nothing committed is read twice"
    for m in members:
        m.close()

    # A new member starts from the committed offsets: nothing more to read.
    m = ck_consumer(bootstrap, group, "consumer")
    m.subscribe([topic])
    pump_until(ledger, [m], P, lambda a: exclusive_and_complete(a, P), EVENTUALLY, "one new member")
    end = time.time() + 2
    while time.time() < end:
        ledger.pump([m])
    m.close()
    assert ledger.duplicates() == {}
    assert set(ledger.count) == produced


def test_a_static_member_restarting_gets_its_partitions_back(cluster):
    """A static member (group.instance.id) that closes leaves with epoch -2
    and keeps its partitions; its next process gets them again and the
    other member's assignment never changes."""
    c = cluster(1, "kip848-static")
    bootstrap = c.bootstrap()
    topic, group, P = topic_name(), group_name(), 4
    create_topic(bootstrap, topic, P)
    ledger = Ledger()

    def static(name):
        m = ck_consumer(bootstrap, group, "consumer", **{"group.instance.id": name})
        m.subscribe([topic])
        return m

    a, b = static("a"), static("b")
    split = pump_until(ledger, [a, b], P, lambda x: exclusive_and_complete(x, P)
                       and len(x[0]) == len(x[1]), EVENTUALLY, "two static members sharing")
    a.close()
    # b keeps exactly its partitions while a is away ...
    end = time.time() + 3
    while time.time() < end:
        ledger.pump([b])
        assert assigned(b) == split[1]
    a = static("a")
    again = pump_until(ledger, [a, b], P, lambda x: exclusive_and_complete(x, P), EVENTUALLY,
                       "the static member back")
    # ... and a gets its own back.
    assert again == split, (split, again)
    a.close()
    b.close()


def test_a_regex_subscription_sees_topics_made_later(cluster):
    """A subscription by regular expression goes to the coordinator
    (ConsumerGroupHeartbeat v1), which assigns the matching topics,
    including one created after the member joined."""
    c = cluster(1, "kip848-regex")
    bootstrap = c.bootstrap()
    prefix = topic_name()
    first, later = f"{prefix}-a", f"{prefix}-b"
    create_topic(bootstrap, first, 2)
    create_topic(bootstrap, f"other-{prefix}", 2)
    m = ck_consumer(bootstrap, group_name(), "consumer")
    m.subscribe([f"^{prefix}-.*"])
    ledger = Ledger()
    wait_until(lambda: ledger.pump([m]) or {tp.topic for tp in m.assignment()} == {first}, EVENTUALLY,
               "the first matching topic")
    create_topic(bootstrap, later, 3)
    produced = ck_produce(bootstrap, later, range(30), 3)
    wait_until(lambda: ledger.pump([m]) or set(ledger.count) >= produced, EVENTUALLY,
               "the topic made after the subscription consumed")
    assert {tp.topic for tp in m.assignment()} == {first, later}
    m.close()


def test_an_unknown_assignor_is_refused(cluster):
    from confluent_kafka import KafkaError

    c = cluster(1, "kip848-assignor")
    bootstrap = c.bootstrap()
    topic = topic_name()
    create_topic(bootstrap, topic, 1)
    m = ck_consumer(bootstrap, group_name(), "consumer", **{"group.remote.assignor": "sticky"})
    m.subscribe([topic])
    deadline = time.time() + EVENTUALLY
    error = None
    while error is None and time.time() < deadline:
        msg = m.poll(0.2)
        if msg is not None and msg.error() is not None:
            error = msg.error()
    m.close()
    # librdkafka makes it a fatal error that names the broker's code.
    assert error is not None and (
        error.code() == KafkaError.UNSUPPORTED_ASSIGNOR
        or error.code() == KafkaError._FATAL and "assignor or its version range is not supported" in error.str()), error


@pytest.mark.parametrize("first", ["classic", "consumer"])
def test_the_two_protocols_do_not_share_a_live_group(cluster, first):
    """While a group has members of one protocol, a member of the other is
    refused (Kafka's INCONSISTENT_GROUP_PROTOCOL / GROUP_ID_NOT_FOUND)."""
    from confluent_kafka import KafkaError

    c = cluster(1, f"kip848-mixed-{first}")
    bootstrap = c.bootstrap()
    topic, group = topic_name(), group_name()
    create_topic(bootstrap, topic, 2)
    ledger = Ledger()
    one = ck_consumer(bootstrap, group, first)
    one.subscribe([topic])
    pump_until(ledger, [one], 2, lambda a: exclusive_and_complete(a, 2), EVENTUALLY, "the first member")
    other = ck_consumer(bootstrap, group, "consumer" if first == "classic" else "classic")
    other.subscribe([topic])
    deadline = time.time() + EVENTUALLY
    error = None
    while error is None and time.time() < deadline:
        ledger.pump([one])
        msg = other.poll(0.2)
        if msg is not None and msg.error() is not None:
            error = msg.error()
    assert assigned(other) == set()
    assert assigned(one) == {0, 1}
    other.close()
    one.close()
    assert error is not None, "the second member is told"
    assert error.code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL or (
        error.code() == KafkaError._FATAL and "group id does not exist" in error.str()), error


def test_the_range_assignor_co_partitions(cluster):
    """group.remote.assignor=range: each member gets the same partition
    numbers of two topics with as many partitions (Kafka's range)."""
    c = cluster(1, "kip848-range")
    bootstrap = c.bootstrap()
    t1, t2 = topic_name(), topic_name()
    for t in (t1, t2):
        create_topic(bootstrap, t, 4)
    group = group_name()
    members = []
    for _ in range(2):
        m = ck_consumer(bootstrap, group, "consumer", **{"group.remote.assignor": "range"})
        m.subscribe([t1, t2])
        members.append(m)
    ledger = Ledger()

    def split(ms):
        by = [{(tp.topic, tp.partition) for tp in m.assignment()} for m in ms]
        return by if all(len(b) == 4 for b in by) else None

    by = wait_until(lambda: ledger.pump(members) or split(members), EVENTUALLY, "a range split")
    for owned in by:
        assert {p for t, p in owned if t == t1} == {p for t, p in owned if t == t2}, by
    assert by[0].isdisjoint(by[1])
    for m in members:
        m.close()
