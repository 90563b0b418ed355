#!/usr/bin/env bash
# Builds librdkafka's native load generator, examples/rdkafka_performance,
# so that the benchmark measures the broker and not a Python client. The
# example's source comes from Debian bookworm's librdkafka 2.0.2 tarball
# (checked against the sha256 bookworm's Sources index lists); it is linked
# against the librdkafka that the benchmark's confluent-kafka wheel bundles
# (2.16.0), so that the native and the Python rows run the same client
# library (librdkafka 2.0.2 itself cannot read the ApiVersions answer of
# the peer broker Tansu 0.6). ./configure only writes the config.h the
# example includes, and only the example is compiled (about a second).
#
#   bash ci/bench/rdkafka_performance.sh VENV    # prints the binary's path
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:-target/venv-bench}
version=2.0.2
sha256=f321bcb1e015a34114c83cf1aa7b99ee260236aab096b85c003170c90a47ca9d
tools=$PWD/target/bench-tools
bin=$tools/rdkafka_performance
libdir=$("$venv/bin/python" -c 'import confluent_kafka, os; print(os.path.realpath(os.path.join(os.path.dirname(confluent_kafka.__file__), "..", "confluent_kafka.libs")))')
lib=$(cd "$libdir" && ls librdkafka-*.so.1 | head -1)
if [ -x "$bin" ] && [ "$(cat "$bin.lib" 2>/dev/null)" = "$libdir/$lib" ]; then
    echo "$bin"
    exit 0
fi
mkdir -p "$tools"
tarball=$tools/librdkafka_$version.orig.tar.gz
if ! echo "$sha256  $tarball" | sha256sum -c --quiet 2>/dev/null; then
    curl -fsS -o "$tarball" \
        "http://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_$version.orig.tar.gz"
    echo "$sha256  $tarball" | sha256sum -c --quiet
fi
src=$tools/librdkafka-$version
rm -rf "$src"
tar -C "$tools" -xzf "$tarball"
(cd "$src" && ./configure --disable-ssl --disable-gssapi --disable-zstd --disable-sasl >/dev/null)
gcc -O2 -I "$src/src" -I "$src" "$src/examples/rdkafka_performance.c" \
    -o "$bin" -L"$libdir" -l:"$lib" -Wl,-rpath,"$libdir" -lpthread -lm
echo "$libdir/$lib" > "$bin.lib"
echo "$bin"
