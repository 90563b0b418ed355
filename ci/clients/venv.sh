# Sourced by the real-client tests: the Python Kafka clients, in a venv
# inside target/ (made here on first use), as $venv.
venv=target/venv
if ! "$venv/bin/python" -c 'import confluent_kafka, kafka, aiokafka, pytest, pytest_timeout, prometheus_client' 2>/dev/null; then
    echo "creating $venv with the Kafka clients ..."
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q \
        confluent-kafka==2.16.1 kafka-python==3.0.12 aiokafka==0.14.0 pytest==9.2.0 \
        pytest-timeout==2.4.0 prometheus-client==0.21.1
fi
