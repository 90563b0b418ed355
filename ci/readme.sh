#!/usr/bin/env bash
# Runs the shell blocks of README.md, scenarios/README.md and deploy/README.md
# literally, in order, from the repository root (see ci/readme/check.py for
# the comments that mark a server, an expected output or a skipped block).
# The README's quick start uses ./data, so it must not exist beforehand: the
# check runs against a fresh data directory and removes it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -e data ]; then
    echo "ci/readme.sh: ./data exists; the README check needs a fresh data directory." >&2
    echo "Move it aside (mv data data.keep) and run again." >&2
    exit 1
fi
trap 'rm -rf data' EXIT

if ! command -v kcat >/dev/null; then
    echo "installing kcat (a prerequisite the README names) ..."
    (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null
fi
source ci/readme/venv.sh
"$venv/bin/python" -m unittest ci/readme/test_check.py
"$venv/bin/python" ci/readme/check.py README.md scenarios/README.md deploy/README.md
