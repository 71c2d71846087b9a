"""Shared scaffolding of the end-to-end tests of the built maelys-warden.

Every envelope is validated against the published agent-cli/v2 schemas, read
from ../shared/agent-cli-v2 at test time (never copied into the project).

    test_*.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest


class _Args:
    """Filled in by main(); the same object everywhere it is imported."""


ARGS = _Args()

try:
    import jsonschema
except ImportError:  # the test must fail, not skip: ci/deps.sh installs it
    sys.stderr.write("python3-jsonschema is required (apt-get install "
                     "python3-jsonschema)\n")
    sys.exit(1)


def load_schema(name):
    path = os.path.join(ARGS.schemas, name)
    if not os.path.exists(path):
        raise SystemExit("agent-cli/v2 schema not found at %s: the tests read "
                         "the published schemas from ../shared" % path)
    with open(path) as f:
        return json.load(f)


class WardenCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.envelope_schema = load_schema("envelope.json")
        cls.describe_schema = load_schema("describe.json")
        cls.tmp = tempfile.mkdtemp(prefix="maelys-warden-test-")
        os.chmod(cls.tmp, 0o755)
        cls.state = os.path.join(cls.tmp, "state")
        os.makedirs(cls.state)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.ws = tempfile.mkdtemp(dir=self.tmp, prefix="ws-")
        os.chmod(self.ws, 0o755)

    def env(self, **extra):
        e = {"PATH": "/usr/bin:/bin", "HOME": self.tmp,
             "XDG_STATE_HOME": self.state}
        e.update(extra)
        return e

    def warden(self, *args, input=None, env=None, timeout=120, check=None,
               cwd=None):
        p = subprocess.run([ARGS.warden] + list(args), input=input,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env or self.env(), cwd=cwd or self.ws,
                           timeout=timeout)
        if check is not None:
            self.assertEqual(p.returncode, check,
                             "stderr: %s" % p.stderr.decode(errors="replace"))
        return p

    def envelope(self, text):
        doc = json.loads(text)
        jsonschema.validate(doc, self.envelope_schema)
        return doc

    def failure(self, p, code):
        """Asserts a refusal: status 1, nothing on stdout, one envelope on
        stderr with `code`; returns the envelope's error."""
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stdout, b"")
        doc = self.envelope(p.stderr)
        self.assertFalse(doc["ok"])
        self.assertEqual(doc["error"]["code"], code, doc["error"]["message"])
        return doc["error"]

    def run_args(self, *extra):
        return ["run", "--rw", "--allow-read", ARGS.fixture] + list(extra)

    def marked(self, marker):
        """The processes whose command line carries `marker`: (pid, state,
        parent pid, command line)."""
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ")
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if marker.encode() in cmd:
                found.append((int(pid), fields[0], int(fields[1]),
                              cmd.decode(errors="replace")[:120]))
        return found

    def count_marked(self, marker):
        return len(self.marked(marker))

    def run_on_terminal(self, *args):
        """Runs maelys-warden with a fresh pseudo-terminal as its stdin,
        stdout and stderr; returns (status, what reached the terminal)."""
        import pty
        import select
        import time
        master, slave = pty.openpty()
        proc = subprocess.Popen([ARGS.warden] + list(args), stdin=slave,
                                stdout=slave, stderr=slave, env=self.env(),
                                cwd=self.ws, close_fds=True)
        os.close(slave)
        seen = b""
        deadline = time.time() + 60
        while time.time() < deadline:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
        os.close(master)
        return code, seen



def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warden", required=True)
    parser.add_argument("--fixture", required=True)
    parser.add_argument("--schemas", required=True)
    parser.add_argument("--man", required=True)
    args, rest = parser.parse_known_args()
    for name in ("warden", "fixture", "schemas", "man"):
        setattr(ARGS, name, os.path.abspath(getattr(args, name)))
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
