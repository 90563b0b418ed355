"""Where the broker's CPU goes under a native produce load: runs rows of
rdkafka_performance producers (as the benchmark's native phase does)
against one release broker on the local disk, tmpfs or the NFS-like test
volume, samples the broker (and the test volume's daemon) with
`perf record --call-graph dwarf` during one of the rows, and writes a
flame graph (inferno) and a breakdown of the samples by what they were
doing: copying into the volume's page cache, fsync, socket receive and
send, CRC checks, the test volume's daemon, kaas's own code, the runtime.

Run: bash ci/bench/profile [--volume tmpfs] [--rows 1x1,1x4,8x4] [--profile-row 2]
"""

import argparse
import collections
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402

# A sample goes to the category of the frame nearest its leaf that matches
# one (a memcpy inside a socket receive is the receive's), except that
# everything the test volume's daemon does is the daemon's.
CATEGORIES = (
    ("CRC check of record batches", r"crc32c"),
    ("write into the volume (page cache / FUSE)", r"write_all_vectored_at|pwritev|vfs_writev"),
    ("fsync", r"fsync|fdatasync"),
    ("socket receive", r"recvfrom|tcp_recvmsg|sock_recvmsg"),
    ("socket send", r"sendmsg|tcp_sendmsg|sock_write_iter|do_writev"),
    ("file reads", r"pread|vfs_read|filemap_read"),
    ("memory allocation and page faults", r"malloc|_int_free|cfree|exc_page_fault|mmap|munmap|madvise"),
    ("scheduler, wake-ups, runtime", r"futex|schedule|epoll|finish_task_switch|tokio::runtime"),
    ("kaas (decode, produce path, responses)", r"^broker::|^vfs::|kafka_protocol"),
)
DAEMON = "test volume daemon"


def categorise(folded):
    """(category -> samples, total) of an inferno-collapse-perf --pid
    output (each stack starts with the process name and pid)."""
    counts, total = collections.Counter(), 0
    compiled = [(name, re.compile(p)) for name, p in CATEGORIES]
    for line in folded.splitlines():
        stack, n = line.rsplit(" ", 1)
        n = int(n)
        total += n
        frames = stack.split(";")
        found = DAEMON if frames[0].startswith("testvol") else None
        for frame in reversed(frames):
            if found:
                break
            found = next((name for name, pattern in compiled if pattern.search(frame)), None)
        counts[found or "other (kernel, libc)"] += n
    return counts, total


def tool(name):
    path = os.path.join("target", "bench-tools", "inferno", "bin", name)
    if not os.path.exists(path):
        subprocess.run(["cargo", "install", "--locked", "inferno", "--version", "0.12.8", "--root",
                        os.path.join("target", "bench-tools", "inferno")], check=True)
    return path


def pids_of(pattern):
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--volume", choices=("disk", "tmpfs", "testvol"), default="tmpfs")
    ap.add_argument("--rows", default="1x1,1x4,8x4,64x4", help="partitions x producers, run in order")
    ap.add_argument("--profile-row", type=int, default=2, help="which row (from 0) to sample")
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages per row")
    ap.add_argument("--size", type=int, default=1024, help="bytes per message")
    ap.add_argument("--frequency", type=int, default=299, help="samples per second per thread")
    ap.add_argument("--out", default=bench.OUT)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rdkafka = subprocess.run(["bash", "ci/bench/rdkafka_performance.sh", sys.prefix], check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
    collapse, flamegraph = tool("inferno-collapse-perf"), tool("inferno-flamegraph")
    scratch = tempfile.mkdtemp(prefix="kaas-profile-", dir="/dev/shm" if args.volume != "disk" else "target")
    rows = [tuple(map(int, r.split("x"))) for r in args.rows.split(",")]
    name = f"profile-{args.volume}-{rows[args.profile_row][0]}x{rows[args.profile_row][1]}-{args.size}B"
    data_file = os.path.join(scratch, "perf.data")
    try:
        with data_directory(args.volume, scratch) as data:
            c = bench.Cluster(data, logs=scratch)
            try:
                pid = c.procs[0].pid
                for i, (partitions, producers) in enumerate(rows):
                    topic = f"profile-{i}"
                    c.create(topic, partitions)
                    perf = None
                    if i == args.profile_row:
                        targets = [pid] + pids_of("release/testvol")
                        perf = subprocess.Popen(["perf", "record", "-F", str(args.frequency), "--call-graph",
                                                 "dwarf,32768", "-p", ",".join(map(str, targets)), "-o", data_file],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        time.sleep(0.5)
                    b0, c0 = bench.cpu_seconds(pid), bench.children_cpu_seconds()
                    r = bench.native_produce(rdkafka, c.bootstrap, topic, args.size, producers, args.messages)
                    broker_cpu = bench.cpu_seconds(pid) - b0
                    if perf:
                        perf.send_signal(signal.SIGINT)
                        perf.wait()
                    bench.say(f"{partitions} x {producers}{' (sampled)' if perf else ''}: {r['mbps']:.1f} MB/s, "
                              f"broker CPU {broker_cpu:.2f} s, {r['mbps'] * r['secs'] / broker_cpu:.0f} MB per "
                              f"broker CPU-s, clients CPU {r['client_cpu_total'] - c0:.2f} s, wall {r['secs']:.2f} s")
            finally:
                c.stop()
        script = subprocess.run(["perf", "script", "-i", data_file], check=True, capture_output=True).stdout
        folded = subprocess.run([collapse, "--pid"], input=script, check=True, capture_output=True).stdout
        with open(os.path.join(args.out, f"{name}.folded"), "wb") as f:
            f.write(folded)
        svg = os.path.join(args.out, f"{name}.svg")
        with open(svg, "wb") as f:
            subprocess.run([flamegraph, "--title", f"kaas broker, {args.volume}, {name}"], input=folded, check=True,
                           stdout=f)
        counts, total = categorise(folded.decode())
        print(f"\nSamples of the broker{' and the test volume daemon' if args.volume == 'testvol' else ''}: {total:,} "
              f"(perf cpu-clock, weighted); flame graph {svg}\n")
        print("| what | share of samples |\n|---|---|")
        for what, n in counts.most_common():
            print(f"| {what} | {100 * n / total:.1f}% |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def data_directory(volume, scratch):
    """The data directory on the chosen volume (the test volume mounted for
    the run)."""
    if volume != "testvol":
        data = os.path.join(scratch, "data")
        os.makedirs(data)
        yield data
        return
    with bench.test_volume(scratch, bench.COMMIT_MS) as data:
        if data is None:
            raise SystemExit("no test volume here (see above)")
        os.makedirs(data, exist_ok=True)
        yield data


if __name__ == "__main__":
    main()
