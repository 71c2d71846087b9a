#!/usr/bin/env python3
"""maelys-warden where user namespaces are blocked: bubblewrap refuses and
the built-in profiles confine on landlock (issue 16).

Every run goes through maelys-no-userns (built next to the fixture), which
denies namespaces by seccomp and drops CAP_SYS_ADMIN as an unprivileged
container does.

    test_landlock.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import glob
import json
import os
import re
import signal
import subprocess
import time

import wardentest
from wardentest import ARGS, WardenCase


def wrapper():
    return os.path.join(os.path.dirname(ARGS.fixture), "maelys-no-userns")


class Landlock(WardenCase):
    def blocked(self, *args, env=None, check=None, timeout=120):
        p = subprocess.run([wrapper(), ARGS.warden] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env or self.env(), cwd=self.ws,
                           timeout=timeout)
        if check is not None:
            self.assertEqual(p.returncode, check,
                             "stderr: %s" % p.stderr.decode(errors="replace"))
        return p

    def landlock_proved(self):
        p = self.blocked("probe", "--format", "json", check=0)
        data = self.envelope(p.stdout)["data"]
        self.profiles = data["profiles"]
        return {b["name"]: b for b in data["backends"]}

    def setUp(self):
        super().setUp()
        backends = self.landlock_proved()
        self.bw = backends["bubblewrap"]
        self.ll = backends["landlock"]
        if "filesystem_read" not in self.ll["capabilities"]:
            if os.environ.get("MAELYS_BWRAP_MUST_WORK") == "1":
                self.fail("landlock cannot confine here: %s" %
                          self.ll["diagnostic"])
            self.skipTest("landlock cannot confine here: %s" %
                          self.ll["diagnostic"])
        self.tree = "process_tree" in self.ll["capabilities"]
        with open(os.path.join(self.ws, "inside"), "w") as f:
            f.write("inside\n")
        self.outside = os.path.join(self.tmp, "outside-%s" %
                                    os.path.basename(self.ws))
        with open(self.outside, "w") as f:
            f.write("outside\n")
        os.chmod(self.outside, 0o644)

    def plan_without_tree(self, *profile, rules=()):
        """The landlock-shaped built-in profile as a plan file that does not
        require the tree: what an unprivileged user without a delegated
        cgroup can still run confined. `rules` are added to it as they are
        (plan checks what it prints, so it would refuse them itself)."""
        p = self.blocked("plan", *profile, "--format", "json")
        if p.returncode != 0 and not self.tree:
            # plan fails where run would (issue 17, item 8): without a
            # cgroup this user can write, the built-in profile needs the
            # tree and is refused, so there is no plan to strip here.
            self.skipTest("no cgroup this user can write: plan %s is "
                          "refused here, so no plan to take the tree out of"
                          % " ".join(profile))
        self.assertEqual(p.returncode, 0, p.stderr)
        plan = self.envelope(p.stdout)["data"]["plan"]
        plan["process_tree_required"] = False
        plan["rules"].extend(rules)
        del plan["digest"]
        path = os.path.join(self.tmp, "plan-%s.json" % os.path.basename(
            self.ws))
        with open(path, "w") as f:
            json.dump(plan, f)
        os.chmod(path, 0o644)
        return path

    def ro(self, *payload):
        # --io isolated: the payload's stdout is its stderr.
        return self.blocked("run", "--ro", "--io", "isolated", "--trace",
                            "--allow-read",
                            ARGS.fixture, "--", ARGS.fixture, *payload)

    def test_probe_says_who_serves(self):
        # bubblewrap proves nothing here and says why; landlock confines.
        self.assertEqual(self.bw["capabilities"], [])
        self.assertIn("user namespaces", self.bw["diagnostic"])
        for cap in ("filesystem_read", "filesystem_write", "network_none",
                    "root_readonly", "seccomp", "disable_userns"):
            self.assertIn(cap, self.ll["capabilities"])
        # Which backend serves which built-in profile (the tree needs a
        # cgroup this user can write).
        ro = self.profiles["ro"]
        if self.tree:
            self.assertEqual(ro["backend"], "landlock", ro)
        else:
            self.assertIsNone(ro["backend"], ro)
            self.assertIn("process_tree", ro["refused"])

    def test_default_ro_confines_on_landlock(self):
        if not self.tree:
            # The built-in profiles require the tree: without a cgroup
            # this user can write, the run is refused, naming why.
            p = self.blocked("run", "--ro", "--",
                             ARGS.fixture, "exit", "0",
                             env=self.env(MAELYS_CLI_FORMAT="json"))
            err = self.failure(p, "POLICY_FAILED")
            self.assertIn("landlock did not prove process_tree",
                          err["message"])
            self.assertIn("cgroup", err["message"])
            return
        p = self.ro("escape", "read", os.path.join(self.ws, "inside"),
                    "read", self.outside, "read", "/etc/shadow", "write",
                    os.path.join(self.ws, "new"), "tcp", "127.0.0.1", "9",
                    "userns")
        # The payload's stdout is its stderr in the CLI's isolated mode.
        err = p.stderr.decode()
        out = err
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("backend landlock", err)
        # The payload's lines may land right after a trace line's prefix
        # (two writers on one stderr): found wherever they start.
        lines = re.findall(r"(?:^|\s)(read=\S+)", out)
        self.assertEqual(lines[0], "read=open", out)
        self.assertTrue(lines[1].startswith("read=blocked:"), out)
        self.assertTrue(lines[2].startswith("read=blocked:"), out)
        self.assertIn("write=blocked:", out)
        self.assertIn("tcp=blocked:", out)
        self.assertIn("userns=blocked:", out)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "new")))
        # The receipt names the backend that enforced the plan.
        receipt = err.split("receipt ")[-1].strip().splitlines()[0]
        with open(receipt) as f:
            doc = json.load(f)
        self.assertEqual(doc["backend"]["name"], "landlock")
        self.assertIn("unbounded", doc["context"]["tasks"])

    def test_plan_without_tree_confines(self):
        """Confinement itself does not depend on the cgroup: a plan that
        does not require the tree confines for any user."""
        plan = self.plan_without_tree("--ro", "--allow-read", ARGS.fixture)
        p = self.blocked("run", "--plan", plan, "--io", "isolated", "--trace",
                         "--", ARGS.fixture, "escape", "read",
                         os.path.join(self.ws, "inside"), "read",
                         self.outside, "write", os.path.join(self.ws, "new"),
                         "tcp", "127.0.0.1", "9", "userns")
        out = p.stderr.decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("backend landlock", out)
        # The payload's lines may land right after a trace line's prefix
        # (two writers on one stderr): found wherever they start.
        lines = re.findall(r"(?:^|\s)(read=\S+)", out)
        self.assertEqual(lines[0], "read=open", out)
        self.assertTrue(lines[1].startswith("read=blocked:"), out)
        for name in ("write", "tcp", "userns"):
            self.assertIn(name + "=blocked:", out)

    def test_rw_writes_only_the_workspace(self):
        if not self.tree:
            self.skipTest("no cgroup this user can write: the built-in "
                          "profiles need the tree")
        if os.getuid() == 0:
            # As root the payload runs as an identity of its own, which can
            # only write what it may: a root-owned workspace is refused.
            p = self.blocked("run", "--rw", "--",
                             ARGS.fixture, "exit", "0",
                             env=self.env(MAELYS_CLI_FORMAT="json"))
            err = self.failure(p, "ACCESS_DENIED")
            self.assertIn("idmapped", err["message"])
            os.chmod(self.ws, 0o777)
        # What --rw keeps read-only inside the workspace (.git/hooks,
        # .git/config, .maelys) cannot be carved out of a writable tree by
        # Landlock's allow-lists, so the tree is carved around them: the
        # workspace's top and .git are frozen (nothing created, removed or
        # renamed there), every entry below them writable, and the CLI
        # says so on every such run.
        os.makedirs(os.path.join(self.ws, ".git", "hooks"))
        with open(os.path.join(self.ws, ".git", "config"), "w") as f:
            f.write("[core]\n")
        os.makedirs(os.path.join(self.ws, ".git", "objects"))
        os.makedirs(os.path.join(self.ws, "src"))
        for root, dirs, files in os.walk(self.ws):
            for n in dirs + files:
                os.chmod(os.path.join(root, n), 0o777)
        ws = lambda *p: os.path.join(self.ws, *p)
        p = self.blocked("run", "--rw", "--io", "isolated", "--allow-read",
                         ARGS.fixture, "--", ARGS.fixture, "escape",
                         "write", ws("src", "new"),
                         "write", ws(".git", "objects", "pack"),
                         "write", ws("inside"),
                         "write", self.outside + "-new",
                         "write", ws("new-at-top"),
                         "write", ws(".git", "hooks", "pre-commit"),
                         "write", ws(".git", "config"),
                         "write", ws(".maelys"),
                         "write", ws(".git", "new-in-git"))
        out = p.stderr.decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("freezing the directories", out)
        writes = [l for l in out.splitlines() if l.startswith("write=")]
        self.assertEqual(len(writes), 9, out)
        for i in range(3):
            self.assertEqual(writes[i], "write=open", out)
        for i in range(3, 9):
            self.assertTrue(writes[i].startswith("write=blocked:"),
                            (i, out))
        self.assertTrue(os.path.exists(ws("src", "new")))
        self.assertFalse(os.path.exists(self.outside + "-new"))
        self.assertFalse(os.path.exists(ws("new-at-top")))
        self.assertFalse(os.path.exists(ws(".git", "hooks", "pre-commit")))
        with open(ws(".git", "config")) as f:
            self.assertEqual(f.read(), "[core]\n")
        # Nothing of the run's placeholders stays (.maelys did not exist).
        self.assertFalse(os.path.exists(ws(".maelys")))
        # Lifted explicitly, the workspace is plainly writable.
        p = self.blocked("run", "--rw", "--unprotect", ".git", "--unprotect",
                         ".maelys", "--io", "isolated", "--allow-read",
                         ARGS.fixture, "--", ARGS.fixture, "escape", "write",
                         ws("new"), "write", self.outside + "-new")
        out = p.stderr.decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertNotIn("freezing", out)
        writes = [l for l in out.splitlines() if l.startswith("write=")]
        self.assertEqual(writes[0], "write=open", out)
        self.assertTrue(writes[1].startswith("write=blocked:"), out)
        self.assertTrue(os.path.exists(ws("new")))
        self.assertFalse(os.path.exists(self.outside + "-new"))

    def test_inexpressible_plan_is_refused_naming_the_rule(self):
        secret = os.path.join(self.ws, "inside")
        plan = self.plan_without_tree(
            "--ro", rules=[{"path": secret, "access": "deny",
                            "scope": "literal-file"}])
        p = self.blocked("run", "--plan", plan, "--", ARGS.fixture, "exit",
                         "0", env=self.env(MAELYS_CLI_FORMAT="json"))
        self.assertEqual(p.returncode, 1)
        err = self.envelope(p.stderr)["error"]
        self.assertIn("rule deny '%s'" % secret, err["message"])
        self.assertIn("rule read '%s'" % self.ws, err["message"])

    def test_nothing_survives_the_cli(self):
        if not self.tree:
            self.skipTest("no cgroup this user can write: the tree is not "
                          "promised here")
        marker = "landlock-cli-%d" % os.getpid()
        proc = subprocess.Popen(
            [wrapper(), ARGS.warden, "run", "--ro", "--allow-read",
             ARGS.fixture, "--", ARGS.fixture, "daemon", marker],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(),
            cwd=self.ws)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        deadline = time.time() + 20
        while len(self.marked(marker)) < 3 and time.time() < deadline:
            time.sleep(0.02)
        self.assertGreaterEqual(len(self.marked(marker)), 3)
        # The CLI dies at once: its launcher's lifeline ends everything.
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.time() + 5
        while self.marked(marker) and time.time() < deadline:
            time.sleep(0.02)
        self.assertEqual(self.marked(marker), [])


if __name__ == "__main__":
    wardentest.main()
