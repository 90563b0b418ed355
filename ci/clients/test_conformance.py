"""What Kafka clients expect of a broker beyond the happy path, asked at the
exact protocol versions today's clients send (kafka-python's message
codec, see kafkawire.py), against the release `kaas` binary on 127.0.0.1:

- a request that creates topics or partitions answers once they have
  leaders, so a client's first answer already names them;
- error codes and messages as Kafka sends them, per API;
- configs as Kafka reports them.
"""

import os
import sys
import time
import uuid

import pytest
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest
from kafka.protocol.metadata import MetadataRequest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from kaasproc import Broker  # noqa: E402
from kafkawire import call  # noqa: E402


@pytest.fixture(scope="module")
def broker():
    b = Broker()
    b.start()
    yield b
    b.stop()


def new_topic():
    return f"conf-{uuid.uuid4().hex[:10]}"


def metadata(addr, topics, version, auto_create=False):
    T = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(topics=[T(name=t) for t in topics])
    if version >= 4:
        req.allow_auto_topic_creation = auto_create
    return call(addr, req, version)


def leaders(resp):
    """topic -> [(partition, error code, leader)] of a Metadata answer."""
    return {
        t.name: sorted((p.partition_index, p.error_code, p.leader_id) for p in t.partitions)
        for t in resp.topics
    }


# 1. A request that creates topics answers with their leaders.

@pytest.mark.parametrize("version", [1, 9, 12])
def test_the_first_metadata_answer_for_an_auto_created_topic_names_its_leader(broker, version):
    topics = [new_topic(), new_topic()]
    resp = metadata(broker.addr, topics, version, auto_create=True)
    assert [t.error_code for t in resp.topics] == [0, 0], resp
    assert leaders(resp) == {t: [(0, 0, 0)] for t in topics}


def test_create_topics_answers_once_the_new_partitions_have_leaders(broker):
    topic = new_topic()
    C = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[C(name=topic, num_partitions=3, replication_factor=1)],
                              timeout_ms=10000, validate_only=False)
    resp = call(broker.addr, req, 7)
    assert [(t.name, t.error_code, t.num_partitions) for t in resp.topics] == [(topic, 0, 3)]
    # No auto-creation, no retry: the very next answer names every leader.
    assert leaders(metadata(broker.addr, [topic], 12)) == {topic: [(p, 0, 0) for p in range(3)]}


def test_create_partitions_answers_once_the_added_partitions_have_leaders(broker):
    topic = new_topic()
    metadata(broker.addr, [topic], 12, auto_create=True)
    P = CreatePartitionsRequest.CreatePartitionsTopic
    req = CreatePartitionsRequest(topics=[P(name=topic, count=4, assignments=None)],
                                  timeout_ms=10000, validate_only=False)
    resp = call(broker.addr, req, 3)
    assert [(r.name, r.error_code) for r in resp.results] == [(topic, 0)]
    assert leaders(metadata(broker.addr, [topic], 12)) == {topic: [(p, 0, 0) for p in range(4)]}


def test_aiokafka_first_send_to_a_new_topic_finds_its_leader_at_once(broker, caplog):
    """aiokafka reports a first Metadata answer without a leader ("not
    available during auto-create initialization") and retries the send."""
    import asyncio
    import logging

    from aiokafka import AIOKafkaProducer

    async def send():
        p = AIOKafkaProducer(bootstrap_servers=broker.addr, acks="all")
        await p.start()
        try:
            return await p.send_and_wait(new_topic(), b"first")
        finally:
            await p.stop()

    with caplog.at_level(logging.WARNING, logger="aiokafka"):
        md = asyncio.run(send())
    assert md.offset == 0
    retried = [r.getMessage() for r in caplog.records if "not available" in r.getMessage()
               or "retrying" in r.getMessage()]
    assert retried == []
