"""Transactions with real clients: confluent-kafka (librdkafka) as a
transactional producer and as read_committed and read_uncommitted
consumers, against one broker and against three brokers on one data
directory (markers then travel between brokers, and the coordinator is
killed with SIGKILL between transactions, and in the middle of a
consume-transform-produce loop); kafka-python's and aiokafka's
transactional producers; the operator APIs through kafka-python's
codecs."""

import asyncio
import os
import signal
import sys
import tempfile
import threading
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.structs import OffsetAndMetadata
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from kaasproc import free_port, start  # noqa: E402
from kafkawire import call  # noqa: E402


def create(bootstrap, *topics, partitions=2):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, partitions) for t in topics]).values():
        f.result(30)


def settled_ends(bootstrap, topic, partitions, limit_s):
    """Each partition's last stable offset once it reached the high
    watermark: a committed transaction's markers are written after its
    commit returns, and until they are the last stable offset is below
    them."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + limit_s
    while True:
        high = {tp.partition: watermark(bootstrap, tp, "read_uncommitted", deadline) for tp in tps}
        stable = {tp.partition: watermark(bootstrap, tp, "read_committed", deadline) for tp in tps}
        if all(stable[p] >= high[p] for p in high):
            return stable
        assert time.monotonic() < deadline, f"{topic}: last stable {stable}, high {high} after {limit_s} s"
        time.sleep(0.2)


# Leadership moves (a killed broker, its return as preferred leader): a
# broker whose metadata is a moment old answers these, and a client asks
# again. librdkafka's local _UNKNOWN_PARTITION too, and that one only a new
# client gets past: in the moment a restarted broker is back, one broker's
# Metadata may list it and another's not yet; librdkafka drops a broker a
# Metadata answer leaves out, and get_watermark_offsets then takes the
# partitions it leads as having no leader, without asking for Metadata
# again, until the client's next periodic refresh (5 minutes). A request
# already sent to the broker it drops ends in _DESTROY_BROKER (CI, the
# same test, 2026-12-07).
MOVING = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
          KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError.UNKNOWN_TOPIC_OR_PART,
          KafkaError._UNKNOWN_PARTITION, KafkaError._DESTROY_BROKER}


def watermark(bootstrap, tp, isolation, deadline):
    """The end of `tp` for `isolation`: the high watermark, or the last
    stable offset under read_committed (librdkafka's default isolation,
    so it is always named here), asked by a new client each time while
    leadership moves, until `deadline`."""
    while True:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4()}",
                      "isolation.level": isolation})
        try:
            return c.get_watermark_offsets(tp, timeout=30, cached=False)[1]
        except KafkaException as e:
            err = e.args[0]
            if not (err.retriable() or err.code() in MOVING) or time.monotonic() > deadline:
                raise
        finally:
            c.close()
        time.sleep(0.5)


def read_all(bootstrap, topic, partitions, isolation, limit_s=90.0, settled=True, seen=None):
    """Every value of `topic` a consumer of `isolation` reads, in offset
    order per partition, up to each partition's end as the broker answers
    it now for that isolation (the high watermark; for read_committed the
    last stable offset, by default once it reached the high watermark,
    `settled`: the markers of a commit that returned may still be on their
    way). It waits for those
    ends, never for a quiet spell: a busy machine slows it, and if an end
    is not reached within `limit_s` it says which. `seen`, a dict, gets
    the ends read to and each value's (partition, offset), for a failing
    test to say where a record went."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{uuid.uuid4()}",
        "isolation.level": isolation,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    if isolation == "read_committed" and settled:
        ends = settled_ends(bootstrap, topic, partitions, limit_s)
    else:
        until = time.monotonic() + limit_s
        ends = {tp.partition: watermark(bootstrap, tp, isolation, until) for tp in tps}
    # From the log start, named: with no committed offset to look up, the
    # read does not wait on its group's coordinator (a broker just back
    # may be one a moment-old Metadata answer left out, see MOVING).
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values, end = [], time.monotonic() + limit_s
    def behind():
        return {p.partition: (max(p.offset, 0), ends[p.partition])
                for p in c.position(tps) if max(p.offset, 0) < ends[p.partition]}
    while behind():
        assert time.monotonic() < end, f"{topic}: read to {behind()} (position, end) in {limit_s} s"
        m = c.poll(0.3)
        if m is not None and not m.error():
            values.append(m.value().decode())
            if seen is not None:
                seen.setdefault("at", {})[values[-1]] = (m.partition(), m.offset())
    c.close()
    if seen is not None:
        seen["ends"] = ends
    return values


