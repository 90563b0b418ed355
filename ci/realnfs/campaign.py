"""The real-NFS fault campaign: three broker hosts and an nfsd host
(cluster.py), five workloads running throughout (workloads.py), and a
seeded schedule of faults (faults.py), one per round. After each round
the checks hold the brokers to what they acknowledged; the round's time
to failover (every partition of the idempotent topic acknowledging a
record sent after the fault: the brokers' part and the client's
rediscovery of the new leaders), to the first such acknowledgement and,
when a broker went away, until the metadata showed every partition led
by another broker (the brokers' part alone) are measured. At the end, `kaas fsck` of the export and one table by fault
kind. A failing round stops the campaign and prints how to replay it.

    bash ci/realnfs/run campaign [--seed S] [--rounds N] [--kinds K,..]
                                 [--round I] [--lease S] [--grace S]
                                 [--max-secs S] [--budget-minutes M]
                                 [--from-round I] [--judge-failover]
    python3 ci/realnfs/campaign.py --combine SITTING.json ...

`--rounds N` is N rounds of every kind (the schedule shuffles them);
`--round I` replays round I of the schedule alone on a fresh cluster;
`--lease`/`--grace` set nfsd's (defaults: nfsd's own, 90 s each);
`--max-secs` caps how long a cut, a full export or a stopped server
lasts (CI's short campaign);
`--budget-minutes M` starts no round after M minutes and goes on to the
final checks (a long run cut to the time there is; the table says how
many rounds of each kind ran, and the round to go on from);
`--from-round I` runs the schedule from round I on (a long run in
sittings: each sitting boots a fresh cluster, runs what its budget
allows, ends with the final checks and `kaas fsck`, and records its
rounds in `target/realnfs/campaign-s<seed>-from<I>.json`);
`--combine` checks that sittings' records are one schedule (same seed,
rounds, kinds and fault caps; every round once, none missing from the
first to the last) and prints one table for them all;
`--judge-failover` fails a kill -9 or power loss after which every
partition was led by another broker only later than the broker session
timeout + 5 s (the promise of the README; judged only where the campaign
has the machine to itself)."""

import argparse
import faulthandler
import json
import os
import random
import re
import signal
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka.admin import AdminClient

sys.path.insert(0, os.path.dirname(__file__))
import faults  # noqa: E402
import workloads as w  # noqa: E402
from cluster import Cluster, check_setup  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SESSION_TIMEOUT = 10  # the brokers' default --session-timeout-secs
FAILOVER_BOUND = SESSION_TIMEOUT + 5
JUDGED = ("kill-9", "power-loss")



def fsck_tally(report):
    """fsck's findings counted by severity and kind (the text after the
    path, digits folded), most frequent first: a long report's kinds at a
    glance."""
    kinds = {}
    for line in report.splitlines():
        severity, _, rest = line.partition(" ")
        severity = severity.lower()
        if severity not in ("error", "warning", "notice") or ": " not in rest:
            continue
        kind = re.sub(r"\d+", "N", rest.split(": ", 1)[1])
        kinds[(severity, kind)] = kinds.get((severity, kind), 0) + 1
    rows = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
    return "\n".join(f"{n:5} {sev:7} {kind}" for (sev, kind), n in rows) or "(none)"

def schedule(seed, rounds, kinds, max_secs=None):
    """The rounds' faults, drawn from `seed`; `max_secs` caps how long a
    fault lasts without changing what else is drawn."""
    rng = random.Random(seed)
    order = [k for k in kinds for _ in range(rounds)]
    rng.shuffle(order)
    plan = [faults.plan(k, rng, 3) for k in order]
    for p in plan:
        if max_secs is not None and "secs" in p:
            p["secs"] = min(p["secs"], max_secs)
    return plan


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Settled:
    """Waits until three brokers are listed and lead every partition of
    the idempotent topic, with no leader moving for `quiet_s` (the
    previous round's moves done, so that they are not taken for this
    round's); False if that never happened. Before a round (`again`),
    leaders just as the last settled call left them need no new quiet
    time: the checks of the round before were that quiet time. After a
    fault they do: a move may be under way."""

    def __init__(self, admin):
        self.admin, self.known = admin, None

    def __call__(self, again=False, deadline_s=w.EVENTUALLY, quiet_s=3):
        deadline = time.monotonic() + deadline_s
        last, since = None, None
        while time.monotonic() < deadline:
            try:
                md = self.admin.list_topics(timeout=20)
                parts = md.topics[w.IDEM].partitions
                leaders = {p: q.leader for p, q in parts.items()}
                if len(md.brokers) == 3 and all(x in md.brokers for x in leaders.values()):
                    if again and last is None and leaders == self.known:
                        return True
                    if leaders != last:
                        last, since = leaders, time.monotonic()
                    elif time.monotonic() - since >= quiet_s:
                        self.known = leaders
                        return True
                else:
                    last = None
            except Exception:  # noqa: BLE001 - metadata while brokers move
                last = None
            self.known = None
            time.sleep(1)
        return False


