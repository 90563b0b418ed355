"""kaas's own checks of rendered manifests (`kubectl kustomize deploy/...`),
beyond the schema: what a kaas cluster needs to work and to fail safely.

Usage: python check_manifests.py RENDERED.yaml
"""

import re
import sys

import yaml


def listener_names(config):
    return [item.split("://", 1)[0] for item in config["KAAS_LISTENERS"].split(",")]


def listener_port(config, name):
    for item in config["KAAS_LISTENERS"].split(","):
        if item.split("://", 1)[0] == name:
            return int(item.rsplit(":", 1)[1])
    return None


def secret_mounts(pod, container):
    """mountPath -> Secret name, for the container's read-only Secret mounts."""
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}
    return {m["mountPath"]: secrets[m["name"]] for m in container.get("volumeMounts", [])
            if m["name"] in secrets and m.get("readOnly") is True}


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def check_secured(config, pod, c, by_kind, labels, need):
    """An overlay with named listeners: clients only on TLS listeners,
    ACLs enforced, the PLAINTEXT inter-broker listener reachable by the
    brokers alone, certificates and passwords from read-only Secrets."""
    names = listener_names(config)
    protocols = dict(i.split(":", 1) for i in config.get("KAAS_LISTENER_SECURITY_PROTOCOL_MAP", "").split(",") if ":" in i)
    inter = config.get("KAAS_INTER_BROKER_LISTENER_NAME", names[0])
    need(protocols.get(inter, inter) == "PLAINTEXT", f"inter-broker listener {inter} is PLAINTEXT (kaas needs that)")
    for name in names:
        if name != inter:
            need(protocols.get(name, name) in ("SSL", "SASL_SSL"), f"client listener {name} is SSL or SASL_SSL")
    need(config.get("KAAS_AUTHORIZER") == "acl", "KAAS_AUTHORIZER=acl")
    need(bool(config.get("KAAS_SUPER_USERS")), "KAAS_SUPER_USERS names the admin")
    need(config.get("KAAS_ALLOW_EVERYONE_IF_NO_ACL_FOUND", "false") == "false", "no ACL means no access")
    mounts = secret_mounts(pod, c)
    for var in ("KAAS_SSL_CERT_FILE", "KAAS_SSL_KEY_FILE"):
        path = config.get(var, "")
        need(any(path.startswith(m + "/") for m in mounts), f"{var} is in a read-only Secret mount (got {path!r})")
    # The inter-broker port: every ingress rule that opens it admits kaas
    # broker pods only; no rule opens every port.
    policies = [p for p in by_kind.get("NetworkPolicy", []) if selects(p["spec"]["podSelector"], labels)]
    need(policies, "a NetworkPolicy selects the brokers")
    port = listener_port(config, inter)
    for p in policies:
        need("Ingress" in p["spec"].get("policyTypes", []), f"NetworkPolicy {p['metadata']['name']} governs ingress")
        for rule in p["spec"].get("ingress", []):
            opens = not rule.get("ports") or any(x.get("port") == port for x in rule["ports"])
            if opens:
                peers = rule.get("from", [])
                need(
                    peers and all(set(x) == {"podSelector"} and selects(x["podSelector"], labels) for x in peers),
                    f"NetworkPolicy {p['metadata']['name']}: port {port} ({inter}) from broker pods only",
                )
    # The health port serves /metrics, which names every topic: no rule
    # opens it to everyone (the kubelet's probes pass regardless).
    health = int(config.get("KAAS_HEALTH_LISTEN", "0.0.0.0:9644").rsplit(":", 1)[1])
    for p in policies:
        for rule in p["spec"].get("ingress", []):
            if not rule.get("ports") or any(x.get("port") == health for x in rule["ports"]):
                need(bool(rule.get("from")),
                     f"NetworkPolicy {p['metadata']['name']}: the health port {health} (/metrics) not from everywhere")
    # The first admin's credential: a Job running `kaas scram-user` with the
    # password from a Secret, on the same volume.
    jobs = [j for j in by_kind.get("Job", []) if "scram-user" in j["spec"]["template"]["spec"]["containers"][0].get("args", [])]
    need(len(jobs) == 1, "a Job that bootstraps the admin credential (kaas scram-user)")
    for j in jobs:
        jpod = j["spec"]["template"]["spec"]
        (jc,) = jpod["containers"]
        args = jc["args"]
        pw = args[args.index("--password-file") + 1] if "--password-file" in args else ""
        need(any(pw.startswith(m + "/") for m in secret_mounts(jpod, jc)), "the admin password comes from a Secret")
        need(jpod.get("securityContext", {}).get("runAsNonRoot") is True, "the Job runs as non-root")
        need(jc.get("securityContext", {}).get("readOnlyRootFilesystem") is True, "the Job's root filesystem is read-only")
        need(
            [v["persistentVolumeClaim"]["claimName"] for v in jpod["volumes"] if "persistentVolumeClaim" in v]
            == [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v],
            "the Job writes to the brokers' volume",
        )
        need(not selects({"matchLabels": labels}, j["spec"]["template"]["metadata"].get("labels", {})),
             "the Job's pod is not selected as a broker")


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
    # Kubernetes expands $(VAR) only from variables listed before.
    defined = set()
    for e in c.get("env", []):
        for ref in re.findall(r"\$\(([A-Z_][A-Z0-9_]*)\)", e.get("value", "")):
            need(ref in defined, f"{e['name']} refers to $({ref}) before it is defined")
        defined.add(e["name"])
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
        pod_name = "$(POD_NAME)." + h["metadata"]["name"] + "."
        if "KAAS_LISTENERS" in config:
            adv = env.get("KAAS_ADVERTISED_LISTENERS", {}).get("value", "")
            advertised = dict(a.split("://", 1) for a in adv.split(",") if "://" in a)
            for name in listener_names(config):
                need(
                    advertised.get(name, "").startswith(pod_name),
                    f"listener {name} advertised as the pod's name under the headless Service (got {adv!r})",
                )
                port = listener_port(config, name)
                need(
                    any(p["port"] == port for p in h["spec"]["ports"]),
                    f"the headless Service publishes listener {name}'s port {port}",
                )
        else:
            adv = env.get("KAAS_ADVERTISED_LISTENER", {}).get("value", "")
            need(
                adv.startswith(pod_name),
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
    need(c.get("securityContext", {}).get("readOnlyRootFilesystem") is True, "a read-only root filesystem")
    if "KAAS_LISTENERS" in config:
        check_secured(config, pod, c, by_kind, spec["template"]["metadata"]["labels"], need)
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
    secured = ", secured: " + config["KAAS_LISTENERS"] if "KAAS_LISTENERS" in config else ""
    print(f"{path}: kaas checks passed (StatefulSet {sts['metadata']['name']}, {spec['replicas']} brokers{secured})")


if __name__ == "__main__":
    main(sys.argv[1])