def producer(bootstrap, txn_id, **extra):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "linger.ms": 2, **extra})
    p.init_transactions(30)
    return p


def test_committed_records_are_read_once_and_aborted_ones_never(broker):
    create(broker.addr, "tx-out", "tx-in")
    p = producer(broker.addr, "tx-a")
    p.begin_transaction()
    for i in range(20):
        p.produce("tx-out", key=str(i), value=f"commit-{i}")
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(20):
        p.produce("tx-out", key=str(i), value=f"abort-{i}")
    p.flush()
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("tx-out", key=str(i), value=f"late-{i}")
    p.commit_transaction(30)
    committed = read_all(broker.addr, "tx-out", 2, "read_committed")
    assert sorted(committed) == sorted([f"commit-{i}" for i in range(20)] + [f"late-{i}" for i in range(5)])
    uncommitted = read_all(broker.addr, "tx-out", 2, "read_uncommitted")
    assert sum(v.startswith("abort-") for v in uncommitted) == 20


def test_an_open_transaction_holds_read_committed_readers_back(broker):
    create(broker.addr, "tx-open", partitions=1)
    p = producer(broker.addr, "tx-open-1")
    p.begin_transaction()
    p.produce("tx-open", value="pending")
    p.flush()
    assert read_all(broker.addr, "tx-open", 1, "read_committed", settled=False) == []
    assert read_all(broker.addr, "tx-open", 1, "read_uncommitted") == ["pending"]
    p.commit_transaction(30)
    assert read_all(broker.addr, "tx-open", 1, "read_committed") == ["pending"]


def test_offsets_sent_to_a_transaction_count_only_if_it_commits(broker):
    create(broker.addr, "tx-src", "tx-dst")
    group = f"etl-{uuid.uuid4()}"
    c = Consumer({"bootstrap.servers": broker.addr, "group.id": group, "enable.auto.commit": False})
    meta = c.consumer_group_metadata()
    p = producer(broker.addr, "tx-etl")
    p.begin_transaction()
    p.produce("tx-dst", value="x")
    p.send_offsets_to_transaction([TopicPartition("tx-src", 0, 7)], meta, 30)
    p.abort_transaction(30)
    assert c.committed([TopicPartition("tx-src", 0)], 10)[0].offset < 0
    p.begin_transaction()
    p.produce("tx-dst", value="y")
    p.send_offsets_to_transaction([TopicPartition("tx-src", 0, 9)], meta, 30)
    p.commit_transaction(30)
    assert c.committed([TopicPartition("tx-src", 0)], 10)[0].offset == 9
    c.close()


def test_a_new_producer_of_the_same_id_fences_the_old_one(broker):
    create(broker.addr, "tx-fence", partitions=1)
    old = producer(broker.addr, "tx-fenced")
    old.begin_transaction()
    old.produce("tx-fence", value="from-the-zombie")
    old.flush()
    new = producer(broker.addr, "tx-fenced")  # aborts the old one's transaction
    new.begin_transaction()
    new.produce("tx-fence", value="from-the-new-one")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        old.produce("tx-fence", value="late")
        old.commit_transaction(10)
    assert e.value.args[0].fatal() or e.value.args[0].txn_requires_abort()
    assert read_all(broker.addr, "tx-fence", 1, "read_committed") == ["from-the-new-one"]


