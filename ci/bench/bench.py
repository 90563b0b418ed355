"""What kaas costs, measured with real clients next to bounds taken in the
same run: see the module docs of each phase below and docs/benchmarks.md.

Run: bash ci/bench/run            (all phases)
     bash ci/bench/run produce    (some phases: bounds produce native latency
                                   e2e txn tls failover scale sim)

Clients: confluent-kafka (librdkafka) from Python, one process per producer;
the native phase runs librdkafka's C load generator, rdkafka_performance
(ci/bench/rdkafka_performance.sh builds it), so that the broker and not
the client is measured, against kaas on three volumes (local disk, tmpfs,
the NFS-like test volume) and against the peer broker Tansu
(ci/bench/tansu.sh installs it).
Every figure is printed next to its bound; absolute numbers on a shared
2-core machine drift from run to run, the ratios much less.
"""

import contextlib
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
# The test volume's commit (fsync) latency: a cloud NFS service commits in
# 2 to 3 ms.
COMMIT_MS = float(os.environ.get("KAAS_BENCH_COMMIT_MS", "2.5"))


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


class Brokers:
    """What the phases need of a broker deployment: a bootstrap list, the
    broker processes (for their CPU time and memory), topics."""

    bootstrap = ""
    procs = []

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

    def stop(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.kill()
                p.wait()

    def delete(self, topic):
        """Deletes a topic, if the broker can (a row's data must not crowd
        the next row's memory)."""
        try:
            self.admin.delete_topics([topic])[topic].result(30)
        except Exception as e:  # noqa: BLE001 - a broker without DeleteTopics keeps it
            say(f"  {topic} not deleted: {e}")


def release_memory(data):
    """Removes a finished deployment's data and, as root, writes back and
    drops the page cache, so that the next deployment starts with the
    machine's memory as free as the first one did. (On this kind of VM,
    memory the guest freed goes back to the host, and touching it again
    costs far more than a copy: a deployment that runs while an earlier
    one's files fill tmpfs and the page cache pays for it in CPU seconds.)"""
    shutil.rmtree(data, ignore_errors=True)
    if os.geteuid() == 0:
        os.sync()
        with contextlib.suppress(OSError), open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")


class Cluster(Brokers):
    """`n` kaas processes sharing one data directory."""

    def __init__(self, data, n=1, session_timeout=10, heartbeat=2, partitions=1, logs=None):
        self.data = data
        self.logs = logs or data
        self.ports = [free_port() for _ in range(n)]
        self.procs = [None] * n
        self.args = dict(session_timeout=session_timeout, heartbeat=heartbeat, partitions=partitions)
        self.start_all()
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def start_all(self):
        """Every broker at once, as the StatefulSet does (podManagementPolicy:
        Parallel): each one's start-up waits two heartbeats to see that no
        other process runs under its id, and those waits overlap."""
        threads = [threading.Thread(target=self.start, args=(i,)) for i in range(len(self.procs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        missing = [i for i, p in enumerate(self.procs) if p is None or p.poll() is not None]
        if missing:
            raise RuntimeError(f"brokers {missing} did not start; see their logs in {self.logs}")

    def start(self, i):
        a = self.args
        self.procs[i] = start_kaas(
            ["--data-dir", self.data, "--broker-id", str(i), "--listen", f"127.0.0.1:{self.ports[i]}",
             "--session-timeout-secs", str(a["session_timeout"]), "--heartbeat-interval-secs", str(a["heartbeat"]),
             "--num-partitions", str(a["partitions"])],
            self.ports[i], os.path.join(self.logs, f"kaas-{i}.log"),
            env={**os.environ, "KAAS_LOG": "info"})


class Tansu(Brokers):
    """The peer broker, Tansu, on one of its storage engines: `memory`
    (keeps nothing) or `sqlite` (a database file in `data`)."""

    def __init__(self, binary, engine, data):
        self.data = data
        port = free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        url = {"memory": "memory://tansu/", "sqlite": "sqlite://tansu.db"}[engine]
        # The sqlite engine's path is relative to the working directory.
        self.procs = [start_kaas(
            ["broker", "--listener-url", f"tcp://{self.bootstrap}",
             "--advertised-listener-url", f"tcp://{self.bootstrap}", "--storage-engine", url],
            port, os.path.join(data, "tansu.log"), binary=os.path.abspath(binary), cwd=data,
            env={**os.environ, "RUST_LOG": "warn"})]
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})


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


NATIVE_CONSUMED = re.compile(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms")

NATIVE_ROWS = ((1, 1), (1, 4), (8, 4), (64, 4))


def native_consume(tool, bootstrap, topic, partitions, count, consumers=1):
    """`consumers` rdkafka_performance consumers, the topic's partitions
    dealt out between them, reading from the start until each has seen
    the end of its partitions: throughput of all `count` messages from the
    first message to the end (the slowest consumer's own clock; a short
    fetch.wait.max.ms, so that seeing the end costs 20 ms, not 500), and
    the clients' CPU seconds."""
    cmds = []
    for i in range(consumers):
        parts = [arg for p in range(i, partitions, consumers) for arg in ("-p", str(p))]
        cmds.append([tool, "-C", "-t", topic, "-b", bootstrap, *parts, "-o", "beginning", "-e", "-q",
                     "-X", "enable.partition.eof=true", "-X", "fetch.wait.max.ms=20", "-X", "fetch.max.bytes=52428800",
                     "-X", "max.partition.fetch.bytes=8388608"])
    cpu0 = children_cpu_seconds()
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for cmd in cmds]
    msgs = nbytes = 0
    secs = 0.0
    for pr in procs:
        out, _ = pr.communicate(timeout=600)
        done = NATIVE_CONSUMED.findall(out)
        if not done:
            raise RuntimeError(f"rdkafka_performance -C printed no summary:\n{out[-2000:]}")
        msgs += int(done[-1][0])
        nbytes += int(done[-1][1])
        secs = max(secs, int(done[-1][2]) / 1000)
    wall = time.perf_counter() - start
    if msgs != count:
        raise RuntimeError(f"{topic}: consumed {msgs} messages, {count} were acknowledged")
    return {"msgs": msgs / secs, "mbps": nbytes / 1e6 / secs, "got": msgs, "secs": secs, "wall": wall,
            "consumers": consumers, "client_cpu": children_cpu_seconds() - cpu0}


@contextlib.contextmanager
def test_volume(shm, commit_ms):
    """The NFS-like FUSE test volume (testvol/, as in the power-loss rounds)
    with `commit_ms` per fsync and 1 ms per create/rename/unlink, its
    backing directory on tmpfs so that the latencies are the volume's own:
    yields its data directory, or None (saying why) where FUSE cannot be
    mounted."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "powerloss"))
    from testvol import TestVol, fuse_available  # noqa: E402
    why = fuse_available()
    if why is None and os.geteuid() != 0:
        why = "mounting it needs root"
    if why is not None:
        say(f"no test volume: {why}")
        yield None
        return
    subprocess.run(["cargo", "build", "--locked", "--release", "-q", "-p", "testvol"], check=True)
    work = tempfile.mkdtemp(prefix="kaas-bench-vol-", dir=shm)
    vol = TestVol(work, 1, "target/release/testvol", ["--commit-ms", str(commit_ms), "--metadata-ms", "1"])
    try:
        yield os.path.join(vol.points[0], "data")
    finally:
        vol.stop()
        shutil.rmtree(work, ignore_errors=True)


def client_bound(row, cores):
    """The clients used more than half of the machine's CPU over the row:
    a faster broker could not have gone much faster."""
    return row["client_cpu"] > 0.5 * row["secs"] * cores


def native(deployments, tool, sizes=(1024, 100), count=5 * MESSAGES):
    """Brokers measured with a native client, one deployment after the
    other: for each message size, 1, 8 and 64 partitions with 1 and 4
    producer processes (`count` 1 KB messages a row, five times as many
    of 100 B), each row with the broker's and the clients'
    CPU seconds (a side near the run's wall time x cores is the
    bottleneck); then one and two consumers read the 8-partition 1 KB
    topic back. Each row's topic is deleted after it and each deployment's
    data and page cache released, so that every row starts from the same
    free memory.
    `deployments` is a list of (broker, volume, start) where start() gives
    a running Brokers."""
    rows, consumes = [], []
    for broker, where, start in deployments:
        c = start()
        try:
            pid = c.procs[0].pid
            for size in sizes:
                n = count * max(1, 512 // size)
                for partitions, producers in NATIVE_ROWS:
                    topic = f"n-{size}-{partitions}-{producers}"
                    c.create(topic, partitions)
                    say(f"native produce, {broker} on {where}: {n:,} x {size} B, {partitions} partition(s), "
                        f"{producers} rdkafka_performance process(es)")
                    broker0, clients0 = cpu_seconds(pid), children_cpu_seconds()
                    r = native_produce(tool, c.bootstrap, topic, size, producers, n)
                    r.update(broker=broker, where=where, size=size, partitions=partitions, producers=producers,
                             broker_cpu=cpu_seconds(pid) - broker0,
                             client_cpu=r.pop("client_cpu_total") - clients0)
                    rows.append(r)
                    say(f"  {r['mbps']:.1f} MB/s, broker CPU {r['broker_cpu']:.2f} s, "
                        f"clients CPU {r['client_cpu']:.2f} s, wall {r['secs']:.2f} s, {r['errors']} failed")
                    if size == 1024 and (partitions, producers) == (8, 4):
                        for consumers in (1, 2):
                            broker0 = cpu_seconds(pid)
                            k = native_consume(tool, c.bootstrap, topic, partitions, r["acked"], consumers)
                            k.update(broker=broker, where=where, size=size, partitions=partitions,
                                     broker_cpu=cpu_seconds(pid) - broker0, produce_mbps=r["mbps"])
                            consumes.append(k)
                            say(f"  {consumers} consumer(s): {k['mbps']:.1f} MB/s ({k['got']:,} messages), "
                                f"broker CPU {k['broker_cpu']:.2f} s, clients CPU {k['client_cpu']:.2f} s")
                    c.delete(topic)
        finally:
            c.stop()
            release_memory(c.data)
    return {"produce": rows, "consume": consumes}


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


# ---- many partitions -----------------------------------------------------------


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def all_led(cluster, topics, per, avoid=None):
    """Every partition of `topics` has a live leader (not `avoid`)."""
    try:
        md = cluster.admin.list_topics(timeout=10)
    except Exception:
        return False
    live = set(md.brokers) - {avoid}
    for name in topics:
        t = md.topics.get(name)
        if t is None or t.error is not None or len(t.partitions) != per:
            return False
        if any(p.leader not in live for p in t.partitions.values()):
            return False
    return True


def wait_led(cluster, topics, per, avoid=None, timeout=300):
    deadline = time.perf_counter() + timeout
    while not all_led(cluster, topics, per, avoid):
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{len(topics)} topics: not all partitions led after {timeout} s")
        time.sleep(0.05)


def api_versions_connections(port, n):
    """`n` client connections to one broker, each having been answered
    an ApiVersions request (so that the broker holds its per-connection
    state), kept open."""
    client = b"bench"
    body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + (1).to_bytes(4, "big") + \
        len(client).to_bytes(2, "big") + client
    frame = len(body).to_bytes(4, "big") + body
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(frame)
        size = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
        s.recv(size, socket.MSG_WAITALL)
        socks.append(s)
    return socks


def scale(data, logs, steps=(10, 100, 1000), per=10, session_timeout=10, records=200, size=512):
    """Three brokers on one volume with 10, 100 and 1,000 partitions (topics
    of `per` partitions): creating them, resident memory per partition and
    per connection, Metadata latency, one consumer reading all of them,
    start-up of the whole cluster on the populated volume, and failover
    when the broker leading the most partitions is killed."""
    rows = []
    for total in steps:
        d = os.path.join(data, f"scale-{total}")
        os.makedirs(d, exist_ok=True)
        topics = [f"s{total}-{i:03d}" for i in range(total // per)]
        c = Cluster(d, n=3, session_timeout=session_timeout, logs=logs)
        try:
            row = {"partitions": total, "topics": len(topics), "per": per}
            time.sleep(1)
            empty = [rss_mb(p.pid) for p in c.procs]
            say(f"scale, {total} partitions: creating {len(topics)} topics of {per}")
            t0 = time.perf_counter()
            for i in range(0, len(topics), 50):
                fs = c.admin.create_topics([NewTopic(t, num_partitions=per) for t in topics[i:i + 50]])
                for f in fs.values():
                    f.result(120)
            wait_led(c, topics, per)
            row["create_s"] = time.perf_counter() - t0
            say(f"  created and led in {row['create_s']:.2f} s; writing {records} x {size} B to each partition")
            p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5,
                          "queue.buffering.max.messages": 2000000, "queue.buffering.max.kbytes": 2097151})
            payload = b"r" * size
            t0 = time.perf_counter()
            for t in topics:
                for part in range(per):
                    for _ in range(records):
                        p.produce(t, payload, partition=part)
                    p.poll(0)
            left = p.flush(300)
            row["produce_s"] = time.perf_counter() - t0
            if left:
                raise RuntimeError(f"{left} messages not delivered")
            time.sleep(1)
            loaded = [rss_mb(x.pid) for x in c.procs]
            row["rss_mb"] = sum(loaded)
            row["rss_per_partition_kb"] = (sum(loaded) - sum(empty)) * 1024 / total
            lat = []
            for _ in range(20):
                t0 = time.perf_counter()
                c.admin.list_topics(timeout=30)
                lat.append((time.perf_counter() - t0) * 1000)
            lat.sort()
            row["metadata_ms"], row["metadata_p99_ms"] = statistics.median(lat), lat[-1]
            say(f"  {sum(loaded):.0f} MB resident in all ({row['rss_per_partition_kb']:.0f} KB per partition); "
                f"Metadata of all topics median {row['metadata_ms']:.1f} ms")
            before = rss_mb(c.procs[0].pid)
            socks = api_versions_connections(c.ports[0], 200)
            row["rss_per_connection_kb"] = (rss_mb(c.procs[0].pid) - before) * 1024 / len(socks)
            for sk in socks:
                sk.close()
            cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"bench-scale-{total}",
                             "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                             "max.partition.fetch.bytes": 1048576})
            cons.assign([TopicPartition(t, part, 0) for t in topics for part in range(per)])
            expect, got, first, idle = total * records, 0, None, 0
            t0 = time.perf_counter()
            while got < expect and idle < 5:
                batch = cons.consume(10000, timeout=2)
                idle = 0 if batch else idle + 1
                n = sum(1 for m in batch if m.error() is None)
                if n and first is None:
                    first = time.perf_counter() - t0
                got += n
            secs = time.perf_counter() - t0
            cons.close()
            row.update(consume_s=secs, consume_first_s=first, consume_got=got, consume_expect=expect,
                       consume_mbps=got * size / 1e6 / secs)
            say(f"  one consumer read {got:,}/{expect:,} messages from all partitions in {secs:.2f} s "
                f"({row['consume_mbps']:.1f} MB/s); {row['rss_per_connection_kb']:.0f} KB per connection")
            # The whole cluster restarted on the populated volume.
            c.stop()
            t0 = time.perf_counter()
            c.start_all()
            wait_led(c, topics, per)
            row["startup_s"] = time.perf_counter() - t0
            say(f"  restart of all three brokers: every partition led after {row['startup_s']:.2f} s")
            # Failover: kill -9 the broker leading the most partitions.
            md = c.admin.list_topics(timeout=30)
            led = {}
            for t in topics:
                for part, pm in md.topics[t].partitions.items():
                    led.setdefault(pm.leader, []).append((t, part))
            victim = max(led, key=lambda b: len(led[b]))
            theirs = led[victim]
            acks = {}
            p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0,
                          "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000,
                          "retry.backoff.ms": 50, "retry.backoff.max.ms": 200, "log_level": 3})
            p.list_topics(timeout=30)
            c.procs[victim].kill()
            hit = time.perf_counter()

            def acked(err, msg):
                if err is None:
                    acks[(msg.topic(), msg.partition())] = time.perf_counter() - hit

            for t, part in theirs:
                p.produce(t, b"after", partition=part, on_delivery=acked)
            t_led = None
            while len(acks) < len(theirs) and time.perf_counter() - hit < 180:
                p.poll(0.05)
                if t_led is None and all_led(c, topics, per, avoid=victim):
                    t_led = time.perf_counter() - hit
            p.flush(10)
            c.procs[victim].wait()
            row.update(victim_partitions=len(theirs), failover_led_s=t_led,
                       failover_writable_s=max(acks.values()) if len(acks) == len(theirs) else None,
                       failover_writable_count=len(acks), session_timeout=session_timeout)
            say(f"  kill -9 of broker {victim} (leading {len(theirs)}): all led again after "
                f"{t_led if t_led is not None else float('nan'):.2f} s, all of them written to after "
                f"{row['failover_writable_s'] if row['failover_writable_s'] is not None else float('nan'):.2f} s "
                f"({len(acks)}/{len(theirs)})")
            rows.append(row)
        finally:
            c.stop()
            shutil.rmtree(d, ignore_errors=True)
    return rows


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
    ax.set_title("kaas produce latency vs throughput (disk solid, tmpfs dashed, test volume dotted)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    phases = set(sys.argv[1:]) or {"bounds", "produce", "native", "latency", "e2e", "txn", "tls", "failover",
                                   "scale", "sim"}
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
            # tmpfs shows what the client and the protocol cost alone; on
            # the test volume, what a 2.5 ms commit adds.
            conf = {"linger.ms": 0, "enable.idempotence": True, "queue.buffering.max.messages": 1000000}
            with test_volume(shm, COMMIT_MS) as vol:
                volumes = [("disk", disk), ("tmpfs", shm)] + ([("testvol", vol)] if vol else [])
                for where, data in volumes:
                    d = os.path.join(data, "latency")
                    os.makedirs(d, exist_ok=True)
                    logs = tempfile.mkdtemp(prefix="logs-", dir=shm)
                    c = Cluster(d, n=1, logs=logs)
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
                        results["latency" if where == "disk" else f"latency_{where}"] = curve
                    finally:
                        c.stop()
                        release_memory(d)
            results["commit_ms"] = COMMIT_MS

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
            tool = subprocess.run(["bash", "ci/bench/rdkafka_performance.sh", sys.prefix], check=True,
                                  capture_output=True, text=True).stdout.strip().splitlines()[-1]
            say("the peer broker: bash ci/bench/tansu.sh (a ten-minute build the first time)")
            tansu = subprocess.run(["bash", "ci/bench/tansu.sh"], check=True,
                                   stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]

            def fresh(parent, name):
                d = os.path.join(parent, name)
                os.makedirs(d, exist_ok=True)
                return d

            logs = fresh(shm, "native-logs")
            with test_volume(shm, COMMIT_MS) as vol:
                deployments = [("kaas", "disk", lambda: Cluster(fresh(disk, "native"), logs=logs)),
                               ("kaas", "tmpfs", lambda: Cluster(fresh(shm, "native"), logs=logs))]
                if vol:
                    deployments.append(("kaas", "testvol", lambda: Cluster(fresh(vol, "native"), logs=logs)))
                deployments += [("tansu-memory", "memory", lambda: Tansu(tansu, "memory", fresh(shm, "tansu-memory"))),
                                ("tansu-sqlite", "disk", lambda: Tansu(tansu, "sqlite", fresh(disk, "tansu-sqlite")))]
                results["native"] = native(deployments, tool)
            results["commit_ms"] = COMMIT_MS
            results["tansu"] = subprocess.run([tansu, "--version"], capture_output=True, text=True).stdout.strip()

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

        if "scale" in phases:
            logs = tempfile.mkdtemp(prefix="scale-logs-", dir=shm)
            results["scale"] = scale(disk, logs)

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
        for where, style in (("tmpfs", "--"), ("testvol", ":")):
            if f"latency_{where}" in results:
                curves.append((where, results[f"latency_{where}"], style))
        plot(curves, results["bounds"]["fsync_ms"], os.path.join(OUT, f"{stamp}.png"))
        shutil.copy(os.path.join(OUT, f"{stamp}.png"), os.path.join(OUT, "latest.png"))
    with open(os.path.join(OUT, f"{stamp}.md"), "w") as f:
        f.write(report)
    shutil.copy(os.path.join(OUT, f"{stamp}.md"), os.path.join(OUT, "latest.md"))
    print(report)
    say(f"written: {OUT}/{stamp}.md, .json, .png (and latest.*)")


def target(ok, what):
    return f"- {'met' if ok else 'MISSED'}: {what}"


def render_native(r):
    n = r["native"]
    rows, cores = n["produce"], os.cpu_count()
    commit = r.get("commit_ms", COMMIT_MS)
    key = {(x["broker"], x["where"], x["size"], x["partitions"], x["producers"]): x for x in rows}
    out = [f"Native client: librdkafka's rdkafka_performance (C, linked against librdkafka 2.16.0, one process per producer, "
           f"acks=all, linger.ms=5, random partitioner), {5 * r['messages']:,} messages of 1 KB or five times as many "
           "of 100 B per row, one broker. Volumes: the local disk, tmpfs, and the NFS-like test volume (testvol/, "
           f"FUSE, {commit:g} ms per commit and 1 ms per create/rename/unlink, backing store on tmpfs). The peer, "
           f"{r.get('tansu', 'Tansu')}, runs on its memory engine (keeps nothing) and its sqlite engine (local disk). "
           "`vs 1 partition` is the ratio to the same broker and volume's 1-partition, 4-producer row. CPU seconds of "
           f"the broker and of the client processes against the run's wall time ({cores} cores) show who is the "
           "bottleneck: `clients` where the clients used more than half of the machine.",
           "",
           "| broker | volume | message | partitions | producers | MB/s | msgs/s | vs 1 partition | broker CPU s | "
           "MB per broker CPU-s | clients CPU s | wall s | bottleneck | failed |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in rows:
        base = key.get((x["broker"], x["where"], x["size"], 1, 4))
        ratio = f"{x['mbps'] / base['mbps']:.2f}" if base else "-"
        mb = x["acked"] * x["size"] / 1e6
        busy = "clients" if client_bound(x, cores) else "broker" if x["broker_cpu"] > 0.5 * x["secs"] * cores \
            else "waits (commits, round trips)"
        out.append(f"| {x['broker']} | {x['where']} | {x['size']} B | {x['partitions']} | {x['producers']} | "
                   f"{x['mbps']:.1f} | {x['msgs']:,.0f} | {ratio} | {x['broker_cpu']:.2f} | "
                   f"{mb / x['broker_cpu'] if x['broker_cpu'] else 0:,.0f} | {x['client_cpu']:.2f} | "
                   f"{x['secs']:.2f} | {busy} | {x['errors']} |")
    out += ["", "One and two rdkafka_performance consumers (the partitions dealt out between them) reading the "
                "8-partition 1 KB topic from the start to its end, next to the produce row that wrote it (a "
                "librdkafka consumer has one fetch in flight per broker, and parses between fetches):", "",
            "| broker | volume | consumers | consume MB/s | produce MB/s | consume / produce | broker CPU s | "
            "clients CPU s | first to last message s |",
            "|---|---|---|---|---|---|---|---|---|"]
    for k in n["consume"]:
        out.append(f"| {k['broker']} | {k['where']} | {k['consumers']} | {k['mbps']:.1f} | {k['produce_mbps']:.1f} | "
                   f"{k['mbps'] / k['produce_mbps']:.2f} | {k['broker_cpu']:.2f} | {k['client_cpu']:.2f} | "
                   f"{k['secs']:.2f} |")
    out += ["", "Targets (ratios within this run):", ""]
    for where in ("disk", "tmpfs", "testvol"):
        base = key.get(("kaas", where, 1024, 1, 4))
        for parts in (8, 64):
            x = key.get(("kaas", where, 1024, parts, 4))
            if base and x:
                ratio = x["mbps"] / base["mbps"]
                out.append(target(ratio >= 1.0, f"kaas on {where}, 1 KB, 4 producers: {parts} partitions "
                                                f"{ratio:.2f}x the 1-partition throughput (>= 1.0)"))
    vol, local = key.get(("kaas", "testvol", 1024, 8, 4)), key.get(("kaas", "disk", 1024, 8, 4))
    if vol and local:
        ratio = vol["mbps"] / local["mbps"]
        out.append(target(ratio >= 0.7, f"kaas on the test volume ({commit:g} ms commits), 1 KB, 4 producers, "
                                        f"8 partitions: {ratio:.2f}x the local disk (>= 0.7)"))
    for k in n["consume"]:
        if k["broker"] == "kaas" and k["consumers"] == 2:
            ratio = k["mbps"] / k["produce_mbps"]
            out.append(target(ratio >= 2.0, f"kaas on {k['where']}: consume (2 consumers) {ratio:.2f}x produce "
                                            "(4 producers) (>= 2)"))
    worst_eff, worst_tput = None, None
    for x in rows:
        if x["broker"] != "kaas" or x["where"] != "disk":
            continue
        peer = key.get(("tansu-memory", "memory", x["size"], x["partitions"], x["producers"]))
        if not peer or not x["broker_cpu"] or not peer["broker_cpu"]:
            continue
        eff = (x["acked"] * x["size"] / x["broker_cpu"]) / (peer["acked"] * peer["size"] / peer["broker_cpu"])
        what = f"{x['size']} B, {x['partitions']} partition(s), {x['producers']} producer(s)"
        if worst_eff is None or eff < worst_eff[0]:
            worst_eff = (eff, what)
        if not client_bound(x, cores) and not client_bound(peer, cores):
            tput = x["mbps"] / peer["mbps"]
            if worst_tput is None or tput < worst_tput[0]:
                worst_tput = (tput, what)
    if worst_eff:
        out.append(target(worst_eff[0] >= 1.5, f"MB per broker CPU-second, kaas durable on disk vs Tansu-memory: "
                                               f"lowest {worst_eff[0]:.2f}x ({worst_eff[1]}; >= 1.5 on every row)"))
    if worst_tput:
        out.append(target(worst_tput[0] >= 1.0, f"throughput, kaas on disk vs Tansu-memory where neither row is "
                                                f"client-bound: lowest {worst_tput[0]:.2f}x ({worst_tput[1]}; >= 1.0)"))
    elif worst_eff:
        out.append("- throughput, kaas on disk vs Tansu-memory: every row had a client-bound side")
    return out + [""]


def render_scale(rows):
    out = ["Many partitions: three brokers on one volume (local disk), topics of 10 partitions, 200 x 512 B written "
           "to every partition. Memory is resident set size (all three brokers; per connection: broker 0 after 200 "
           "idle connections that each had an ApiVersions answered); Metadata is a full Metadata request (all "
           "topics) from librdkafka, median of 20; the consumer is one confluent-kafka consumer assigned every "
           "partition; start-up is all three brokers killed (-9) and started together on the populated volume until "
           "every partition has a leader again (each broker first watches its id's heartbeat for two heartbeat "
           "intervals, 4 s, to see that no other process runs under its id); failover kills (-9) the broker leading the most partitions and measures until every one "
           "of them has a new leader and until a message written to each of them is acknowledged.",
           "",
           "| partitions | create s | resident MB | KB per partition | KB per connection | Metadata ms (p50/max) | "
           "consume all MB/s | consume s | start-up s | failover: partitions moved | led again s | writable s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    def f(v):
        return f"{v:.2f}" if v is not None else "-"

    for x in rows:
        out.append(f"| {x['partitions']:,} | {x['create_s']:.2f} | {x['rss_mb']:.0f} | {x['rss_per_partition_kb']:.0f} | "
                   f"{x['rss_per_connection_kb']:.0f} | {x['metadata_ms']:.1f} / {x['metadata_p99_ms']:.1f} | "
                   f"{x['consume_mbps']:.1f} | {x['consume_s']:.2f} | {x['startup_s']:.2f} | "
                   f"{x['victim_partitions']} | {f(x['failover_led_s'])} | {f(x['failover_writable_s'])} |")
    out.append("")
    for x in rows:
        w = x["failover_writable_s"]
        bound = x["session_timeout"] + 2
        out.append(target(w is not None and w <= bound,
                          f"{x['partitions']:,} partitions: the killed broker's {x['victim_partitions']} partitions "
                          f"writable again after {f(w)} s "
                          f"(<= session timeout {x['session_timeout']} s + 2 s)"))
        if x["consume_got"] != x["consume_expect"]:
            out.append(f"- MISSED: {x['partitions']:,} partitions: the consumer read {x['consume_got']:,} of "
                       f"{x['consume_expect']:,} messages")
    return out + [""]


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
                  "one producer, one partition; disk, tmpfs and the test volume); "
                  f"plot: `latest.png`. Target: p99 at half of max throughput <= 2 x one fsync + 2 ms = "
                  f"{2 * b['fsync_ms'] + 2:.2f} ms.",
                  "",
                  "| data | offered msgs/s | acknowledged msgs/s | p50 ms | p99 ms | p99.9 ms |",
                  "|---|---|---|---|---|---|"]
        for key, where in (("latency", "disk"), ("latency_tmpfs", "tmpfs"), ("latency_testvol", "testvol")):
            for x in r.get(key, []):
                offered = f"{x['offered']:,.0f} ({x['fraction']:.0%})" if x["offered"] else "unpaced (max)"
                lines.append(f"| {where} | {offered} | {x['msgs']:,.0f} | {x['p50']:.2f} | {x['p99']:.2f} | {x['p999']:.2f} |")
        lines.append("")
        half = {k: next((x for x in r.get(k, []) if x["fraction"] == 0.5), None)
                for k in ("latency", "latency_tmpfs", "latency_testvol")}
        if half["latency"]:
            bound = 2 * b["fsync_ms"] + 2
            lines.append(target(half["latency"]["p99"] <= bound, f"disk: p99 at half of max throughput "
                                f"{half['latency']['p99']:.2f} ms (<= 2 fsyncs + 2 ms = {bound:.2f} ms)"))
        if half["latency_testvol"] and half["latency_tmpfs"]:
            commit = r.get("commit_ms", COMMIT_MS)
            bound = half["latency_tmpfs"]["p99"] + 2 * commit
            lines.append(target(half["latency_testvol"]["p99"] <= bound,
                                f"test volume: p99 at half of max throughput {half['latency_testvol']['p99']:.2f} ms "
                                f"(<= the tmpfs run's p99 + two {commit:g} ms commits = {bound:.2f} ms)"))
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
        lines += render_native(r)
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
    if "scale" in r:
        lines += render_scale(r["scale"])
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
