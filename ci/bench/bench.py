"""What kaas costs, measured with real clients next to bounds taken in the
same run: see the module docs of each phase below and README.md.

Run: bash ci/bench/run            (all phases)
     bash ci/bench/run produce    (some phases: bounds produce native latency
                                   e2e txn tls failover sim)

Clients: confluent-kafka (librdkafka) from Python, one process per producer;
the native phase runs librdkafka's C load generator, rdkafka_performance
(ci/bench/rdkafka_performance.sh builds it), so that the broker and not
the client is measured.
Every figure is printed next to its bound; absolute numbers on a shared
2-core machine drift from run to run, the ratios much less.
"""

import json
import multiprocessing as mp
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KAAS = os.environ.get("KAAS_BIN", "target/release/kaas")
MESSAGES = int(os.environ.get("KAAS_BENCH_MESSAGES", "200000"))
ROUNDS = int(os.environ.get("KAAS_BENCH_FAILOVER_ROUNDS", "10"))
OUT = os.environ.get("KAAS_BENCH_OUT", "target/bench-results")


def say(*what):
    print(time.strftime("%H:%M:%S"), *what, file=sys.stderr, flush=True)


def pct(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


# ---- bounds -----------------------------------------------------------------


def fsync_bandwidth(directory, total=256 << 20, chunk=1 << 20):
    """MB/s of 1 MiB writes, each followed by fdatasync, to a fresh file."""
    path = os.path.join(directory, ".bound-bw")
    data = b"\xa5" * chunk
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(total // chunk):
        os.write(fd, data)
        os.fdatasync(fd)
    secs = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    return total / 1e6 / secs


def fsync_latency(directory, n=300):
    """Median ms of one 4 KiB append followed by fdatasync."""
    path = os.path.join(directory, ".bound-lat")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    data = b"\x5a" * 4096
    times = []
    for _ in range(n):
        t = time.perf_counter()
        os.write(fd, data)
        os.fdatasync(fd)
        times.append((time.perf_counter() - t) * 1000)
    os.close(fd)
    os.unlink(path)
    times.sort()
    return pct(times, 0.5), pct(times, 0.99)


def loopback_bandwidth(total=2 << 30, chunk=1 << 20):
    """MB/s of one TCP stream over 127.0.0.1."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got = [0]

    def sink():
        conn, _ = srv.accept()
        buf = bytearray(chunk)
        while True:
            n = conn.recv_into(buf)
            if n == 0:
                break
            got[0] += n
        conn.close()

    t = threading.Thread(target=sink)
    t.start()
    c = socket.create_connection(("127.0.0.1", port))
    data = b"\x00" * chunk
    start = time.perf_counter()
    for _ in range(total // chunk):
        c.sendall(data)
    c.close()
    t.join()
    secs = time.perf_counter() - start
    srv.close()
    return got[0] / 1e6 / secs


# ---- brokers ----------------------------------------------------------------


sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from kaasproc import free_port, start as start_kaas  # noqa: E402


class Cluster:
    """`n` kaas processes sharing one data directory."""

    def __init__(self, data, n=1, session_timeout=10, heartbeat=2, partitions=1):
        self.data = data
        self.ports = [free_port() for _ in range(n)]
        self.procs = [None] * n
        self.args = dict(session_timeout=session_timeout, heartbeat=heartbeat, partitions=partitions)
        for i in range(n):
            self.start(i)
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def start(self, i):
        a = self.args
        self.procs[i] = start_kaas(
            ["--data-dir", self.data, "--broker-id", str(i), "--listen", f"127.0.0.1:{self.ports[i]}",
             "--session-timeout-secs", str(a["session_timeout"]), "--heartbeat-interval-secs", str(a["heartbeat"]),
             "--num-partitions", str(a["partitions"])],
            self.ports[i], os.path.join(self.data, f"kaas-{i}.log"),
            env={**os.environ, "KAAS_LOG": "info"})

    def stop(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.kill()
                p.wait()

    def create(self, topic, partitions):
        self.admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)
        return self.leaders(topic, partitions)

    def leaders(self, topic, partitions, avoid=None, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                md = self.admin.list_topics(topic, timeout=5)
                t = md.topics.get(topic)
                if t and t.error is None and len(t.partitions) == partitions:
                    leaders = {p: t.partitions[p].leader for p in t.partitions}
                    live = {b for b in md.brokers}
                    if all(l >= 0 and l in live and l != avoid for l in leaders.values()):
                        return leaders
            except Exception:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{topic}: no leaders")


# ---- produce / consume --------------------------------------------------------


def producer_process(bootstrap, topic, size, partitions, count, conf, rate, out):
    latencies = []
    errors = [0]
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", **conf})
    payload = b"x" * size

    def make_cb(sent):
        def cb(err, _msg):
            if err is None:
                latencies.append(time.perf_counter() - sent)
            else:
                errors[0] += 1
        return cb

    # Warm up first (connections, metadata, producer id): a run measures
    # the steady state, not the client's start.
    for _ in range(10):
        p.produce(topic, payload, partition=0)
    p.flush(60)
    start = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    interval = 1.0 / rate if rate else 0.0
    for i in range(count):
        if interval:
            due = start + i * interval
            while True:
                now = time.perf_counter()
                if now >= due:
                    break
                p.poll(min(due - now, 0.001))
        sent = time.perf_counter()
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions, on_delivery=make_cb(sent))
                break
            except BufferError:
                p.poll(0.005)
        if i % 500 == 0:
            p.poll(0)
    p.flush(300)
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime
    out.put((time.perf_counter() - start, latencies, errors[0], cpu))


def produce(bootstrap, topic, size, partitions, producers, conf, rate=None, count=MESSAGES):
    """Throughput and delivery latency of `producers` processes sharing
    `count` messages; `rate` (msgs/s in all) paces them."""
    q = mp.Queue()
    per = count // producers
    procs = [mp.Process(target=producer_process,
                        args=(bootstrap, topic, size, partitions, per, conf,
                              rate / producers if rate else None, q))
             for _ in range(producers)]
    start = time.perf_counter()
    for pr in procs:
        pr.start()
    results = [q.get() for _ in procs]
    for pr in procs:
        pr.join()
    secs = time.perf_counter() - start
    lat = sorted(x * 1000 for r in results for x in r[1])
    errors = sum(r[2] for r in results)
    acked = len(lat)
    return {
        "msgs": acked / secs, "mbps": acked * size / 1e6 / secs, "acked": acked, "sent": per * producers,
        "errors": errors, "p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "p999": pct(lat, 0.999),
        "client_cpu": sum(r[3] for r in results), "secs": secs,
    }


def consume(bootstrap, topic, partitions, size, expect):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    idle = 0
    while got < expect and idle < 3:
        batch = c.consume(10000, timeout=2)
        idle = 0 if batch else idle + 1
        got += sum(1 for m in batch if m.error() is None)
    secs = time.perf_counter() - start
    c.close()
    return {"msgs": got / secs, "mbps": got * size / 1e6 / secs, "got": got}


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` so far (all threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def txn_process(bootstrap, topic, partitions, txns, per_txn, size, out):
    """`txns` transactions of `per_txn` records spread over `partitions`
    partitions, each committed before the next begins (as an exactly-once
    loop does); the client's own CPU time next to the wall time."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}", "linger.ms": 5,
                  "queue.buffering.max.messages": 1000000})
    p.init_transactions(30)
    payload = b"x" * size

    def one():
        p.begin_transaction()
        for i in range(per_txn):
            while True:
                try:
                    p.produce(topic, payload, partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.005)
        p.commit_transaction(60)

    for _ in range(3):
        one()
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(txns):
        one()
    out.put((time.perf_counter() - start, time.process_time() - cpu))