def test_a_transaction_past_its_timeout_is_aborted(broker):
    create(broker.addr, "tx-slow", partitions=1)
    p = producer(broker.addr, "tx-slow-1", **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce("tx-slow", value="abandoned")
    p.flush()
    wait_aborted_by_timeout(broker.addr, "tx-slow-1")
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert read_all(broker.addr, "tx-slow", 1, "read_committed") == []
    # The last stable offset moved past the aborted records.
    c = Consumer({"bootstrap.servers": broker.addr, "group.id": "w", "isolation.level": "read_committed"})
    low, high = c.get_watermark_offsets(TopicPartition("tx-slow", 0), timeout=10)
    c.close()
    assert high >= 2, "the data batch and the abort marker"


def wait_aborted_by_timeout(bootstrap, txn_id, limit_s=120.0):
    """Waits until the coordinator has aborted `txn_id`'s transaction for
    its timeout (DescribeTransactions says PrepareAbort or CompleteAbort):
    how soon after the timeout it does so is the broker's pace, which a
    busy machine slows, so the tests wait for it rather than sleep."""
    deadline, state = time.monotonic() + limit_s, None
    while time.monotonic() < deadline:
        r = call(bootstrap, DescribeTransactionsRequest(transactional_ids=[txn_id]), 0)
        state = r.transaction_states[0].transaction_state
        if state in ("PrepareAbort", "CompleteAbort"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{txn_id}: still {state} {limit_s} s past its timeout")


def pipelining_producer(bootstrap, txn_id, **extra):
    """A transactional producer that sends each message in a produce
    request of its own, several in flight per connection, as librdkafka
    does under load (issue 46: the second of them, queued behind the one
    that opened the transaction on its partition, wedged the broker)."""
    return producer(bootstrap, txn_id, **{
        "linger.ms": 0,
        "batch.num.messages": 1,
        "max.in.flight.requests.per.connection": 5,
        **extra,
    })


def test_pipelined_transactional_produce_requests_are_all_answered(broker):
    topic = f"tx-pipelined-{uuid.uuid4()}"
    create(broker.addr, topic)
    p = pipelining_producer(broker.addr, f"tx-pipe-{uuid.uuid4()}")
    expected = []
    for n, commit in enumerate([True, False, True, True, False, True]):
        p.begin_transaction()
        values = [f"t{n}-{i}" for i in range(60)]
        for i, v in enumerate(values):
            p.produce(topic, partition=i % 2, value=v)
            p.poll(0)
        if commit:
            p.commit_transaction(30)
            expected += values
        else:
            p.abort_transaction(30)
    assert sorted(read_all(broker.addr, topic, 2, "read_committed")) == sorted(expected)
    # The broker still leads new topics and takes writes on them.
    fresh = f"after-pipelined-{uuid.uuid4()}"
    create(broker.addr, fresh, partitions=1)
    plain = Producer({"bootstrap.servers": broker.addr, "message.timeout.ms": 30000})
    failed = []
    plain.produce(fresh, value="after", on_delivery=lambda err, _m: err and failed.append(err))
    assert plain.flush(40) == 0 and not failed, failed


def test_a_transaction_that_times_out_with_requests_in_flight_is_aborted_and_the_next_commits(broker):
    topic = f"tx-pipe-timeout-{uuid.uuid4()}"
    create(broker.addr, topic)
    # The coordinator aborts the transaction while requests of it are in
    # flight, and the producer learns of it from their answers (or from its
    # commit).
    txn_id = f"tx-pipe-to-{uuid.uuid4()}"
    p = pipelining_producer(broker.addr, txn_id, **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    # Produce until the coordinator has aborted it for its timeout, so that
    # requests of it are in flight when it does (however slow the machine).
    done = threading.Event()
    watcher = threading.Thread(target=lambda: (wait_aborted_by_timeout(broker.addr, txn_id), done.set()),
                               daemon=True)
    watcher.start()
    i = 0
    while not done.is_set() and watcher.is_alive():
        try:
            p.produce(topic, partition=i % 2, value=f"timed-out-{i}")
            # A produce of the aborted epoch still in flight may be
            # answered INVALID_PRODUCER_EPOCH, which librdkafka takes as
            # fatal and raises here (Kafka answers it the same way).
            p.poll(0.01)
        except KafkaException:
            break  # the transaction already failed: nothing more is taken
        i += 1
    watcher.join(130)
    assert done.is_set(), "the coordinator never aborted the timed-out transaction"
    with pytest.raises(KafkaException) as e:
        p.commit_transaction(30)
    err = e.value.args[0]
    if err.fatal():
        p = pipelining_producer(broker.addr, f"tx-pipe-to-{uuid.uuid4()}")
    else:
        p.abort_transaction(30)
    p.begin_transaction()
    for j in range(40):
        p.produce(topic, partition=j % 2, value=f"next-{j}")
        p.poll(0)
    p.commit_transaction(30)
    assert sorted(read_all(broker.addr, topic, 2, "read_committed")) == sorted(
        f"next-{j}" for j in range(40))


def test_init_producer_id_bumps_only_the_producers_own_epoch(broker):
    """KIP-360 at the versions librdkafka sends: a producer naming its
    producer id and epoch gets the next epoch; a retry of that request
    (its answer lost) gets the same one again, not a third; any older
    epoch is fenced; the producer whose transaction timed out claims the
    epoch it was aborted under (KIP-588) until a new producer takes the
    id."""
    create(broker.addr, "tx-bump", partitions=1)
    tid = "tx-bump-1"

    def init(pid=-1, epoch=-1, timeout_ms=60000):
        deadline = time.monotonic() + 30
        while True:
            r = call(broker.addr, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms,
                                                         producer_id=pid, producer_epoch=epoch), 4)
            # CONCURRENT_TRANSACTIONS while an abort's markers go out.
            if r.error_code != 51 or time.monotonic() > deadline:
                return r.error_code, r.producer_id, r.producer_epoch
            time.sleep(0.2)

    code, pid, e0 = init()
    assert code == 0
    assert init(pid, e0) == (0, pid, e0 + 1), "a bump of its own epoch"
    assert init(pid, e0) == (0, pid, e0 + 1), "a retry gets the same epoch"
    assert init(pid, e0 + 1) == (0, pid, e0 + 2)
    assert init(pid, e0)[0] == 90, "PRODUCER_FENCED: two bumps ago"
    assert init(pid + 1, e0 + 2)[0] == 90, "another producer id"
    # A transaction that times out: the coordinator aborts it under e0 + 3.
    code, pid, e = init(pid, e0 + 2, timeout_ms=1000)
    assert (code, e) == (0, e0 + 3)
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="tx-bump", partitions=[0])
    added = call(broker.addr, AddPartitionsToTxnRequest(
        transactions=[], v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=e, v3_and_below_topics=[topic]), 3)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    wait_aborted_by_timeout(broker.addr, tid)
    ended = call(broker.addr, EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=e,
                                            committed=True), 3)
    # Not committed: INVALID_PRODUCER_ID_MAPPING, which clients answer by
    # claiming the epoch of the abort (Kafka says PRODUCER_FENCED, fatal to
    # a producer whose EndTxn merely came a millisecond after its timeout).
    assert ended.error_code == 49, "the abort took its epoch"
    assert init(pid, e) == (0, pid, e + 1), "KIP-588: the epoch of the abort"
    assert init(pid, e) == (0, pid, e + 1), "and again on a retry"
    # A new producer of the id fences the old one for good.
    assert init() == (0, pid, e + 2)
    assert init(pid, e)[0] == 90
    assert init(pid, e + 1)[0] == 90
    ended = call(broker.addr, EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=e,
                                            committed=False), 3)
    assert ended.error_code == 90, "PRODUCER_FENCED once a newer producer holds the id"


