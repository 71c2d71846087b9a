#!/usr/bin/env python3
"""`plan` is `run`'s dry run (issue 17, item 8): for a table of invocations,
`plan` and `run` with the same options and program agree -- both succeed, or
both fail with the same error code and message -- and `plan` leaves nothing
behind. `plan` takes every option `run` takes.

    test_dryrun.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import json
import os
import socket
import stat

from wardentest import WardenCase, main


class DryRun(WardenCase):
    def both(self, options, program=("/bin/true",), cwd=None):
        """(run's outcome, plan's outcome): (status, code, message)."""
        env = self.env(MAELYS_CLI_FORMAT="json")
        outcomes = []
        for command in ("run", "plan"):
            p = self.warden(command, *options, "--", *program, env=env,
                            cwd=cwd)
            if p.returncode == 0:
                outcomes.append((0, None, None))
                continue
            doc = self.envelope(p.stderr)
            self.assertFalse(doc["ok"])
            outcomes.append((p.returncode, doc["error"]["code"],
                             doc["error"]["message"]))
        return outcomes

    def cases(self):
        ws = self.ws
        link = os.path.join(ws, "link")
        os.symlink("/etc", link)
        regular = os.path.join(self.tmp, "regular-" + os.path.basename(ws))
        with open(regular, "w") as f:
            f.write("x\n")
        socket_dir = os.path.join(self.tmp, "with-socket-" +
                                  os.path.basename(ws))
        os.mkdir(socket_dir)
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.join(socket_dir, "s"))
        self.addCleanup(s.close)
        git_link_ws = os.path.join(self.tmp, "git-link-" +
                                   os.path.basename(ws))
        os.mkdir(git_link_ws)
        os.symlink("/etc", os.path.join(git_link_ws, ".git"))
        plan_file = os.path.join(self.tmp, "plan-" + os.path.basename(ws))
        with open(plan_file, "wb") as f:
            f.write(self.warden("plan", "--ro", "--format", "jsonl", "--field",
                                "plan", check=0).stdout)
        shared_plan = plan_file + ".shared"
        with open(shared_plan, "wb") as f:
            with open(plan_file, "rb") as g:
                f.write(g.read())
        os.chmod(shared_plan, 0o666)
        zero = "sha256:" + "0" * 64
        # name, options, program, the error code run gives (None: success)
        return [
            ("a workspace of one's own", ["--rw"], None, None),
            ("read-only", ["--ro"], None, None),
            ("/ as the workspace", ["--rw", "--workspace", "/"], None,
             "ACCESS_DENIED"),
            ("/ read-only", ["--ro", "--workspace", "/"], None,
             "ACCESS_DENIED"),
            ("/tmp as the workspace", ["--rw", "--workspace", "/tmp"], None,
             "ACCESS_DENIED"),
            ("/tmp read-only", ["--ro", "--workspace", "/tmp"], None,
             "ACCESS_DENIED"),
            ("a home", ["--ro", "--workspace", "/root"], None,
             "ACCESS_DENIED"),
            ("/home", ["--rw", "--workspace", "/home"], None,
             "ACCESS_DENIED"),
            ("/etc writable", ["--rw", "--workspace", "/etc"], None,
             "ACCESS_DENIED"),
            ("--deny of a missing path", ["--rw", "--deny", "missing"], None,
             "POLICY_FAILED"),
            ("--deny of a symbolic link", ["--rw", "--deny", link], None,
             "ACCESS_DENIED"),
            ("--allow-read of a device", ["--rw", "--allow-read",
                                          "/dev/null"], None,
             "ACCESS_DENIED"),
            ("a socket in the workspace", ["--ro", "--workspace",
                                           socket_dir], None,
             "ACCESS_DENIED"),
            ("receipts in the workspace", ["--rw", "--receipt-dir",
                                           os.path.join(ws, "r")], None,
             "ACCESS_DENIED"),
            ("receipts in a file", ["--rw", "--receipt-dir", regular], None,
             "IO_FAILED"),
            ("an unconfined backend", ["--rw", "--backend", "posix"], None,
             "POLICY_FAILED"),
            ("an unknown backend", ["--rw", "--backend", "nope"], None,
             "NOT_FOUND"),
            ("a file as the workspace", ["--rw", "--workspace", regular],
             None, "VALIDATION_FAILED"),
            ("a symbolic link as .git", ["--rw", "--workspace", git_link_ws],
             None, "ACCESS_DENIED"),
            ("--unprotect of nothing", ["--rw", "--unprotect", "nothing"],
             None, "VALIDATION_FAILED"),
            ("a program that is nowhere", ["--rw"],
             ["no-such-program-anywhere"], "NOT_FOUND"),
            ("--grace too long", ["--rw", "--grace", "2h"], None,
             "VALIDATION_FAILED"),
            ("a plan file", ["--plan", plan_file], None, None),
            ("a plan file others may write", ["--plan", shared_plan], None,
             "ACCESS_DENIED"),
            ("a plan pinned to another digest", ["--plan", plan_file,
                                                 "--plan-digest", zero],
             None, "ACCESS_DENIED"),
            ("a memory ceiling", ["--rw", "--memory", "1G"], None, "ANY"),
        ]

    def test_plan_fails_exactly_when_run_does(self):
        for name, options, program, expect in self.cases():
            with self.subTest(name):
                run, plan = self.both(options, program or ("/bin/true",))
                self.assertEqual(plan, run, "%s: plan and run disagree" %
                                 name)
                if expect != "ANY":
                    self.assertEqual(run[1], expect, "%s: %s" % (name, run))

    def test_plan_leaves_nothing_behind(self):
        receipts = os.path.join(self.tmp, "receipts-" +
                                os.path.basename(self.ws))
        before = sorted(os.listdir(self.ws))
        self.warden("plan", "--rw", "--receipt-dir", receipts, check=0)
        self.warden("plan", "--explain", "--rw", "--receipt-dir", receipts,
                    "--", "/bin/true", check=0)
        self.assertEqual(sorted(os.listdir(self.ws)), before)
        self.assertFalse(os.path.exists(receipts))
        # run, by contrast, writes its receipt there.
        self.warden("run", "--rw", "--receipt-dir", receipts, "--",
                    "/bin/true", check=0)
        self.assertTrue(os.path.isdir(receipts))
        self.assertEqual(sorted(os.listdir(self.ws)), before)

    def test_plan_takes_every_option_of_run(self):
        doc = json.loads(self.warden("describe", "--format", "json",
                                     check=0).stdout)["data"]
        options = {c["id"]: {o["long"] for o in c["input"]["options"]}
                   for c in doc["commands"]}
        self.assertEqual(options["run"] - options["plan"], set())
        self.assertIn("--explain", options["plan"])

    def test_plan_output_is_what_plan_files_load(self):
        plan = os.path.join(self.tmp, "loaded-" + os.path.basename(self.ws))
        p = self.warden("plan", "--ro", "--format", "jsonl", "--field",
                        "plan", check=0)
        with open(plan, "wb") as f:
            f.write(p.stdout)
        digest = json.loads(self.warden("plan", "--ro", "--json",
                                        check=0).stdout)["data"]["digest"]
        p = self.warden("plan", "--plan", plan, "--plan-digest", digest,
                        "--json", check=0)
        self.assertEqual(json.loads(p.stdout)["data"]["digest"], digest)
        self.warden("run", "--plan", plan, "--plan-digest", digest, "--",
                    "/bin/true", check=0)

    def test_explain_summarises(self):
        p = self.warden("plan", "--explain", "--rw", "--network", "inherit",
                        "--cpu-time", "1m", "--", "/bin/true", check=0)
        text = p.stdout.decode()
        for label in ("plan", "root", "readable", "writable", "protected",
                      "denied", "network", "limits", "backend"):
            self.assertRegex(text, r"(^|\n)%s\s" % label)
        self.assertIn("%s/ (and below)" % self.ws, text)
        self.assertIn("the host's network", text)
        self.assertIn("1024 tasks", text)
        self.assertIn("60 seconds of CPU time", text)
        p = self.warden("plan", "--explain", "--rw", "--json", check=0)
        data = self.envelope(p.stdout)["data"]
        self.assertIn("explanation", data)
        self.assertIn("backend", data)


if __name__ == "__main__":
    main()