def transactions(cluster, txns, per_txn=100, size=1024):
    """Transactions per second for 1 and 8 partitions per transaction,
    next to the same records from an idempotent non-transactional producer,
    and read_committed next to read_uncommitted consume; broker and client
    CPU seconds say who the bottleneck is."""
    broker = cluster.procs[0].pid
    rows = []
    for partitions in (1, 8):
        for kind in ("transactional", "idempotent"):
            topic = f"tx-{kind}-{partitions}"
            cluster.create(topic, partitions)
            say(f"transactions: {kind}, {txns} x {per_txn} records of {size} B over {partitions} partition(s)")
            b0 = cpu_seconds(broker)
            if kind == "transactional":
                q = mp.Queue()
                pr = mp.Process(target=txn_process, args=(cluster.bootstrap, topic, partitions, txns, per_txn, size, q))
                pr.start()
                secs, client_cpu = q.get()
                pr.join()
            else:
                t0 = time.perf_counter()
                r = produce(cluster.bootstrap, topic, size, partitions, 1,
                            {"linger.ms": 5, "enable.idempotence": True, "queue.buffering.max.messages": 1000000},
                            count=txns * per_txn)
                secs, client_cpu = time.perf_counter() - t0, None
            broker_cpu = cpu_seconds(broker) - b0
            records = txns * per_txn
            row = {"kind": kind, "partitions": partitions, "per_txn": per_txn, "txns": txns if kind == "transactional" else None,
                   "secs": secs, "records_s": records / secs, "mbps": records * size / 1e6 / secs,
                   "txns_s": txns / secs if kind == "transactional" else None,
                   "broker_cpu": broker_cpu, "client_cpu": client_cpu}
            if kind == "idempotent":
                row["records_s"], row["mbps"] = r["msgs"], r["mbps"]
            for isolation in ("read_committed", "read_uncommitted"):
                c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"bench-{topic}-{isolation}",
                              "enable.auto.commit": False, "isolation.level": isolation,
                              "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608})
                c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
                got, idle, start = 0, 0, time.perf_counter()
                while got < records and idle < 3:
                    batch = c.consume(10000, timeout=2)
                    idle = 0 if batch else idle + 1
                    got += sum(1 for m in batch if m.error() is None)
                row[isolation] = got / (time.perf_counter() - start)
                row[f"{isolation}_got"] = got
                c.close()
            rows.append(row)
            say(f"  {row['records_s']:,.0f} records/s" + (f", {row['txns_s']:,.1f} txns/s" if row["txns_s"] else "")
                + f", broker CPU {broker_cpu:.2f} s over {secs:.2f} s; read_committed {row['read_committed']:,.0f}/s")
    return rows