def led_by(admin, broker):
    """How many partitions of the idempotent topic `broker` leads now
    (None if the metadata did not answer)."""
    try:
        parts = admin.list_topics(w.IDEM, timeout=20).topics[w.IDEM].partitions
    except Exception:  # noqa: BLE001 - the round goes on without the count
        return None
    return sum(1 for q in parts.values() if q.leader == broker)


def timed(rows):
    """The rounds whose failover says something: a killed or powered-off
    broker that led none of the idempotent topic's partitions (one just
    restarted, not given any yet) leaves nothing to fail over."""
    return [r for r in rows if r.get("victim_led") != 0]


def recovered(idem, t0, deadline_s, cluster, gone):
    """({partition: seconds from t0 to its first acknowledgement of a
    record sent after t0}, seconds from t0 until the metadata showed every
    partition led by a broker other than `gone`), once every partition
    has such an acknowledgement and (when a broker is gone) the leaders
    moved, or the deadline passed."""
    deadline = time.monotonic() + deadline_s
    led = None
    if gone is not None:
        # Only the survivors are asked: a client that knows the victim
        # keeps sending it metadata requests over a connection a power
        # loss never closed, and waits out its socket timeout (60 s).
        admin = AdminClient({"bootstrap.servers": ",".join(
            c.kafka for c in cluster.clients if c.broker_id != gone)})
    while True:
        first = idem.first_acks_after(t0)
        if gone is not None and led is None:
            try:
                parts = admin.list_topics(w.IDEM, timeout=5).topics[w.IDEM].partitions
                if all(q.leader >= 0 and q.leader != gone for q in parts.values()):
                    led = time.monotonic() - t0
            except Exception:  # noqa: BLE001 - metadata while brokers move
                pass
        done = len(first) == w.IDEM_PARTITIONS and (gone is None or led is not None)
        if done or time.monotonic() > deadline:
            return {p: at - t0 for p, at in first.items()}, led
        time.sleep(0.2)


def run_round(i, p, cluster, admin, settled, work):
    fault = faults.Fault(cluster, p)
    phases, mark = {}, [time.monotonic()]

    def took(name):
        now = time.monotonic()
        phases[name] = round(now - mark[0], 1)
        mark[0] = now

    if not settled(again=True):
        return {"problems": ["the cluster never had three brokers leading every partition "
                             "before the round"]}
    gone = p.get("victim") if p["kind"] in JUDGED else None
    victim_led = None if gone is None else led_by(admin, gone)
    log(f"round {i}: {faults.describe(p)}"
        + ("" if victim_led is None else f" (it leads {victim_led} of {w.IDEM_PARTITIONS})"))
    took("settle")
    fault.inject()
    took("inject")
    # From when the fault took hold (a kill or a rule is applied through
    # the host's agent, a few hundred ms under emulation): records sent
    # before then may still be acknowledged by the victim and would read
    # as an instant failover.
    t0 = time.monotonic()
    fault.heal()
    healed = time.monotonic() - t0
    first, led = recovered(work["idem"], t0, w.EVENTUALLY + healed, cluster, gone)
    row = {"healed": healed}
    if victim_led is not None:
        row["victim_led"] = victim_led
    if led is not None:
        row["led"] = led
    problems = []
    if len(first) < w.IDEM_PARTITIONS:
        problems.append(f"only partitions {sorted(first)} acknowledged a record sent after "
                        f"the fault within {w.EVENTUALLY} s")
    else:
        row["failover"] = max(first.values())
        row["first_ack"] = min(first.values())
    took("heal+recover")
    fault.restore()
    took("restore")
    if not settled():
        problems.append("three brokers never led every partition again after the round")
    took("settle again")
    # Each check reads with a client of its own: side by side.
    with ThreadPoolExecutor(len(work)) as pool:
        checks = dict(zip(work, pool.map(timed_check, work.values())))
    for name, (result, secs) in checks.items():
        problems += result.pop("problems")
        row[name] = result
        if secs > 30:
            log(f"round {i}: the {name} check took {secs:.0f} s; "
                f"its client's last errors: {work[name].errors[-3:]}")
    took("checks")
    row["problems"] = problems
    cluster.evidence(f"round{i:03}")
    took("evidence")
    row["phases"] = phases
    log(f"round {i}: failover {fmt(row.get('failover'))} s (every partition led again "
        f"{fmt(row.get('led'))} s), first ack {fmt(row.get('first_ack'))} s"
        f", {row['idem']['acked']} acknowledged, {row['idem']['lost']} lost, "
        f"{row['idem']['duplicated']} duplicated" +
        (f" ({row['idem']['resent']} more re-sent by librdkafka under a bumped producer epoch: "
         f"{row['idem']['resent_examples']})" if row['idem'].get('resent') else "")
        + ("" if not problems else f"; PROBLEMS: {problems[:5]}")
        + f"; seconds spent: {phases}")
    return row


