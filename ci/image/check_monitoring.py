"""deploy/monitoring against the brokers it monitors: the PodMonitor must
select the StatefulSet's pods and scrape a port they expose, the dashboard
ConfigMap must carry a dashboard Grafana can load, and every metric an
alert or a dashboard query names must be one the broker exports (the names
registered in broker/src/metrics.rs).

Usage: python check_monitoring.py MONITORING.yaml BASE.yaml
"""

import json
import re
import sys

import yaml


def exported():
    """The metric names the broker registers (prefix kaas_), with the
    series a histogram adds."""
    with open("broker/src/metrics.rs") as f:
        source = f.read()
    names = set(re.findall(r'"([a-z][a-z0-9_]*)"', source))
    out = set()
    for n in names:
        out |= {f"kaas_{n}", f"kaas_{n}_bucket", f"kaas_{n}_sum", f"kaas_{n}_count"}
    return out


def named_metrics(expr):
    return set(re.findall(r"\bkaas_[a-z0-9_]+", expr))


def main(monitoring, base):
    with open(monitoring) as f:
        mon = [d for d in yaml.safe_load_all(f) if d]
    with open(base) as f:
        sts = next(d for d in yaml.safe_load_all(f) if d and d["kind"] == "StatefulSet")
    pod = sts["spec"]["template"]
    labels = pod["metadata"]["labels"]
    ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    problems = []
    monitors = [d for d in mon if d["kind"] == "PodMonitor"]
    if not monitors:
        problems.append("no PodMonitor")
    for m in monitors:
        wanted = m["spec"]["selector"].get("matchLabels", {})
        if not wanted or any(labels.get(k) != v for k, v in wanted.items()):
            problems.append(f"PodMonitor {m['metadata']['name']} selects {wanted}, the pods are labelled {labels}")
        for e in m["spec"]["podMetricsEndpoints"]:
            if e.get("port") not in ports:
                problems.append(f"PodMonitor scrapes port {e.get('port')!r}; the pods expose {sorted(ports)}")
            if e.get("path") != "/metrics":
                problems.append(f"PodMonitor scrapes {e.get('path')!r}, not /metrics")
    maps = [d for d in mon if d["kind"] == "ConfigMap" and "kaas-dashboard.json" in d.get("data", {})]
    if not maps:
        problems.append("no ConfigMap with kaas-dashboard.json")
    for cm in maps:
        dash = json.loads(cm["data"]["kaas-dashboard.json"])
        if not dash.get("panels") or not all(p.get("targets") for p in dash["panels"]):
            problems.append("the dashboard has no panels, or a panel without queries")
        if cm["metadata"].get("labels", {}).get("grafana_dashboard") != "1":
            problems.append("the dashboard ConfigMap lacks the grafana_dashboard label")
    known = exported()
    rules = [r for d in mon if d["kind"] == "PrometheusRule"
             for g in d["spec"]["groups"] for r in g["rules"]]
    if not rules:
        problems.append("no PrometheusRule with alerts")
    for r in rules:
        for m in named_metrics(r["expr"]) - known:
            problems.append(f"alert {r.get('alert')} names {m}, which the broker does not export")
        if "runbook" not in r.get("annotations", {}):
            problems.append(f"alert {r.get('alert')} names no runbook")
    for cm in maps:
        for panel in json.loads(cm["data"]["kaas-dashboard.json"])["panels"]:
            for t in panel.get("targets", []):
                for m in named_metrics(t.get("expr", "")) - known:
                    problems.append(f"panel {panel.get('title')!r} queries {m}, which the broker does not export")
    for p in problems:
        print(f"deploy/monitoring: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"deploy/monitoring: PodMonitor selects the brokers' pods and port; dashboard with "
          f"{len(maps and json.loads(maps[0]['data']['kaas-dashboard.json'])['panels'])} panels; "
          f"{len(rules)} alerts, every metric they and the panels name exported")


if __name__ == "__main__":
    main(*sys.argv[1:3])