def tls_cost(data, size=1024, count=5 * MESSAGES):
    """Produce through a PLAINTEXT and an SSL listener of one broker, the
    runs alternating on the same data directory: throughput, and CPU
    seconds of the broker and of the clients over each run (a side near
    the run's wall time x its cores is the bottleneck)."""
    pki = os.path.join(data, "pki")
    os.makedirs(pki)
    crt, key = os.path.join(pki, "tls.crt"), os.path.join(pki, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", crt], check=True, capture_output=True)
    plain, tls = free_port(), free_port()
    proc = start_kaas(["--data-dir", data, "--broker-id", "0",
                       "--listeners", f"PLAIN://127.0.0.1:{plain},TLS://127.0.0.1:{tls}",
                       "--listener-security-protocol-map", "PLAIN:PLAINTEXT,TLS:SSL",
                       "--ssl-cert-file", crt, "--ssl-key-file", key],
                      plain, os.path.join(data, "kaas.log"), env={**os.environ, "KAAS_LOG": "info"})
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
    rows = []
    try:
        for partitions, producers in ((1, 1), (8, 4)):
            for listener in ("PLAINTEXT", "SSL"):
                topic = f"tls-{listener}-{partitions}-{producers}"
                admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)
                conf = {"linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1000000}
                bootstrap = f"127.0.0.1:{plain}"
                if listener == "SSL":
                    conf.update({"security.protocol": "SSL", "ssl.ca.location": crt})
                    bootstrap = f"127.0.0.1:{tls}"
                say(f"produce over {listener}: {count} x {size} B, {partitions} partition(s), {producers} producer(s)")
                before = cpu_seconds(proc.pid)
                r = produce(bootstrap, topic, size, partitions, producers, conf, count=count)
                r.update(listener=listener, partitions=partitions, producers=producers, size=size,
                         broker_cpu=cpu_seconds(proc.pid) - before)
                rows.append(r)
                say(f"  {r['mbps']:.1f} MB/s, broker CPU {r['broker_cpu']:.2f} s, clients CPU {r['client_cpu']:.2f} s, "
                    f"wall {r['secs']:.2f} s")
    finally:
        proc.kill()
        proc.wait()
    return rows


NATIVE_DONE = re.compile(r"(\d+) delivered \(offset -?\d+, (\d+) failed\)")


def native_produce(tool, bootstrap, topic, size, producers, count):
    """`producers` rdkafka_performance processes (librdkafka in C, no
    Python in the loop) sharing `count` messages of `size` bytes, acks=all,
    spread over the topic's partitions: throughput, and the clients' CPU
    seconds (from each process's rusage) to set beside the broker's."""
    per = count // producers
    cmd = [tool, "-P", "-t", topic, "-b", bootstrap, "-s", str(size), "-c", str(per), "-a", "-1",
           "-X", "linger.ms=5", "-X", "batch.size=1048576", "-X", "queue.buffering.max.messages=1000000"]
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(producers)]
    delivered = failed = 0
    for pr in procs:
        out, _ = pr.communicate()
        # A progress line a second, the last one the summary.
        done = NATIVE_DONE.findall(out)
        if not done:
            raise RuntimeError(f"rdkafka_performance printed no summary:\n{out[-2000:]}")
        delivered += int(done[-1][0])
        failed += int(done[-1][1])
    secs = time.perf_counter() - start
    client_cpu = children_cpu_seconds()
    return {"msgs": delivered / secs, "mbps": delivered * size / 1e6 / secs, "acked": delivered,
            "sent": per * producers, "errors": failed, "secs": secs, "client_cpu_total": client_cpu}


