"""First-send latency to a topic that does not exist yet: how long a real
client waits between its first send to a new topic (auto-created by the
broker) and the acknowledgement, for kafka-python, confluent-kafka
(librdkafka) and aiokafka, on one broker and on a three-broker cluster whose
creating broker is not the controller. Prints a markdown table with the
median and the worst of several new topics per row, next to the same
client's send to an existing topic measured in the same run (the floor).

    target/venv/bin/python ci/bench/first_send.py [--topics 5]
    KAAS_BIN=/tmp/kaas-old target/venv/bin/python ci/bench/first_send.py

The venv is ci/clients/venv.sh's. What bounds a first send is the broker:
the topic's leaders have to be assigned by the controller and opened by
their broker before the first answer names them; the clients only retry.
"""

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from kaasproc import KAAS, free_port, start as start_kaas  # noqa: E402


class Cluster:
    def __init__(self, size):
        self.dir = tempfile.mkdtemp(prefix="kaas-first-send-", dir="target")
        self.procs = []
        self.addrs = []
        for broker in range(size):
            port = free_port()
            addr = f"127.0.0.1:{port}"
            args = ["--data-dir", self.dir, "--listen", addr, "--broker-id", str(broker)]
            self.procs.append(start_kaas(args, port, os.path.join(self.dir, f"kaas-{broker}.log")))
            self.addrs.append(addr)
            if broker == 0:
                # Broker 0 becomes the controller before the others start.
                wait_ready(addr)
        for addr in self.addrs:
            wait_ready(addr)

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=30)


def wait_ready(addr):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": addr})
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            md = admin.list_topics(timeout=2)
            if md.brokers:
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{addr} did not answer Metadata")


def kafka_python(bootstrap, topic):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        p.send("warm-" + topic[-6:], b"x").get(timeout=60)  # connection, ApiVersions, first metadata
        t0 = time.perf_counter()
        p.send(topic, b"x").get(timeout=60)
        return time.perf_counter() - t0
    finally:
        p.close()


def confluent(bootstrap, topic):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    done = {}

    def timed(name):
        t0 = time.perf_counter()
        p.produce(name, b"x", on_delivery=lambda err, msg: done.setdefault(name, (err, time.perf_counter() - t0)))
        deadline = time.time() + 60
        while name not in done and time.time() < deadline:
            p.poll(0.005)
        err, took = done.get(name, ("timed out", None))
        if err is not None:
            raise RuntimeError(f"{name}: {err}")
        return took

    timed("warm-" + topic[-6:])
    return timed(topic)


def aiokafka(bootstrap, topic):
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await p.start()
        try:
            await p.send_and_wait("warm-" + topic[-6:], b"x")
            t0 = time.perf_counter()
            await p.send_and_wait(topic, b"x")
            return time.perf_counter() - t0
        finally:
            await p.stop()

    return asyncio.run(run())


CLIENTS = {"kafka-python": kafka_python, "confluent-kafka": confluent, "aiokafka": aiokafka}


def measure(client, bootstrap, topics, existing):
    """Seconds from send to acknowledgement: new topics, then `existing`."""
    fresh = [CLIENTS[client](bootstrap, f"fs-{uuid.uuid4().hex[:10]}") for _ in range(topics)]
    floor = [CLIENTS[client](bootstrap, existing) for _ in range(topics)]
    return fresh, floor


def ms(xs):
    return f"{statistics.median(xs) * 1000:.0f} ms (worst {max(xs) * 1000:.0f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=5, help="new topics per row")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    args = ap.parse_args()
    print(f"# First send to a new topic ({KAAS})\n")
    print("| cluster | client | new topic | existing topic (floor) |")
    print("|---|---|---|---|")
    for size in (1, 3):
        cluster = Cluster(size)
        try:
            # The last broker: on three, not the controller (broker 0).
            bootstrap = cluster.addrs[-1]
            existing = f"existing-{uuid.uuid4().hex[:6]}"
            confluent(bootstrap, existing)
            for client in args.clients.split(","):
                fresh, floor = measure(client, bootstrap, args.topics, existing)
                print(f"| {size} broker(s) | {client} | {ms(fresh)} | {ms(floor)} |", flush=True)
        finally:
            cluster.stop()
    print("\nBottleneck: the broker (the leader of a new topic is assigned by the "
          "controller and opened by its broker before the first answer names it).")


if __name__ == "__main__":
    main()
