"""What an idle cluster costs: the four guests' CPU over a minute with
three brokers up and nothing to do, then with the campaign's topics
created (still no clients). Emulated hosts magnify it; read it against
the campaign's own CPU."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import workloads as w  # noqa: E402
from cluster import Cluster  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TICK = os.sysconf("SC_CLK_TCK")


def cpu(host):
    with open(f"/proc/{host.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def measure(cluster, secs):
    before = {h.name: cpu(h) for h in cluster.hosts}
    time.sleep(secs)
    return {h.name: round((cpu(h) - before[h.name]) / secs, 2) for h in cluster.hosts}


def main():
    cluster = Cluster(ROOT)
    try:
        cluster.up()
        time.sleep(15)
        print("idle, no topics (cores per guest):", measure(cluster, 60), flush=True)
        w.create_topics(cluster.bootstrap())
        time.sleep(15)
        print("idle, the campaign's topics (cores per guest):", measure(cluster, 60), flush=True)
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