def timed_check(worker):
    began = time.monotonic()
    result = worker.check()
    return result, time.monotonic() - began


def fmt(x):
    return "-" if x is None else f"{x:.1f}"


def table(rows):
    lines = ["| fault | rounds | acknowledged | lost | duplicated | re-sent by librdkafka after an "
             "epoch bump | led again p50 / max (s) | failover p50 / max (s) "
             "| first ack p50 / max (s) |", "|---|---|---|---|---|---|---|---|---|"]
    for kind in faults.KINDS:
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        acked = sum(r["acked_in_round"] for r in mine)
        lost = sum(r["idem"]["lost"] + r["txn"]["lost"] + r["churn"]["lost"]
                   + r["compact"]["lost"] for r in mine)
        dup = sum(r["idem"]["duplicated"] + r["txn"]["duplicated"]
                  + r["compact"]["duplicated"] for r in mine)
        resent = sum(r["idem"].get("resent", 0) + r["compact"].get("resent", 0) for r in mine)
        measured = timed(mine)
        fo = [r["failover"] for r in measured if "failover" in r]
        fa = [r["first_ack"] for r in measured if "first_ack" in r]
        led = [r["led"] for r in measured if "led" in r]
        idle = len(mine) - len(measured)
        rounds = f"{len(mine)} ({idle} with a victim leading nothing, not timed)" if idle else len(mine)
        lines.append(f"| {kind} | {rounds} | {acked} | {lost} | {dup} | {resent} | {spread(led)} | "
                     f"{spread(fo)} | {spread(fa)} |")
    return "\n".join(lines)


