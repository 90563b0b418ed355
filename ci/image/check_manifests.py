"""kaas's own checks of rendered manifests (`kubectl kustomize deploy/...`),
beyond the schema: what a kaas cluster needs to work and to fail safely.

Usage: python check_manifests.py RENDERED.yaml
"""

import sys

import yaml


def main(path):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    problems = []

    def need(cond, what):
        if not cond:
            problems.append(what)

    (sts,) = by_kind["StatefulSet"]
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e for e in c.get("env", [])}
    config = {}
    for cm in by_kind.get("ConfigMap", []):
        config.update(cm.get("data", {}))

    need(spec.get("podManagementPolicy") == "Parallel", "StatefulSet: podManagementPolicy Parallel")
    need(
        env.get("KAAS_BROKER_ID", {}).get("value") == "$(POD_NAME)"
        and env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        == "metadata.name",
        "broker id from the pod name (KAAS_BROKER_ID=$(POD_NAME))",
    )
    headless = [s for s in by_kind["Service"] if s["spec"].get("clusterIP") == "None"]
    need(len(headless) == 1, "one headless Service")
    if headless:
        h = headless[0]
        need(spec.get("serviceName") == h["metadata"]["name"], "serviceName is the headless Service")
        # A starting broker connects to its own advertised name before it
        # can be ready: the name must resolve before readiness.
        need(h["spec"].get("publishNotReadyAddresses") is True, "headless Service publishes not-ready addresses")
        adv = env.get("KAAS_ADVERTISED_LISTENER", {}).get("value", "")
        need(
            adv.startswith("$(POD_NAME)." + h["metadata"]["name"] + "."),
            f"advertised listener is the pod's name under the headless Service (got {adv!r})",
        )
    need(any(s["spec"].get("clusterIP") != "None" for s in by_kind["Service"]), "a client Service")
    # One shared RWX claim, not a volumeClaimTemplate per pod.
    need(not spec.get("volumeClaimTemplates"), "no per-pod volumeClaimTemplates")
    (pvc,) = by_kind["PersistentVolumeClaim"]
    need(pvc["spec"]["accessModes"] == ["ReadWriteMany"], "the PVC is ReadWriteMany")
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v]
    need(claims == [pvc["metadata"]["name"]], "pods mount the shared PVC")
    mount = [m["mountPath"] for m in c.get("volumeMounts", [])]
    data_dir = env.get("KAAS_DATA_DIR", {}).get("value") or config.get("KAAS_DATA_DIR")
    need(data_dir in mount, "KAAS_DATA_DIR is the mounted volume")
    # Probes: readiness is the broker's own signal; liveness is not the volume.
    need(c.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/readyz", "readiness probe on /readyz")
    need(c.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/livez", "liveness probe on /livez")
    need(env.get("KAAS_HEALTH_LISTEN") is not None or "KAAS_HEALTH_LISTEN" in config, "KAAS_HEALTH_LISTEN set")
    need("requests" in c.get("resources", {}), "resource requests")
    session = int(config.get("KAAS_SESSION_TIMEOUT_SECS", 10))
    heartbeat = int(config.get("KAAS_HEARTBEAT_INTERVAL_SECS", 2))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    need(
        grace > session + 2 * heartbeat + 10,
        f"terminationGracePeriodSeconds {grace} outlasts a controlled shutdown ({session} s session timeout + heartbeats + margin)",
    )
    sc = pod.get("securityContext", {})
    need(sc.get("runAsNonRoot") is True, "runAsNonRoot")
    need(len(by_kind.get("PodDisruptionBudget", [])) == 1, "a PodDisruptionBudget")
    for kind in ("StatefulSet", "PodDisruptionBudget"):
        for obj in by_kind.get(kind, []):
            sel = obj["spec"]["selector"]["matchLabels"]
            labels = spec["template"]["metadata"]["labels"]
            need(all(labels.get(k) == v for k, v in sel.items()), f"{kind} selector matches the pods")

    if problems:
        for p in problems:
            print(f"{path}: missing: {p}", file=sys.stderr)
        sys.exit(1)
    print(f"{path}: kaas checks passed (StatefulSet {sts['metadata']['name']}, {spec['replicas']} brokers)")


if __name__ == "__main__":
    main(sys.argv[1])
