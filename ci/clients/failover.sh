#!/usr/bin/env bash
# Failover across real processes: three `kaas` brokers share one data
# directory; kcat produces to a 3-partition topic; the leader of partition 0
# is killed with SIGKILL and another broker takes its partitions over; then
# the new leader is stopped with SIGTERM and hands them off before exiting;
# then, with the two stopped brokers started again, the leader of partition 0
# is paused (SIGSTOP) past a session timeout while kcat keeps producing to
# that partition, and resumed (SIGCONT): it must step down and acknowledge
# nothing more for it; every acknowledged message is consumed exactly once
# at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v kcat >/dev/null || { apt-get update -qq && apt-get install -y -qq kcat >/dev/null; }
# KAAS_BIN picks another binary (as for the Python tests); by default the
# release build of this tree.
kaas=${KAAS_BIN:-target/release/kaas}
test -x "$kaas" || [ -n "${KAAS_BIN:-}" ] || cargo build --locked --release -p broker
test -x "$kaas" || { echo "no kaas binary at $kaas" >&2; exit 1; }

work=$(mktemp -d "$PWD/target/failover-test.XXXXXX")
mkdir -p "$work/data"
ports=()
for _ in 0 1 2; do
    ports+=("$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')")
done
pids=()
start() {
    local id=$1
    # Auto-created topics get 3 partitions, one per broker. Every
    # acknowledged produce is logged (trace of broker::api: "acknowledged"
    # with the partition's directory and the leader epoch).
    KAAS_LOG=info,broker::api=trace KAAS_NUM_PARTITIONS=3 "$kaas" --data-dir "$work/data" --broker-id "$id" \
        --listen "127.0.0.1:${ports[$id]}" --heartbeat-interval-secs 1 --session-timeout-secs 4 \
        >>"$work/kaas-$id.log" 2>&1 &
    pids[$id]=$!
    disown "$!"
}
producers=()
passed=0
cleanup() {
    touch "$work/fed-enough" # ends the feed of the zombie phase's kcat
    for p in "${pids[@]}" "${producers[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    if [ "$passed" = 1 ]; then rm -rf "$work"; else echo "kept $work (kaas-<id>.log, kcat.log)" >&2; fi
}
trap cleanup EXIT
for id in 0 1 2; do start "$id"; done
bootstrap="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"

# "partition leader" lines, as the brokers in $1 (default: all) see them.
leaders() { timeout 20 kcat -b "${1:-$bootstrap}" -L -t orders 2>/dev/null | sed -n 's/.*partition \([0-9]\), leader \([0-9-]*\),.*/\1 \2/p'; }
# The leader of partition $1 as each broker in $2... (ids) tells it, printed
# only when every one of them answers and they agree: a broker learns a new
# assignment at its next tick, so for a moment two brokers can answer
# differently.
agreed_leader() {
    local p=$1 id answer answers=()
    shift
    for id in "$@"; do
        answer=$(leaders "127.0.0.1:${ports[$id]}" | awk -v p="$p" '$1 == p {print $2}')
        [ -n "$answer" ] || return 0
        answers+=("$answer")
    done
    [ "$(printf '%s\n' "${answers[@]}" | sort -u | wc -l)" = 1 ] && echo "${answers[0]}"
    return 0
}
wait_for() {
    local what=$1
    # A condition, not a pace: a busy machine gets two minutes.
    local until=$((SECONDS + 120))
    while [ "$SECONDS" -lt "$until" ]; do
        if eval "$what"; then return 0; fi
        sleep 0.2
    done
    echo "timed out after 120 s waiting for: $what" >&2
    kcat -b "$bootstrap" -L >&2 || true
    return 1
}

# Asking for the topic's metadata creates it; wait until all 3 have leaders.
wait_for '[ "$(leaders | awk "\$2 >= 0" | wc -l)" = 3 ]'