def test_operators_see_transactions_and_producers(broker):
    create(broker.addr, "tx-ops", partitions=1)
    p = producer(broker.addr, "tx-ops-1")
    p.begin_transaction()
    p.produce("tx-ops", value="v")
    p.flush()
    listed = call(broker.addr, ListTransactionsRequest(state_filters=["Ongoing"], producer_id_filters=[],
                                                       duration_filter=-1, transactional_id_pattern=None), 2)
    assert "tx-ops-1" in [t.transactional_id for t in listed.transaction_states]
    described = call(broker.addr, DescribeTransactionsRequest(transactional_ids=["tx-ops-1", "nope"]), 0)
    ours, missing = described.transaction_states
    assert (ours.error_code, ours.transaction_state) == (0, "Ongoing")
    assert [(t.topic, t.partitions) for t in ours.topics] == [("tx-ops", [0])]
    assert missing.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
    asked = DescribeProducersRequest.TopicRequest(name="tx-ops", partition_indexes=[0])
    producers = call(broker.addr, DescribeProducersRequest(topics=[asked]), 0)
    active = producers.topics[0].partitions[0].active_producers
    assert [a.producer_id for a in active] == [ours.producer_id]
    assert active[0].current_txn_start_offset == 0
    p.commit_transaction(30)


