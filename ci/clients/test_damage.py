"""The one copy damaged, as an operator meets it (issue 48's trial): 200
records acknowledged, the broker stopped with SIGTERM, two bytes flipped in
the middle of the partition's only segment, the broker started again. No
acknowledged record is cut or its offset handed out again; a consumer is
told CORRUPT_MESSAGE at the damaged batch instead of skipping it; `kaas
fsck` exits 1 naming the first bad offset and the topic."""

import glob
import json
import os
import subprocess
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from kaasproc import KAAS, Broker  # noqa: E402
from test_conformance import batch, produce  # noqa: E402

EVENTUALLY = 120
KAFKA_STORAGE_ERROR = 56


def test_a_flipped_byte_in_an_acknowledged_segment_is_found_never_cut():
    b = Broker()
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.addr})
        admin.create_topics([NewTopic("damaged", 1, 1)])["damaged"].result(EVENTUALLY)
        p = Producer({"bootstrap.servers": b.addr, "acks": "all", "linger.ms": 0,
                      "message.timeout.ms": EVENTUALLY * 1000})
        failed = []
        for i in range(200):
            p.produce("damaged", value=f"record {i:03d}",
                      on_delivery=lambda err, _m: err and failed.append(err))
            p.flush(EVENTUALLY)  # one produce request, one batch, each
        assert not failed, failed[:3]
        b.stop()

        segments = sorted(glob.glob(os.path.join(b.dir, "topics", "*", "0", "*.log")))
        assert len(segments) == 1, segments
        with open(segments[0], "r+b") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(size // 2)
            two = bytearray(f.read(2))
            f.seek(size // 2)
            f.write(bytes([two[0] ^ 0xFF, two[1] ^ 0x0F]))

        fsck = subprocess.run([KAAS, "fsck", "--data-dir", b.dir, "--json"],
                              capture_output=True, text=True, timeout=EVENTUALLY)
        assert fsck.returncode == 1, fsck
        errors = [f for f in json.loads(fsck.stdout)["findings"] if f["severity"] == "error"]
        assert len(errors) == 1 and errors[0]["topic"] == "damaged", errors
        assert "first bad offset" in errors[0]["what"], errors

        b.start()
        c = Consumer({"bootstrap.servers": b.addr, "group.id": "damage-reader",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        low, high = c.get_watermark_offsets(TopicPartition("damaged", 0), timeout=EVENTUALLY)
        assert (low, high) == (0, 200), "the takeover cut acknowledged records"
        c.assign([TopicPartition("damaged", 0, 0)])
        read, corrupt = [], None
        deadline = time.monotonic() + EVENTUALLY
        while corrupt is None:
            assert time.monotonic() < deadline, f"read {len(read)} records and no error"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError.INVALID_MSG:  # 2, Kafka's CORRUPT_MESSAGE
                    corrupt = len(read)
                continue
            read.append(m.value().decode())
        c.close()
        assert read == [f"record {i:03d}" for i in range(corrupt)], "a record skipped or changed"
        assert 50 <= corrupt < 150, f"CORRUPT_MESSAGE at offset {corrupt}"
        assert f"first bad offset {corrupt}" in errors[0]["what"], (corrupt, errors)

        # New records take new offsets.
        p = Producer({"bootstrap.servers": b.addr, "acks": "all",
                      "message.timeout.ms": EVENTUALLY * 1000})
        offsets = []
        p.produce("damaged", value="after", on_delivery=lambda _e, m: offsets.append(m.offset()))
        assert p.flush(EVENTUALLY) == 0
        assert offsets == [200], offsets

        # The operator gives the damage up, with the broker running: the
        # damaged segment from its bad batch on, and nothing else.
        repair = subprocess.run([KAAS, "fsck", "--data-dir", b.dir, "--repair",
                                 "--truncate-damaged", "damaged-0", "--json"],
                                capture_output=True, text=True, timeout=EVENTUALLY)
        assert repair.returncode in (0, 1), repair
        truncated = json.loads(repair.stdout)["repairs"]["truncated"]
        assert [(g["from"], g["to"]) for g in truncated[0]["given_up"]] == [(corrupt, 200)], \
            truncated
        c = Consumer({"bootstrap.servers": b.addr, "group.id": "after-repair",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c.assign([TopicPartition("damaged", 0, 0)])
        got = []
        deadline = time.monotonic() + EVENTUALLY
        while len(got) < corrupt + 1:
            assert time.monotonic() < deadline, f"read {len(got)} records after the repair"
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.append((m.offset(), m.value().decode()))
        c.close()
        assert got == [(i, f"record {i:03d}") for i in range(corrupt)] + [(200, "after")], got[-3:]
        p.produce("damaged", value="after the repair",
                  on_delivery=lambda _e, m: offsets.append(m.offset()))
        assert p.flush(EVENTUALLY) == 0
        assert offsets == [200, 201], "an offset given up was handed out again"
        deadline = time.monotonic() + EVENTUALLY
        while True:
            fsck = subprocess.run([KAAS, "fsck", "--data-dir", b.dir],
                                  capture_output=True, text=True, timeout=EVENTUALLY)
            if fsck.returncode == 0:
                break
            assert time.monotonic() < deadline, fsck.stdout
            time.sleep(1)
        assert f"offsets {corrupt}..200 were given up" in fsck.stdout, fsck.stdout
        print(f"\ndamaged-segment trial: 200 acknowledged, watermarks (0, 200) after the restart, "
              f"CORRUPT_MESSAGE at offset {corrupt} after {corrupt} records read in order, "
              f"fsck exit 1 naming offset {corrupt}; --truncate-damaged gave up {corrupt}..200, "
              f"a new consumer read {corrupt} records then offset 200, the next record took 201")
    finally:
        b.stop()


def test_an_unreadable_manifest_is_one_offline_state_not_an_epoch_loop():
    """The issue's trial: `truncate -s 0` of the partition's manifest, the
    broker started again. Before: a new epoch claimed about every 2 s while
    Metadata named the broker leader. Now: one epoch, Metadata shows the
    partition without a leader and its replica offline, a produce sent to
    the broker is answered KAFKA_STORAGE_ERROR, fsck exits 1 naming the
    manifest, and the partition is back once the file is restored."""
    b = Broker()
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": b.addr})
        admin.create_topics([NewTopic("broken", 1, 1)])["broken"].result(EVENTUALLY)
        p = Producer({"bootstrap.servers": b.addr, "acks": "all",
                      "message.timeout.ms": EVENTUALLY * 1000})
        for i in range(20):
            p.produce("broken", value=f"record {i:02d}")
        assert p.flush(EVENTUALLY) == 0
        b.stop()

        partition = glob.glob(os.path.join(b.dir, "topics", "*", "0"))[0]
        manifests = sorted(glob.glob(os.path.join(partition, "manifest-*")))
        newest = manifests[-1]
        with open(newest, "rb") as f:
            whole = f.read()
        os.truncate(newest, 0)
        epochs_before = len(glob.glob(os.path.join(partition, "epoch-*")))

        b.start()
        admin = AdminClient({"bootstrap.servers": b.addr})
        deadline = time.monotonic() + EVENTUALLY
        while True:
            t = admin.list_topics("broken", timeout=30).topics["broken"]
            part = t.partitions[0]
            if part.leader == -1 and part.error is not None:
                break
            assert time.monotonic() < deadline, f"still led in Metadata: {part.leader} {part.error}"
            time.sleep(0.5)
        assert part.error.code() == KafkaError.LEADER_NOT_AVAILABLE, part.error
        # Twenty heartbeats later, still the one epoch of this start.
        time.sleep(20)
        epochs = len(glob.glob(os.path.join(partition, "epoch-*")))
        assert epochs <= epochs_before + 1, f"{epochs - epochs_before} epochs claimed in 20 s"

        # A client with metadata from before sends its produce anyway.
        answer = produce(b.addr, 9, batch(b"x"), name="broken").partition_responses[0].error_code
        assert answer == KAFKA_STORAGE_ERROR, f"produce to the held partition answered {answer}"

        fsck = subprocess.run([KAAS, "fsck", "--data-dir", b.dir, "--json"],
                              capture_output=True, text=True, timeout=EVENTUALLY)
        assert fsck.returncode == 1, fsck
        errors = [f for f in json.loads(fsck.stdout)["findings"] if f["severity"] == "error"]
        assert any(os.path.basename(newest) in f["what"] and f.get("topic") == "broken"
                   for f in errors), errors

        # Restored from a backup: led again within one retry (30 s).
        with open(newest + ".restore", "wb") as f:
            f.write(whole)
        os.rename(newest + ".restore", newest)
        deadline = time.monotonic() + EVENTUALLY
        while admin.list_topics("broken", timeout=30).topics["broken"].partitions[0].leader == -1:
            assert time.monotonic() < deadline, "still offline after the manifest was restored"
            time.sleep(1)
        c = Consumer({"bootstrap.servers": b.addr, "group.id": "broken-reader"})
        _, high = c.get_watermark_offsets(TopicPartition("broken", 0), timeout=EVENTUALLY)
        c.close()
        assert high == 20, high
    finally:
        b.stop()
