"""The stale file handle probe: how often a host that reads a file another
host keeps replacing by rename gets ESTALE, how long it lasts, and which
way of looking the name up again ends it.

kaas replaces every metadata file by temp + fsync + rename, and the long
campaign saw a new controller fail its ticks for up to 29 s with ESTALE
from the fstat right after a successful open of its predecessor's
assignment. No broker runs here: kaas-0 replaces /mnt/kaas/probe/doc as
fast as it can, kaas-1 and kaas-2 read it as PosixVfs does, each healing
its ESTALEs another way (stale_probe.py). The second phase powers the
writer off halfway, as round 85 did.

  bash ci/realnfs/run stale [--seconds S] [--only server-crash-then-cut]"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from cluster import SERVER_IP, Cluster  # noqa: E402
from faults import drop  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROBE = os.path.join(ROOT, "ci", "realnfs", "stale_probe.py")
DOC = "/mnt/kaas/probe/doc"


def results(cluster, phase):
    out = []
    for c in cluster.clients:
        path = os.path.join(cluster.logs, f"probe-{phase}-{c.name}.log")
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("{"):
                        out.append({"host": c.name, **json.loads(line)})
                    elif line.strip():
                        out.append({"host": c.name, "error": line.strip()})
        except OSError:
            pass
    return out


def phase(cluster, name, secs, heals, power_loss_after=None):
    writer, *readers = cluster.clients
    writer.spawn(f"exec python3 {PROBE} write {DOC} {secs}", f"/logs/probe-{name}-{writer.name}.log")
    for r, how in zip(readers, heals):
        r.spawn(f"exec python3 {PROBE} read {DOC} {secs} {how}", f"/logs/probe-{name}-{r.name}.log")
    if power_loss_after is not None:
        time.sleep(power_loss_after)
        writer.power_off()
        print(f"stale: {name}: powered {writer.name} off after {power_loss_after} s", flush=True)
        time.sleep(secs - power_loss_after + 15)
    else:
        time.sleep(secs + 15)
    for r in results(cluster, name):
        print(f"stale: {name}: {json.dumps(r)}", flush=True)


def server_crash_then_cut(cluster, secs):
    """The conditions of the longest ESTALE runs the campaign saw: the
    server host loses power and boots again, then the writer is cut off
    from it (campaign seed 5, round 4) while the others read."""
    writer, *readers = cluster.clients
    name = "server-crash-then-cut"
    writer.spawn(f"exec python3 {PROBE} write {DOC} {secs}", f"/logs/probe-{name}-{writer.name}.log")
    for r, how in zip(readers, ["none", "stat"]):
        r.spawn(f"exec python3 {PROBE} read {DOC} {secs} {how}", f"/logs/probe-{name}-{r.name}.log")
    began = time.monotonic()
    time.sleep(secs * 0.1)
    cluster.server.power_off()
    time.sleep(5)
    cluster.boot(cluster.server)
    print(f"stale: {name}: server back after {time.monotonic() - began:.0f} s", flush=True)
    time.sleep(5)
    writer.must(drop([SERVER_IP]))
    time.sleep(20)
    writer.must("iptables -F INPUT && iptables -F OUTPUT")
    print(f"stale: {name}: writer cut off for 20 s, back at {time.monotonic() - began:.0f} s",
          flush=True)
    time.sleep(max(0, secs - (time.monotonic() - began)) + 60)
    for r in results(cluster, name):
        print(f"stale: {name}: {json.dumps(r)}", flush=True)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--seconds", type=float, default=60)
    a.add_argument("--only", choices=["server-crash-then-cut"])
    args = a.parse_args()
    cluster = Cluster(ROOT)
    try:
        cluster.up_without_brokers()
        cluster.clients[0].must("mkdir -p /mnt/kaas/probe")
        if args.only == "server-crash-then-cut":
            server_crash_then_cut(cluster, args.seconds)
            return
        phase(cluster, "steady", args.seconds, ["none", "stat"])
        phase(cluster, "steady-list", args.seconds, ["list", "none"])
        phase(cluster, "power-loss", args.seconds, ["none", "stat"],
              power_loss_after=args.seconds / 2)
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
