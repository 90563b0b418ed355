#!/usr/bin/env bash
# Power-loss rounds: real kaas processes on the FUSE test volume (testvol/)
# with real clients; see rounds.py for what each round does and checks.
# Without FUSE (no /dev/fuse, no right to mount) a local run is skipped
# with a loud message; under CI (CI set) that is a failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/powerloss/fuse.sh
why=$fuse_missing
if [ -n "$why" ]; then
    if [ -n "${CI:-}" ]; then
        echo "power-loss rounds cannot run: $why (CI requires FUSE)" >&2
        exit 1
    fi
    printf '\n!!!!! SKIPPED: the power-loss rounds need FUSE: %s !!!!!\n\n' "$why" >&2
    exit 0
fi
# Built one at a time: together, feature unification would rebuild the
# broker that the steps before built alone.
cargo build --locked --release -p broker
cargo build --locked --release -p testvol
source ci/clients/venv.sh
exec "$venv/bin/python" -u ci/powerloss/rounds.py "$@"