seq 1 3000 | sed 's/^/m/' >"$work/first"
timeout 120 kcat -b "$bootstrap" -t orders -P -X acks=all -l "$work/first"
# Every broker follows the newest assignment within a tick: wait for them to
# agree rather than ask once (a broker a tick behind names no leader yet).
wait_for '[ -n "$(agreed_leader 0 0 1 2)" ]'
victim=$(agreed_leader 0 0 1 2)
[ -n "$victim" ] || { echo "the brokers disagree on the leader of partition 0" >&2; exit 1; }
echo "killing broker $victim (leader of partition 0)"
kill -9 "${pids[$victim]}"
alive=()
for id in 0 1 2; do [ "$id" = "$victim" ] || alive+=("$id"); done
moved() { local l; l=$(agreed_leader 0 "${alive[@]}"); [ -n "$l" ] && [ "$l" -ge 0 ] && [ "$l" != "$1" ]; }
wait_for 'moved "$victim"'
echo "partition 0 moved to broker $(agreed_leader 0 "${alive[@]}")"

seq 3001 4000 | sed 's/^/m/' >"$work/second"
timeout 120 kcat -b "$bootstrap" -t orders -P -X acks=all -l "$work/second" 2>>"$work/kcat.log"

# Controlled shutdown: SIGTERM the new leader of partition 0; it announces
# it is leaving, the controller moves its partitions, and it exits only
# once it leads nothing.
heir=$(agreed_leader 0 "${alive[@]}")
[ -n "$heir" ] && [ "$heir" != "$victim" ] || { echo "brokers ${alive[*]} disagree on the leader of partition 0, or name the killed broker" >&2; exit 1; }
echo "stopping broker $heir with SIGTERM"
kill -TERM "${pids[$heir]}"
wait_for '! kill -0 "${pids[$heir]}" 2>/dev/null'
if ! grep -q 'handed off.*still_leading=0' "$work/kaas-$heir.log"; then
    echo "broker $heir exited without handing its partitions off:" >&2
    cat "$work/kaas-$heir.log" >&2
    exit 1
fi
alive=()
for id in 0 1 2; do [ "$id" = "$victim" ] || [ "$id" = "$heir" ] || alive+=("$id"); done
wait_for 'moved "$heir"'
echo "partition 0 handed to broker $(agreed_leader 0 "${alive[@]}")"
seq 4001 5000 | sed 's/^/m/' >"$work/third"
timeout 120 kcat -b "$bootstrap" -t orders -P -X acks=all -l "$work/third" 2>>"$work/kcat.log"

# A paused leader (a zombie): start the two stopped brokers again (on the
# same data directory, so the partitions spread over the three), then
# SIGSTOP the leader of partition 0 for longer than a session timeout while
# kcat keeps producing to partition 0. The others must take the partition
# over and acknowledge the writes; the paused broker, once resumed, must
# find out it lost the partition and never acknowledge a write for it again.
start "$victim"
start "$heir"
wait_for '[ "$(leaders | awk "\$2 >= 0 {print \$2}" | sort -u | wc -l)" = 3 ]'
wait_for '[ -n "$(agreed_leader 0 0 1 2)" ]'
zombie=$(agreed_leader 0 0 1 2)
others=$(for id in 0 1 2; do [ "$id" = "$zombie" ] || printf '127.0.0.1:%s,' "${ports[$id]}"; done)
others=${others%,}
p0dir=$(grep -ho 'acknowledged dir=[^ ]*/0 ' "$work"/kaas-*.log | head -1 | sed 's/.*dir=//; s/ $//')
[ -n "$p0dir" ] || { echo "no acknowledged write to partition 0 in the brokers' logs" >&2; exit 1; }
p0id=$(basename "$(dirname "$p0dir")")
acks_p0() { cat "$@" | grep -c "acknowledged dir=$p0dir " || true; }
# One kcat keeps producing to partition 0, fed about 2,000 messages a second
# from a second before the pause until 3 s after it (so requests are in
# flight when the leader stops). Idempotent, so that a batch the paused
# broker wrote but never acknowledged, retried to the new leader, still
# counts once. A request to the paused broker times out after 3 s
# (socket.timeout.ms; 60 s by default) and is retried after a metadata
# refresh.
feed() {
    local n=5001
    while [ ! -e "$work/fed-enough" ]; do
        seq "$n" $((n + 199)) | sed 's/^/m/'
        n=$((n + 200))
        sleep 0.1
    done
}
{ feed | tee "$work/fourth" | timeout 300 kcat -b "$bootstrap" -t orders -p 0 -P -X acks=all \
    -X enable.idempotence=true -X socket.timeout.ms=3000 2>>"$work/kcat.log" ||
    echo "kcat exited with $?" >>"$work/failed"; } &
