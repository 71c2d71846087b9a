#!/usr/bin/env python3
"""Hardening after the adversarial review, through the built maelys-warden:
a DENY that a planted hard link would bypass, `agent` and the files no plan
may make writable, raw C1 controls on the operator's terminal, and stale
socket files that must not lock a workspace out while live ones stay
refused. Runs as root and as uid 65534.

    test_hardening.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import json
import os
import socket

from wardentest import ARGS, WardenCase, main


class Hardening(WardenCase):
    # ------------------------------------- a DENY and a planted hard link

    def test_deny_of_a_file_with_a_planted_hard_link(self):
        """Run 1 creates the file the operator fills with a secret later and
        keeps a second hard link to it; run 2 denies the file: refused before
        anything runs, naming the path, the link count and why."""
        marker = os.path.join(self.ws, "ran")
        self.warden(*self.run_args(
            "--", "/bin/sh", "-c",
            ": > .env; mkdir -p .cache; ln .env .cache/blob"),
            check=0)
        with open(os.path.join(self.ws, ".env"), "a") as f:
            f.write("API_KEY=very-secret\n")
        env_path = os.path.join(self.ws, ".env")
        p = self.warden(*self.run_args(
            "--deny", env_path, "--", "/bin/sh", "-c",
            "touch ran; cat .cache/blob"),
            env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn(env_path, e["message"])
        self.assertIn("2 hard links", e["message"])
        self.assertIn("planted by an earlier run", e["message"])
        self.assertFalse(os.path.exists(marker), "the payload ran")
        # With the planted link gone, the same DENY holds.
        os.unlink(os.path.join(self.ws, ".cache", "blob"))
        p = self.warden(*self.run_args(
            "--deny", env_path, "--io", "stdio", "--", "/bin/sh", "-c",
            "cat .env || echo denied"), check=0)
        self.assertNotIn(b"very-secret", p.stdout + p.stderr)
        self.assertIn(b"denied", p.stdout)

    def test_deny_of_a_directory_with_a_planted_hard_link(self):
        """The same below a denied directory: run 1 plants a second name for
        a file the operator later fills; a DENY of the directory is refused,
        naming the file inside it."""
        self.warden(*self.run_args(
            "--", "/bin/sh", "-c",
            "mkdir -p secrets/keys .cache; : > secrets/keys/id; "
            "ln secrets/keys/id .cache/k"),
            check=0)
        with open(os.path.join(self.ws, "secrets", "keys", "id"), "a") as f:
            f.write("PRIVATE KEY\n")
        secrets = os.path.join(self.ws, "secrets")
        p = self.warden(*self.run_args(
            "--deny", secrets, "--", "/bin/sh", "-c",
            "touch ran; cat .cache/k"),
            env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn(os.path.join(secrets, "keys", "id"), e["message"])
        self.assertIn("2 hard links", e["message"])
        self.assertFalse(os.path.exists(os.path.join(self.ws, "ran")))
        os.unlink(os.path.join(self.ws, ".cache", "k"))
        p = self.warden(*self.run_args(
            "--deny", secrets, "--io", "stdio", "--", "/bin/sh", "-c",
            "cat secrets/keys/id || echo denied"), check=0)
        self.assertNotIn(b"PRIVATE KEY", p.stdout + p.stderr)
        self.assertIn(b"denied", p.stdout)

    # ------------------------------ raw C1 controls on the operator's tty

    def test_raw_c1_controls_reach_the_terminal_inert(self):
        """Both relays to the operator's terminal -- the payload's stdout
        through maelys-warden, its stderr through the library -- escape raw
        8-bit C1 controls and invalid UTF-8, and pass valid characters whole
        even when the payload's writes split them."""
        code, seen = self.run_on_terminal(*self.run_args(
            "--io", "stdio", "--", ARGS.fixture, "c1-bytes", "1", "2"))
        self.assertEqual(code, 0, seen)
        want = ("raw:\\x9b2J osc:\\x9d0;t\\x9c utf8:\\u009b2J e:\u00e9 "
                "cjk:\u65e5 c1split:\\u009b2J bad:\\xe6\\x97X "
                "stray:\\xbf end").encode()
        self.assertEqual(seen.count(want), 2, seen)
        text = seen.decode("utf-8")  # valid UTF-8 as a whole
        for ch in text:
            self.assertFalse(0x80 <= ord(ch) <= 0x9f, seen)
            self.assertFalse(ord(ch) < 0x20 and ch not in "\r\n\t", seen)
        # --raw-output passes the bytes as they are.
        code, seen = self.run_on_terminal(*self.run_args(
            "--io", "stdio", "--raw-output", "--", ARGS.fixture, "c1-bytes",
            "1", "2"))
        self.assertEqual(code, 0, seen)
        self.assertEqual(seen.count(b"raw:\x9b2J"), 2, seen)

    # ----------------------- sockets: a stale one is harmless, a live not

    def test_stale_socket_does_not_lock_the_workspace_out(self):
        """A socket file left by an earlier run (its socket closed) connects
        to nothing: later runs of that workspace, and an --allow-read of a
        directory holding one, run. A socket that is bound (listening, not
        yet listening, or datagram) is still refused, in the workspace and
        within two levels of --allow-read."""
        self.warden(*self.run_args(
            "--", "/usr/bin/python3", "-c",
            "import socket; socket.socket(socket.AF_UNIX).bind('x.sock')"),
            check=0)
        self.assertTrue(os.path.exists(os.path.join(self.ws, "x.sock")))
        self.warden(*self.run_args("--", "/bin/true"), check=0)
        shelf = os.path.join(self.tmp, "shelf-%s" % os.path.basename(self.ws))
        os.makedirs(os.path.join(shelf, "inner"))
        os.chmod(shelf, 0o755)
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(os.path.join(shelf, "inner", "old.sock"))
        stale.close()
        self.warden(*self.run_args("--allow-read", shelf, "--", "/bin/true"),
                    check=0)
        # Live listeners: refused, named.
        env = self.env(MAELYS_CLI_FORMAT="json")
        # A listener, a stream socket bound but not listening yet, a
        # datagram socket.
        for kind, listening in ((socket.SOCK_STREAM, True),
                                (socket.SOCK_STREAM, False),
                                (socket.SOCK_DGRAM, False)):
            with self.subTest(kind=kind, listening=listening):
                live = socket.socket(socket.AF_UNIX, kind)
                path = os.path.join(self.ws, "live-%d.sock" % kind)
                live.bind(path)
                if listening:
                    live.listen(1)
                try:
                    p = self.warden(*self.run_args("--", "/bin/true"),
                                    env=env)
                    e = self.failure(p, "ACCESS_DENIED")
                    self.assertIn("live-%d.sock" % kind, e["message"])
                finally:
                    live.close()
                    os.unlink(path)
        live = socket.socket(socket.AF_UNIX)
        live.bind(os.path.join(shelf, "inner", "agent.sock"))
        live.listen(1)
        try:
            p = self.warden(*self.run_args("--allow-read", shelf, "--",
                                           "/bin/true"), env=env)
            e = self.failure(p, "ACCESS_DENIED")
            self.assertIn("agent.sock", e["message"])
        finally:
            live.close()

    # ------------------- agent: nothing of maelys-warden's own is writable

    def agent_spec(self, workspace, name="spec.json"):
        spec = {"format": "maelys-agent-spec/1",
                "executable": ARGS.fixture,
                "argv": [ARGS.fixture, "exit", "0"],
                "workspace": {"path": workspace, "access": "write"},
                "readable": [ARGS.fixture],
                "runtime": "none",
                "network": "none",
                "endpoint": "duplex-stdio",
                "backend": "bubblewrap"}
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            json.dump(spec, f)
        os.chmod(path, 0o600)
        return path

    def test_agent_refuses_a_workspace_holding_its_own_files(self):
        """`maelys-warden agent` makes the checks `run` makes (invariant 18):
        a spec whose writable workspace holds the receipt directory, the
        state directory (its signing key) or the configuration directory is
        refused before anything runs; the same spec with all of them
        elsewhere runs."""
        receipts = os.path.join(self.ws, "receipts")
        spec = self.agent_spec(self.ws)
        env = self.env(MAELYS_CLI_FORMAT="json")
        p = self.warden("agent", "--receipt-dir", receipts, spec, env=env)
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn(receipts, e["message"])
        # The state directory (the receipts' signing key) in the workspace,
        # the receipts elsewhere.
        outside = os.path.join(self.tmp, "agent-receipts")
        env = self.env(MAELYS_CLI_FORMAT="json",
                       XDG_STATE_HOME=os.path.join(self.ws, "state"))
        p = self.warden("agent", "--receipt-dir", outside, spec, env=env)
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("state directory", e["message"])
        self.assertIn(self.ws, e["message"])
        self.assertFalse(os.path.exists(outside), "the agent ran")
        # The configuration directory in the workspace (what the checks of
        # `run` add: the agent command made only the two above).
        env = self.env(MAELYS_CLI_FORMAT="json",
                       XDG_CONFIG_HOME=os.path.join(self.ws, "config"))
        p = self.warden("agent", "--receipt-dir", outside, spec, env=env)
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("configuration directory", e["message"])
        self.assertIn(os.path.join(self.ws, "config", "maelys"), e["message"])
        self.assertFalse(os.path.exists(outside), "the agent ran")
        # Nothing of maelys-warden's in the workspace: it runs.
        self.warden("agent", "--receipt-dir", outside, spec, check=0)
        self.assertTrue(os.listdir(outside))


if __name__ == "__main__":
    main()
