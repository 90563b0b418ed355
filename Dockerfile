# The production kaas broker image.
#
#   podman build -t kaas .        (or: docker build -t kaas .)
#
# Two stages: the release build of the `kaas` binary (real tokio; the
# simulator's `--cfg madsim` build is never used here), then a slim Debian
# runtime holding only that binary, run as an unprivileged user.
#
# BUILDER_IMAGE and RUNTIME_IMAGE default to the public images; a build
# without access to a registry passes local substitutes (ci/image.sh builds
# a Debian base with debootstrap and a builder with the host's Rust).
ARG BUILDER_IMAGE=docker.io/library/rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim

# The stage is named `build`: a build that already has the binary replaces
# it with a directory holding out/kaas (podman/docker build
# --build-context build=DIR), as CI does with its own release build.
FROM ${BUILDER_IMAGE} AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
# kafka-protocol with the decoder fix the fuzzer called for
# (third_party/kafka-protocol/KAAS-PATCH.md), patched in by Cargo.toml.
COPY third_party third_party
COPY vfs vfs
COPY broker broker
COPY sim sim
# Cargo loads every workspace member; the test volume is built by CI only,
# never into the image (only -p broker is built, only its binary copied).
COPY testvol testvol
# The registry and target caches survive between builds (BuildKit and
# buildah both support cache mounts); the binary is copied out of them. Its
# line tables stay (a panic's backtrace names files and lines), compressed:
# 16 MB instead of 45.
RUN --mount=type=cache,id=kaas-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=kaas-target,target=/src/target \
    cargo build --release --locked -p broker \
    && install -D -m 0755 target/release/kaas /out/kaas \
    && objcopy --compress-debug-sections=zlib /out/kaas \
    && /out/kaas --version

FROM ${RUNTIME_IMAGE}
# A fixed uid/gid, so a volume's ownership can be prepared for it
# (fsGroup 10001 on Kubernetes, or chown on the NFS export).
RUN groupadd --system --gid 10001 kaas \
    && useradd --system --uid 10001 --gid kaas --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin kaas \
    && mkdir -p /var/lib/kaas && chown kaas:kaas /var/lib/kaas
COPY --from=build /out/kaas /usr/local/bin/kaas
# The broker is PID 1: it installs handlers for SIGTERM and SIGINT (a
# controlled shutdown that hands its partitions off first) and starts no
# child processes, so there is nothing for an init to reap or forward.
USER 10001:10001
ENV KAAS_DATA_DIR=/var/lib/kaas \
    KAAS_LISTEN=0.0.0.0:9092 \
    KAAS_HEALTH_LISTEN=0.0.0.0:9644
EXPOSE 9092 9644
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/kaas"]
