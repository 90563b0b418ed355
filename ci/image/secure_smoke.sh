#!/usr/bin/env bash
# The secured overlay (deploy/overlays/secure) run by podman the way
# Kubernetes would run it (called by ci/image.sh): the bootstrap Job and
# three brokers get the environment, Secret mounts, user, read-only root
# filesystem and dropped capabilities of the rendered manifests
# (ci/image/pod_args.py). Only the addresses change: the client listener
# listens on a port published on the host's 127.0.0.1 and advertises it.
# Then Python clients (confluent-kafka) on the host check SASL_SSL with
# SCRAM, ACLs and the admin API (ci/image/secure_clients.py).
#
# Usage: secure_smoke.sh IMAGE RENDERED_OVERLAY.yaml [podman run flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
image=$1
rendered=$2
shift 2
flags=("$@")
prefix=kaas-secure
net=$prefix-net
work=$(mktemp -d "$PWD/target/image-secure.XXXXXX")
passed=0

remove_all() {
    podman rm -f -t 0 "$prefix-0" "$prefix-1" "$prefix-2" "$prefix-admin" >/dev/null 2>&1 || true
    podman network rm -f "$net" >/dev/null 2>&1 || true
}
cleanup() {
    for id in 0 1 2; do podman logs "$prefix-$id" >"$work/kaas-$id.log" 2>&1 || true; done
    remove_all
    if [ "$passed" = 1 ]; then
        rm -rf "$work"
    else
        for id in 0 1 2; do
            echo "--- last lines of $prefix-$id" >&2
            tail -15 "$work/kaas-$id.log" 2>/dev/null | cut -c1-300 >&2 || true
        done
        echo "kept $work" >&2
    fi
}
trap cleanup EXIT
remove_all
podman network create "$net" >/dev/null 2>&1

# What the operator creates before applying the overlay: the kaas-tls
# Secret (a certificate for the brokers' names, here also 127.0.0.1) and
# the kaas-admin Secret (the first admin's password).
tls=$work/kaas-tls admin=$work/kaas-admin data=$work/data
mkdir -p "$tls" "$admin" "$data"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=smoke-ca \
    -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kaas \
    -keyout "$tls/tls.key" -out "$work/kaas.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:%s-0,DNS:%s-1,DNS:%s-2\n' "$prefix" "$prefix" "$prefix" >"$work/san.ext"
openssl x509 -req -in "$work/kaas.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial \
    -days 2 -extfile "$work/san.ext" -out "$tls/tls.crt" 2>/dev/null
python3 -c 'import secrets; print(secrets.token_urlsafe(24))' >"$admin/password"
# A Secret volume's files belong to the pod's fsGroup.
chown -R 10001:10001 "$tls" "$admin" "$data"
chmod 0440 "$tls"/* "$admin"/*

mounts=(--mount "kaas-tls=$tls" --mount "kaas-admin=$admin" --mount "kaas-data=$data")
mapfile -t job < <(python3 ci/image/pod_args.py "$rendered" Job kaas-bootstrap-admin "$image" "${mounts[@]}")
podman run --rm --name "$prefix-admin" "${flags[@]}" "${job[@]}"
echo "the bootstrap Job's container wrote User:admin's credential (read-only root filesystem, user 10001)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ports=() health=()
for _ in 0 1 2; do
    ports+=("$(free_port)")
    health+=("$(free_port)")
done
for id in 0 1 2; do
    mapfile -t pod < <(python3 ci/image/pod_args.py "$rendered" StatefulSet kaas "$image" "${mounts[@]}" \
        --set "POD_NAME=$prefix-$id" --set POD_NAMESPACE=smoke \
        --override "KAAS_LISTENERS=INTERNAL://0.0.0.0:9092,CLIENTS://0.0.0.0:${ports[$id]}" \
        --override "KAAS_ADVERTISED_LISTENERS=INTERNAL://$prefix-$id:9092,CLIENTS://127.0.0.1:${ports[$id]}" \
        --override KAAS_HEARTBEAT_INTERVAL_SECS=1 --override KAAS_SESSION_TIMEOUT_SECS=4)
    podman run -d --name "$prefix-$id" --hostname "$prefix-$id" --network "$net" "${flags[@]}" \
        -p "127.0.0.1:${ports[$id]}:${ports[$id]}" -p "127.0.0.1:${health[$id]}:9644" "${pod[@]}" >/dev/null
done
for id in 0 1 2; do
    [ "$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}} {{.Config.User}}' "$prefix-$id")" = "true 10001:10001" ] || {
        echo "$prefix-$id does not run as 10001 with a read-only root filesystem" >&2
        exit 1
    }
done
ready_by=$((SECONDS + 120))
while [ "$SECONDS" -lt "$ready_by" ]; do
    up=0
    for id in 0 1 2; do
        python3 -c "import sys,urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:${health[$id]}/readyz', timeout=2).status != 200)" 2>/dev/null && up=$((up + 1))
    done
    [ "$up" = 3 ] && break
    sleep 0.2
done
[ "$up" = 3 ] || { echo "only $up of 3 secured brokers ready after 120 s" >&2; exit 1; }
echo "3 secured brokers ready (SASL_SSL for clients, PLAINTEXT between brokers, ACLs on)"

source ci/clients/venv.sh
"$venv/bin/python" ci/image/secure_clients.py "$work/ca.crt" "$(cat "$admin/password")" \
    "127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
passed=1
echo "secured overlay smoke test passed"
