"""The test volume (testvol/) for the power-loss rounds: start it over a
backing directory with one mount per client host, talk to its control
socket, unmount it."""

import os
import socket
import subprocess
import time


class TestVol:
    def __init__(self, work, mounts, binary, extra=()):
        self.backing = os.path.join(work, "backing")
        self.points = [os.path.join(work, f"mnt{i}") for i in range(mounts)]
        self.control = os.path.join(work, "control.sock")
        os.makedirs(self.backing, exist_ok=True)
        for p in self.points:
            os.makedirs(p, exist_ok=True)
        args = [binary, "--backing", self.backing, "--control", self.control, *extra]
        for p in self.points:
            args += ["--mount", p]
        self.log_path = os.path.join(work, "testvol.log")
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log)
        try:
            self._wait_mounted()
            # The data directory kaas is given, made durable on the volume.
            os.makedirs(os.path.join(self.points[0], "data"), exist_ok=True)
            fd = os.open(self.points[0], os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            self.stop()
            raise

    def _wait_mounted(self):
        deadline = time.monotonic() + 10
        while not (os.path.exists(self.control) and all(os.path.ismount(p) for p in self.points)):
            if self.proc.poll() is not None:
                raise RuntimeError(f"testvol exited with {self.proc.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"testvol did not mount in 10 s; see {self.log_path}")
            time.sleep(0.05)

    def command(self, line):
        """Sends one control command; returns its key=value answer as a dict."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.control)
            s.sendall((line + "\n").encode())
            answer = s.makefile().readline().strip()
        if not answer.startswith("ok"):
            raise RuntimeError(f"testvol {line!r}: {answer}")
        return dict(kv.split("=", 1) for kv in answer.split()[1:])

    def cut(self, seed, keep=0.0, mount=None):
        line = f"cut seed={seed} keep={keep}"
        if mount is not None:
            line += f" mount={mount}"
        return self.command(line)

    def stats(self):
        return {k: float(v) for k, v in self.command("stats").items()}

    def nfs_files(self):
        """The `.nfs…` names on the volume now."""
        found = []
        for dirpath, _dirs, files in os.walk(self.backing):
            found += [os.path.join(dirpath, f) for f in files if f.startswith(".nfs")]
        return found

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.command("quit")
                self.proc.wait(timeout=10)
            except (OSError, RuntimeError, subprocess.TimeoutExpired):
                self.proc.kill()
        # By /proc/mounts: a FUSE mount whose daemon is gone fails stat
        # (ENOTCONN), so os.path.ismount would say it is not mounted.
        with open("/proc/mounts") as f:
            mounted = {line.split()[1] for line in f}
        for p in self.points:
            if os.path.abspath(p) in mounted:
                subprocess.run(["umount", "-l", p], check=False)


def fuse_available():
    """None if FUSE mounts can be made here, else why not."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    return None


if __name__ == "__main__":
    # python3 ci/powerloss/testvol.py SOCKET COMMAND...: one control command.
    import sys

    if len(sys.argv) < 3:
        sys.exit("usage: testvol.py SOCKET COMMAND [ARG=VALUE...]")
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sys.argv[1])
        s.sendall((" ".join(sys.argv[2:]) + "\n").encode())
        answer = s.makefile().readline().strip()
    print(answer)
    sys.exit(0 if answer.startswith("ok") else 1)