def children_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def native(disk, shm, tool, size=1024, count=5 * MESSAGES):
    """The broker measured with a native client: 1, 8 and 64 partitions
    with 1 and 4 producer processes, on disk and on tmpfs, each row with
    the broker's and the clients' CPU seconds over the run (a side near
    the run's wall time x cores is the bottleneck) and its ratio to the
    same volume's 1-partition, 4-producer row."""
    rows = []
    for where, data in (("disk", disk), ("tmpfs", shm)):
        d = os.path.join(data, "native")
        os.makedirs(d, exist_ok=True)
        c = Cluster(d, n=1)
        try:
            for partitions, producers in ((1, 1), (1, 4), (8, 4), (64, 4)):
                topic = f"n-{partitions}-{producers}"
                c.create(topic, partitions)
                say(f"native produce on {where}: {count} x {size} B, {partitions} partition(s), "
                    f"{producers} rdkafka_performance process(es)")
                broker0 = cpu_seconds(c.procs[0].pid)
                clients0 = children_cpu_seconds()
                r = native_produce(tool, c.bootstrap, topic, size, producers, count)
                r.update(where=where, size=size, partitions=partitions, producers=producers,
                         broker_cpu=cpu_seconds(c.procs[0].pid) - broker0,
                         client_cpu=r.pop("client_cpu_total") - clients0)
                rows.append(r)
                say(f"  {r['mbps']:.1f} MB/s, broker CPU {r['broker_cpu']:.2f} s, "
                    f"clients CPU {r['client_cpu']:.2f} s, wall {r['secs']:.2f} s, {r['errors']} failed")
        finally:
            c.stop()
    return rows


