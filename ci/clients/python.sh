#!/usr/bin/env bash
# Real-client tests with the Python Kafka clients (confluent-kafka, i.e.
# librdkafka; kafka-python; aiokafka) against the release `kaas` binary on
# 127.0.0.1. The clients live in a venv inside target/, made here.
set -euo pipefail
cd "$(dirname "$0")/../.."
test -x target/release/kaas || cargo build --locked --release -p broker
venv=target/venv
if ! "$venv/bin/python" -c 'import confluent_kafka, kafka, aiokafka, pytest' 2>/dev/null; then
    echo "creating $venv with the Kafka clients ..."
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q \
        confluent-kafka==2.16.1 kafka-python==3.0.12 aiokafka==0.14.0 pytest==9.2.0
fi
exec "$venv/bin/pytest" -q -p no:cacheprovider -W ignore::DeprecationWarning ci/clients/test_python_clients.py ci/clients/test_groups.py
