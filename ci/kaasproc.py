"""Starting real kaas processes on 127.0.0.1, for the real-client tests
(ci/clients) and the benchmarks (ci/bench): one way to pick ports and to
wait for a broker to listen."""

import os
import socket
import subprocess
import tempfile
import time

KAAS = os.environ.get("KAAS_BIN", "target/release/kaas")


def free_port():
    """A port nobody listens on now (the kernel's pick, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args, port, log_path, env=None, timeout=60, poll=0.05, binary=None, cwd=None):
    """Starts `kaas ARGS` (or another broker's `binary`) with its output
    appended to `log_path` and waits until 127.0.0.1:`port` accepts
    connections; raises, naming the log, if the process exits first or the
    port stays closed for `timeout` s."""
    name = os.path.basename(binary or KAAS)
    with open(log_path, "a") as log:
        proc = subprocess.Popen([binary or KAAS, *args], stdout=log, stderr=log, cwd=cwd,
                                env=env if env is not None else dict(os.environ))
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {log_path}")
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"{name} did not listen on {port} in {timeout} s; see {log_path}")
            time.sleep(poll)


class Broker:
    """One broker on a fresh data directory under target/, on a free port."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="kaas-py-", dir="target")
        self.addr = f"127.0.0.1:{free_port()}"
        self.proc = None

    def start(self, poll=0.1, extra=()):
        port = int(self.addr.rsplit(":", 1)[1])
        args = ["--data-dir", self.dir, "--listen", self.addr, *extra]
        self.proc = start(args, port, os.path.join(self.dir, "kaas.log"), timeout=60, poll=poll)

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=60)
            self.proc = None
