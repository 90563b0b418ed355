#!/usr/bin/env bash
# Topics at scale against three release `kaas` processes on 127.0.0.1: 1,000
# topics x 10 partitions created 100 per request, several requests at once,
# while other topics are deleted and grown; each must succeed the first time.
# Prints the scale figures (ci/clients/topics_at_scale.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
kaas=${KAAS_BIN:-target/release/kaas}
test -x "$kaas" || [ -n "${KAAS_BIN:-}" ] || cargo build --locked --release -p broker
source ci/clients/venv.sh
work=$(mktemp -d "$PWD/target/topics-test.XXXXXX")
if "$venv/bin/python" ci/clients/topics_at_scale.py "$kaas" "$work" "$@"; then
    rm -rf "$work"
else
    echo "kept $work (kaas-<id>.log)" >&2
    exit 1
fi
