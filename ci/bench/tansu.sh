#!/usr/bin/env bash
# Installs the peer broker the benchmark measures kaas against: Tansu 0.6
# (a Kafka-compatible broker in Rust), with the engines the benchmark uses
# (memory, and sqlite through libsql), into target/bench-tools/tansu. The
# build takes about ten minutes once; later runs find the binary.
#
#   bash ci/bench/tansu.sh    # prints the binary's path
set -euo pipefail
cd "$(dirname "$0")/../.."
version=0.6.0
tools=$PWD/target/bench-tools
bin=$tools/tansu/bin/tansu
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "$version"; then
    echo "$bin"
    exit 0
fi
cargo install --locked tansu --version "$version" --features dynostore,libsql \
    --root "$tools/tansu" --target-dir "$tools/tansu-build" >&2
echo "$bin"