def test_out_of_order_calls_get_kafkas_error_codes(broker):
    """Transaction requests in an order no correct client sends, at the
    versions librdkafka uses: Kafka's error codes, and the id still works
    afterwards."""
    create(broker.addr, "tx-ooo", partitions=1)
    tid = "tx-ooo-1"
    init = call(broker.addr, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                                   producer_id=-1, producer_epoch=-1), 4)
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch

    def end(commit, e=epoch):
        return call(broker.addr, EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=e,
                                               committed=commit), 3).error_code

    def offsets(group):
        part = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")
        topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="tx-ooo", partitions=[part])
        r = call(broker.addr, TxnOffsetCommitRequest(transactional_id=tid, group_id=group, producer_id=pid,
                                                     producer_epoch=epoch, generation_id=-1, member_id="",
                                                     group_instance_id=None, topics=[topic]), 3)
        return r.topics[0].partitions[0].error_code

    def add(partition=0):
        topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="tx-ooo", partitions=[partition])
        r = call(broker.addr, AddPartitionsToTxnRequest(
            transactions=[], v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=[topic]), 3)
        return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code

    assert end(True) == 48, "INVALID_TXN_STATE: a commit without a transaction"
    assert offsets("never-added") == 48, "INVALID_TXN_STATE: offsets for a group the transaction lacks"
    assert add() == 0
    assert offsets("never-added") == 48, "the group was not added"
    assert end(True, epoch - 1 if epoch > 0 else 32767) in (47, 90), "an older epoch is fenced"
    added = call(broker.addr, AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                     group_id="g-ooo"), 3)
    assert added.error_code == 0
    assert offsets("g-ooo") == 0
    assert end(True) == 0
    # Right after the decision the markers may still be on their way.
    added = add()
    assert added in (0, 51), "CONCURRENT_TRANSACTIONS while the markers go out"
    # After a refused add there is no transaction to abort: the abort ends
    # nothing (librdkafka sends it when its add met the markers), unless
    # the markers are still going out.
    assert end(False) in (0, 51)
    c = Consumer({"bootstrap.servers": broker.addr, "group.id": "g-ooo"})
    deadline = time.monotonic() + 20
    while c.committed([TopicPartition("tx-ooo", 0)], 10)[0].offset != 5 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert c.committed([TopicPartition("tx-ooo", 0)], 10)[0].offset == 5
    c.close()
    # The id still works for a real producer.
    p = producer(broker.addr, tid)
    p.begin_transaction()
    p.produce("tx-ooo", value="after")
    p.commit_transaction(30)
    assert read_all(broker.addr, "tx-ooo", 1, "read_committed") == ["after"]


def test_kafka_python_transactions(broker):
    """kafka-python's transactional producer: commit, abort, offsets sent
    to a transaction with the consumer's group metadata (KIP-447)."""
    create(broker.addr, "kp-tx", "kp-src")
    group = f"kp-etl-{uuid.uuid4()}"
    p = KafkaProducer(bootstrap_servers=broker.addr, transactional_id="kp-tx-1")
    p.init_transactions()
    p.begin_transaction()
    for i in range(10):
        p.send("kp-tx", value=f"kp-commit-{i}".encode())
    c = KafkaConsumer(bootstrap_servers=broker.addr, group_id=group, enable_auto_commit=False)
    c.subscribe(["kp-src"])
    # Joins the group: a generation to commit in.
    deadline = time.monotonic() + 120
    while not c.assignment():
        assert time.monotonic() < deadline, f"{group}: no assignment in 120 s"
        c.poll(timeout_ms=500)
    p.send_offsets_to_transaction({KTopicPartition("kp-src", 0): OffsetAndMetadata(5, "", -1)},
                                  c.group_metadata())
    p.commit_transaction()
    p.begin_transaction()
    for i in range(10):
        p.send("kp-tx", value=f"kp-abort-{i}".encode())
    p.flush()
    p.abort_transaction()
    p.close()
    committed = c.committed(KTopicPartition("kp-src", 0))
    c.close()
    assert committed == 5
    got = read_all(broker.addr, "kp-tx", 2, "read_committed")
    assert sorted(got) == sorted(f"kp-commit-{i}" for i in range(10))