def spread(xs):
    return "-" if not xs else f"{statistics.median(xs):.1f} / {max(xs):.1f}"


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--rounds", type=int, default=1)
    a.add_argument("--kinds", default=",".join(faults.KINDS))
    a.add_argument("--round", type=int)
    a.add_argument("--lease", type=int)
    a.add_argument("--grace", type=int)
    a.add_argument("--max-secs", type=int)
    a.add_argument("--budget-minutes", type=float)
    a.add_argument("--from-round", type=int, default=0)
    a.add_argument("--judge-failover", action="store_true")
    a.add_argument("--combine", nargs="+", metavar="SITTING.json")
    args = a.parse_args()
    if args.combine:
        sys.exit(combine(args.combine))
    # `kill -USR1` shows where every thread waits.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    kinds = args.kinds.split(",")
    unknown = set(kinds) - set(faults.KINDS)
    if unknown:
        sys.exit(f"unknown fault kinds {sorted(unknown)}; the kinds: {', '.join(faults.KINDS)}")
    plan = list(enumerate(schedule(args.seed, args.rounds, kinds, args.max_secs)))
    if args.round is not None:
        plan = [plan[args.round]]
    else:
        plan = plan[args.from_round:]
    cluster = Cluster(ROOT, lease=args.lease, grace=args.grace)
    rows, failed = [], None
    began = time.monotonic()
    try:
        booted = cluster.up()
        log(f"{len(cluster.hosts)} hosts up in {booted:.0f} s; seed {args.seed}, "
            f"{len(plan)} rounds; lease {args.lease or 'default'}, grace {args.grace or 'default'}")
        check_setup(cluster)
        w.LOGS = cluster.logs
        bootstrap = cluster.bootstrap()
        w.create_topics(bootstrap)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        settled = Settled(admin)
        work = {"idem": w.Idempotent(bootstrap), "txn": w.Transactional(bootstrap, args.seed),
                "group": w.Group(bootstrap), "churn": w.Churn(bootstrap),
                "compact": w.Compacted(bootstrap)}
        for worker in work.values():
            worker.start()
        acked = 0
        for i, p in plan:
            if args.budget_minutes and time.monotonic() - began > args.budget_minutes * 60:
                log(f"the budget of {args.budget_minutes:g} minutes is spent: {len(rows)} of "
                    f"{len(plan)} rounds ran")
                break
            row = run_round(i, p, cluster, admin, settled, work)
            row.update(p)
            row["round"] = i
            if "idem" in row:
                row["acked_in_round"] = row["idem"]["acked"] - acked
                acked = row["idem"]["acked"]
            rows.append(row)
            slow = p["kind"] in JUDGED and row.get("led", 0) > FAILOVER_BOUND
            if slow:
                log(f"round {i}: every partition was led again only after {row['led']:.1f} s, "
                    f"past the session timeout + 5 s ({FAILOVER_BOUND} s)")
            if row["problems"] or (slow and args.judge_failover):
                failed = i
                break
        log("stopping the workloads for the last checks")
        for worker in work.values():
            worker.stop()
        final = [f"{name}: {worker.undelivered} records never acknowledged {w.FLUSH} s after "
                 f"the workload stopped on a settled cluster (its producer stalled; what "
                 f"librdkafka did is in {name}-producer.librdkafka.log)"
                 for name, worker in work.items() if worker.undelivered]
        for name, worker in work.items():
            result = worker.check(final=True) if name in ("txn", "churn") else worker.check()
            final += result["problems"]
            log(f"final {name}: {json.dumps({k: v for k, v in result.items() if k != 'problems'})}")
        rc, report = cluster.fsck()
        summary = report.strip().splitlines()[-1] if report.strip() else ""
        errors = re.search(r"(\d+) errors", summary)
        if rc == 0:
            log(f"fsck: {summary}")
        elif rc == 1 and errors and errors.group(1) == "0":
            # Warnings are leftovers nothing reads (files a crash kept
            # from being removed): reported, not failed on; errors are
            # damage or loss.
            log(f"fsck warnings (leftovers nothing reads):\n{report.strip()[-2000:]}")
            log(f"fsck findings by kind:\n{fsck_tally(report)}")
        else:
            final.append(f"kaas fsck exited {rc}: {report.strip()[-2000:]}")
        errors = {n: len(wk.errors) for n, wk in work.items()}
        log(f"client errors seen on the way (retried): {errors}")
        # A read by name looks the name up again on ESTALE; what still
        # reached a log failed eight lookups in a row (or was no read).
        stale = {c.name: cluster.broker_log(c).count("Stale file handle") for c in cluster.clients}
        log(f"broker log lines with ESTALE: {stale}")
        # Of those, an fstat right after an open that failed ESTALE, then
        # whether the stat by path that follows found the name again.
        for healed in ("true", "false"):
            n = {c.name: cluster.broker_log(c).count(f"healed={healed}") for c in cluster.clients}
            log(f"fstat ESTALE after an open, stat by path healed={healed}: {n}")
    finally:
        cluster.down()
    record = {"seed": args.seed, "rounds_per_kind": args.rounds, "kinds": kinds,
              "max_secs": args.max_secs, "lease": args.lease, "grace": args.grace,
              "judged": args.judge_failover, "scheduled": len(schedule(args.seed, args.rounds, kinds)),
              "from_round": args.from_round if args.round is None else args.round,
              "final_problems": final, "rounds": rows}
    with open(os.path.join(cluster.work, "campaign.json"), "w") as f:
        json.dump(record, f, indent=1)
    if args.round is None and args.from_round:
        sitting = os.path.join(cluster.work, f"campaign-s{args.seed}-from{args.from_round}.json")
    elif args.round is None:
        sitting = os.path.join(cluster.work, f"campaign-s{args.seed}-from0.json")
    else:
        sitting = None
    if sitting:
        with open(sitting, "w") as f:
            json.dump(record, f, indent=1)
    complete = [r for r in rows if "idem" in r]
    print(f"\nreal-NFS campaign, seed {args.seed}: {len(rows)} rounds in "
          f"{time.monotonic() - began:.0f} s (logs in {cluster.logs})\n")
    if complete:
        print(table(complete))
    if final:
        print("\nfinal checks failed:\n  " + "\n  ".join(final[:20]))
    if failed is not None:
        print(f"\nround {failed} failed: {rows[-1]['problems'][:10]}\nreplay it alone: "
              f"bash ci/realnfs/run campaign --seed {args.seed} --rounds {args.rounds} "
              f"--kinds {args.kinds} --round {failed}"
              + (f" --max-secs {args.max_secs}" if args.max_secs else "")
              + (f" --grace {args.grace}" if args.grace else "")
              + (f" --lease {args.lease}" if args.lease else ""))
    go_on = rows[-1]["round"] + (0 if failed is not None else 1) if rows else None
    if sitting and go_on is not None and go_on < record["scheduled"]:
        print(f"\nthis sitting's rounds are in {sitting}; go on with: bash ci/realnfs/run campaign "
              f"--seed {args.seed} --rounds {args.rounds} --kinds {args.kinds}"
              + (f" --max-secs {args.max_secs}" if args.max_secs else "")
              + (f" --grace {args.grace}" if args.grace else "")
              + (f" --lease {args.lease}" if args.lease else "")
              + (" --judge-failover" if args.judge_failover else "")
              + f" --budget-minutes M --from-round {go_on}"
              f"\nand combine the sittings: python3 ci/realnfs/campaign.py --combine "
              f"{os.path.dirname(sitting)}/campaign-s{args.seed}-from*.json")
    if failed is not None or final:
        sys.exit(1)


