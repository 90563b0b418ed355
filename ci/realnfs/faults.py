"""The campaign's fault kinds (campaign.py). `plan(kind, rng, clients)`
draws one round's parameters from the seeded schedule; `Fault` injects
them, heals them and brings the cluster back to three brokers. Each
kind is what an operator's cluster meets: a broker killed, a host that
loses power, the NFS server crashing or restarting nfsd (its NFSv4
grace period after), a host cut off from the server or from the other
brokers for 5-60 s, a host's clock stepped, the export full."""

import time

from cluster import SERVER_IP

KINDS = ["kill-9", "power-loss", "server-crash", "nfsd-restart", "cut-from-server",
         "cut-from-brokers", "clock-jump", "export-full"]
NFSD = "rpc.nfsd -N 3 -V 4.1 -V 4.2 4"


def plan(kind, rng, clients):
    """One round's parameters, all drawn from `rng`."""
    p = {"kind": kind}
    if kind in ("kill-9", "power-loss", "cut-from-server", "cut-from-brokers", "clock-jump"):
        p["victim"] = rng.randrange(clients)
    if kind in ("cut-from-server", "cut-from-brokers"):
        p["secs"] = rng.randint(5, 60)
    if kind == "server-crash":
        p["secs"] = rng.randint(2, 15)  # powered off this long
    if kind == "nfsd-restart":
        p["secs"] = rng.randint(0, 10)  # nfsd stopped this long
    if kind == "clock-jump":
        p["jump"] = rng.choice([-1, 1]) * rng.randint(30, 900)
        p["secs"] = rng.randint(5, 30)  # until the clock is stepped back
    if kind == "export-full":
        p["secs"] = rng.randint(5, 30)
    return p


def describe(p):
    parts = [p["kind"]]
    if "victim" in p:
        parts.append(f"broker {p['victim']}")
    if "jump" in p:
        parts.append(f"{p['jump']:+d} s")
    if "secs" in p:
        parts.append(f"for {p['secs']} s")
    return " ".join(parts)


class Fault:
    def __init__(self, cluster, p):
        self.cluster, self.p = cluster, p
        self.victim = cluster.clients[p["victim"]] if "victim" in p else None

    def inject(self):
        c, p, v = self.cluster, self.p, self.victim
        kind = p["kind"]
        if kind == "kill-9":
            c.kill_broker(v)
        elif kind == "power-loss":
            v.power_off()
        elif kind == "server-crash":
            c.server.power_off()
        elif kind == "nfsd-restart":
            c.server.must("rpc.nfsd 0")
        elif kind == "cut-from-server":
            v.must(drop([SERVER_IP]))
        elif kind == "cut-from-brokers":
            v.must(drop([h.ip for h in c.clients if h is not v]))
        elif kind == "clock-jump":
            v.must(step(p["jump"]))
        elif kind == "export-full":
            c.server.must(FILL, timeout=120)

    def heal(self):
        """Ends what lasts (a cut, a full export, a stopped server);
        returns at once for a fault that lasts until restore()."""
        c, p, v = self.cluster, self.p, self.victim
        kind = p["kind"]
        if "secs" in p:
            time.sleep(p["secs"])
        if kind == "server-crash":
            c.boot(c.server)
        elif kind == "nfsd-restart":
            c.server.must(NFSD)
        elif kind in ("cut-from-server", "cut-from-brokers"):
            v.must("iptables -F INPUT && iptables -F OUTPUT")
        elif kind == "clock-jump":
            v.must(step(-p["jump"]))
        elif kind == "export-full":
            c.server.must("rm -f /srv/filler*")

    def restore(self):
        """Brings back what the fault took down (after the cluster
        failed over without it)."""
        c, v = self.cluster, self.victim
        if self.p["kind"] == "kill-9":
            c.start_broker(v)
            c.wait_broker(v)
        elif self.p["kind"] == "power-loss":
            c.boot(v)


def drop(ips):
    """iptables rules that drop every packet to or from `ips` (the host's
    own kernel: its NFS client or its broker's connections)."""
    rules = []
    for ip in ips:
        rules.append(f"iptables -I INPUT -s {ip} -j DROP")
        rules.append(f"iptables -I OUTPUT -d {ip} -j DROP")
    return " && ".join(rules)


def step(secs):
    """Steps the wall clock by `secs` as a misbehaving NTP would."""
    return f"date -s @$(( $(date +%s) + ({secs}) )) >/dev/null"


# Fills what is left on the export's disk (outside the export, so the
# brokers see a full volume and nothing of theirs), largest pieces first.
FILL = ("avail=$(df --output=avail -B1 /srv | tail -1); "
        "fallocate -l $((avail - 4*1024*1024)) /srv/filler 2>/dev/null; "
        "for s in 1048576 65536 4096; do i=0; "
        "while fallocate -l $s /srv/filler-$s-$i 2>/dev/null; do i=$((i+1)); done; done; "
        "df --output=avail -B1 /srv | tail -1")
