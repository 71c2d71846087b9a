#!/usr/bin/env python3
"""Writable extras, persistent homes, named profiles and plan files
(issue 17, items 4 and 5), through the built maelys-warden.

Every new input is held to invariants 17-22: a profile, like a plan, is
authority, so it is never read from where a sandbox writes, through a
symbolic link, or from a file others could change; --allow-write and --home
are refused where the workspace would be.

    test_profiles.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import json
import os
import shutil
import stat
import subprocess

from wardentest import ARGS, WardenCase, main, jsonschema

SOURCE = os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))
SHIPPED = os.path.join(SOURCE, "bindings", "cli", "profiles")
PLAN_SCHEMA = os.path.join(SOURCE, "docs", "maelys-executor-plan-1.schema.json")
PROFILE_SCHEMA = os.path.join(SOURCE, "docs",
                              "maelys-warden-profile-1.schema.json")
EXAMPLES = ("claude-code", "codex", "node-mcp", "python-mcp")

# A stdio JSON-RPC server as MCP servers are: one request per line on stdin,
# one answer per line on stdout.
PY_SERVER = r"""
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["method"] == "initialize":
        result = {"protocolVersion": "2024-11-05", "capabilities": {},
                  "serverInfo": {"name": "tiny-py", "version": "1"}}
    else:
        result = {"tools": [], "home": __import__("os").environ["HOME"]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"],
                                 "result": result}) + "\n")
    sys.stdout.flush()
