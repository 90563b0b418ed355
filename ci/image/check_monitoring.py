"""deploy/monitoring against the brokers it monitors: the PodMonitor must
select the StatefulSet's pods and scrape a port they expose, and the
dashboard ConfigMap must carry a dashboard Grafana can load.

Usage: python check_monitoring.py MONITORING.yaml BASE.yaml
"""

import json
import sys

import yaml


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
    for p in problems:
        print(f"deploy/monitoring: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"deploy/monitoring: PodMonitor selects the brokers' pods and port; dashboard with "
          f"{len(maps and json.loads(maps[0]['data']['kaas-dashboard.json'])['panels'])} panels")


if __name__ == "__main__":
    main(*sys.argv[1:3])
