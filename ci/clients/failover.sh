#!/usr/bin/env bash
# Failover across real processes: three `kaas` brokers share one data
# directory; kcat produces to a 3-partition topic; the leader of partition 0
# is killed with SIGKILL and another broker takes its partitions over; then
# the new leader is stopped with SIGTERM and hands them off before exiting;
# every acknowledged message is consumed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v kcat >/dev/null || { apt-get update -qq && apt-get install -y -qq kcat >/dev/null; }
kaas=target/release/kaas
test -x "$kaas" || cargo build --locked --release -p broker

work=$(mktemp -d "$PWD/target/failover-test.XXXXXX")
mkdir -p "$work/data"
ports=()
for _ in 0 1 2; do
    ports+=("$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')")
done
pids=()
start() {
    local id=$1
    # Auto-created topics get 3 partitions, one per broker.
    KAAS_LOG=info KAAS_NUM_PARTITIONS=3 "$kaas" --data-dir "$work/data" --broker-id "$id" \
        --listen "127.0.0.1:${ports[$id]}" --heartbeat-interval-secs 1 --session-timeout-secs 4 \
        >>"$work/kaas-$id.log" 2>&1 &
    pids[$id]=$!
    disown "$!"
}
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
for id in 0 1 2; do start "$id"; done
bootstrap="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"

leaders() { timeout 20 kcat -b "$bootstrap" -L -t orders 2>/dev/null | sed -n 's/.*partition \([0-9]\), leader \([0-9-]*\),.*/\1 \2/p'; }
wait_for() {
    local what=$1
    for _ in $(seq 1 150); do
        if eval "$what"; then return 0; fi
        sleep 0.2
    done
    echo "timed out waiting for: $what" >&2
    kcat -b "$bootstrap" -L >&2 || true
    return 1
}

# Asking for the topic's metadata creates it; wait until all 3 have leaders.
wait_for '[ "$(leaders | awk "\$2 >= 0" | wc -l)" = 3 ]'

seq 1 3000 | sed 's/^/m/' >"$work/first"
timeout 120 kcat -b "$bootstrap" -t orders -P -X acks=all -l "$work/first"
victim=$(leaders | awk '$1 == 0 {print $2}')
echo "killing broker $victim (leader of partition 0)"
kill -9 "${pids[$victim]}"
wait_for '[ -n "$(leaders | awk -v v="$victim" "\$1 == 0 && \$2 >= 0 && \$2 != v")" ]'
echo "partition 0 moved to broker $(leaders | awk '$1 == 0 {print $2}')"

seq 3001 4000 | sed 's/^/m/' >"$work/second"
timeout 120 kcat -b "$bootstrap" -t orders -P -X acks=all -l "$work/second" 2>>"$work/kcat.log"

# Controlled shutdown: SIGTERM the new leader of partition 0; it announces
# it is leaving, the controller moves its partitions, and it exits only
# once it leads nothing.
heir=$(leaders | awk '$1 == 0 {print $2}')
echo "stopping broker $heir with SIGTERM"
kill -TERM "${pids[$heir]}"
wait_for '! kill -0 "${pids[$heir]}" 2>/dev/null'
if ! grep -q 'handed off.*still_leading=0' "$work/kaas-$heir.log"; then
    echo "broker $heir exited without handing its partitions off:" >&2
    cat "$work/kaas-$heir.log" >&2
    exit 1
fi
wait_for '[ -n "$(leaders | awk -v v="$heir" "\$1 == 0 && \$2 >= 0 && \$2 != v")" ]'
echo "partition 0 handed to broker $(leaders | awk '$1 == 0 {print $2}')"
seq 4001 5000 | sed 's/^/m/' >"$work/third"
timeout 120 kcat -b "$bootstrap" -t orders -P -X acks=all -l "$work/third" 2>>"$work/kcat.log"
for p in 0 1 2; do
    timeout 120 kcat -b "$bootstrap" -t orders -p "$p" -C -e -q -o beginning 2>>"$work/kcat.log"
done | sort >"$work/seen"
cat "$work/first" "$work/second" "$work/third" | sort >"$work/expected"
if cmp -s "$work/expected" "$work/seen"; then
    echo "failover: 1 passed, 0 failed"
else
    echo "failover: 0 passed, 1 failed" >&2
    diff "$work/expected" "$work/seen" | head -20 >&2
    exit 1
fi
