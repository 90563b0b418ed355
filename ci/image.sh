#!/usr/bin/env bash
# The production image and its deployment, checked on this machine:
#
#  1. the Kubernetes manifests (deploy/) render with kustomize and pass a
#     schema check (kubernetes-validate, strict) and kaas's own checks;
#  2. the image builds with podman from the repository's Dockerfile. No
#     image registry is reachable here, so the Dockerfile's two base images
#     are replaced by local ones: a Debian bookworm base made with
#     debootstrap + `podman import`, and a builder that is that base plus a
#     C linker and this machine's Rust toolchain. Both are cached (the
#     rootfs tarball under target/image-cache, the images in podman's
#     store), so a rerun only rebuilds what changed;
#  3. a smoke test: three broker containers on a podman network share one
#     bind-mounted host directory as their volume; kcat on the host
#     produces and consumes through published ports; the leader of a
#     partition is killed (`podman kill`, SIGKILL), clients carry on, the
#     container is started again and rejoins; a container is stopped with
#     SIGTERM and hands its partitions off; every acknowledged message is
#     consumed exactly once; and the start-up checks refuse a broker of
#     another cluster, a broker id already live, a read-only volume and a
#     missing data directory, each with its message;
#  4. the secured overlay (deploy/overlays/secure): its bootstrap Job and
#     three brokers run as its manifests say (user, read-only root
#     filesystem, Secret mounts, environment), clients on SASL_SSL with
#     SCRAM, users and ACLs made through the admin API.
#
# Needs root (rootful podman). Installs what it needs itself.
#
#   bash ci/image.sh                       the Dockerfile as users build it:
#                                          the binary built from source
#                                          inside the builder image
#   bash ci/image.sh --binary target/release/kaas
#                                          the Dockerfile's runtime stage
#                                          around a binary built already
#                                          (what the CI tier does: the
#                                          release build a step before is
#                                          the same build; the long tier
#                                          builds from source)
set -euo pipefail
cd "$(dirname "$0")/.."
prebuilt=""
case "${1:-}" in
"") ;;
--binary) prebuilt=${2:?--binary needs the path of a kaas binary} ;;
*) echo "usage: bash ci/image.sh [--binary PATH]" >&2; exit 2 ;;
esac
start=$SECONDS
step() { printf '\n--- %s (%d s)\n' "$*" $((SECONDS - start)); }

cache=target/image-cache
mkdir -p "$cache"
base_image=localhost/kaas-base:bookworm
image=localhost/kaas:ci
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# podman run/build flags. runc: the runtime that works in this sandbox (and
# the common default). Explicit ulimits: podman's defaults ask for more than
# a process may have here (no CAP_SYS_RESOURCE to raise a hard limit), so
# ask for at most this shell's hard limits.
hard_nofile=$(ulimit -Hn)
[ "$hard_nofile" = unlimited ] && hard_nofile=1048576
nofile=$((hard_nofile < 65536 ? hard_nofile : 65536))
podman_flags=(--runtime runc --ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096)

step "tools"
missing=()
for tool in podman:podman runc:runc debootstrap:debootstrap kcat:kcat python3:python3 openssl:openssl; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
podman --version
echo "podman storage: $(podman info --format '{{.Store.GraphDriverName}}'), cgroups: $(podman info --format '{{.Host.CgroupManager}} {{.Host.CgroupsVersion}}'), network: $(podman info --format '{{.Host.NetworkBackend}}'), ulimit nofile=$nofile"

step "manifests: render and validate"
source ci/image/venv.sh
rendered=$cache/manifests
mkdir -p "$rendered"
for overlay in base overlays/example overlays/secure; do
    out=$rendered/$(echo "$overlay" | tr / -).yaml
    "$kubectl" kustomize "deploy/$overlay" >"$out"
    for version in 1.28.0 1.37.0; do
        "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" "$out"
        echo "deploy/$overlay: schema of Kubernetes $version: valid ($(grep -c '^kind:' "$out") objects)"
    done
    "$venv/bin/python" ci/image/check_manifests.py "$out"
done
# Prometheus Operator and Grafana objects: not in the Kubernetes schema,
# checked against the brokers they watch instead.
"$kubectl" kustomize deploy/monitoring >"$rendered/monitoring.yaml"
"$venv/bin/python" ci/image/check_monitoring.py "$rendered/monitoring.yaml" "$rendered/base.yaml"