"""
NODE_SERVER = r"""
const rl = require("readline").createInterface({input: process.stdin});
rl.on("line", (line) => {
  const req = JSON.parse(line);
  const result = req.method === "initialize"
    ? {protocolVersion: "2024-11-05", capabilities: {},
       serverInfo: {name: "tiny-node", version: "1"}}
    : {tools: [], home: process.env.HOME};
  process.stdout.write(JSON.stringify({jsonrpc: "2.0", id: req.id, result})
                       + "\n");
});
"""
REQUESTS = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')


def load(path):
    with open(path) as f:
        return json.load(f)


class Profiles(WardenCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.plan_schema = load(PLAN_SCHEMA)
        cls.profile_schema = load(PROFILE_SCHEMA)
        cls.counter = 0

    def setUp(self):
        super().setUp()
        Profiles.counter += 1
        n = Profiles.counter
        # Per test: the user's configuration directory and a stand-in for
        # the system directory (MAELYS_WARDEN_SYSTEM_PROFILES).
        self.config = os.path.join(self.tmp, "config-%d" % n)
        self.user_dir = os.path.join(self.config, "maelys", "profiles")
        os.makedirs(self.user_dir, mode=0o755)
        self.system_dir = os.path.join(self.tmp, "system-%d" % n)
        os.makedirs(self.system_dir, mode=0o755)
        self.outside = os.path.join(self.tmp, "outside-%d" % n)
        os.makedirs(self.outside, mode=0o755)

    def env(self, **extra):
        # Failures as envelopes (run's included), which self.failure reads.
        e = super().env(XDG_CONFIG_HOME=self.config,
                        MAELYS_WARDEN_SYSTEM_PROFILES=self.system_dir,
                        MAELYS_CLI_FORMAT="json")
        e.update(extra)
        return e

    def profile(self, directory, name, doc, mode=0o644):
        path = os.path.join(directory, name + ".json")
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        os.chmod(path, mode)
        return path

    def plan_of(self, *args, env=None):
        p = self.warden("plan", *args, "--format", "json", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        plan = self.envelope(p.stdout)["data"]["plan"]
        jsonschema.validate(plan, self.plan_schema)
        return plan

    def sh(self, *args, script, env=None, input=None):
        return self.warden("run", *args, "--io", "stdio", "--wall-time", "60s",
                           "--", "/bin/sh", "-c", script, env=env, input=input,
                           timeout=90)

    # -------------------------------------------------------- --allow-write

    def test_allow_write(self):
        target = os.path.join(self.outside, "out")
        os.makedirs(target)
        single = os.path.join(self.outside, "single.txt")
        with open(single, "w") as f:
            f.write("old\n")
        # (Next to them, the sandbox's /tmp is its own: a write there never
        # reaches the host.)
        p = self.sh("--ro", "--allow-write", target, "--allow-write", single,
                    script="echo made > %s/new && echo new > %s && "
                    "echo x > %s/other && echo done"
                    % (target, single, self.outside))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"done\n")
        with open(os.path.join(target, "new")) as f:
            self.assertEqual(f.read(), "made\n")
        with open(single) as f:
            self.assertEqual(f.read(), "new\n")
        self.assertFalse(os.path.exists(os.path.join(self.outside, "other")))
        # The workspace stays read-only under --ro.
        p = self.sh("--ro", "--allow-write", target,
                    script="touch ws-file 2>/dev/null || echo ws=blocked")
        self.assertEqual(p.stdout, b"ws=blocked\n")

    def test_allow_write_refusals(self):
        """The workspace's refusals: the root, shared temporary directories,
        system trees, the user's home itself, maelys-warden's own
        directories; no symbolic link; the path must exist."""
        marker = os.path.join(self.ws, "ran")
        link = os.path.join(self.tmp, "link-to-outside")
        os.symlink(self.outside, link)
        # (path, code, also refused by `plan`): the system trees are refused
        # by the library when a run starts, the rest by maelys-warden itself.
        cases = [
            ("/", "ACCESS_DENIED", True),
            ("/tmp", "ACCESS_DENIED", True),
            ("/var/tmp", "ACCESS_DENIED", True),
            ("/etc", "ACCESS_DENIED", False),
            ("/usr/lib", "ACCESS_DENIED", False),
            (self.tmp, "ACCESS_DENIED", True),     # $HOME
            (self.state, "ACCESS_DENIED", True),   # receipts, signing key
            (self.config, "ACCESS_DENIED", True),  # holds the profiles
            (link, "ACCESS_DENIED", True),
            (os.path.join(self.outside, "absent"), "NOT_FOUND", True),
        ]
        for path, code, by_plan in cases:
            p = self.warden("run", "--rw", "--allow-write", path, "--",
                            "/bin/sh", "-c", "touch ran")
            err = self.failure(p, code)
            self.assertFalse(os.path.exists(marker), path)
            if path == self.tmp:
                self.assertIn("home", err["message"])
            if by_plan:
                p = self.warden("plan", "--ro", "--allow-write", path)
                self.failure(p, code)

    # -------------------------------------------------------------- --home

    def test_home_persists_across_runs(self):
        home = os.path.join(self.outside, "homes", "agent")
        p = self.sh("--rw", "--home", home,
                    script='echo "$HOME"; echo remembered > "$HOME/.state"')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().strip(), home)
        self.assertIn(b"created", p.stderr)
        self.assertIn(home.encode(), p.stderr)
        st = os.stat(home)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o700)
        self.assertEqual(st.st_uid, os.geteuid())
        p = self.sh("--ro", "--home", home, script='cat "$HOME/.state"')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"remembered\n")
        self.assertNotIn(b"created", p.stderr)
        # plan shows it and creates nothing.
        other = os.path.join(self.outside, "homes", "never")
        plan = self.plan_of("--ro", "--home", other)
        self.assertIn({"path": other, "access": "write",
                       "scope": "recursive-directory"}, plan["rules"])
        self.assertFalse(os.path.exists(other))

    def test_dot_entries_of_the_home_are_refused(self):
        """What the user's shell and tools run lives in the home's
        dot-entries (~/.bashrc, ~/.config, ~/.local/bin): never a --home or
        an --allow-write, by `run` and by `plan` (the library refuses them
        under /root and /home too: they are system trees)."""
        marker = os.path.join(self.ws, "ran")
        dot = os.path.join(self.tmp, ".local", "share", "agent")
        os.makedirs(dot)
        os.makedirs(os.path.join(self.tmp, ".cache"), exist_ok=True)
        for args in (["--home", dot],
                     ["--home", os.path.join(self.tmp, ".agent-home")],
                     ["--allow-write", os.path.join(self.tmp, ".cache")],
                     ["--allow-write", dot]):
            for cmd in ("run", "plan"):
                tail = ["--", "/bin/sh", "-c", "touch ran"] \
                    if cmd == "run" else []
                err = self.failure(self.warden(cmd, "--rw", *args, *tail),
                                   "ACCESS_DENIED")
                self.assertIn("dot-entr", err["message"], args)
                self.assertIn("maelys-homes", err["hint"], args)
                self.assertFalse(os.path.exists(marker), args)
        self.assertFalse(os.path.exists(os.path.join(self.tmp,
                                                     ".agent-home")))
        # A directory of the home that is not a dot-entry is fine.
        p = self.sh("--rw", "--home", os.path.join(self.tmp, "maelys-homes",
                                                   "x"),
                    script='echo "$HOME"')
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_a_refused_run_creates_no_home(self):
        """The home is created only for a run that starts: a run refused at
        any step (maelys-warden's checks, the library's system trees, a
        receipt directory that cannot take a receipt) leaves nothing on
        disk (invariant 22), and says nothing about a home."""
        marker = os.path.join(self.ws, "ran")
        blocker = os.path.join(self.outside, "not-a-dir")
        with open(blocker, "w") as f:
            f.write("x")
        cases = [
            (os.path.join(self.outside, "h1", "deep", "home"),
             ["--allow-write", self.state], "ACCESS_DENIED"),
            (os.path.join(self.outside, "h2", "home"),
             ["--receipt-dir", os.path.join(blocker, "receipts")],
             "IO_FAILED"),
        ]
        if os.geteuid() == 0:
            # Only root could create it; the library refuses it at spawn.
            cases.append(("/etc/maelys-test-home-%d" % os.getpid(), [],
                          "ACCESS_DENIED"))
        for home, extra, code in cases:
            p = self.warden("run", "--rw", "--home", home, *extra, "--",
                            "/bin/sh", "-c", "touch ran")
            self.failure(p, code)
            self.assertNotIn(b"created the home", p.stderr, home)
            self.assertFalse(os.path.exists(marker), home)
            top = home if home.startswith("/etc/") else os.path.join(
                self.outside, os.path.relpath(home, self.outside).split(
                    os.sep)[0])
            self.assertFalse(os.path.exists(top), top)
        # An existing part of the path is left as it was.
        kept = os.path.join(self.outside, "kept")
        os.makedirs(kept, mode=0o755)
        p = self.warden("run", "--rw", "--home", os.path.join(kept, "a", "b"),
                        "--receipt-dir", os.path.join(blocker, "r"), "--",
                        "/bin/true")
        self.failure(p, "IO_FAILED")
        self.assertEqual(os.listdir(kept), [])
        self.assertEqual(stat.S_IMODE(os.stat(kept).st_mode), 0o755)

    def test_home_refusals(self):
        marker = os.path.join(self.ws, "ran")
        link = os.path.join(self.tmp, "home-link-%d" % Profiles.counter)
        real = os.path.join(self.outside, "real-home")
        os.makedirs(real, mode=0o700)
        os.symlink(real, link)
        shared = os.path.join(self.outside, "shared-home")
        os.makedirs(shared)
        os.chmod(shared, 0o770)
        inside = os.path.join(self.ws, "home")
        os.makedirs(inside)
        # A workspace below a directory given as the home.
        project = os.path.join(self.outside, "project")
        nested = os.path.join(project, "ws")
        os.makedirs(nested)
        cases = [
            (self.tmp, self.ws, "home"),      # the real $HOME
            (self.ws, self.ws, "workspace"),
            (inside, self.ws, "workspace"),
            (project, nested, "workspace"),
            (link, self.ws, "symbolic link"),
            (os.path.join(link, "below"), self.ws, "symbolic link"),
            (shared, self.ws, "0770"),
            ("/tmp", self.ws, "/tmp"),
        ]
        # The password database's home, when it is not $HOME.
        import pwd
        db_home = pwd.getpwuid(os.geteuid()).pw_dir
        if os.path.isdir(db_home) and db_home != self.tmp:
            cases.append((db_home, self.ws, "home"))
        if os.geteuid() == 0:
            theirs = os.path.join(self.outside, "theirs")
            os.makedirs(theirs, mode=0o700)
            os.chown(theirs, 4242, 4242)
            cases.append((theirs, self.ws, "4242"))
        for path, ws, words in cases:
            p = self.warden("run", "--rw", "--workspace", ws, "--home", path,
                            "--", "/bin/sh", "-c", "touch ran")
            err = self.failure(p, "ACCESS_DENIED")
            self.assertIn(words, err["message"], path)
            self.assertFalse(os.path.exists(marker), path)
            self.assertFalse(os.path.exists(os.path.join(nested, "ran")))
        self.assertFalse(os.path.exists(os.path.join(link, "below")))
        # A directory that holds the real home (HOME below it).
        around = os.path.join(self.outside, "around")
        real_home = os.path.join(around, "me")
        os.makedirs(real_home, mode=0o700)
        err = self.failure(self.warden("run", "--rw", "--home", around, "--",
                                       "/bin/sh", "-c", "touch ran",
                                       env=self.env(HOME=real_home)),
                           "ACCESS_DENIED")
        self.assertIn("holds your home", err["message"])
        self.assertFalse(os.path.exists(marker))
        # A profile's "home": "~" is the real home too.
        self.profile(self.user_dir, "tilde-home", {"extends": "rw",
                                                   "home": "~"})
        err = self.failure(self.warden("run", "--profile", "tilde-home", "--",
                                       "/bin/sh", "-c", "touch ran"),
                           "ACCESS_DENIED")
        self.assertIn("home", err["message"])
        self.assertFalse(os.path.exists(marker))

    # ------------------------------------------------------------- lookup

    def test_lookup_order(self):
        """The user's directory first, then the system directory; a name
        found nowhere names both."""
        self.profile(self.user_dir, "demo", {"extends": "ro",
                                             "network": "inherit"})
        self.profile(self.system_dir, "demo", {"extends": "ro"})
        self.profile(self.system_dir, "sysonly", {"extends": "rw"})
        plan = self.plan_of("--profile", "demo")
        self.assertEqual(plan["network"]["mode"], "inherit")
        os.unlink(os.path.join(self.user_dir, "demo.json"))
        plan = self.plan_of("--profile", "demo")
        self.assertEqual(plan["network"]["mode"], "none")
        plan = self.plan_of("--profile", "sysonly")
        self.assertIn({"path": self.ws, "access": "write",
                       "scope": "recursive-directory"}, plan["rules"])
        err = self.failure(self.warden("plan", "--profile", "nowhere"),
                           "NOT_FOUND")
        self.assertIn(self.user_dir, err["message"])
        self.assertIn(self.system_dir, err["message"])
        # Without XDG_CONFIG_HOME: ~/.config.
        env = self.env()
        del env["XDG_CONFIG_HOME"]
        home_dir = os.path.join(self.tmp, ".config", "maelys", "profiles")
        os.makedirs(home_dir, exist_ok=True)
        self.profile(home_dir, "fromhome", {"extends": "ro",
                                            "network": "inherit"})
        plan = self.plan_of("--profile", "fromhome", env=env)
        self.assertEqual(plan["network"]["mode"], "inherit")

    def test_names_are_plain(self):
        for name in ("../demo", "a/b", "a.b", ".hidden", "", "-x"):
            p = self.warden("plan", "--profile=" + name)
            self.failure(p, "VALIDATION_FAILED")

    def test_unknown_and_bad_members_are_errors(self):
        cases = [
            ({"extends": "ro", "allow_reads": []}, "allow_reads"),
            ({"extends": "ro", "network": "all"}, "network"),
            ({"extends": "rw", "limits": {"cpu": 1}}, "cpu"),
            ({"extends": "rw", "limits": {"memory": "lots"}}, "memory"),
            ({"extends": "ro", "env": {"A": 1}}, "env.A"),
            ({"extends": "ro", "env": {"A=B": "1"}}, "A=B"),
            ({"extends": "ro", "pass-env": ["A B"]}, "pass-env"),
            ({"extends": "ro", "allow-read": ["relative/path"]},
             "relative/path"),
            ({"extends": "ro", "home": 7}, "home"),
            ({"extends": "plan"}, "extends"),
            ({"network": "none"}, "extends"),
            ({"format": "maelys-warden-profile/9", "extends": "ro"},
             "format"),
            ('{"extends": "ro", "extends": "rw"}', "line"),
            ("[1]", "object"),
        ]
        for doc, words in cases:
            path = self.profile(self.user_dir, "bad", doc)
            err = self.failure(self.warden("plan", "--profile", "bad"),
                               "PROTOCOL_FAILED")
            self.assertIn(words, err["message"], doc)
            self.assertIn(path, err["message"])

    # ---------------------------------------------------------- authority

    def test_profile_in_the_workspace_is_refused(self):
        """Invariant 18: a configuration directory inside the workspace (a
        project that sets XDG_CONFIG_HOME=./.config) could be written by the
        payload of an earlier run."""
        config = os.path.join(self.ws, ".config")
        d = os.path.join(config, "maelys", "profiles")
        os.makedirs(d)
        self.profile(d, "demo", {"extends": "ro"})
        env = self.env(XDG_CONFIG_HOME=config)
        for cmd in ("run", "plan"):
            args = ["--", "/bin/true"] if cmd == "run" else []
            p = self.warden(cmd, "--profile", "demo", *args, env=env)
            err = self.failure(p, "ACCESS_DENIED")
            self.assertIn("workspace", err["message"])
        # Nor from a directory this run makes writable.
        self.profile(self.user_dir, "demo", {"extends": "ro"})
        p = self.warden("run", "--profile", "demo", "--allow-write",
                        self.config, "--", "/bin/true")
        self.failure(p, "ACCESS_DENIED")
        p = self.warden("run", "--profile", "demo", "--home", self.config,
                        "--", "/bin/true")
        self.failure(p, "ACCESS_DENIED")

    def test_profile_never_from_where_an_earlier_run_wrote(self):
        """A profile directory an earlier run could write (it was made
        writable then, before it held profiles) is refused, whichever of the
        two directories it is: a user-run payload's files are the user's."""
        earlier = os.path.join(self.outside, "earlier")
        os.makedirs(earlier)
        p = self.sh("--ro", "--allow-write", earlier, script="true")
        self.assertEqual(p.returncode, 0, p.stderr)
        user = os.path.join(earlier, "cfg", "maelys", "profiles")
        system = os.path.join(earlier, "sys")
        os.makedirs(user)
        os.makedirs(system)
        self.profile(user, "planted", {"extends": "rw", "network": "inherit"})
        self.profile(system, "planted-sys", {"extends": "rw"})
        env = self.env(XDG_CONFIG_HOME=os.path.join(earlier, "cfg"),
                       MAELYS_WARDEN_SYSTEM_PROFILES=system)
        for name in ("planted", "planted-sys"):
            for cmd in ("run", "plan"):
                tail = ["--", "/bin/true"] if cmd == "run" else []
                err = self.failure(self.warden(cmd, "--profile", name, *tail,
                                               env=env), "ACCESS_DENIED")
                self.assertIn("earlier sandbox", err["message"])

    def test_symlinked_or_shared_profiles_are_refused(self):
        real = self.profile(self.outside, "real", {"extends": "ro"})
        os.symlink(real, os.path.join(self.user_dir, "linked.json"))
        err = self.failure(self.warden("plan", "--profile", "linked"),
                           "ACCESS_DENIED")
        self.assertIn("symbolic link", err["message"])
        # A symlinked profile never falls through to the system directory.
        self.profile(self.system_dir, "linked", {"extends": "ro"})
        self.failure(self.warden("plan", "--profile", "linked"),
                     "ACCESS_DENIED")
        self.profile(self.user_dir, "shared", {"extends": "ro"}, mode=0o666)
        err = self.failure(self.warden("plan", "--profile", "shared"),
                           "ACCESS_DENIED")
        self.assertIn("0666", err["message"])
        # A symbolic link in the directory chain is refused too.
        moved = os.path.join(self.outside, "profiles")
        self.profile(self.system_dir, "viadir", {"extends": "ro"})
        shutil.move(self.system_dir, moved)
        os.symlink(moved, self.system_dir)
        err = self.failure(self.warden("plan", "--profile", "viadir"),
                           "ACCESS_DENIED")
        self.assertIn("symbolic link", err["message"])

    # --------------------------------------------------------- semantics

    def test_profile_members_and_overrides(self):
        readable = os.path.join(self.outside, "readable")
        writable = os.path.join(self.outside, "writable")
        denied = os.path.join(self.outside, "readable", "secret")
        os.makedirs(denied)
        os.makedirs(writable)
        with open(os.path.join(readable, "data"), "w") as f:
            f.write("data\n")
        home = os.path.join(self.outside, "phome")
        self.profile(self.user_dir, "full", {
            "format": "maelys-warden-profile/1",
            "description": "every member",
            "extends": "ro",
            "network": "inherit",
            "allow-read": [readable],
            "allow-write": [writable],
            "deny": [denied],
            "env": {"FROM_PROFILE": "p", "OVERRIDDEN": "profile"},
            "pass-env": ["PASSED", "NOT_SET_ANYWHERE"],
            "limits": {"tasks": 300, "open-files": 200, "file-size": "1M",
                       "cpu-time": "1h"},
            "home": home,
            "protect": [os.path.join(self.outside, "precious")],
        })
        plan = self.plan_of("--profile", "full")
        self.assertEqual(plan["network"]["mode"], "inherit")
        rules = plan["rules"]
        for want in ({"path": self.ws, "access": "read",
                      "scope": "recursive-directory"},
                     {"path": readable, "access": "read",
                      "scope": "recursive-directory"},
                     {"path": writable, "access": "write",
                      "scope": "recursive-directory"},
                     {"path": denied, "access": "deny",
                      "scope": "recursive-directory"},
                     {"path": home, "access": "write",
                      "scope": "recursive-directory"}):
            self.assertIn(want, rules)
        self.assertEqual(plan["limits"]["tasks"], 300)
        self.assertEqual(plan["rlimits"]["nofile"], {"soft": 200, "hard": 200})
        self.assertEqual(plan["rlimits"]["fsize"]["hard"], 1 << 20)
        self.assertEqual(plan["rlimits"]["cpu"]["hard"], 3600)
        # The command line overrides single values and adds to lists.
        extra = os.path.join(self.outside, "extra")
        os.makedirs(extra)
        plan = self.plan_of("--profile", "full", "--network", "none",
                            "--tasks", "77", "--allow-read", extra)
        self.assertEqual(plan["network"]["mode"], "none")
        self.assertEqual(plan["limits"]["tasks"], 77)
        self.assertIn({"path": extra, "access": "read",
                       "scope": "recursive-directory"}, plan["rules"])
        self.assertIn({"path": readable, "access": "read",
                       "scope": "recursive-directory"}, plan["rules"])
        # The environment: the profile adds, the command line wins.
        p = self.warden("run", "--profile", "full", "--io", "stdio", "--env",
                        "OVERRIDDEN=cli", "--allow-read", ARGS.fixture, "--",
                        ARGS.fixture, "env",
                        env=self.env(PASSED="yes"))
        self.assertEqual(p.returncode, 0, p.stderr)
        got = dict(l.split("=", 1) for l in p.stdout.decode().splitlines())
        self.assertEqual(got["FROM_PROFILE"], "p")
        self.assertEqual(got["OVERRIDDEN"], "cli")
        self.assertEqual(got["PASSED"], "yes")
        self.assertEqual(got["HOME"], home)
        self.assertNotIn("NOT_SET_ANYWHERE", got)
        # --home on the command line replaces the profile's.
        other = os.path.join(self.outside, "other-home")
        plan = self.plan_of("--profile", "full", "--home", other)
        self.assertIn({"path": other, "access": "write",
                       "scope": "recursive-directory"}, plan["rules"])
        self.assertNotIn(home, [r["path"] for r in plan["rules"]])

    def test_profile_directories_are_never_writable(self):
        """Both directories profiles are read from are never writable, on
        every run (with a profile or not): otherwise the payload of one run
        could plant the profile a later run reads as its authority (a file a
        user-run sandbox writes is the user's, so the owner check alone
        cannot tell)."""
        system = os.path.join(self.outside, "sys", "profiles")
        os.makedirs(system)
        config = os.path.join(self.outside, "cfg")
        os.makedirs(os.path.join(config, "maelys", "profiles"))
        env = self.env(MAELYS_WARDEN_SYSTEM_PROFILES=system,
                       XDG_CONFIG_HOME=config)
        marker = os.path.join(self.ws, "ran")
        around = os.path.join(self.outside, "sys")
        for args in (["--rw", "--allow-write", around],
                     ["--rw", "--allow-write", system],
                     ["--rw", "--home", around],
                     ["--rw", "--workspace", around],
                     ["--rw", "--allow-write", config]):
            for cmd in ("run", "plan"):
                tail = ["--", "/bin/sh", "-c", "touch %s" % marker] \
                    if cmd == "run" else []
                err = self.failure(self.warden(cmd, *args, *tail, env=env),
                                   "ACCESS_DENIED")
                self.assertRegex(err["message"],
                                 "profile directory|configuration directory")
                self.assertFalse(os.path.exists(marker), args)
        # A directory next to them stays usable.
        beside = os.path.join(self.outside, "beside")
        os.makedirs(beside)
        p = self.warden("run", "--rw", "--allow-write", beside, "--io",
                        "stdio", "--", "/bin/sh", "-c",
                        "echo ok > %s/f && cat %s/f" % (beside, beside),
                        env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"ok\n")

    def test_profile_protected_paths(self):
        precious = os.path.join(self.outside, "precious")
        os.makedirs(precious)
        self.profile(self.user_dir, "guarded",
                     {"extends": "rw", "protect": [precious]})
        err = self.failure(self.warden("run", "--profile", "guarded",
                                       "--allow-write", self.outside, "--",
                                       "/bin/true"), "ACCESS_DENIED")
        self.assertIn(precious, err["message"])
        self.failure(self.warden("run", "--profile", "guarded",
                                 "--allow-write", precious, "--",
                                 "/bin/true"), "ACCESS_DENIED")
        p = self.warden("run", "--profile", "guarded", "--", "/bin/true")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_tilde_is_the_invoking_users_home(self):
        os.makedirs(os.path.join(self.tmp, "tilde-read"), exist_ok=True)
        self.profile(self.user_dir, "tilde", {
            "extends": "ro", "allow-read": ["~/tilde-read"],
            "home": "~/maelys-homes/tilde"})
        plan = self.plan_of("--profile", "tilde")
        paths = [r["path"] for r in plan["rules"]]
        self.assertIn(os.path.join(self.tmp, "tilde-read"), paths)
        self.assertIn(os.path.join(self.tmp, "maelys-homes/tilde"),
                      paths)

    # ---------------------------------------------------------- shipped

    def test_shipped_examples(self):
        env = self.env(MAELYS_WARDEN_SYSTEM_PROFILES=SHIPPED)
        for name in EXAMPLES:
            doc = load(os.path.join(SHIPPED, name + ".json"))
            jsonschema.validate(doc, self.profile_schema)
            plan = self.plan_of("--profile", name, env=env)
            mode = plan["network"]["mode"]
            homes = [r for r in plan["rules"]
                     if r["access"] == "write" and
                     r["path"].startswith(os.path.join(self.tmp,
                                                       "maelys-homes"))]
            if name in ("claude-code", "codex"):
                self.assertEqual(mode, "inherit", name)
                self.assertEqual(len(homes), 1, name)
            else:
                self.assertEqual(mode, "none", name)
        # The schema is not a formality: it refuses what the reader refuses.
        for bad in ({"extends": "ro", "allow_reads": []}, {"network": "none"},
                    {"extends": "ro", "limits": {"cpu": 1}}):
            with self.assertRaises(jsonschema.ValidationError):
                jsonschema.validate(bad, self.profile_schema)

    def test_agent_profiles_run_node_with_a_persistent_home(self):
        """claude-code and codex: node on PATH from the read-only /usr, the
        workspace writable, the network inherited, HOME persistent."""
        env = self.env(MAELYS_WARDEN_SYSTEM_PROFILES=SHIPPED)
        import socket
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        port = srv.getsockname()[1]
        try:
            for name in ("claude-code", "codex"):
                script = ("require('fs').writeFileSync('made-by-node', 'x');"
                          "const h = process.env.HOME;"
                          "const f = h + '/.seen'; const fs = require('fs');"
                          "const n = fs.existsSync(f) ? "
                          "fs.readFileSync(f, 'utf8') : '';"
                          "fs.writeFileSync(f, n + 'x');"
                          "require('net').connect(%d, '127.0.0.1', function()"
                          "{ console.log(h, n + 'x', 'net=ok'); this.destroy(); })"
                          ".on('error', e => { console.log('net=' + e.code);"
                          " process.exit(3) })" % port)
                for round_ in ("x", "xx"):
                    p = self.warden("run", "--profile", name, "--io", "stdio",
                                    "--wall-time", "60s", "--", "node", "-e",
                                    script, env=env, timeout=90)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    home, seen, net = p.stdout.decode().split()
                    self.assertEqual(seen, round_)
                    self.assertEqual(net, "net=ok")
                    self.assertEqual(home, os.path.join(
                        self.tmp, "maelys-homes", name))
                self.assertTrue(os.path.exists(
                    os.path.join(self.ws, "made-by-node")))
        finally:
            srv.close()

    def mcp_round_trip(self, profile, program, script_name, script):
        with open(os.path.join(self.ws, script_name), "w") as f:
            f.write(script)
        env = self.env(MAELYS_WARDEN_SYSTEM_PROFILES=SHIPPED)
        p = self.warden("run", "--profile", profile, "--io", "stdio",
                        "--wall-time", "60s", "--", program, script_name,
                        input=REQUESTS, env=env, timeout=90)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(l) for l in p.stdout.decode().splitlines()]
        self.assertEqual([l["id"] for l in lines], [1, 2])
        self.assertIn("serverInfo", lines[0]["result"])
        self.assertEqual(lines[1]["result"]["tools"], [])
        return lines

    def test_python_mcp_round_trip(self):
        self.mcp_round_trip("python-mcp", "python3", "server.py", PY_SERVER)

    def test_node_mcp_round_trip(self):
        self.assertIsNotNone(shutil.which("node", path="/usr/bin:/bin"),
                             "nodejs is required (ci/deps.sh)")
        self.mcp_round_trip("node-mcp", "node", "server.js", NODE_SERVER)

    def test_mcp_profiles_have_no_network(self):
        env = self.env(MAELYS_WARDEN_SYSTEM_PROFILES=SHIPPED)
        import socket
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        try:
            for name in ("node-mcp", "python-mcp"):
                p = self.warden("run", "--profile", name, "--allow-read",
                                ARGS.fixture, "--", ARGS.fixture, "escape",
                                "tcp", "127.0.0.1",
                                str(srv.getsockname()[1]), env=env)
                self.assertIn(b"tcp=blocked", p.stdout, name)
        finally:
            srv.close()

    def test_catalog_and_man_page(self):
        """--help, describe and the man page come from one catalog: the new
        options, the constraint that makes --profile a policy source, and
        the profile lookup are in all of them."""
        run = self.envelope(self.warden("describe", "run", "--format",
                                        "json").stdout)["data"]
        jsonschema.validate(run, self.describe_schema)
        text = json.dumps(run)
        for want in ("--profile", "--allow-write", "--home"):
            self.assertIn('"%s"' % want, text)
        self.assertIn('["--ro", "--rw", "--profile", "--plan", "--policy"]',
                      text)
        helptext = self.warden("run", "--help",
                               env=self.env(MAELYS_CLI_FORMAT="text")).stdout
        self.assertIn(b"--profile NAME", helptext)
        with open(ARGS.man) as f:
            man = f.read().replace("\\-", "-")
        for want in ("Named profiles", "--allow-write", "--home",
                     "XDG_CONFIG_HOME", "MAELYS_WARDEN_SYSTEM_PROFILES",
                     "SSL_CERT_FILE", "resolv.conf", "maelys/profiles"):
            self.assertIn(want, man)

    def test_completion(self):
        """The shell completion offers the new options, and --profile's
        names from both directories (each once; a file that is not a valid
        name is not offered)."""
        def words(*typed):
            p = self.warden("__complete", "--", *typed,
                            env=self.env(MAELYS_CLI_FORMAT="text"))
            self.assertEqual(p.returncode, 0, p.stderr)
            return p.stdout.decode().split()
        self.assertIn("--allow-write", words("run", "--allow-"))
        self.assertEqual(words("run", "--hom"), ["--home"])
        self.assertIn("--profile", words("plan", "--pro"))
        self.profile(self.user_dir, "mine", {"extends": "ro"})
        self.profile(self.user_dir, "codex", {"extends": "rw"})
        self.profile(self.system_dir, "codex", {"extends": "rw"})
        self.profile(self.system_dir, "claude-code", {"extends": "rw"})
        self.profile(self.system_dir, "not.valid", {"extends": "rw"})
        with open(os.path.join(self.system_dir, "README"), "w") as f:
            f.write("not a profile\n")
        self.assertEqual(words("run", "--profile", ""),
                         ["claude-code", "codex", "mine"])
        self.assertEqual(words("plan", "--profile", "c"),
                         ["claude-code", "codex"])
        # After the program's "--", the words are the program's.
        self.assertNotIn("codex", words("run", "--rw", "--", "--profile", ""))

    # ------------------------------------------------------- plan files

    def test_plan_prints_a_plan_file(self):
        """`plan` prints a maelys-executor-plan/1 document that --plan
        accepts (digest verified) and that the shipped schema validates."""
        home = os.path.join(self.outside, "h")
        os.makedirs(home, mode=0o700)
        writable = os.path.join(self.outside, "w")
        os.makedirs(writable)
        denied = os.path.join(self.ws, "secret")
        with open(denied, "w") as f:
            f.write("s\n")
        text = self.env(MAELYS_CLI_FORMAT="text")
        for args in (["--ro"], ["--rw", "--network", "inherit"],
                     ["--rw", "--allow-write", writable, "--home", home,
                      "--deny", denied]):
            p = self.warden("plan", *args, env=text)
            self.assertEqual(p.returncode, 0, p.stderr)
            doc = json.loads(p.stdout)
            jsonschema.validate(doc, self.plan_schema)
            self.assertEqual(doc["format"], "maelys-executor-plan/1")
            path = os.path.join(self.outside, "plan.json")
            with open(path, "wb") as f:
                f.write(p.stdout)
            q = self.warden("plan", "--plan", path, "--field", "digest",
                            env=text)
            self.assertEqual(q.returncode, 0, q.stderr)
            self.assertEqual(q.stdout.decode().strip(), doc["digest"])
            r = self.warden("run", "--plan", path, "--plan-digest",
                            doc["digest"], "--io", "stdio", "--", "/bin/sh",
                            "-c", "echo inside")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, b"inside\n")
        # So does the envelope's data.plan (--format json).
        p = self.warden("plan", "--ro", "--format", "json")
        jsonschema.validate(self.envelope(p.stdout)["data"]["plan"],
                            self.plan_schema)

    def test_plan_schema_covers_every_member(self):
        """A plan file using every member and every kind the format has
        (mediated network, channels, decision digest, ephemeral root,
        unlimited rlimits, each mount kind) validates against the schema and
        is read whole by --plan. plan is run's dry run (issue 17, item 8), so
        it refuses that plan exactly as run does (no backend here mediates a
        network, and run gives an ephemeral root no scratch); the same plan
        with what this host runs instead is printed back member for member,
        and what is printed validates against the schema."""
        writable = os.path.join(self.outside, "w")
        os.makedirs(writable)
        doc = {
            "format": "maelys-executor-plan/1",
            "mounts": [
                {"kind": "ro-bind", "source": "/usr", "destination": "/usr",
                 "missing": "skip"},
                {"kind": "bind", "source": writable, "destination": "/work",
                 "missing": "create"},
                {"kind": "tmpfs", "destination": "/tmp", "size": 1 << 20},
                {"kind": "proc", "destination": "/proc"},
                {"kind": "dev", "destination": "/dev"},
                {"kind": "symlink", "target": "usr/bin",
                 "destination": "/bin"},
                {"kind": "dir", "destination": "/scratch"}],
            "rules": [
                {"path": writable, "access": "write",
                 "scope": "recursive-directory"},
                {"path": os.path.join(writable, "secret"), "access": "deny",
                 "scope": "literal-file"}],
            "network": {"mode": "mediated",
                        "destinations": [{"host": "example.org",
                                          "port": 443}],
                        "mediator": "maelys-egress.fd4"},
            "root": {"disposition": "ephemeral-write", "scratch": 1 << 20},
            "required_capabilities": ["seccomp", "pid_namespace"],
            "process_tree_required": True,
            "rlimits": {"cpu": {"soft": 10, "hard": 20},
                        "core": {"soft": 0, "hard": "unlimited"}},
            "limits": {"tasks": 100, "memory": 1 << 30},
            "decision_digest": "sha256:" + "0123456789abcdef" * 4,
            "channels": [{"fd": 4, "name": "egress"}],
        }
        jsonschema.validate(doc, self.plan_schema)
        path = os.path.join(self.outside, "full.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        env = self.env(MAELYS_CLI_FORMAT="json")
        refusals = []
        for command in ("plan", "run"):
            p = self.warden(command, "--plan", path, "--", "/bin/true",
                            env=env)
            self.assertEqual(p.returncode, 1, p.stderr)
            refusals.append(self.envelope(p.stderr)["error"])
        self.assertEqual(refusals[0], refusals[1])
        self.assertNotEqual(refusals[0]["code"], "PROTOCOL_FAILED")
        runnable = json.loads(json.dumps(doc))
        runnable["network"] = {"mode": "none"}
        runnable["root"] = {"disposition": "readonly"}
        runnable["limits"] = {"tasks": 100}  # memory needs a cgroup
        del runnable["channels"]
        open(os.path.join(writable, "secret"), "w").close()
        jsonschema.validate(runnable, self.plan_schema)
        path = os.path.join(self.outside, "runnable.json")
        with open(path, "w") as f:
            json.dump(runnable, f)
        plan = self.plan_of("--plan", path)
        for member in ("network", "root", "rlimits", "limits",
                       "decision_digest", "mounts", "rules"):
            self.assertEqual(plan[member], runnable[member], member)

    def test_plan_schema_is_strict(self):
        good = json.loads(self.warden(
            "plan", "--ro", env=self.env(MAELYS_CLI_FORMAT="text")).stdout)
        for mutate in (lambda d: d.update(format="maelys-executor-plan/2"),
                       lambda d: d.update(extra=1),
                       lambda d: d["mounts"][0].update(kind="nfs"),
                       lambda d: d["rules"].append({"path": "/x",
                                                    "access": "all",
                                                    "scope": "literal-file"}),
                       lambda d: d["network"].update(mode="everything"),
                       lambda d: d.update(digest="sha256:00")):
            doc = json.loads(json.dumps(good))
            mutate(doc)
            with self.assertRaises(jsonschema.ValidationError):
                jsonschema.validate(doc, self.plan_schema)


if __name__ == "__main__":
    main()
