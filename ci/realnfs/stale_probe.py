"""Runs inside a real-NFS guest (see stale.py): one side of the stale file
handle probe.

  stale_probe.py write PATH SECONDS   replaces PATH by temp + fsync + rename,
                                      as kaas replaces a metadata file
  stale_probe.py read PATH SECONDS HEAL
                                      opens PATH as kaas's PosixVfs does
                                      (O_DIRECT, then fstat, then a read)
                                      and, on ESTALE, heals by HEAL: `none`
                                      (the next loop opens again), `stat`
                                      (a path-based stat, which the kernel
                                      retries with a revalidating lookup)
                                      or `list` (a listing of the parent)

Prints one JSON line: opens, ESTALE count by step, the longest run of
failed opens in seconds, and how many heals were followed by a good open."""

import errno
import json
import mmap
import os
import sys
import time

FLAGS = os.O_RDONLY | os.O_DIRECT | os.O_NOFOLLOW | os.O_NONBLOCK


def write(path, secs):
    buf = mmap.mmap(-1, 4096)
    end = time.monotonic() + secs
    n = 0
    while time.monotonic() < end:
        n += 1
        tmp = f"{path}.tmp-{os.getpid()}-{n}"
        buf.seek(0)
        buf.write(f"version {n}\n".encode().ljust(4096, b" "))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o644)
        try:
            os.pwritev(fd, [buf], 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    print(json.dumps({"role": "write", "versions": n}), flush=True)


def read_once(path, buf):
    """The step that failed with ESTALE, or None."""
    try:
        fd = os.open(path, FLAGS)
    except OSError as e:
        if e.errno == errno.ESTALE:
            return "open"
        if e.errno == errno.ENOENT:
            return None
        raise
    try:
        try:
            os.fstat(fd)
        except OSError as e:
            if e.errno == errno.ESTALE:
                return "fstat"
            raise
        try:
            os.preadv(fd, [buf], 0)
        except OSError as e:
            if e.errno == errno.ESTALE:
                return "read"
            raise
    finally:
        os.close(fd)
    return None


def heal(path, how):
    try:
        if how == "stat":
            os.stat(path)
        elif how == "list":
            os.listdir(os.path.dirname(path))
    except OSError:
        pass


def read(path, secs, how):
    buf = mmap.mmap(-1, 4096)
    stale = {"open": 0, "fstat": 0, "read": 0}
    opens = healed = 0
    failing_since = None
    longest = 0.0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        opens += 1
        step = read_once(path, buf)
        now = time.monotonic()
        if step is None:
            if failing_since is not None:
                longest = max(longest, now - failing_since)
                failing_since = None
            continue
        stale[step] += 1
        if failing_since is None:
            failing_since = now
        heal(path, how)
        if how != "none" and read_once(path, buf) is None:
            healed += 1
            longest = max(longest, time.monotonic() - failing_since)
            failing_since = None
        time.sleep(0.01)
    if failing_since is not None:
        longest = max(longest, time.monotonic() - failing_since)
    print(json.dumps({"role": "read", "heal": how, "opens": opens, "estale": stale,
                      "healed": healed, "longest_failing_s": round(longest, 3)}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], float(sys.argv[3]))
    else:
        read(sys.argv[2], float(sys.argv[3]), sys.argv[4])
