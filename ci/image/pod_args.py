"""`podman run` arguments for a pod of a rendered overlay, so that the
image's smoke test runs a container the way Kubernetes would run that pod:
its environment (ConfigMaps and env, with $(VAR) references resolved), its
Secret and volume mounts (each backed by a local directory), its user, its
read-only root filesystem, its dropped capabilities; then the image, then
the container's args. One argument per line (for bash's mapfile).

Usage: python pod_args.py RENDERED.yaml KIND NAME IMAGE
         [--set VAR=VALUE]...     values of fieldRef variables (POD_NAME)
         [--override VAR=VALUE]... replace what the manifests say (the
                                   addresses a one-machine test must use)
         [--mount NAME=DIR]...    a local directory for a Secret (by its
                                   secretName) or a PersistentVolumeClaim
                                   (by its claimName)
"""

import argparse
import re
import sys

import yaml


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rendered")
    ap.add_argument("kind")
    ap.add_argument("name")
    ap.add_argument("image")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--override", action="append", default=[])
    ap.add_argument("--mount", action="append", default=[])
    a = ap.parse_args()
    docs = [d for d in yaml.safe_load_all(open(a.rendered)) if d]
    (obj,) = [d for d in docs if d["kind"] == a.kind and d["metadata"]["name"] == a.name]
    pod = obj["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    configmaps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    known = dict(kv.split("=", 1) for kv in a.set)
    local = dict(kv.split("=", 1) for kv in a.mount)

    env = {}
    for source in c.get("envFrom", []):
        env.update(configmaps[source["configMapRef"]["name"]])
    for e in c.get("env", []):
        if "value" in e:
            # Kubernetes expands $(VAR) from variables defined before only.
            env[e["name"]] = re.sub(r"\$\(([A-Z_][A-Z0-9_]*)\)",
                                    lambda m: env.get(m.group(1), m.group(0)), e["value"])
        elif e["name"] in known:
            env[e["name"]] = known[e["name"]]
        else:
            sys.exit(f"{a.kind}/{a.name}: no value for {e['name']} (pass --set {e['name']}=...)")
    env.update(dict(kv.split("=", 1) for kv in a.override))

    out = []
    for k, v in env.items():
        out += ["-e", f"{k}={v}"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        v = volumes[m["name"]]
        source = v.get("secret", {}).get("secretName") or v.get("persistentVolumeClaim", {}).get("claimName")
        if source not in local:
            sys.exit(f"{a.kind}/{a.name}: volume {m['name']} ({source}) has no local directory (pass --mount {source}=DIR)")
        out += ["-v", f"{local[source]}:{m['mountPath']}" + (":ro" if m.get("readOnly") else "")]
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    user = csc.get("runAsUser", psc.get("runAsUser"))
    if user is not None:
        out += ["--user", f"{user}:{csc.get('runAsGroup', psc.get('runAsGroup', user))}"]
    if csc.get("readOnlyRootFilesystem"):
        out.append("--read-only")
    if csc.get("allowPrivilegeEscalation") is False:
        out += ["--security-opt", "no-new-privileges"]
    for cap in csc.get("capabilities", {}).get("drop", []):
        out += ["--cap-drop", cap]
    out.append(a.image)
    out += c.get("args", [])
    print("\n".join(out))


if __name__ == "__main__":
    main()
