#!/usr/bin/env bash
# The regression suite of the historical bugs: every scenario under
# scenarios/ must pass with today's code on its seed and 9 nearby seeds,
# and, with its bug switched back on (--reintroduce <name>), fail with
# exactly its invariant on its own seed and on at least 8 of those 10.
set -euo pipefail
cd "$(dirname "$0")/.."
# The release build of the simulator (as the sweep in ci/test), run in its
# own target directory directly (what `cargo run --release -p sim` relaunches
# into): the same digests as the debug build, several times faster.
sim() {
    RUSTFLAGS="${RUSTFLAGS:-} --cfg madsim" CARGO_TARGET_DIR=target/madsim \
        cargo run --release --locked -q -p sim -- "$@"
}
start=$SECONDS
table="| scenario | today's code | reintroduced | seconds |\n|---|---|---|---|"
for file in scenarios/*.toml; do
    began=$SECONDS
    name=$(basename "$file" .toml)
    echo "--- $name"
    today=$(sim --scenario "$name" --nearby 9 2>/dev/null) || {
        echo "$today" | grep -E 'violation|replay' >&2
        echo "$name: today's code fails the scenario" >&2
        exit 1
    }
    passed=$(echo "$today" | grep '^passed')
    echo "$passed"
    set +e
    bug=$(sim --scenario "$name" --reintroduce "$name" --nearby 9 2>/dev/null)
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        echo "$name: the reintroduced bug went unnoticed" >&2
        exit 1
    fi
    summary=$(echo "$bug" | grep '^caught')
    echo "$summary"
    caught=$(echo "$summary" | awk '{print $2}')
    if [ "$caught" -lt 8 ]; then
        echo "$name: caught on only $caught of 10 seeds (at least 8 needed)" >&2
        exit 1
    fi
    # The scenario's own seed must be caught: its invariant (and only the
    # consequences the scenario lists).
    own=$(echo "$bug" | awk '/^seed=/{n++} n==1')
    if ! grep -q 'verdict=FAIL' <<<"$own"; then
        echo "$name: its own seed was not caught" >&2
        exit 1
    fi
    own_caught=$(sim --scenario "$name" --reintroduce "$name" 2>/dev/null | grep '^caught' || true)
    case "$own_caught" in
    "caught 1 of 1"*) ;;
    *)
        echo "$name: its own seed did not report exactly its invariant: $own_caught" >&2
        exit 1
        ;;
    esac
    table="$table\n| $name | ${passed#passed } | $(echo "$summary" | cut -d' ' -f2-4) | $((SECONDS - began)) |"
done
echo
printf '%b\n' "$table"
echo
echo "scenarios: all passed today and caught reintroduced, in $((SECONDS - start)) s"
