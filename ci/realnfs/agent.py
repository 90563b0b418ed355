"""The command agent of a real-NFS test host (PID 1 once guest.sh is
done, beside the shell that stays PID 1): one JSON request per connection, `{"sh": CMD, "timeout": S}` runs
CMD with /bin/sh and answers `{"rc", "out", "err"}`; `{"sh": CMD, "bg":
LOG}` starts it in a session of its own with its output appended to LOG
and answers `{"pid"}`. The orchestrator reaches it through the run's
network namespace only."""

import argparse
import json
import os
import socketserver
import subprocess


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline()
        try:
            req = json.loads(line)
            if req.get("bg"):
                with open(req["bg"], "ab") as log:
                    p = subprocess.Popen(["/bin/sh", "-c", req["sh"]], stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
                answer = {"pid": p.pid}
            else:
                r = subprocess.run(["/bin/sh", "-c", req["sh"]], capture_output=True,
                                   timeout=req.get("timeout", 60), stdin=subprocess.DEVNULL)
                answer = {"rc": r.returncode, "out": r.stdout.decode(errors="replace"),
                          "err": r.stderr.decode(errors="replace")}
        except subprocess.TimeoutExpired as e:
            answer = {"rc": -1, "out": "", "err": f"timed out after {e.timeout} s"}
        except Exception as e:  # noqa: BLE001 - the orchestrator reads why
            answer = {"rc": -1, "out": "", "err": f"agent: {e!r}"}
        self.wfile.write(json.dumps(answer).encode() + b"\n")


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--listen", required=True)
    args = a.parse_args()
    host, port = args.listen.rsplit(":", 1)
    with Server((host, int(port)), Handler) as s:
        print(f"agent listening on {args.listen}", flush=True)
        s.serve_forever()


if __name__ == "__main__":
    os.environ.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    main()
