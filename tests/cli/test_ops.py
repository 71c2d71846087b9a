#!/usr/bin/env python3
"""`maelys-warden ps`, `stop ID` and `receipts` (issue 17, item 11).

    test_ops.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import json
import os
import signal
import subprocess
import time

import wardentest
from wardentest import ARGS, WardenCase


class Ops(WardenCase):
    def json_of(self, *args):
        p = self.warden(*args, "--format", "json", check=0)
        return self.envelope(p.stdout)["data"]

    def start(self, *extra, marker):
        """A run in the background whose payload waits; returns the process
        and its execution id once `ps` lists it."""
        proc = subprocess.Popen(
            [ARGS.warden] + self.run_args(*extra) +
            ["--", ARGS.fixture, "ignore-term" if "ignore" in marker
             else "sleep", "60000", marker],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(),
            cwd=self.ws)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for e in self.json_of("ps")["executions"]:
                if e["pid"] == proc.pid:
                    return proc, e
            time.sleep(0.05)
        self.fail("ps never listed the run")

    def test_ps_and_graceful_stop(self):
        proc, e = self.start(marker="ops-graceful")
        self.assertEqual(len(e["id"]), 32)
        self.assertEqual(e["workspace"], os.path.realpath(self.ws))
        self.assertEqual(e["program"], ARGS.fixture)
        self.assertGreater(e["launcher_pid"], 0)
        p = self.warden("ps", check=0)
        self.assertIn(e["id"].encode(), p.stdout)
        data = self.json_of("stop", e["id"][:6])
        self.assertEqual(data["id"], e["id"])
        self.assertEqual(data["stopped"], "graceful")
        self.assertEqual(proc.wait(timeout=30), 128 + signal.SIGTERM)
        self.assertEqual(data["outcome"]["kind"], "signaled")
        self.assertTrue(os.path.isfile(data["receipt"]))
        self.assertEqual(self.count_marked("ops-graceful"), 0)
        self.assertEqual(self.json_of("ps")["executions"], [])
        # The receipt is the newest one, listed and shown.
        listed = self.json_of("receipts", "--limit", "1")["receipts"]
        self.assertEqual(listed[0]["id"], e["id"])
        shown = self.json_of("receipts", "latest")
        self.assertEqual(shown["receipt"]["execution_id"], e["id"])
        shown = self.json_of("receipts", e["id"][:8])
        self.assertEqual(shown["receipt"]["execution_id"], e["id"])
        p = self.warden("receipts", "--limit", "1", check=0)
        self.assertIn(e["id"].encode(), p.stdout)
        self.assertIn(b"signaled 15", p.stdout)

    def test_stop_forces_a_warden_that_does_not_stop(self):
        """A warden that cannot act on SIGTERM (here: stopped) is killed,
        and its sandbox goes with it (the lifeline)."""
        proc, e = self.start("--grace", "100ms", marker="ops-forced")
        os.kill(proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        data = self.json_of("stop", e["id"])
        self.assertEqual(data["stopped"], "forced")
        self.assertLess(time.monotonic() - t0, 30)
        self.assertEqual(proc.wait(timeout=30), -signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.count_marked("ops-forced") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.count_marked("ops-forced"), 0)

    def test_a_killed_wardens_record_is_not_listed(self):
        proc, e = self.start(marker="ops-killed")
        proc.kill()
        proc.wait(timeout=30)
        self.assertNotIn(e["id"], [x["id"] for x in
                                   self.json_of("ps")["executions"]])
        running = os.path.join(self.state, "maelys", "running")
        self.assertFalse(os.path.exists(os.path.join(running,
                                                     e["id"] + ".json")))

    def test_refusals(self):
        env = self.env(MAELYS_CLI_FORMAT="json")
        self.failure(self.warden("stop", "nothex!", env=env),
                     "VALIDATION_FAILED")
        self.failure(self.warden("stop", "ab", env=env), "VALIDATION_FAILED")
        self.failure(self.warden("stop", "abcdef0123", env=env), "NOT_FOUND")
        self.failure(self.warden("receipts", "ffffffffff", env=env),
                     "NOT_FOUND")
        self.failure(self.warden("receipts", "--limit", "0", env=env),
                     "VALIDATION_FAILED")


if __name__ == "__main__":
    wardentest.main()
