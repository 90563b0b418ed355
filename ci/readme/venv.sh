# Sourced: the README check's Python (markdown-it-py), in a venv inside
# target/ made here on first use, as $venv.
venv=target/venv-docs
if ! "$venv/bin/python" -c 'import markdown_it' 2>/dev/null; then
    echo "creating $venv with markdown-it-py ..."
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q markdown-it-py==4.3.0
fi