producers+=("$!")
sleep 1
echo "pausing broker $zombie (leader of partition 0) with SIGSTOP"
kill -STOP "${pids[$zombie]}"
paused=$SECONDS
others_logs=()
for id in 0 1 2; do [ "$id" = "$zombie" ] || others_logs+=("$work/kaas-$id.log"); done
acked_before=$(acks_p0 "${others_logs[@]}")
wait_for '[ -n "$(leaders "$others" | awk -v v="$zombie" "\$1 == 0 && \$2 >= 0 && \$2 != v")" ]'
# The writes go on there while the zombie still sleeps.
wait_for '[ "$(acks_p0 "${others_logs[@]}")" -gt "$acked_before" ]'
echo "partition 0 moved to broker $(leaders "$others" | awk '$1 == 0 {print $2}'), which acknowledges writes, while broker $zombie is paused"
while [ $((SECONDS - paused)) -lt 7 ]; do sleep 0.2; done # session timeout (4 s) + 3 s
resumed_at=$(($(wc -l <"$work/kaas-$zombie.log") + 1))
echo "resuming broker $zombie after $((SECONDS - paused)) s with SIGCONT"
kill -CONT "${pids[$zombie]}"
sleep 3
touch "$work/fed-enough"
wait "${producers[0]}"
if [ -s "$work/failed" ]; then
    echo "kcat could not produce to partition 0 around the pause of broker $zombie:" >&2
    cat "$work/failed" >&2
    exit 1
fi
# The resumed broker tells clients that another broker leads partition 0 ...
wait_for '[ -n "$(leaders "127.0.0.1:${ports[$zombie]}" | awk -v v="$zombie" "\$1 == 0 && \$2 >= 0 && \$2 != v")" ]'
# ... it acknowledged no write for it after it resumed ...
zombie_log=$(tail -n +"$resumed_at" "$work/kaas-$zombie.log")
zombie_failed=
if grep -E "acknowledged dir=$p0dir " <<<"$zombie_log" >&2; then
    zombie_failed="broker $zombie acknowledged writes to partition 0 after it resumed"
fi
# ... and it logged that it lost the partition: fenced by the new leader's
# epoch at an append ("fenced: stepping down"), its log stopped, or told by
# the new assignment (a "stepping down" / "no longer leading" line naming the
# partition).
lost="fenced: stepping down.*dir=$p0dir( |\$)|log stopped.*topic_id=$p0id partition=0 "
lost+="|(stepping down|stepped down|no longer lead).*topic_id=$p0id partition=0 "
if ! grep -qE "$lost" <<<"$zombie_log"; then
    zombie_failed+="${zombie_failed:+; }broker $zombie logged nothing about losing partition 0 (topic_id=$p0id) after it resumed"
    echo "broker $zombie's log after it resumed:" >&2
    grep -v ' acknowledged' <<<"$zombie_log" >&2
else
    echo "broker $zombie stepped down: $(grep -oE "$lost" <<<"$zombie_log" | head -1)"
fi

for p in 0 1 2; do
    timeout 120 kcat -b "$bootstrap" -t orders -p "$p" -C -e -q -o beginning 2>>"$work/kcat.log"
done | sort >"$work/seen"
cat "$work/first" "$work/second" "$work/third" "$work/fourth" | sort >"$work/expected"
# Exactly once: the sorted lists are equal (nothing lost, nothing twice).
if ! cmp -s "$work/expected" "$work/seen"; then
    echo "failover: 0 passed, 1 failed" >&2
    echo "missing: $(comm -23 "$work/expected" "$work/seen" | wc -l), duplicated: $(uniq -d "$work/seen" | wc -l), unexpected: $(comm -13 "$work/expected" <(sort -u "$work/seen") | wc -l)" >&2
    diff "$work/expected" "$work/seen" | head -20 >&2
    [ -z "$zombie_failed" ] || echo "$zombie_failed" >&2
    exit 1
elif [ -n "$zombie_failed" ]; then
    echo "every acknowledged message consumed exactly once, but: $zombie_failed" >&2
    echo "failover: 0 passed, 1 failed" >&2
    exit 1
else
    passed=1
    echo "failover: 1 passed, 0 failed ($(wc -l <"$work/seen") messages, each once)"
fi
