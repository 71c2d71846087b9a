#!/usr/bin/env python3
"""Every hint fits its error (issue 17, item 9): each failure the library
reports through maelys-warden is provoked and its hint checked -- an
ACCESS_DENIED about a home directory does not talk about --receipt-dir --
and a hint that names a command is run, to show that it does what it says.

    test_hints.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import json
import os
import re
import shlex
import socket
import subprocess

from wardentest import ARGS, WardenCase, main


class Hints(WardenCase):
    def refusal(self, *args, code=None, **kw):
        p = self.warden(*args, env=self.env(MAELYS_CLI_FORMAT="json"), **kw)
        err = self.failure(p, code) if code else None
        if err is None:
            self.assertEqual(p.returncode, 1, p.stderr)
            err = self.envelope(p.stderr)["error"]
        return err

    def plan_file(self, name, edit, member="rules"):
        """A plan file NAME (outside the workspace) from `plan --ro`, with
        its rules (or another member) edited by `edit` and its digest
        dropped."""
        doc = json.loads(self.warden("plan", "--ro", "--format", "jsonl",
                                     "--field", "plan", check=0).stdout)
        del doc["digest"]
        edit(doc[member])
        path = os.path.join(self.tmp, "plan-%s-%s.json" % (
            name, os.path.basename(self.ws)))
        with open(path, "w") as f:
            json.dump(doc, f)
        os.chmod(path, 0o600)
        return path

    # Each row of bindings/cli/hints.c: how to provoke it, what its message
    # names, what its hint must say.
    def test_each_library_diagnostic_gets_its_own_hint(self):
        ws = self.ws
        sockets = os.path.join(self.tmp, "sockets-" + os.path.basename(ws))
        os.mkdir(sockets)
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.join(sockets, "agent.sock"))
        self.addCleanup(s.close)
        regular = os.path.join(self.tmp, "regular-" + os.path.basename(ws))
        with open(regular, "w") as f:
            f.write("x\n")
        target = os.path.join(ws, "target")
        os.mkdir(target)
        link = os.path.join(ws, "link")
        os.symlink("target", link)
        through_link = self.plan_file("through-link", lambda rules: rules.append(
            {"path": link, "access": "read", "scope": "recursive-directory"}))
        wrong_scope = self.plan_file("wrong-scope", lambda rules: rules.append(
            {"path": target, "access": "read", "scope": "literal-file"}))
        missing = self.plan_file("missing", lambda rules: rules.append(
            {"path": os.path.join(ws, "gone"), "access": "read",
             "scope": "literal-file"}))
        no_dev = self.plan_file("no-dev", lambda mounts: mounts.remove(
            next(m for m in mounts if m["kind"] == "dev")), member="mounts")
        cases = [
            (["--rw", "--workspace", "/etc"], "system tree",
             "system trees are never writable"),
            (["--rw", "--receipt-dir", regular], "cannot take a receipt",
             "another --receipt-dir"),
            (["--ro", "--workspace", "/"], "the host's root is never bound",
             "give --workspace DIR"),
            (["--ro", "--workspace", "/tmp"], "shared temporary directory",
             "mktemp -d"),
            (["--ro", "--workspace", "/run"], "/run holds",
             "outside /run"),
            (["--ro", "--workspace", "/root"], "home directory",
             "below the home directory"),
            (["--ro", "--workspace", sockets], "holds the unix socket",
             "holds no socket"),
            (["--plan", through_link], "symbolic link",
             "instead of the link"),
            (["--rw", "--allow-read", "/dev/null"],
             "neither a directory nor a regular file",
             "regular files only"),
            (["--rw", "--deny", "not-there"], "create-protection",
             "Deny only paths that exist"),
            (["--plan", wrong_scope], "scope is",
             "not of the kind its rule says"),
            (["--plan", missing], "missing-path mode: fail",
             "Create the path"),
            (["--plan", no_dev, "--tty"], "no devpts instance",
             "--no-tty"),
        ]
        for options, names, says in cases:
            with self.subTest(names):
                for command in ("run", "plan"):
                    err = self.refusal(command, *options, "--", "/bin/true")
                    self.assertIn(names, err["message"])
                    self.assertIn(says, err.get("hint", ""), err)
                    if "receipt" not in names:
                        self.assertNotIn("--receipt-dir", err.get("hint", ""))

    def test_plan_error_hint_names_output_plan_loads(self):
        bad = os.path.join(self.tmp, "bad-%s.json" % os.path.basename(self.ws))
        with open(bad, "w") as f:
            f.write('{"format": "not-a-plan"}\n')
        os.chmod(bad, 0o600)
        err = self.refusal("run", "--plan", bad, "--", "/bin/true",
                        code="PROTOCOL_FAILED")
        [command] = re.findall(r"'(maelys-warden [^']*)'", err["hint"])
        # Run the hint as written, from a shell, then load what it wrote.
        env = self.env(PATH="%s:/usr/bin:/bin" % os.path.dirname(ARGS.warden))
        p = subprocess.run(["/bin/sh", "-c", command], cwd=self.ws, env=env,
                           stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = re.search(r"> *(\S+)", command).group(1)
        if out.startswith("~/"):
            out = os.path.join(env["HOME"], out[2:])
        self.warden("run", "--plan", out, "--", "/bin/true", check=0)

    def test_help_hints_name_the_command(self):
        for args, command in ((["run", "--bogus"], "run"),
                              (["plan", "--bogus"], "plan"),
                              (["run", "--rw"], "run")):
            err = self.refusal(*args, code="VALIDATION_FAILED")
            self.assertNotIn("COMMAND_ID", err["hint"])
            [hint] = re.findall(r"'maelys-warden ([^']*)'", err["hint"])
            self.assertEqual(hint, "help %s" % command)
            p = self.warden(*shlex.split(hint), check=0)
            self.assertIn(b"Usage: maelys-warden %s" % command.encode(),
                          p.stdout)

    def test_a_capability_no_backend_proved_is_not_told_to_install(self):
        """bubblewrap works here; a plan that asks for what it cannot do (a
        mediated network) is not told to install it."""
        doc = json.loads(self.warden("plan", "--ro", "--format", "jsonl",
                                     "--field", "plan", check=0).stdout)
        del doc["digest"]
        doc["network"] = {"mode": "mediated",
                          "destinations": [{"host": "example.org",
                                            "port": 443}],
                          "mediator": "maelys-egress.fd4"}
        path = os.path.join(self.tmp, "mediated-%s.json" %
                            os.path.basename(self.ws))
        with open(path, "w") as f:
            json.dump(doc, f)
        os.chmod(path, 0o600)
        for command in ("run", "plan"):
            err = self.refusal(command, "--plan", path, "--", "/bin/true",
                               code="POLICY_FAILED")
            self.assertIn("network_mediated_fd4", err["message"])
            self.assertNotIn("Install bubblewrap", err["hint"])
            self.assertIn("maelys-warden probe", err["hint"])

    def test_verify_takes_the_key_probe_prints_and_hints_fit(self):
        """The key exactly as `probe` prints it ("ed25519:" and 64 hex
        digits) is accepted whole; an empty directory is not called a
        tampered chain."""
        self.warden(*self.run_args(), "--", "/bin/true", check=0)
        key = self.envelope(self.warden("probe", "--format", "json",
                                        check=0).stdout)["data"][
                                            "receipt_signing_key"]
        receipts = os.path.join(self.state, "maelys", "receipts")
        self.warden("verify", "--key", key, receipts, check=0)
        self.warden("verify", "--key", key.split(":", 1)[1], receipts,
                    check=0)
        # A longer text is refused, never cut down to a key.
        self.refusal("verify", "--key", key + "ff", receipts,
                     code="VALIDATION_FAILED")
        empty = os.path.join(self.tmp, "empty-" + os.path.basename(self.ws))
        os.mkdir(empty)
        err = self.refusal("verify", "--key", key, empty,
                           code="VERIFICATION_FAILED")
        self.assertIn("no receipt in it", err["message"])
        self.assertNotIn("modified", err["hint"])
        self.assertIn("maelys-warden receipts", err["hint"])

    def test_launch_failure_hint_runs(self):
        """A program that cannot start in the sandbox: the hint's command,
        with the same options, shows what the sandbox holds."""
        options = ["--rw", "--allow-read", ARGS.fixture]
        err = self.refusal("run", *options, "--", "/opt/not-in-the-sandbox",
                        code="PROCESS_FAILED")
        self.assertIn("'maelys-warden plan --explain' with the same options",
                      err["hint"])
        p = self.warden("plan", "--explain", *options, check=0)
        self.assertIn(ARGS.fixture.encode(), p.stdout)


if __name__ == "__main__":
    main()
