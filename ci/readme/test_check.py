"""The README check must be able to fail: each way a block can go wrong is
shown to it here, in a Markdown file of its own."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def check(markdown):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "README.md")
        with open(path, "w") as f:
            f.write(textwrap.dedent(markdown))
        res = subprocess.run([sys.executable, os.path.join(HERE, "check.py"), path],
                             capture_output=True, text=True, timeout=120, cwd=d)
        return res.returncode, res.stdout + res.stderr


def fence(code, comment=None):
    head = f"<!-- readme-check: {comment} -->\n" if comment else ""
    return f"{head}```sh\n{code}\n```\n\n"


class ReadmeCheck(unittest.TestCase):
    def test_blocks_that_work_pass(self):
        rc, out = check(fence("echo hello", 'stdout-equals="echo hello"')
                        + fence("false", "exit=1")
                        + fence("echo x >&2", 'stdout-contains="x"')
                        + fence("rm -rf /", 'skip="never run"'))
        self.assertEqual(rc, 0, out)
        self.assertIn("readme: 3 passed, 0 failed, 1 skipped", out)

    def test_a_failing_command_fails(self):
        rc, out = check(fence("true\nfalse\necho not reached"))
        self.assertEqual(rc, 1, out)
        self.assertIn("exited with 1, expected 0", out)

    def test_a_failure_inside_a_pipe_fails(self):
        rc, out = check(fence("false | cat"))
        self.assertEqual(rc, 1, out)

    def test_other_output_fails(self):
        rc, out = check(fence("seq 1 9", 'stdout-equals="seq 1 10"'))
        self.assertEqual(rc, 1, out)
        self.assertIn("stdout differs", out)

    def test_duplicated_output_fails(self):
        rc, out = check(fence("seq 1 3; seq 1 3", 'stdout-equals="seq 1 3"'))
        self.assertEqual(rc, 1, out)

    def test_missing_text_fails(self):
        rc, out = check(fence("echo verdict=FAIL", 'stdout-contains="verdict=PASS"'))
        self.assertEqual(rc, 1, out)

    def test_a_skip_needs_a_reason(self):
        rc, out = check(fence("true", "skip"))
        self.assertNotEqual(rc, 0, out)

    def test_an_unknown_option_is_refused(self):
        rc, out = check(fence("true", "bakground"))
        self.assertNotEqual(rc, 0, out)
        self.assertIn("unknown readme-check option", out)

    def test_a_comment_applies_only_to_the_next_block(self):
        rc, out = check("<!-- readme-check: exit=1 -->\n\nsome text\n\n" + fence("false"))
        self.assertEqual(rc, 1, out)

    def test_a_server_that_never_listens_fails(self):
        rc, out = check(fence("echo starting; exit 3", "background ready=127.0.0.1:1 timeout=10"))
        self.assertEqual(rc, 1, out)
        self.assertIn("exited with 3 before", out)

    def test_a_server_is_stopped_with_ctrl_c_and_must_exit_cleanly(self):
        server = ("exec python3 -c 'import socket,signal,sys; s=socket.socket(); "
                  "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                  "s.bind((\"127.0.0.1\", 38517)); s.listen(); "
                  "signal.signal(signal.SIGINT, lambda *a: sys.exit(CODE)); signal.pause()'")
        ok = fence(server.replace("CODE", "0"), "background ready=127.0.0.1:38517")
        rc, out = check(ok + fence("true"))
        self.assertEqual(rc, 0, out)
        bad = fence(server.replace("CODE", "4"), "background ready=127.0.0.1:38517")
        rc, out = check(bad + fence("true"))
        self.assertEqual(rc, 1, out)
        self.assertIn("exited with 4 after ctrl-c", out)

    def test_non_shell_blocks_are_left_alone(self):
        rc, out = check("```yaml\nkind: Pod\n```\n\n" + fence("true"))
        self.assertEqual(rc, 0, out)
        self.assertIn("1 passed", out)


if __name__ == "__main__":
    unittest.main()