def combine(paths):
    """One table for the sittings of one long run; an error message if
    they are not one schedule run through once, or if a round failed.
    A sitting stopped by a round may be followed by one that starts at
    that round (`--from-round`): both runs of it are listed, and the
    table holds the later one."""
    sittings = sorted(zip([json.load(open(p)) for p in paths], paths),
                      key=lambda sp: sp[0]["from_round"])
    same = ("seed", "rounds_per_kind", "kinds", "max_secs", "lease", "grace", "judged")
    first = sittings[0][0]
    for s, p in sittings:
        other = [k for k in same if s.get(k) != first.get(k)]
        if other:
            return f"{p} is not of the same schedule as {sittings[0][1]}: {other} differ"
        if s.get("final_problems"):
            return f"{p}: its final checks failed: {s['final_problems'][:5]}"
    rows, again = {}, []
    for s, p in sittings:
        for r in s["rounds"]:
            before = rows.get(r["round"])
            if before is not None:
                if r["round"] != s["from_round"]:
                    return f"round {r['round']} is in two sittings, and {p} does not start at it"
                again.append((before, r))
            rows[r["round"]] = r
    numbers = sorted(rows)
    if numbers != list(range(len(numbers))):
        return f"the sittings do not run rounds 0..{numbers[-1]} once each: {numbers}"
    rows = [rows[n] for n in numbers]
    print(f"real-NFS campaign, seed {first['seed']}: rounds 0..{numbers[-1]} of "
          f"{first['scheduled']} in {len(sittings)} sittings "
          f"({', '.join(p for _, p in sittings)})\n")
    print(table([r for r in rows if "idem" in r]))
    for before, after in again:
        print(f"\nround {before['round']} ({before['kind']}) ran twice: every partition led "
              f"again after {fmt(before.get('led'))} s in the sitting it stopped, "
              f"{fmt(after.get('led'))} s when run again")
    failed = [r["round"] for r in rows if r["problems"]]
    slow = [r["round"] for r in rows if first["judged"] and r["kind"] in JUDGED
            and r.get("led", 0) > FAILOVER_BOUND]
    if failed or slow:
        return f"rounds {failed} failed, rounds {slow} failed over later than {FAILOVER_BOUND} s"
    return None

if __name__ == "__main__":
    main()