def test_aiokafka_transactions(broker):
    """aiokafka's transactional producer: a committed and an aborted
    transaction, offsets sent to the committed one."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATopicPartition

    create(broker.addr, "aio-tx")
    group = f"aio-etl-{uuid.uuid4()}"

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=broker.addr, transactional_id="aio-tx-1",
                             enable_idempotence=True)
        await p.start()
        try:
            async with p.transaction():
                for i in range(10):
                    await p.send("aio-tx", value=f"aio-commit-{i}".encode())
                await p.send_offsets_to_transaction({ATopicPartition("aio-tx", 1): 3}, group)
            await p.begin_transaction()
            for i in range(10):
                await p.send("aio-tx", value=f"aio-abort-{i}".encode())
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    got = read_all(broker.addr, "aio-tx", 2, "read_committed")
    assert sorted(got) == sorted(f"aio-commit-{i}" for i in range(10))
    c = Consumer({"bootstrap.servers": broker.addr, "group.id": group})
    assert c.committed([TopicPartition("aio-tx", 1)], 10)[0].offset == 3
    c.close()


class Cluster:
    """Three brokers on one data directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="kaas-txn-", dir="target")
        os.mkdir(os.path.join(self.dir, "data"))
        self.ports = [free_port() for _ in range(3)]
        self.procs = [None] * 3

    def start(self, i):
        env = dict(os.environ, KAAS_LOG="info")
        args = ["--data-dir", os.path.join(self.dir, "data"), "--broker-id", str(i),
                "--listen", f"127.0.0.1:{self.ports[i]}",
                "--heartbeat-interval-secs", "1", "--session-timeout-secs", "4"]
        self.procs[i] = start(args, self.ports[i], os.path.join(self.dir, f"kaas-{i}.log"), env=env)

    @property
    def bootstrap(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def kill(self, i):
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()

    def stop(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    for i in range(3):
        c.start(i)
    yield c
    c.stop()


def coordinator_of(bootstrap, txn_id):
    from kafka.protocol.metadata import FindCoordinatorRequest
    resp = call(bootstrap.split(",")[0], FindCoordinatorRequest(key=txn_id, key_type=1), 3)
    return resp.node_id


def test_transactions_across_brokers_survive_a_killed_coordinator(cluster):
    """Each transaction writes to all six partitions (led by three
    brokers); the coordinator is killed with SIGKILL after some commits and
    restarted; every committed transaction is read whole, exactly once,
    and no aborted record is ever read under read_committed."""
    bs = cluster.bootstrap
    create(bs, "tx-wide", partitions=6)
    txn_id = "tx-wide-1"
    committed, aborted = [], []
    p = producer(bs, txn_id, **{"transaction.timeout.ms": 10000})
    killed = False
    # Until 15 transactions committed, however many a busy machine's
    # timeouts cost around the kill.
    n = -1
    while len(committed) < 6 * 15:
        n += 1
        assert n < 300, f"only {len(committed) // 6} transactions committed in {n} attempts"
        if n == 12 and not killed:
            victim = coordinator_of(bs, txn_id)
            cluster.kill(victim)
            killed = True
        values = [f"t{n}-p{k}" for k in range(6)]
        try:
            p.begin_transaction()
            for k, v in enumerate(values):
                p.produce("tx-wide", value=v, partition=k)
            if n % 5 == 4:
                p.abort_transaction(60)
                aborted += values
            else:
                p.commit_transaction(60)
                committed += values
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                p.abort_transaction(60)
                aborted += values
            elif err.retriable():
                # Unknown outcome of a commit: a read decides, below.
                p.abort_transaction(60)
            else:
                raise
        if killed and n == 14:
            cluster.start(victim)
    seen = {}
    got = read_all(bs, "tx-wide", 6, "read_committed", seen=seen)
    print(f"transactions committed {len(committed) // 6}, aborted {len(aborted) // 6}, "
          f"records read {len(got)}, coordinator broker {victim} killed and restarted")
    assert len(got) == len(set(got)), "a record read twice"
    assert not set(got) & set(aborted), "an aborted record was read"
    missing = set(committed) - set(got)
    if missing:
        # Where the lost records are, and whether a second reader finds them.
        everything, again = {}, {}
        read_all(bs, "tx-wide", 6, "read_uncommitted", seen=everything)
        read_all(bs, "tx-wide", 6, "read_committed", seen=again)
        where = {v: everything["at"].get(v) for v in sorted(missing)[:5]}
        found = sorted(missing & set(again.get("at", {})))[:5]
        pytest.fail(f"committed records lost: {sorted(missing)[:5]} at (partition, offset) {where}; "
                    f"read to {seen['ends']}; a second reader read to {again['ends']} and found {found}; "
                    f"broker logs in {cluster.dir}")
    # Whole transactions only: for every transaction seen, all six records.
    seen = {v.split("-")[0] for v in got}
    for t in seen:
        assert all(f"{t}-p{k}" in got for k in range(6)), f"transaction {t} torn"


def test_consume_transform_produce_is_exactly_once_across_a_killed_coordinator(cluster):
    """The exactly-once loop: a read_committed consumer in a group, a
    transactional producer writing what it read, transformed, with the
    consumer's offsets sent to the same transaction. The transaction
    coordinator's broker is killed with SIGKILL a third of the way in and
    restarted; a failed transaction is aborted and the loop resumes from
    the group's committed offsets (a new consumer). Every input record
    must be in the output exactly once."""
    bs = cluster.bootstrap
    create(bs, "ctp-in", "ctp-out", partitions=3)
    total = 600
    plain = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(total):
        plain.produce("ctp-in", value=f"in-{i}", partition=i % 3)
    assert plain.flush(120) == 0
    group, txn_id = "ctp", "ctp-1"

    def consumer():
        c = Consumer({"bootstrap.servers": bs, "group.id": group,
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
        c.subscribe(["ctp-in"])
        return c

    c, p = consumer(), producer(bs, txn_id, **{"transaction.timeout.ms": 10000})
    done, aborted, victim, restart_at = 0, 0, None, None
    limit_s = 300
    deadline = time.monotonic() + limit_s
    while done < total:
        assert time.monotonic() < deadline, (
            f"{done} of {total} records transformed in {limit_s} s ({aborted} transactions aborted)")
        if victim is None and done >= total // 3:
            victim = coordinator_of(bs, txn_id)
            cluster.kill(victim)
            restart_at = time.monotonic() + 3
        if restart_at and time.monotonic() > restart_at:
            cluster.start(victim)
            restart_at = None
        msgs = [m for m in c.consume(50, 1.0) if not m.error()]
        if not msgs:
            continue
        try:
            p.begin_transaction()
            for m in msgs:
                p.produce("ctp-out", value=f"out-{m.value().decode()}", partition=m.partition())
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            done += len(msgs)
        except KafkaException as e:
            err = e.args[0]
            aborted += 1
            if err.fatal():
                p = producer(bs, txn_id, **{"transaction.timeout.ms": 10000})
            else:
                try:
                    p.abort_transaction(30)
                except KafkaException:
                    p = producer(bs, txn_id, **{"transaction.timeout.ms": 10000})
            # What was read since the last commit is read again.
            c.close()
            c = consumer()
    c.close()
    if restart_at:
        cluster.start(victim)
    got = read_all(bs, "ctp-out", 3, "read_committed")
    print(f"consume-transform-produce: {len(got)} output records for {total} input, "
          f"{aborted} transactions aborted, broker {victim} (the coordinator) killed and restarted")
    assert victim is not None
    want = [f"out-in-{i}" for i in range(total)]
    dupes = {v for v in got if got.count(v) > 1}
    assert not dupes, f"output twice: {sorted(dupes)[:5]}"
    assert sorted(got) == sorted(want), f"missing: {sorted(set(want) - set(got))[:5]}"
