#!/usr/bin/env bash
# Real-client tests with the Python Kafka clients (confluent-kafka, i.e.
# librdkafka; kafka-python; aiokafka) against the release `kaas` binary on
# 127.0.0.1. The clients live in a venv inside target/, made here.
set -euo pipefail
cd "$(dirname "$0")/../.."
test -x target/release/kaas || cargo build --locked --release -p broker
# test_security issues its certificates with openssl and runs kcat.
for tool in openssl kcat; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool" >/dev/null; }
done
source ci/clients/venv.sh
# A test that hangs (a client call without a timeout) fails after 5 minutes
# with every thread's stack, instead of holding CI until its deadline.
exec "$venv/bin/pytest" -q -p no:cacheprovider -W ignore::DeprecationWarning \
    --timeout 300 --timeout-method thread --durations 10 ci/clients/test_python_clients.py ci/clients/test_conformance.py ci/clients/test_groups.py ci/clients/test_consumer_protocol.py ci/clients/test_transactions.py ci/clients/test_security.py ci/clients/test_metrics.py ci/clients/test_admin.py ci/clients/test_admin_matrix.py ci/clients/test_reassignments.py ci/clients/test_client_quotas.py ci/clients/test_compaction.py ci/clients/test_damage.py ci/clients/test_full_volume.py