step "base image $base_image (debootstrap, cached)"
if ! podman image exists "$base_image"; then
    tarball=$cache/bookworm-minbase.tar
    if [ ! -s "$tarball" ]; then
        # Built aside and renamed into place, so an interrupted run leaves
        # no half tarball behind; the partial rootfs is started afresh.
        rootfs=$cache/rootfs.partial
        rm -rf "$rootfs" "$tarball.partial"
        mkdir -p "$rootfs"
        debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
            tail -20 "$cache/debootstrap.log" >&2
            exit 1
        }
        # What a slim image leaves out: package caches, docs, manuals.
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
            "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
        printf 'deb %s bookworm main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
            "$mirror" >"$rootfs/etc/apt/sources.list"
        tar -C "$rootfs" --numeric-owner -cf "$tarball.partial" .
        mv "$tarball.partial" "$tarball"
        rm -rf "$rootfs"
    fi
    podman import -q --change 'CMD ["/bin/bash"]' "$tarball" "$base_image" >/dev/null
fi
podman image ls "$base_image"

rust_version=$(rustc --version | awk '{print $2}')
builder_image=localhost/kaas-builder:$rust_version
# The stand-in for the Dockerfile's Rust builder image.
make_builder_image() {
    podman image exists "$builder_image" && return 0
    local ctx=$cache/builder-context sysroot
    rm -rf "$ctx"
    mkdir -p "$ctx/toolchain" "$ctx/ca-certificates"
    sysroot=$(rustc --print sysroot)
    # Hard links where the toolchain is on the same filesystem.
    for d in bin lib libexec; do
        [ -d "$sysroot/$d" ] || continue
        cp -al "$sysroot/$d" "$ctx/toolchain/" 2>/dev/null || cp -a "$sysroot/$d" "$ctx/toolchain/"
    done
    cp /usr/local/share/ca-certificates/*.crt "$ctx/ca-certificates/" 2>/dev/null || true
    cp ci/image/builder.Containerfile "$ctx/Containerfile"
    podman build "${podman_flags[@]}" --build-arg "BASE_IMAGE=$base_image" \
        -t "$builder_image" "$ctx" >"$cache/builder.log" 2>&1 || {
        tail -40 "$cache/builder.log" >&2
        return 1
    }
    rm -rf "$ctx"
}
if [ -n "$prebuilt" ]; then
    step "the binary for the image: $prebuilt (as the Dockerfile's build stage leaves it)"
    # The Dockerfile's build stage, named `build`, is replaced by this
    # directory (podman build --build-context build=...): the same file
    # at the same path, its line tables compressed the same way.
    staged=$cache/prebuilt
    rm -rf "$staged"
    install -D -m 0755 "$prebuilt" "$staged/out/kaas"
    objcopy --compress-debug-sections=zlib "$staged/out/kaas"
    "$staged/out/kaas" --version
    from=(--build-context "build=$staged")
else
    step "builder image $builder_image (the base + this machine's Rust, cached)"
    make_builder_image
    podman image ls "$builder_image"
    from=(--build-arg "BUILDER_IMAGE=$builder_image")
fi

step "image $image (Dockerfile${prebuilt:+, runtime stage around $prebuilt})"
podman build "${podman_flags[@]}" "${from[@]}" --build-arg "RUNTIME_IMAGE=$base_image" \
    -t "$image" . >"$cache/build.log" 2>&1 || {
    tail -40 "$cache/build.log" >&2
    exit 1
}
grep -E 'Finished|COMMIT' "$cache/build.log" || true
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "image $image: $((size / 1000 / 1000)) MB ($size bytes); base $base_image: $(($(podman image inspect --format '{{.Size}}' "$base_image") / 1000 / 1000)) MB"
podman run --rm "${podman_flags[@]}" "$image" --version
[ "$(podman image inspect --format '{{.Config.User}}' "$image")" = 10001:10001 ] || {
    echo "the image does not run as the unprivileged user 10001" >&2
    exit 1
}

step "smoke test: three containers on one volume"
bash ci/image/smoke.sh "$image" "${podman_flags[@]}"

step "smoke test: the secured overlay (SASL_SSL, ACLs, read-only root filesystem)"
bash ci/image/secure_smoke.sh "$image" "$rendered/overlays-secure.yaml" "${podman_flags[@]}"
echo "ci/image.sh: 1 passed, 0 failed ($((SECONDS - start)) s)"
