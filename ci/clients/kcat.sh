#!/usr/bin/env bash
# Real-client test: librdkafka (kcat) against the release `kaas` binary on
# 127.0.0.1. Produces and consumes 10,000 keyed messages with a header per
# compression codec, compares them byte for byte, restarts the broker and
# compares again. Installs kcat itself if it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v kcat >/dev/null; then
    echo "installing kcat ..."
    (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null
fi
kaas=target/release/kaas
test -x "$kaas" || cargo build --locked --release -p broker

work=$(mktemp -d "$PWD/target/kcat-test.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
broker="127.0.0.1:$port"
pid=""
start() {
    KAAS_LOG=warn "$kaas" --data-dir "$work/data" --listen "$broker" >>"$work/kaas.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
        kcat -b "$broker" -L -m 2 >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "kaas did not come up; its log:" >&2
    cat "$work/kaas.log" >&2
    return 1
}
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; fi; }
trap 'stop; rm -rf "$work"' EXIT

mkdir -p "$work/data"
start
for i in $(seq 1 10000); do printf 'key-%d:value %d with some text\n' "$i" "$i"; done >"$work/input"

passed=0
failed=0
check() {
    local name=$1 expected=$2 actual=$3
    if cmp -s "$expected" "$actual"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $name" >&2
        diff <(head -c 2000 "$expected") <(head -c 2000 "$actual") >&2 || true
    fi
}

codecs="none gzip snappy lz4 zstd"
for codec in $codecs; do
    timeout 120 kcat -b "$broker" -t "kcat-$codec" -P -K: -z "$codec" -H source=ci -l "$work/input"
    timeout 120 kcat -b "$broker" -t "kcat-$codec" -C -e -q -o beginning -f '%k:%s\n' >"$work/out-$codec"
    check "$codec: records" "$work/input" "$work/out-$codec"
    timeout 120 kcat -b "$broker" -t "kcat-$codec" -C -e -q -o beginning -c 3 -f '%h\n' >"$work/headers-$codec"
    printf 'source=ci\nsource=ci\nsource=ci\n' >"$work/headers-expected"
    check "$codec: headers" "$work/headers-expected" "$work/headers-$codec"
done

timeout 60 kcat -b "$broker" -L >"$work/listing"
if grep -q 'topic "kcat-zstd" with 1 partitions' "$work/listing"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: kcat -L does not list kcat-zstd" >&2
    cat "$work/listing" >&2
fi

# Everything acknowledged survives a restart.
stop
start
for codec in $codecs; do
    timeout 120 kcat -b "$broker" -t "kcat-$codec" -C -e -q -o beginning -f '%k:%s\n' >"$work/again-$codec"
    check "$codec: after restart" "$work/input" "$work/again-$codec"
done

echo "kcat: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
