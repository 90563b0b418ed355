"""`/metrics` on the health listener, scraped the way Prometheus does
(its own client library's parser) after real clients produced, consumed
and got an error: the figures must follow what the clients did."""

import json
import os
import re
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kaasproc import Broker, free_port

# How long a wait for something that should happen soon may take: the CI
# box is small and busy; waits end as soon as the condition holds.
EVENTUALLY = 120


@pytest.fixture(scope="module")
def observed():
    health = f"127.0.0.1:{free_port()}"
    b = Broker()
    b.start(extra=("--health-listen", health))
    yield b, health
    b.stop()


def scrape(health):
    with urllib.request.urlopen(f"http://{health}/metrics", timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0)


def total(samples, name, **labels):
    """Sum over the samples of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def test_metrics_follow_produce_consume_and_errors(observed):
    b, health = observed
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.addr})
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(EVENTUALLY)
    before = scrape(health)

    n, size = 500, 1000
    p = Producer({"bootstrap.servers": b.addr, "linger.ms": 5, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=b"x" * size, key=str(i).encode())
    assert p.flush(EVENTUALLY) == 0

    c = Consumer({"bootstrap.servers": b.addr, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + EVENTUALLY
    while got < n:
        assert time.monotonic() < deadline, f"consumed {got} of {n} in {EVENTUALLY} s"
        m = c.poll(1)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got += 1
    during = scrape(health)
    c.close()

    # An error a client gets: the topic exists already.
    again = admin.create_topics([NewTopic(topic, num_partitions=2)])[topic]
    with pytest.raises(Exception):
        again.result(EVENTUALLY)
    after = scrape(health)

    payload = n * size
    bytes_in = value(after, "kaas_topic_bytes_in_total", topic=topic)
    assert payload <= bytes_in < payload * 1.2, bytes_in
    assert value(after, "kaas_topic_bytes_out_total", topic=topic) >= payload
    assert total(after, "kaas_requests_total", api="Produce", error="NONE") > \
        total(before, "kaas_requests_total", api="Produce", error="NONE")
    assert total(after, "kaas_request_duration_seconds_count", api="Produce") >= 1
    assert total(after, "kaas_requests_total", api="Fetch") >= 1
    assert value(after, "kaas_requests_total", api="CreateTopics", error="TOPIC_ALREADY_EXISTS") == 1
    assert value(after, "kaas_partitions_led") >= 2
    assert value(after, "kaas_coordinator_slots_led") >= 1
    assert total(after, "kaas_takeovers_total", what="partition", outcome="ok") >= 2
    # Every acknowledged produce passed a flush cycle: a write and a commit.
    assert value(after, "kaas_volume_op_duration_seconds_count", op="write_and_sync") >= 1
    # The consumer, the producer and the admin client were connected.
    assert value(during, "kaas_connections") >= 2
    assert value(after, "kaas_fence_refusals_total", api="Produce") == 0
    # Exported from the start (a local disk loses no reply, and every
    # unlink of a dropped segment succeeds).
    for op in ("open", "rename"):
        assert ("kaas_volume_lost_replies_total", (("op", op),)) in after
        assert value(after, "kaas_volume_lost_replies_total", op=op) == 0
    assert ("kaas_retention_backlog_files", ()) in after
    assert value(after, "kaas_retention_backlog_files") == 0


def test_the_dashboard_uses_only_metrics_the_broker_exports(observed):
    """deploy/monitoring's Grafana dashboard, against a live scrape (after
    the test above put traffic through): a renamed metric must not leave
    a silently empty panel."""
    _, health = observed
    path = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "monitoring", "kaas-dashboard.json")
    with open(path) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\bkaas_[a-z_]+", e)}
    exported = {name for name, _ in scrape(health)}
    assert len(used) >= 10, used
    missing = sorted(m for m in used if m not in exported)
    assert not missing, f"the dashboard uses metrics /metrics does not export: {missing}"
