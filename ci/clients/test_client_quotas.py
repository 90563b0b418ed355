"""Client quotas against the release broker: AlterClientQuotas and
DescribeClientQuotas as Kafka's own message schemas encode them
(kafka-python's codec; neither standard admin client has these calls), and
their effect on real clients: a confluent-kafka producer and consumer over
their byte rates are throttled (librdkafka's throttle callback reports the
broker's throttle_time_ms, and the transfer cannot be faster than the
rate), while a client without a quota is not."""

import os
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka import admin as ck
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest

sys.path.insert(0, os.path.dirname(__file__))
from kafkawire import call  # noqa: E402

T = 30
RATE = 200_000  # bytes per second
BURST_SECONDS = 1  # a budget saves up at most one second of its rate
INVALID_REQUEST = 42

Entry = AlterClientQuotasRequest.EntryData
Component = DescribeClientQuotasRequest.ComponentData


def alter(addr, entries, validate_only=False):
    req = AlterClientQuotasRequest(entries=entries, validate_only=validate_only)
    resp = call(addr, req, 1)
    return [(e.error_code, e.error_message) for e in resp.entries]


def entry(entity, ops):
    return Entry(
        entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[Entry.OpData(key=k, value=float(v or 0), remove=v is None) for k, v in ops])


def describe(addr, components=(), strict=False):
    req = DescribeClientQuotasRequest(
        components=[Component(entity_type=t, match_type=m, match=n) for t, m, n in components],
        strict=strict)
    resp = call(addr, req, 1)
    assert resp.error_code == 0, resp.error_message
    return {tuple((e.entity_type, e.entity_name) for e in x.entity):
            {v.key: v.value for v in x.values} for x in resp.entries}


def test_quotas_are_set_described_and_removed(broker):
    a = broker.addr
    app = (("client-id", "describe-app"),)
    outcomes = alter(a, [
        entry(app, [("producer_byte_rate", 1024), ("consumer_byte_rate", 2048)]),
        entry((("user", None), ("client-id", None)), [("producer_byte_rate", 4096)]),
        entry((("client-id", "x"),), [("request_percentage", 50)]),
        entry((("ip", "10.0.0.1"),), [("connection_creation_rate", 5)]),
        entry((("client-id", "y"),), [("producer_byte_rate", 0.5)]),
    ])
    assert outcomes[0] == (0, None) and outcomes[1] == (0, None), outcomes
    for code, why in outcomes[2:]:
        assert code == INVALID_REQUEST, outcomes
        assert why, "a refusal says why"
    assert "request_percentage" in outcomes[2][1]
    everything = describe(a)
    assert everything[app] == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    assert everything[(("user", None), ("client-id", None))] == {"producer_byte_rate": 4096.0}
    # Filters: an exact name, the default, any name; strict.
    assert list(describe(a, [("client-id", 0, "describe-app")])) == [app]
    assert list(describe(a, [("user", 1, None)])) == [(("user", None), ("client-id", None))]
    assert list(describe(a, [("user", 2, None)], strict=True)) == []
    # validate_only changes nothing.
    assert alter(a, [entry(app, [("producer_byte_rate", None)])], validate_only=True) == [(0, None)]
    assert describe(a)[app]["producer_byte_rate"] == 1024.0
    assert alter(a, [entry(app, [("producer_byte_rate", None), ("consumer_byte_rate", None)]),
                     entry((("user", None), ("client-id", None)), [("producer_byte_rate", None)])]) \
        == [(0, None), (0, None)]
    assert describe(a) == {}


def produce(addr, topic, client_id, payload, count):
    throttles = []
    p = Producer({"bootstrap.servers": addr, "client.id": client_id, "acks": "all",
                  "linger.ms": 5, "batch.size": 65536,
                  "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    began = time.monotonic()
    for _ in range(count):
        p.produce(topic, payload, partition=0)
        p.poll(0)
    assert p.flush(120) == 0
    took = time.monotonic() - began
    p.poll(0.5)
    return took, throttles


def test_a_producer_and_a_consumer_over_their_rates_are_throttled(broker):
    a = broker.addr
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    admin = ck.AdminClient({"bootstrap.servers": a})
    admin.create_topics([ck.NewTopic(topic, 1, 1)])[topic].result(timeout=T)
    assert alter(a, [entry((("client-id", "slow-writer"),), [("producer_byte_rate", RATE)]),
                     entry((("client-id", "slow-reader"),), [("consumer_byte_rate", RATE)])]) \
        == [(0, None), (0, None)]
    payload = b"x" * 1000
    count = 1000  # 1 MB: five seconds' worth at RATE
    total = count * len(payload)
    # Within a second every broker applied the change (--security-refresh-ms).
    time.sleep(1.5)
    free_took, free_throttles = produce(a, topic, "free-writer", payload, count)
    assert free_throttles == []
    took, throttles = produce(a, topic, "slow-writer", payload, count)
    assert throttles, "the broker reported no throttle to librdkafka"
    floor = (total - RATE * BURST_SECONDS) / RATE
    assert took >= 0.8 * floor, f"1 MB in {took:.2f} s at {RATE} B/s (at least {floor:.1f} s)"
    print(f"produce: unthrottled {free_took:.2f} s, throttled {took:.2f} s "
          f"(floor {floor:.1f} s), {len(throttles)} throttle reports")

    throttles = []
    c = Consumer({"bootstrap.servers": a, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "client.id": "slow-reader", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": 65536,
                  "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    want = 2 * total  # both producers' messages
    began = time.monotonic()
    while got < 2 * count and time.monotonic() - began < 120:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    took = time.monotonic() - began
    c.close()
    assert got == 2 * count
    assert throttles, "the broker reported no fetch throttle to librdkafka"
    floor = (want - RATE * BURST_SECONDS) / RATE
    assert took >= 0.8 * floor, f"2 MB read in {took:.2f} s at {RATE} B/s (at least {floor:.1f} s)"
    print(f"consume: throttled {took:.2f} s (floor {floor:.1f} s), {len(throttles)} throttle reports")
