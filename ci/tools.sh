#!/usr/bin/env bash
# Everything the tests need from outside the repository, installed once at
# the start of a run (the steps after it run side by side, and two
# apt-gets at once would fight over dpkg's lock): the Debian packages of
# the real-client, power-loss, image and real-NFS steps, and the Python venvs inside
# target/. Each step's own script still installs what it misses, so it
# runs alone too.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for tool in kcat:kcat openssl:openssl podman:podman runc:runc debootstrap:debootstrap objcopy:binutils; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The real-NFS cluster's guests: QEMU, a Debian kernel, nfsd.
bash ci/realnfs/install.sh
source ci/clients/venv.sh
echo "clients: $("$venv/bin/python" -c 'import confluent_kafka, kafka, aiokafka; print("confluent-kafka", confluent_kafka.version()[0], "kafka-python", kafka.__version__, "aiokafka", aiokafka.__version__)')"
source ci/readme/venv.sh
source ci/image/venv.sh
echo "venvs: target/venv target/venv-docs target/venv-deploy ($("$kubectl" version --client 2>/dev/null | head -1))"
