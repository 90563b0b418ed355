#!/usr/bin/env bash
# Builds librdkafka's native load generator, examples/rdkafka_performance,
# so that the benchmark measures the broker and not a Python client. The
# source is Debian bookworm's own librdkafka tarball (the version of the
# librdkafka-dev it links against), checked against the sha256 that
# bookworm's Sources index lists; ./configure only writes the config.h the
# example includes, and only the example is compiled (about a second).
#
#   bash ci/bench/rdkafka_performance.sh    # prints the binary's path
set -euo pipefail
cd "$(dirname "$0")/../.."
version=2.0.2
sha256=f321bcb1e015a34114c83cf1aa7b99ee260236aab096b85c003170c90a47ca9d
tools=$PWD/target/bench-tools
bin=$tools/rdkafka_performance
if [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi
if ! dpkg -s librdkafka-dev >/dev/null 2>&1; then
    apt-get install -y -q librdkafka-dev >&2
fi
installed=$(dpkg-query -W -f '${Version}' librdkafka-dev)
case $installed in
    "$version"-*) ;;
    *) echo "librdkafka-dev is $installed, the example source is $version" >&2 ;;
esac
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
    -o "$bin" -lrdkafka -lpthread -lm
echo "$bin"
