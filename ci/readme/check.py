"""Runs the shell blocks of the project's READMEs as a reader would paste them.

Every ```sh (or ```bash) block of the given Markdown files runs, in file
order, from the repository root, with bash -e -o pipefail, exactly as
written. An HTML comment right before a block (invisible when rendered)
says what else a reader would do or see:

    <!-- readme-check: background ready=HOST:PORT -->
        the block starts a server: run it in the background, go on once
        HOST:PORT accepts connections, stop it with ctrl-c (SIGINT) at the
        end and require a clean exit (status 0)
    <!-- readme-check: stdout-equals="COMMAND" -->
        the block's standard output must equal COMMAND's
    <!-- readme-check: stdout-contains="TEXT" -->
        the block's standard output (or error) must contain TEXT
    <!-- readme-check: exit=N -->
        the block is expected to fail with status N
    <!-- readme-check: skip="WHY" -->
        not run here, and the reason is printed (a reason is required)
    timeout=SECONDS   (any block; default 1200, a cold build is in it)

A block without a comment runs and must exit 0, so a new block is checked
from the day it is written.
"""

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

SHELLS = {"sh", "bash", "shell", "console"}
MARK = "readme-check:"
# How a block runs: as a pasted script that stops at the first failure.
BASH = ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c"]


@dataclass
class Block:
    path: str
    line: int
    code: str
    opts: dict = field(default_factory=dict)

    def where(self):
        return f"{self.path}:{self.line}"


def parse_opts(comment, where):
    body = comment.strip()
    if not (body.startswith("<!--") and body.endswith("-->")):
        return None
    body = body[4:-3].strip()
    if not body.startswith(MARK):
        return None
    opts = {}
    for word in shlex.split(body[len(MARK):]):
        key, _, value = word.partition("=")
        if key not in {"background", "ready", "stdout-equals", "stdout-contains",
                       "exit", "skip", "timeout"}:
            raise SystemExit(f"{where}: unknown readme-check option {key!r}")
        opts[key] = value
    if "skip" in opts and not opts["skip"]:
        raise SystemExit(f"{where}: skip needs a reason (skip=\"why\")")
    if "background" in opts and "ready" not in opts:
        raise SystemExit(f"{where}: a background block needs ready=HOST:PORT")
    return opts


def blocks_of(path):
    """The shell blocks of `path`, each with the comment right before it."""
    tokens = MarkdownIt("commonmark").parse(open(path, encoding="utf-8").read())
    pending = None
    for tok in tokens:
        if tok.nesting == -1 or tok.type == "inline":
            continue
        if tok.type == "html_block":
            pending = parse_opts(tok.content, f"{path}:{tok.map[0] + 1}")
            continue
        if tok.type == "fence" and tok.info.split()[:1] and tok.info.split()[0] in SHELLS:
            yield Block(path, tok.map[0] + 1, tok.content, pending or {})
        pending = None


def bash(code, **kw):
    return subprocess.run([*BASH, code], **kw)


def wait_ready(proc, addr, deadline, log):
    host, _, port = addr.rpartition(":")
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failure(f"exited with {proc.returncode} before {addr} accepted", log)
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise Failure(f"{addr} did not accept connections in time", log)


class Failure(Exception):
    def __init__(self, why, log=None):
        super().__init__(why)
        self.log = log


def tail(path, n=40):
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def run_block(block, env, servers, scratch):
    timeout = float(block.opts.get("timeout", 1200))
    if "background" in block.opts:
        log = os.path.join(scratch, f"server-{len(servers)}.log")
        out = open(log, "w")
        proc = subprocess.Popen(
            [*BASH, block.code],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            wait_ready(proc, block.opts["ready"], time.monotonic() + timeout, log)
        except Failure:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise
        servers.append((block, proc, log))
        return
    try:
        res = bash(block.code, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"did not finish within {timeout:.0f} s")
    shown = f"--- stdout\n{res.stdout[-3000:]}--- stderr\n{res.stderr[-3000:]}"
    want_exit = int(block.opts.get("exit", 0))
    if res.returncode != want_exit:
        raise Failure(f"exited with {res.returncode}, expected {want_exit}\n{shown}")
    if "stdout-equals" in block.opts:
        expected = bash(block.opts["stdout-equals"], env=env, capture_output=True,
                        text=True, check=True).stdout
        if res.stdout != expected:
            raise Failure(f"stdout differs from that of `{block.opts['stdout-equals']}`: "
                          f"expected {expected!r}, got {res.stdout!r}")
    if "stdout-contains" in block.opts:
        text = block.opts["stdout-contains"]
        if text not in res.stdout and text not in res.stderr:
            raise Failure(f"output does not contain {text!r}\n{shown}")


def stop(servers):
    failures = []
    for block, proc, log in reversed(servers):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                failures.append((block, Failure("did not stop within 30 s of ctrl-c", log)))
                continue
        if proc.returncode != 0:
            failures.append((block, Failure(f"exited with {proc.returncode} after ctrl-c", log)))
    servers.clear()
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--list", action="store_true", help="only list the blocks and what is checked")
    args = ap.parse_args()

    blocks = [b for f in args.files for b in blocks_of(f)]
    if args.list:
        for b in blocks:
            print(f"{b.where()}: {b.opts or 'run'}\n    " + b.code.strip().replace("\n", "\n    "))
        return 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAAS_")}
    scratch = tempfile.mkdtemp(prefix="readme-check.")
    passed, failed, skipped = 0, 0, 0
    servers = []
    try:
        for b in blocks:
            if "skip" in b.opts:
                skipped += 1
                print(f"skip  {b.where()}: {b.opts['skip']}")
                continue
            started = time.monotonic()
            try:
                run_block(b, env, servers, scratch)
            except Failure as f:
                failed += 1
                print(f"FAIL  {b.where()}: {f}")
                print("    " + b.code.strip().replace("\n", "\n    "))
                if f.log:
                    print(tail(f.log))
                break
            passed += 1
            print(f"ok    {b.where()} ({time.monotonic() - started:.1f} s)"
                  f"{' [running in the background]' if 'background' in b.opts else ''}")
    finally:
        for b, f in stop(servers):
            failed += 1
            print(f"FAIL  {b.where()}: {f}\n{tail(f.log)}")
    print(f"readme: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
