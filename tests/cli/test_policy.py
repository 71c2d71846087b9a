#!/usr/bin/env python3
"""`maelys-warden run/plan --policy FILE.mir` (issue 12, item 5).

    test_policy.py --warden BIN --fixture BIN --schemas DIR --man FILE
                   (--maelys-policy BIN | --absent REASON)

With --maelys-policy (the peer's compiler, from the libmaelys-sandbox-policy
install the adapter was built against), canonical MIR files are compiled
from source JSON and run end to end under bubblewrap. With --absent, this
maelys-warden was built without the adapter, and the test shows that
--policy refuses with what to rebuild (never a silent fallback).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys

import wardentest
from wardentest import ARGS, WardenCase

POLICY = {}


def source(workspace_access="read", network="none", extra=()):
    return {
        "formatVersion": 3,
        "filesystem": {
            "default": "deny",
            "rules": [
                {"access": workspace_access,
                 "path": {"root": "workspace", "relative": "."},
                 "scope": "tree"},
                {"access": "read", "path": {"special": "minimal-runtime"}},
                {"access": "deny",
                 "path": {"root": "workspace", "relative": "secret"},
                 "missing": "skip"},
            ] + list(extra),
        },
        "network": {"mode": network},
        "root": {"mode": "read-only"},
        "process": {"treeConfinement": "required"},
    }


class Policy(WardenCase):
    """Against the real library (--maelys-policy)."""

    def setUp(self):
        super().setUp()
        shutil.copy(ARGS.fixture, os.path.join(self.ws, "fixture"))
        with open(os.path.join(self.ws, "data"), "w") as f:
            f.write("workspace data\n")
        os.mkdir(os.path.join(self.ws, "secret"))
        with open(os.path.join(self.ws, "secret", "key"), "w") as f:
            f.write("secret\n")
        self.policies = os.path.join(self.tmp, "policies")
        os.makedirs(self.policies, mode=0o755, exist_ok=True)

    def mir(self, name, doc, where=None):
        where = where or self.policies
        src = os.path.join(where, name + ".json")
        out = os.path.join(where, name + ".mir")
        with open(src, "w") as f:
            json.dump(doc, f)
        subprocess.run([POLICY["compiler"], "compile", src, "-o", out],
                       check=True)
        os.chmod(out, 0o600)
        return out

    def run_policy(self, path, *argv, extra=()):
        return self.warden("run", "--policy", path, "--io", "stdio",
                           *extra, "--", *argv,
                           env=self.env(MAELYS_CLI_FORMAT="json"))

    # ----------------------------------------------------------- with it
    def test_enforced_end_to_end(self):
        path = self.mir("read", source())
        p = self.run_policy(path, "/bin/cat", "data")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"workspace data\n")
        # A DENY of the policy, a path outside it, a write, the network.
        p = self.run_policy(path, "./fixture", "escape", "read", "secret/key",
                            "read", "/etc/hostname", "write", "data",
                            "tcp", "127.0.0.1", "9")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.decode().split()
        self.assertEqual(len(lines), 4, lines)
        for line in lines:
            self.assertIn("=blocked:", line)
        with open(os.path.join(self.ws, "data")) as f:
            self.assertEqual(f.read(), "workspace data\n")

    def test_write_rule_and_receipt_digest(self):
        path = self.mir("write", source("write"))
        p = self.run_policy(path, "./fixture", "escape", "write", "out")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"write=open\n")
        with open(os.path.join(self.ws, "out")) as f:
            self.assertEqual(f.read(), "escaped\n")
        p = self.warden("plan", "--policy", path, "--format", "json",
                        check=0)
        plan = self.envelope(p.stdout)["data"]["plan"]
        digest = subprocess.run([POLICY["compiler"], "hash", path],
                                capture_output=True, text=True, check=True)
        self.assertTrue(plan.get("decision_digest"), plan)
        self.assertIn(plan["decision_digest"].split(":")[-1], digest.stdout)

    def test_policy_file_authority(self):
        """The MIR file obeys the rule of --plan: never from where a sandbox
        writes, never through a link, writable by nobody else."""
        # In the writable workspace.
        inside = self.mir("inside", source("write"), where=self.ws)
        p = self.run_policy(inside, "/bin/true")
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("policy file", e["message"])
        # Through a symbolic link.
        real = self.mir("real", source())
        link = os.path.join(self.policies, "link.mir")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(real, link)
        p = self.run_policy(link, "/bin/true")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(b"link", p.stderr)
        # Writable by others.
        os.chmod(real, 0o666)
        p = self.run_policy(real, "/bin/true")
        e = self.failure(p, "ACCESS_DENIED")
        os.chmod(real, 0o600)

    def test_handshake_refuses_a_backend_that_proved_less(self):
        path = self.mir("posix", source())
        p = self.warden("run", "--policy", path, "--backend", "posix", "--",
                        "/bin/true",
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "POLICY_FAILED")
        self.assertIn("posix", e["message"])

    def test_bad_mir_and_mediator(self):
        junk = os.path.join(self.policies, "junk.mir")
        with open(junk, "wb") as f:
            f.write(b"\x00not canonical MIR")
        os.chmod(junk, 0o600)
        p = self.warden("plan", "--policy", junk,
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        self.failure(p, "VALIDATION_FAILED")
        path = self.mir("read2", source())
        p = self.warden("plan", "--policy", path, "--mediator", "other.id",
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "VALIDATION_FAILED")
        self.assertIn("other.id", e["message"])


class Absent(WardenCase):
    """A maelys-warden built without the adapter (--absent)."""

    def setUp(self):
        super().setUp()
        self.policies = os.path.join(self.tmp, "policies")
        os.makedirs(self.policies, mode=0o755, exist_ok=True)

    def test_absent_adapter_refuses(self):
        path = os.path.join(self.policies, "any.mir")
        with open(path, "wb") as f:
            f.write(b"not used")
        os.chmod(path, 0o600)
        for cmd in ("run", "plan"):
            args = [cmd, "--policy", path]
            if cmd == "run":
                args += ["--", "/bin/true"]
            p = self.warden(*args, env=self.env(MAELYS_CLI_FORMAT="json"))
            e = self.failure(p, "UNSUPPORTED")
            self.assertIn("without the Warden Policy adapter", e["message"])
            self.assertIn("MAELYS_SANDBOX_POLICY_DIR", e.get("hint", ""))


def main():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--maelys-policy")
    parser.add_argument("--absent")
    args, rest = parser.parse_known_args()
    if args.maelys_policy:
        POLICY["compiler"] = args.maelys_policy
    elif not args.absent:
        sys.exit("give --maelys-policy BIN or --absent REASON")
    # Exactly one of the two classes runs: the other's situation is not this
    # build's.
    sys.argv = [sys.argv[0]] + rest + ["Policy" if args.maelys_policy
                                       else "Absent"]
    if args.absent:
        print("this build has no Warden Policy adapter (%s): testing that "
              "--policy refuses" % args.absent)
    wardentest.main()


if __name__ == "__main__":
    main()
