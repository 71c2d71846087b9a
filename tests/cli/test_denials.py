#!/usr/bin/env python3
"""Denials made visible through the built maelys-warden (issue 17, item 7):
a refused call explains itself on stderr at the first denial of its kind,
while the payload still runs (a silent hang is the symptom this answers),
names the option that would allow it, and the end of the run sums the
denials up from the receipt.

    test_denials.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import json
import os
import re
import select
import signal
import subprocess
import time

from test_session import Terminal
from wardentest import ARGS, WardenCase, main


class Denials(WardenCase):
    def hidden_program(self):
        """A program on the host, outside everything the sandbox binds (the
        sandbox's /tmp is its own), below directories any uid can search: a
        root-started sandbox looks as its own uid."""
        bindir = os.path.join(self.tmp, "hidden-%d" % os.getpid(), "bin")
        os.makedirs(bindir, exist_ok=True)
        for d in (os.path.dirname(bindir), bindir):
            os.chmod(d, 0o755)
        tool = os.path.join(bindir, "tool")
        with open(tool, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(tool, 0o755)
        return bindir, tool

    def read_until(self, proc, want, timeout=30):
        """stdout and stderr read as they come until every pattern of
        `want` ({"stdout": [...], "stderr": [...]}) matches what its stream
        gave; returns what each gave so far."""
        got = {"stdout": b"", "stderr": b""}
        streams = {proc.stdout.fileno(): "stdout",
                   proc.stderr.fileno(): "stderr"}
        deadline = time.monotonic() + timeout

        def missing():
            return [p for name, ps in want.items() for p in ps
                    if re.search(p, got[name]) is None]

        while missing():
            left = deadline - time.monotonic()
            if left <= 0 or not streams:
                self.fail("no %r; got:\n%r" % (missing(), got))
            ready, _, _ = select.select(list(streams), [], [], left)
            for fd in ready:
                chunk = os.read(fd, 65536)
                if chunk:
                    got[streams[fd]] += chunk
                else:
                    del streams[fd]
        return got

    def test_notice_at_first_denial_then_summary(self):
        bindir, tool = self.hidden_program()
        proc = subprocess.Popen(
            [ARGS.warden] + self.run_args(
                "--", ARGS.fixture, "deny", "socket", "socket6", "socket",
                "exec", "hidden", tool, "exec", "hidden", tool,
                "exec", "missing", "/opt/nonexistent/bin/x",
                "ready", "sleep", "60000"),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=self.env(), cwd=self.ws)
        try:
            # Both notices, while the payload still sleeps: the run has not
            # ended, the denial explained itself. The payload's "ready" on
            # its stdout says every call was made: a stop any earlier could
            # catch the second exec while the listener still holds it, and
            # it would never happen.
            got = self.read_until(proc, {
                "stderr": [rb"denied: socket\(AF_INET\).*\n",
                           rb"denied: execve\(.*\n"],
                "stdout": [rb"(^|\n)ready\n"]})
            self.assertIsNone(proc.poll(), "the run ended before its notices")
            text = got["stderr"].decode(errors="replace")
            net = [l for l in text.splitlines() if "denied: socket" in l]
            self.assertEqual(len(net), 1, text)
            self.assertIn("-> EPERM", net[0])
            self.assertIn("Allow it with --network inherit.", net[0])
            ex = [l for l in text.splitlines() if "denied: execve" in l]
            self.assertEqual(len(ex), 1, text)
            self.assertIn("execve(%s) -> ENOENT" % tool, ex[0])
            self.assertIn("Allow it with --allow-read %s." % bindir, ex[0])
            proc.send_signal(signal.SIGTERM)
            out, rest = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        text += rest.decode(errors="replace")
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, text)
        # One notice per kind, however many denials of it.
        self.assertEqual(text.count("denied: socket("), 1, text)
        self.assertEqual(text.count("denied: execve("), 1, text)
        self.assertNotIn("/opt/nonexistent", "".join(
            l for l in text.splitlines() if "denied" in l))
        # The summary: the counts, and the receipt that lists them.
        summary = [l for l in text.splitlines()
                   if l.startswith("maelys-warden: denials: ")]
        self.assertEqual(len(summary), 1, text)
        self.assertIn("3 network, 2 exec", summary[0])
        receipt = re.search(r"the receipt (\S+\.json) lists them",
                            summary[0]).group(1)
        with open(receipt) as f:
            denials = json.load(f)["denials"]
        self.assertEqual(denials["counts"], {"network": 3, "exec": 2})
        self.assertEqual(denials["recording"], "complete")
        details = sorted((x["call"], x["detail"]) for x in denials["examples"])
        self.assertEqual(details, [("execve", tool), ("socket", "AF_INET"),
                                   ("socket", "AF_INET6")])

    def test_plan_file_hint_names_the_plan(self):
        """With --plan the built-in profile's options do not apply: the
        notice says what to add to the plan instead."""
        p = self.warden("plan", "--rw", "--allow-read", ARGS.fixture,
                        "--format", "json", check=0)
        plan = self.envelope(p.stdout)["data"]["plan"]
        plan.pop("digest", None)
        path = os.path.join(self.tmp, "plan-denials-%d.json" % os.getpid())
        with open(path, "w") as f:
            json.dump(plan, f)
        os.chmod(path, 0o600)
        bindir, tool = self.hidden_program()
        p = self.warden("run", "--plan", path, "--", ARGS.fixture, "deny",
                        "socket", "exec", "hidden", tool, check=0)
        text = p.stderr.decode(errors="replace")
        self.assertEqual(p.returncode, 0, text)
        net = [l for l in text.splitlines() if "denied: socket" in l]
        self.assertEqual(len(net), 1, text)
        self.assertIn("Allow it in the plan: network inherit.", net[0])
        ex = [l for l in text.splitlines() if "denied: execve" in l]
        self.assertEqual(len(ex), 1, text)
        self.assertIn("Allow it in the plan: a read rule for %s." % bindir,
                      ex[0])
        self.assertNotIn("--network", text)
        self.assertNotIn("--allow-read", text)

    def test_notice_in_a_terminal_session(self):
        """In a terminal session the operator's terminal is in raw mode (no
        output processing): the notice ends its line with CR LF itself, or
        the next line would start where this one ended."""
        t = Terminal(self, [ARGS.warden] + self.run_args(
            "--", ARGS.fixture, "deny", "sleep", "500", "socket", "sleep",
            "500"))
        self.addCleanup(t.close)
        self.assertEqual(t.wait(), 0, t.seen)
        m = re.search(rb"denied: socket\(AF_INET\)[^\r\n]*(\r?\n)", t.seen)
        self.assertIsNotNone(m, t.seen)
        self.assertEqual(m.group(1), b"\r\n", t.seen)

    def test_no_notice_without_denial(self):
        """The host's network, and nothing refused: not a word."""
        p = self.warden(*self.run_args("--network", "inherit", "--",
                                       ARGS.fixture, "deny", "socket"),
                        check=0)
        both = (p.stdout + p.stderr).decode(errors="replace")
        self.assertIn("socket=open", both)
        self.assertNotIn("denied:", both)
        self.assertNotIn("denials:", both)

    def test_json_format_keeps_stderr_for_the_envelope(self):
        """Under --format json stderr is the envelope's: no notice, no
        summary, and the receipt lists the denials all the same. A program
        that exists on the host only fails its launch with an envelope
        alone."""
        receipts = os.path.join(self.tmp, "receipts-json-%d" % os.getpid())
        json_env = self.env(MAELYS_CLI_FORMAT="json")
        p = self.warden(*self.run_args("--receipt-dir", receipts, "--",
                                       ARGS.fixture, "deny", "socket"),
                        env=json_env, check=0)
        both = (p.stdout + p.stderr).decode(errors="replace")
        self.assertIn("socket=blocked:1", both)
        self.assertNotIn("denied:", both)
        self.assertNotIn("denials:", both)
        (name,) = [n for n in os.listdir(receipts) if n.endswith(".json")]
        with open(os.path.join(receipts, name)) as f:
            denials = json.load(f)["denials"]
        self.assertEqual(denials["counts"], {"network": 1, "exec": 0})
        bindir, tool = self.hidden_program()
        p = self.warden("run", "--rw", "--", tool, env=json_env)
        self.assertEqual(p.returncode, 1)
        doc = self.envelope(p.stderr)
        self.assertEqual(doc["error"]["code"], "PROCESS_FAILED")

    def test_quiet_says_nothing(self):
        p = self.warden(*self.run_args("--quiet", "--", ARGS.fixture, "deny",
                                       "socket"), check=0)
        both = (p.stdout + p.stderr).decode(errors="replace")
        self.assertIn("socket=blocked:1", both)
        self.assertNotIn("denied:", both)
        self.assertNotIn("denials:", both)


if __name__ == "__main__":
    main()
