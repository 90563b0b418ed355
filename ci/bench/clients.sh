#!/usr/bin/env bash
# Produce/consume benchmark with confluent-kafka against the release binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --locked --release -p broker
venv=target/venv
if ! "$venv/bin/python" -c 'import confluent_kafka' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q confluent-kafka==2.16.1
fi
exec "$venv/bin/python" ci/bench/clients.py