def end_to_end(bootstrap, topic, rate=2000, seconds=8, size=100):
    """Producer timestamps each message; a consumer on the same host
    measures arrival minus send."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-e2e", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    c.consume(1, timeout=1)
    lat = []
    stop = threading.Event()

    def read():
        while not stop.is_set() or len(lat) < sent[0]:
            # One message at a time: consume(n) would hold messages back
            # until n arrived or its timeout passed.
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                sent_at = float(m.value()[:20])
                if sent_at > 0:  # not a warm-up message
                    lat.append((time.time() - sent_at) * 1000)
            if stop.is_set() and time.time() > stop_at[0] + 5:
                break

    sent = [0]
    stop_at = [0]
    t = threading.Thread(target=read)
    t.start()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True})
    for _ in range(10):
        p.produce(topic, f"{0:20.6f}".encode(), partition=0)
    p.flush(60)
    start = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):
        due = start + i / rate
        while time.perf_counter() < due:
            p.poll(0.0005)
        p.produce(topic, f"{time.time():20.6f}".encode() + b"x" * (size - 20), partition=0)
        sent[0] += 1
    p.flush(30)
    stop_at[0] = time.time()
    stop.set()
    t.join()
    c.close()
    lat.sort()
    return {"rate": rate, "n": len(lat), "p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "p999": pct(lat, 0.999)}


# ---- failover ---------------------------------------------------------------


def unavailability(cluster, topic, victim, how):
    """Broker `victim`, the leader of partition 0, gets SIGKILL or SIGTERM
    while a producer writes to partition 0 every 5 ms: returns the longest
    time without an acknowledgement from shortly before the signal until
    well after the process exited, and how long the process took to exit."""
    acks = []
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                  "enable.idempotence": True, "message.timeout.ms": 120000,
                  "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 50,
                  "retry.backoff.max.ms": 200, "log_level": 3})

    def acked(err, _msg):
        if err is None:
            acks.append(time.perf_counter())

    def probe_for(seconds):
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            p.produce(topic, b"probe", partition=0, on_delivery=acked)
            p.poll(0.005)

    probe_for(1.0)  # the producer knows the leader and is writing
    proc = cluster.procs[victim]
    hit = time.perf_counter()
    proc.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
    exited = None
    deadline = hit + 120
    while time.perf_counter() < deadline:
        probe_for(0.05)
        if exited is None and proc.poll() is not None:
            exited = time.perf_counter() - hit
        if exited is not None and acks and acks[-1] > hit + exited + 1.0:
            break
    p.flush(30)
    if exited is None:
        raise RuntimeError(f"broker {victim} did not exit within 120 s")
    window = [t for t in acks if t >= hit - 0.5]
    if not window or window[-1] < hit + exited:
        raise RuntimeError("no acknowledgement after the broker exited")
    gaps = [b - a for a, b in zip(window, window[1:])]
    return max(gaps, default=0.0), exited


def failover(data, rounds, how, session_timeout):
    c = Cluster(data, n=3, session_timeout=session_timeout)
    out = []
    try:
        c.create("failover", 3)
        for r in range(rounds):
            leader = c.leaders("failover", 3)[0]
            say(f"failover ({how}) round {r + 1}/{rounds}: broker {leader} leads partition 0")
            gap, exited = unavailability(c, "failover", leader, how)
            out.append((gap, exited))
            say(f"  longest time without an acknowledgement {gap:.2f} s; the process exited after {exited:.2f} s")
            c.start(leader)
            # Back to three live brokers before the next round.
            time.sleep(session_timeout / 2)
    finally:
        c.stop()
    return out


# ---- simulator --------------------------------------------------------------


def simulator(seeds="1..21"):
    say(f"simulator: cargo run -p sim -- --seeds {seeds}")
    text = subprocess.run(["cargo", "run", "--locked", "-q", "-p", "sim", "--", "--seeds", seeds],
                          capture_output=True, text=True, check=False).stdout
    m = re.search(r"(\d+) passed, (\d+) failed; (\d+) simulated seconds in ([\d.]+) s of wall time "
                  r"\(([\d.]+)x\), (\d+) seeds per minute", text)
    if not m:
        raise RuntimeError("the sweep printed no summary:\n" + text[-2000:])
    return {"passed": int(m[1]), "failed": int(m[2]), "simulated": int(m[3]), "wall": float(m[4]),
            "ratio": float(m[5]), "per_minute": int(m[6]), "seeds": seeds}


# ---- report -----------------------------------------------------------------


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    kaas_version = subprocess.run([KAAS, "--version"], capture_output=True, text=True).stdout.strip()
    import confluent_kafka
    return (f"{platform.node()}: {os.cpu_count()} cores ({cpu}), {mem:.0f} GiB, Linux {platform.release()}; "
            f"{kaas_version} (release); confluent-kafka {confluent_kafka.version()[0]}, "
            f"librdkafka {confluent_kafka.libversion()[0]}")


def plot(curves, fsync_ms, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for where, curve, style in curves:
        xs = [r["msgs"] for r in curve]
        for key, label in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")):
            ax.plot(xs, [r[key] for r in curve], marker="o", linestyle=style, label=f"{label} {where}")
    ax.axhline(2 * fsync_ms + 2, color="grey", linestyle=":", label="target p99 at half load: 2 fsync + 2 ms")
    ax.set_xlabel("acknowledged messages/s (1 KB, acks=all, idempotent, 1 partition, linger.ms=0)")
    ax.set_ylabel("produce latency, ms")
    ax.set_yscale("log")
    ax.set_title("kaas produce latency vs throughput (disk solid, tmpfs dashed)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    phases = set(sys.argv[1:]) or {"bounds", "produce", "native", "latency", "e2e", "txn", "tls", "failover",
                                   "sim"}
    os.makedirs(OUT, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results = {"machine": machine(), "started": stamp, "messages": MESSAGES}
    disk = tempfile.mkdtemp(prefix="kaas-bench-", dir="target")
    shm = tempfile.mkdtemp(prefix="kaas-bench-", dir="/dev/shm")
    try:
        say(f"data directory on disk: {disk}; on tmpfs: {shm}")
        fs_kind = subprocess.run(["stat", "-f", "-c", "%T", disk], capture_output=True, text=True).stdout.strip()
        results["fs"] = fs_kind
        say("bounds: fsync'd sequential writes, single fsync, loopback TCP")
        bw = max(fsync_bandwidth(disk), fsync_bandwidth(disk))
        lat50, lat99 = fsync_latency(disk)
        results["bounds"] = {"fsync_mbps": bw, "fsync_ms": lat50, "fsync_p99_ms": lat99,
                             "tmpfs_mbps": fsync_bandwidth(shm), "loopback_mbps": loopback_bandwidth()}
        say(f"  fsync'd 1 MiB writes {bw:.0f} MB/s, one 4 KiB fsync {lat50:.2f} ms (p99 {lat99:.2f}), "
            f"loopback {results['bounds']['loopback_mbps']:.0f} MB/s")

        if "produce" in phases:
            results["produce"] = []
            default = {"linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1000000}
            for where, data in (("disk", disk), ("tmpfs", shm)):
                os.makedirs(os.path.join(data, "produce"), exist_ok=True)
                c = Cluster(os.path.join(data, "produce"), n=1)
                try:
                    for size in (100, 1024):
                        for partitions in (1, 8):
                            for producers in (1, 4):
                                topic = f"p-{size}-{partitions}-{producers}"
                                c.create(topic, partitions)
                                say(f"produce on {where}: {MESSAGES} x {size} B, {partitions} partition(s), "
                                    f"{producers} producer(s)")
                                r = produce(c.bootstrap, topic, size, partitions, producers, default)
                                r.update(where=where, size=size, partitions=partitions, producers=producers,
                                         kind="default")
                                if where == "disk":
                                    r["consume"] = consume(c.bootstrap, topic, partitions, size, r["acked"])
                                results["produce"].append(r)
                                say(f"  {r['msgs']:,.0f} msgs/s {r['mbps']:.1f} MB/s p50 {r['p50']:.1f} "
                                    f"p99 {r['p99']:.1f} p99.9 {r['p999']:.1f} ms")
                    # Full 1 MiB flush cycles: large batches, one producer.
                    topic = "p-1mib"
                    c.create(topic, 1)
                    say(f"produce on {where}: 1 KB messages in 1 MiB batches")
                    r = produce(c.bootstrap, topic, 1024, 1, 1,
                                {"linger.ms": 50, "batch.size": 1 << 20, "batch.num.messages": 1000000,
                                 "queue.buffering.max.messages": 1000000})
                    r.update(where=where, size=1024, partitions=1, producers=1, kind="1mib")
                    results["produce"].append(r)
                    say(f"  {r['mbps']:.1f} MB/s")
                finally:
                    c.stop()

        if "latency" in phases:
            # Idempotence on (at most 5 requests in flight, like the Java
            # client): without it librdkafka pipelines requests without
            # bound and latency is queueing, not service. The same curve on
            # tmpfs shows what the client and the protocol cost alone.
            conf = {"linger.ms": 0, "enable.idempotence": True, "queue.buffering.max.messages": 1000000}
            for where, data in (("disk", disk), ("tmpfs", shm)):
                os.makedirs(os.path.join(data, "latency"), exist_ok=True)
                c = Cluster(os.path.join(data, "latency"), n=1)
                try:
                    c.create("lat", 1)
                    say(f"latency on {where}: 1 KB at full speed, linger.ms=0, idempotent")
                    top = produce(c.bootstrap, "lat", 1024, 1, 1, conf, count=MESSAGES // 2)
                    curve = []
                    for frac in (0.1, 0.25, 0.5, 0.75, 0.9):
                        rate = top["msgs"] * frac
                        n = int(min(max(rate * 6, 2000), MESSAGES // 2))
                        say(f"latency on {where}: {rate:,.0f} msgs/s offered ({frac:.0%} of {top['msgs']:,.0f})")
                        r = produce(c.bootstrap, "lat", 1024, 1, 1, conf, rate=rate, count=n)
                        r["offered"] = rate
                        r["fraction"] = frac
                        curve.append(r)
                        say(f"  p50 {r['p50']:.2f} p99 {r['p99']:.2f} p99.9 {r['p999']:.2f} ms")
                    curve.append({**top, "offered": None, "fraction": 1.0})
                    results["latency" if where == "disk" else "latency_tmpfs"] = curve
                finally:
                    c.stop()

        if "e2e" in phases:
            os.makedirs(os.path.join(disk, "e2e"), exist_ok=True)
            c = Cluster(os.path.join(disk, "e2e"), n=1)
            try:
                c.create("e2e", 1)
                say("end-to-end latency: 2,000 msgs/s for 8 s, linger.ms=0")
                results["e2e"] = end_to_end(c.bootstrap, "e2e")
            finally:
                c.stop()

        if "txn" in phases:
            os.makedirs(os.path.join(disk, "txn"), exist_ok=True)
            c = Cluster(os.path.join(disk, "txn"), n=1)
            try:
                results["txn"] = transactions(c, txns=int(os.environ.get("KAAS_BENCH_TXNS", "300")))
            finally:
                c.stop()

        if "native" in phases:
            tool = subprocess.run(["bash", "ci/bench/rdkafka_performance.sh"], check=True,
                                  capture_output=True, text=True).stdout.strip().splitlines()[-1]
            results["native"] = native(disk, shm, tool)

        if "tls" in phases:
            os.makedirs(os.path.join(shm, "tls"), exist_ok=True)
            results["tls"] = tls_cost(os.path.join(shm, "tls"))

        if "failover" in phases:
            st = 10
            for how in ("kill", "term"):
                d = os.path.join(disk, f"failover-{how}")
                os.makedirs(d, exist_ok=True)
                results[f"failover_{how}"] = failover(d, ROUNDS, how, st)
            results["session_timeout"] = st

        if "sim" in phases:
            results["sim"] = simulator()
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)

    with open(os.path.join(OUT, f"{stamp}.json"), "w") as f:
        json.dump(results, f, indent=1)
    report = render(results)
    if "latency" in results:
        curves = [("disk", results["latency"], "-")]
        if "latency_tmpfs" in results:
            curves.append(("tmpfs", results["latency_tmpfs"], "--"))
        plot(curves, results["bounds"]["fsync_ms"], os.path.join(OUT, f"{stamp}.png"))
        shutil.copy(os.path.join(OUT, f"{stamp}.png"), os.path.join(OUT, "latest.png"))
    with open(os.path.join(OUT, f"{stamp}.md"), "w") as f:
        f.write(report)
    shutil.copy(os.path.join(OUT, f"{stamp}.md"), os.path.join(OUT, "latest.md"))
    print(report)
    say(f"written: {OUT}/{stamp}.md, .json, .png (and latest.*)")


def render(r):
    b = r["bounds"]
    lines = [f"Machine: {r['machine']}. Data directory: {r['fs']} (disk) and tmpfs; {r['messages']:,} messages per run.",
             "",
             "Bounds measured in the same run:",
             "",
             "| bound | figure |",
             "|---|---|",
             f"| fsync'd sequential 1 MiB writes, data directory | {b['fsync_mbps']:,.0f} MB/s |",
             f"| one 4 KiB append + fdatasync, data directory | {b['fsync_ms']:.2f} ms (p99 {b['fsync_p99_ms']:.2f} ms) |",
             f"| fsync'd sequential 1 MiB writes, tmpfs | {b['tmpfs_mbps']:,.0f} MB/s |",
             f"| loopback TCP, one stream | {b['loopback_mbps']:,.0f} MB/s |",
             ""]
    if "produce" in r:
        tmpfs = {(x["size"], x["partitions"], x["producers"], x["kind"]): x for x in r["produce"] if x["where"] == "tmpfs"}
        lines += ["Produce (acks=all, linger.ms=5, one broker) and consume, on disk; `vs tmpfs` is the same run with "
                  "the data directory on tmpfs (the client + protocol ceiling), `vs fsync bound` the data directory's "
                  "fsync'd write bandwidth:",
                  "",
                  "| message | partitions | producers | msgs/s | MB/s | vs tmpfs | vs fsync bound | p50 ms | p99 ms | p99.9 ms | consume msgs/s | consume MB/s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for x in r["produce"]:
            if x["where"] != "disk" or x["kind"] != "default":
                continue
            t = tmpfs.get((x["size"], x["partitions"], x["producers"], x["kind"]))
            ratio = f"{x['mbps'] / t['mbps']:.2f}" if t else "-"
            cons = x.get("consume", {})
            lines.append(f"| {x['size']} B | {x['partitions']} | {x['producers']} | {x['msgs']:,.0f} | {x['mbps']:.1f} | "
                         f"{ratio} | {x['mbps'] / b['fsync_mbps']:.2f} | {x['p50']:.1f} | {x['p99']:.1f} | "
                         f"{x['p999']:.1f} | {cons.get('msgs', 0):,.0f} | {cons.get('mbps', 0):.1f} |")
        big = [x for x in r["produce"] if x["kind"] == "1mib"]
        if len(big) == 2:
            d, t = (next(x for x in big if x["where"] == w) for w in ("disk", "tmpfs"))
            lines += ["", f"1 KB messages in 1 MiB batches (1 MiB flush cycles): disk {d['mbps']:.1f} MB/s, "
                          f"tmpfs {t['mbps']:.1f} MB/s, ratio {d['mbps'] / t['mbps']:.2f} (target >= 0.9)."]
        one_kb = [x for x in r["produce"] if x["where"] == "disk" and x["kind"] == "default" and x["size"] == 1024]
        if one_kb:
            best = max(one_kb, key=lambda x: x["mbps"])
            t = tmpfs.get((best["size"], best["partitions"], best["producers"], "default"))
            bound = min(b["fsync_mbps"], t["mbps"]) if t else b["fsync_mbps"]
            lines.append(f"Best 1 KB produce on disk: {best['mbps']:.1f} MB/s = {best['mbps'] / bound:.2f} x "
                         f"min(fsync bound, tmpfs run) (target >= 0.7).")
        lines.append("")
    if "latency" in r:
        lines += ["Produce latency vs load (1 KB, acks=all, linger.ms=0, idempotent producer (5 requests in flight), "
                  "one producer, one partition, disk); "
                  f"plot: `latest.png`. Target: p99 at half of max throughput <= 2 x one fsync + 2 ms = "
                  f"{2 * b['fsync_ms'] + 2:.2f} ms.",
                  "",
                  "| data | offered msgs/s | acknowledged msgs/s | p50 ms | p99 ms | p99.9 ms |",
                  "|---|---|---|---|---|---|"]
        for key, where in (("latency", "disk"), ("latency_tmpfs", "tmpfs")):
            for x in r.get(key, []):
                offered = f"{x['offered']:,.0f} ({x['fraction']:.0%})" if x["offered"] else "unpaced (max)"
                lines.append(f"| {where} | {offered} | {x['msgs']:,.0f} | {x['p50']:.2f} | {x['p99']:.2f} | {x['p999']:.2f} |")
        lines.append("")
    if "e2e" in r:
        e = r["e2e"]
        lines += [f"End-to-end (produce acks=all to consumer receipt, {e['rate']:,} msgs/s, {e['n']:,} messages): "
                  f"p50 {e['p50']:.1f} ms, p99 {e['p99']:.1f} ms, p99.9 {e['p999']:.1f} ms.", ""]
    if "txn" in r:
        lines += ["Transactions (confluent-kafka, one producer committing each transaction before the next, 1 KB "
                  "records, one broker, disk) next to the same records from an idempotent producer in the same run; "
                  "consume throughput read_committed and read_uncommitted; CPU seconds of the broker and of the "
                  "client process over the produce phase (against its wall time: a side near its wall time is the "
                  "bottleneck, neither means round trips and fsyncs are):",
                  "",
                  "| producer | partitions per txn | records per txn | txns/s | records/s | MB/s | broker CPU s | client CPU s | wall s | read_committed records/s | read_uncommitted records/s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for x in r["txn"]:
            txns = f"{x['txns_s']:,.1f}" if x["txns_s"] else "-"
            client = f"{x['client_cpu']:.2f}" if x["client_cpu"] is not None else "-"
            lines.append(f"| {x['kind']} | {x['partitions']} | {x['per_txn'] if x['kind'] == 'transactional' else '-'} | "
                         f"{txns} | {x['records_s']:,.0f} | {x['mbps']:.1f} | {x['broker_cpu']:.2f} | {client} | "
                         f"{x['secs']:.2f} | {x['read_committed']:,.0f} | {x['read_uncommitted']:,.0f} |")
        lines.append("")
    if "native" in r:
        lines += [f"Native client: {5 * r['messages']:,} messages of 1 KB per row from librdkafka's rdkafka_performance "
                  "(C, Debian's librdkafka 2.0.2, one process per producer, acks=all, linger.ms=5, random partitioner), one broker. The ratio "
                  "is to the same volume's 1-partition, 4-producer row. CPU seconds of the broker and of the client "
                  "processes against the run's wall time (2 cores) show who is the bottleneck:",
                  "",
                  "| volume | partitions | producers | MB/s | vs 1 partition | broker CPU s | MB per broker CPU-s | "
                  "clients CPU s | wall s | failed |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        base = {x["where"]: x for x in r["native"] if (x["partitions"], x["producers"]) == (1, 4)}
        for x in r["native"]:
            mb = x["acked"] * x["size"] / 1e6
            ratio = x["mbps"] / base[x["where"]]["mbps"] if x["where"] in base else float("nan")
            lines.append(f"| {x['where']} | {x['partitions']} | {x['producers']} | {x['mbps']:.1f} | {ratio:.2f} | "
                         f"{x['broker_cpu']:.2f} | {mb / x['broker_cpu'] if x['broker_cpu'] else 0:,.0f} | "
                         f"{x['client_cpu']:.2f} | {x['secs']:.2f} | {x['errors']} |")
        lines.append("")
    if "tls" in r:
        lines += [f"TLS: {5 * r['messages']:,} messages per row through a PLAINTEXT and an SSL listener of the same broker (1 KB, acks=all, "
                  "linger.ms=5, data on tmpfs so that neither run waits for a disk; rustls on the broker, OpenSSL in "
                  "librdkafka), runs alternating. MB per broker CPU-second is the broker's cost; CPU seconds of the "
                  "broker and the client processes against the run's wall time (2 cores) show who is the bottleneck:",
                  "",
                  "| partitions | producers | listener | MB/s | vs PLAINTEXT | broker CPU s | MB per broker CPU-s | clients CPU s | wall s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        plain = {(x["partitions"], x["producers"]): x for x in r["tls"] if x["listener"] == "PLAINTEXT"}
        for x in r["tls"]:
            base = plain[(x["partitions"], x["producers"])]
            mb = x["acked"] * x["size"] / 1e6
            lines.append(f"| {x['partitions']} | {x['producers']} | {x['listener']} | {x['mbps']:.1f} | "
                         f"{x['mbps'] / base['mbps']:.2f} | {x['broker_cpu']:.2f} | "
                         f"{mb / x['broker_cpu'] if x['broker_cpu'] else 0:,.0f} | {x['client_cpu']:.2f} | {x['secs']:.2f} |")
        lines.append("")
    for how, label in (("kill", "kill -9 of the leader"), ("term", "controlled shutdown (SIGTERM) of the leader")):
        k = f"failover_{how}"
        if k in r:
            gaps = sorted(g for g, _ in r[k])
            exits = sorted(e for _, e in r[k])
            lines.append(f"Failover, {label}, {len(gaps)} rounds, 3 brokers, session timeout {r['session_timeout']} s: "
                         f"partition unavailable min {gaps[0]:.2f} / median {statistics.median(gaps):.2f} / max "
                         f"{gaps[-1]:.2f} s" + (f"; process exit median {statistics.median(exits):.2f} s" if how == "term" else "")
                         + ".")
    if "sim" in r:
        s = r["sim"]
        lines += ["", f"Simulator (debug build, `cargo run -p sim -- --seeds {s['seeds']}`): {s['passed']} passed, "
                      f"{s['simulated']} simulated seconds in {s['wall']:.1f} s ({s['ratio']:.1f}x), "
                      f"{s['per_minute']} seeds per minute."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    mp.set_start_method("fork")
    main()
