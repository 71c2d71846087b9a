#!/usr/bin/env python3
"""What a writable workspace keeps from its payload (issue 17, item 6), through
the built maelys-warden: a hostile payload tries to leave something the
host's git will run -- a hook, core.fsmonitor, a repository of its own in
place of .git, a `gitdir:` file, a commondir -- and every attempt is refused
or undone; then the HOST's own `git status` and `git commit` run, and a marker
file proves that nothing planted ran. A normal commit inside the sandbox still
works; --unprotect opts out; secrets are denied with the network inherited.

    test_protect.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import glob
import hashlib
import json
import os
import signal
import stat
import subprocess
import time

from wardentest import ARGS, WardenCase, main

GIT = "/usr/bin/git"


def tree_digest(top):
    """A digest of every name, mode and content below `top`."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(top)):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            st = os.lstat(path)
            h.update(("%s %o\n" % (os.path.relpath(path, top),
                                   st.st_mode)).encode())
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


class Protect(WardenCase):
    def setUp(self):
        super().setUp()
        self.marker = os.path.join(self.tmp, "PLANTED-%s" % self.id())
        if os.path.exists(self.marker):
            os.unlink(self.marker)

    # ------------------------------------------------------------ helpers

    def git_env(self):
        return {"PATH": "/usr/bin:/bin", "HOME": self.tmp,
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "host",
                "GIT_AUTHOR_EMAIL": "host@example.org",
                "GIT_COMMITTER_NAME": "host",
                "GIT_COMMITTER_EMAIL": "host@example.org"}

    def git(self, *args, cwd=None, check=True):
        p = subprocess.run([GIT] + list(args), cwd=cwd or self.ws,
                           env=self.git_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        if check:
            self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def init_repo(self, path=None):
        path = path or self.ws
        self.git("init", "-q", path, cwd=self.tmp)
        with open(os.path.join(path, "a"), "w") as f:
            f.write("a\n")
        self.git("add", "a", cwd=path)
        self.git("commit", "-q", "-m", "first", cwd=path)

    def payload(self, script, *options, check=None):
        """Runs `script` under /bin/sh in the workspace, --rw unless the
        options choose; its output is on stdout and stderr (--io auto)."""
        policy = [] if {"--ro", "--rw", "--plan"} & set(options) else ["--rw"]
        script = "MARKER=%s\n%s" % (self.marker, script)
        return self.warden("run", *policy, *options, "--", "/bin/sh", "-c",
                           script, check=check)

    def host_git_runs_nothing_planted(self, repo=None):
        """The host's git in the workspace, the way a user works after the
        run: status (fsmonitor), then a commit (hooks)."""
        repo = repo or self.ws
        self.git("status", cwd=repo, check=False)
        self.git("commit", "-q", "--allow-empty", "-m", "after the run",
                 cwd=repo, check=False)
        self.assertFalse(os.path.exists(self.marker),
                         "a program the payload planted ran on the host")

    def planting(self):
        """Shell lines that try every route to a program the host's git
        runs, each reporting its status."""
        return r"""
            hook='#!/bin/sh
touch "'"$MARKER"'"'
            printf '%s\n' "$hook" > .git/hooks/pre-commit; echo "hook=$?"
            chmod +x .git/hooks/pre-commit 2>/dev/null
            git config core.fsmonitor "touch $MARKER"; echo "fsmonitor=$?"
            printf '[core]\n\tfsmonitor = touch %s\n' "$MARKER" >> .git/config
            echo "append=$?"
            mv .git/hooks .git/hooks.old; echo "mvhooks=$?"
            mv .git/config .git/config.old; echo "mvconfig=$?"
            rm -f .git/config; echo "rmconfig=$?"
            rm -rf .git/hooks; echo "rmhooks=$?"
            ln -s /tmp .git/hooks/evil; echo "link=$?"
        """

    def assert_failed(self, out, *names):
        for name in names:
            self.assertRegex(out, r"%s=[1-9]" % name, out)

    # -------------------------------------------------------------- git

    def test_hook_and_fsmonitor_plants_refused(self):
        self.init_repo()
        before = tree_digest(os.path.join(self.ws, ".git", "hooks"))
        with open(os.path.join(self.ws, ".git", "config"), "rb") as f:
            config = f.read()
        p = self.payload(self.planting(), check=0)
        out = (p.stdout + p.stderr).decode()
        self.assert_failed(out, "hook", "fsmonitor", "append", "mvhooks",
                           "mvconfig", "rmconfig", "rmhooks", "link")
        self.assertIn("Read-only file system", out)
        self.assertIn("Device or resource busy", out)
        self.assertEqual(tree_digest(os.path.join(self.ws, ".git", "hooks")),
                         before)
        with open(os.path.join(self.ws, ".git", "config"), "rb") as f:
            self.assertEqual(f.read(), config)
        self.host_git_runs_nothing_planted()

    def test_moving_git_aside_refused(self):
        """`mv .git .g && git init` and the other ways to swap in a
        repository of the payload's."""
        self.init_repo()
        ino = os.stat(os.path.join(self.ws, ".git")).st_ino
        p = self.payload(r"""
            mv .git .g; echo "mv=$?"
            rm -rf .git 2>/dev/null; echo "rm=$?"
            git init -q .; echo "init=$?"
            git config core.fsmonitor "touch $MARKER"; echo "fsmonitor=$?"
            printf '#!/bin/sh\ntouch %s\n' "$MARKER" > .git/hooks/pre-commit
            echo "hook=$?"
        """, check=0)
        out = (p.stdout + p.stderr).decode()
        self.assert_failed(out, "mv", "rm", "fsmonitor", "hook")
        self.assertEqual(os.stat(os.path.join(self.ws, ".git")).st_ino, ino)
        self.assertFalse(os.path.exists(os.path.join(self.ws, ".g")))
        # rm -rf removed what git keeps writable (objects, refs): what the
        # payload may do to a repository it may commit to. Git's files that
        # run programs are all still there.
        self.assertTrue(os.path.isfile(os.path.join(self.ws, ".git",
                                                    "config")))
        self.assertTrue(os.path.isdir(os.path.join(self.ws, ".git", "hooks")))
        self.host_git_runs_nothing_planted()

    def test_no_repository_cannot_be_created(self):
        """Without .git at launch: no repository, no `gitdir:` file, no
        .maelys; nothing of the placeholders stays."""
        p = self.payload(r"""
            git init -q . 2>/dev/null; echo "init=$?"
            mkdir .git/hooks 2>/dev/null; echo "mkhooks=$?"
            mkdir .git 2>/dev/null; echo "mkdir=$?"
            echo "gitdir: ./evil" > .git; echo "gitfile=$?"
            rmdir .git; echo "rmdir=$?"
            mv .git elsewhere; echo "mv=$?"
            mkdir .maelys; echo "maelys=$?"
            mkdir evil && git init -q evil && echo "nested=$?"
        """, check=0)
        out = (p.stdout + p.stderr).decode()
        self.assert_failed(out, "init", "mkhooks", "mkdir", "gitfile",
                           "rmdir", "mv", "maelys")
        self.assertIn("nested=0", out)  # a repository elsewhere is allowed
        self.assertFalse(os.path.lexists(os.path.join(self.ws, ".git")))
        self.assertFalse(os.path.lexists(os.path.join(self.ws, ".maelys")))
        p = self.git("status", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"not a git repository", p.stderr)

    def test_gitdir_file_plant_refused(self):
        """A checkout whose .git is a `gitdir:` file naming a directory in
        the workspace (relative, as git worktrees and submodules write it):
        the file cannot be rewritten, and that directory is protected."""
        self.git("init", "-q", "--separate-git-dir",
                 os.path.join(self.ws, ".repo"), self.ws, cwd=self.tmp)
        with open(os.path.join(self.ws, ".git"), "w") as f:
            f.write("gitdir: .repo\n")
        self.git("commit", "-q", "--allow-empty", "-m", "first")
        p = self.payload(r"""
            echo "gitdir: ./evil" > .git; echo "gitfile=$?"
            rm -f .git; echo "rmgitfile=$?"
            mv .repo .repo.old; echo "mvrepo=$?"
            printf '#!/bin/sh\ntouch %s\n' "$MARKER" > .repo/hooks/pre-commit
            echo "hook=$?"
            git config core.fsmonitor "touch $MARKER"; echo "fsmonitor=$?"
            echo x > x && git add x &&
              git -c user.name=p -c user.email=p@x commit -q -m inside
            echo "commit=$?"
        """, check=0)
        out = (p.stdout + p.stderr).decode()
        self.assert_failed(out, "gitfile", "rmgitfile", "mvrepo", "hook",
                           "fsmonitor")
        self.assertIn("commit=0", out)
        with open(os.path.join(self.ws, ".git")) as f:
            self.assertEqual(f.read(), "gitdir: .repo\n")
        self.host_git_runs_nothing_planted()

    def test_gitdir_file_outside_stays_read_only(self):
        outside = os.path.join(self.tmp, "outside-%s" % os.path.basename(
            self.ws))
        self.git("init", "-q", "--separate-git-dir", outside, self.ws,
                 cwd=self.tmp)
        with open(os.path.join(self.ws, ".git")) as f:
            text = f.read()
        p = self.payload('echo "gitdir: ./evil" > .git; echo "gitfile=$?"',
                         check=0)
        self.assert_failed((p.stdout + p.stderr).decode(), "gitfile")
        with open(os.path.join(self.ws, ".git")) as f:
            self.assertEqual(f.read(), text)

    def test_commit_inside_the_sandbox_works(self):
        self.init_repo()
        p = self.payload(r"""
            echo b > b && git add b &&
              git -c user.name=p -c user.email=p@x commit -q -m inside &&
              git log --oneline | wc -l
        """, check=0)
        self.assertIn(b"2", p.stdout)
        log = self.git("log", "--format=%s").stdout.decode().split()
        self.assertEqual(log[0], "inside")
        self.host_git_runs_nothing_planted()

    def test_submodule_git_dir_protected(self):
        sub = os.path.join(self.tmp, "sub-%s" % os.path.basename(self.ws))
        self.init_repo(sub)
        self.init_repo()
        self.git("-c", "protocol.file.allow=always", "submodule", "add", "-q",
                 sub, "sub")
        self.git("commit", "-q", "-m", "submodule")
        p = self.payload(r"""
            printf '#!/bin/sh\ntouch %s\n' "$MARKER" \
              > .git/modules/sub/hooks/pre-commit; echo "hook=$?"
            git -C sub config core.fsmonitor "touch $MARKER"
            echo "fsmonitor=$?"
            mv .git/modules/sub .git/modules/old; echo "mv=$?"
        """, check=0)
        self.assert_failed((p.stdout + p.stderr).decode(), "hook", "fsmonitor", "mv")
        self.host_git_runs_nothing_planted(os.path.join(self.ws, "sub"))
        self.host_git_runs_nothing_planted()

    def test_unprotect_lets_the_hook_be_written(self):
        self.init_repo()
        p = self.payload(r"""
            printf '#!/bin/sh\ntouch %s\n' "$MARKER" > .git/hooks/pre-commit
            echo "hook=$?"; chmod +x .git/hooks/pre-commit
            mv .git .g; echo "mv=$?"
        """, "--unprotect", ".git/hooks", check=0)
        out = (p.stdout + p.stderr).decode()
        self.assertIn("hook=0", out)
        self.assert_failed(out, "mv")  # .git itself is still pinned
        self.git("commit", "-q", "--allow-empty", "-m", "hooked")
        self.assertTrue(os.path.exists(self.marker),
                        "--unprotect .git/hooks did not let it be written")
        os.unlink(self.marker)
        # What it names must be protected, or it is refused.
        p = self.warden("run", "--rw", "--unprotect", ".nothing", "--",
                        "/bin/true", env=self.env(MAELYS_CLI_FORMAT="json"))
        err = self.failure(p, "VALIDATION_FAILED")
        self.assertIn("is not protected", err["message"])

    def test_commondir_plant_moved_aside(self):
        """commondir cannot be reserved (an empty one breaks git), so one the
        payload writes is moved aside after the run, and said."""
        self.init_repo()
        p = self.payload(r"""
            mkdir evil && cp -r .git/objects .git/refs .git/HEAD evil/ &&
            printf '[core]\n\tfsmonitor = touch %s\n' "$MARKER" > evil/config
            echo ../evil > .git/commondir; echo "commondir=$?"
        """, check=0)
        self.assertIn(b"commondir=0", p.stdout)
        self.assertIn(b"appeared during the run", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.ws, ".git",
                                                     "commondir")))
        self.assertEqual(len(glob.glob(os.path.join(
            self.ws, ".git", "commondir.maelys-quarantine-*"))), 1)
        self.host_git_runs_nothing_planted()

    def test_nested_repository_made_is_moved_aside(self):
        """A repository the payload makes below the workspace's top, and a
        gitlink to it in the top index, would have the host's git obey its
        configuration (git status enters a submodule): after the run it is
        moved aside, and said."""
        self.init_repo()
        p = self.payload(r"""
            export HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1
            mkdir -p src/sub && git init -q src/sub; echo "init=$?"
            printf '[core]\n\tfsmonitor = "touch %s; false"\n' "$MARKER" \
                >> src/sub/.git/config
            head=$(git rev-parse HEAD)
            git update-index --add --cacheinfo 160000,$head,src/sub
            echo "gitlink=$?"
            mkdir -p lib && mv src/sub/.git lib/.git-in-waiting
            mkdir -p other && mv lib/.git-in-waiting other/.git
            echo "moved=$?"
        """, check=0)
        self.assertIn(b"init=0", p.stdout)
        self.assertIn(b"gitlink=0", p.stdout)
        self.assertIn(b"moved=0", p.stdout)
        self.assertIn(b"made or changed during the run", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.ws, "other",
                                                     ".git")))
        self.assertEqual(len(glob.glob(os.path.join(
            self.ws, "other", ".git.maelys-quarantine-*"))), 1)
        self.host_git_runs_nothing_planted()
        self.git("status", cwd=os.path.join(self.ws, "other"), check=False)
        self.assertFalse(os.path.exists(self.marker))

    def test_nested_repository_kept_unless_changed(self):
        """A nested repository that was there before the run stays as it
        is; once the payload changes its configuration, it is moved aside."""
        self.init_repo()
        vendor = os.path.join(self.ws, "vendor", "x")
        os.makedirs(vendor)
        self.init_repo(vendor)
        time.sleep(0.3)
        self.payload("true", check=0)
        self.assertTrue(os.path.isdir(os.path.join(vendor, ".git")))
        p = self.payload(r"""
            printf '[core]\n\tfsmonitor = "touch %s; false"\n' "$MARKER" \
                >> vendor/x/.git/config; echo "append=$?"
        """, check=0)
        self.assertIn(b"append=0", p.stdout)
        self.assertIn(b"made or changed during the run", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(vendor, ".git")))
        self.git("status", cwd=vendor, check=False)
        self.assertFalse(os.path.exists(self.marker))

    def test_existing_maelys_is_read_only(self):
        os.makedirs(os.path.join(self.ws, ".maelys"))
        with open(os.path.join(self.ws, ".maelys", "project.json"), "w") as f:
            f.write("{}\n")
        before = tree_digest(os.path.join(self.ws, ".maelys"))
        p = self.payload(r"""
            echo '{"x": 1}' > .maelys/project.json; echo "write=$?"
            touch .maelys/new; echo "create=$?"
            mv .maelys .m; echo "mv=$?"
            rm -rf .maelys; echo "rm=$?"
        """, check=0)
        self.assert_failed((p.stdout + p.stderr).decode(), "write", "create", "mv", "rm")
        self.assertEqual(tree_digest(os.path.join(self.ws, ".maelys")),
                         before)

    def test_readme_names_what_is_protected(self):
        """The README says which paths are protected, and why: each name the
        receipt lists, and each secret pattern of --help."""
        readme = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "..", "..", "README.md")
        with open(readme) as f:
            text = f.read()
        section = text.split("### What a workspace keeps from its payload",
                             1)[1].split("\n## ", 1)[0]
        self.init_repo()
        with open(os.path.join(self.ws, ".env"), "w") as f:
            f.write("SECRET\n")
        receipts = os.path.join(self.tmp, "receipts-" +
                                os.path.basename(self.ws))
        self.warden("run", "--rw", "--network", "inherit", "--receipt-dir",
                    receipts, "--", "/bin/true", check=0)
        [path] = glob.glob(os.path.join(receipts, "*.json"))
        with open(path) as f:
            protection = json.load(f)["context"]["protection"]
        names = {os.path.relpath(i["path"], self.ws)
                 for i in protection["protected"]}
        names |= {os.path.relpath(w, self.ws)
                  for w in protection["checked_after_run"]}
        self.assertGreaterEqual(len(names), 5, names)
        for name in names:
            self.assertIn("`%s" % name, section, name)
        for pattern in (".env*", ".npmrc", ".netrc", ".git-credentials",
                        ".aws/", ".ssh/"):
            self.assertIn("`%s`" % pattern, section)
        self.assertIn("why", section)

    def test_symbolic_link_git_refused(self):
        real = os.path.join(self.tmp, "real-%s" % os.path.basename(self.ws))
        self.init_repo(real)
        os.symlink(os.path.join(real, ".git"), os.path.join(self.ws, ".git"))
        p = self.warden("run", "--rw", "--", "/bin/true",
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        err = self.failure(p, "ACCESS_DENIED")
        self.assertIn("symbolic link", err["message"])
        self.assertIn("--unprotect .git", err["hint"])
        self.warden("run", "--rw", "--unprotect", ".git", "--", "/bin/true",
                    check=0)

    # ------------------------------------------------------ placeholders

    def wait_for(self, path, proc, what):
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            if proc.poll() is not None:
                self.fail("%s ended early: %s" % (
                    what, proc.stderr.read().decode(errors="replace")))
            self.assertLess(time.monotonic(), deadline, what)
            time.sleep(0.02)

    def waiting_run(self, name):
        """A run that says it started, then waits for `release-NAME`."""
        script = ("touch started-%s; while [ ! -e release-%s ]; do "
                  "sleep 0.02; done" % (name, name))
        p = subprocess.Popen([ARGS.warden, "run", "--rw", "--", "/bin/sh",
                              "-c", script], cwd=self.ws, env=self.env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.wait_for(os.path.join(self.ws, "started-" + name), p, name)
        return p

    def test_placeholders_are_shared_then_removed(self):
        git = os.path.join(self.ws, ".git")
        a = self.waiting_run("a")
        st = os.lstat(git)
        self.assertTrue(stat.S_ISDIR(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o555)
        self.assertEqual(os.listdir(git), [])
        b = self.waiting_run("b")
        open(os.path.join(self.ws, "release-a"), "w").close()
        self.assertEqual(a.wait(timeout=60), 0)
        a.stdout.close()
        a.stderr.close()
        # b still has it mounted: a must not have removed it.
        self.assertTrue(os.path.isdir(git))
        open(os.path.join(self.ws, "release-b"), "w").close()
        self.assertEqual(b.wait(timeout=60), 0)
        b.stdout.close()
        b.stderr.close()
        self.assertFalse(os.path.lexists(git))
        self.assertFalse(os.path.lexists(os.path.join(self.ws, ".maelys")))

    def test_killed_warden_leaves_placeholders_the_next_run_removes(self):
        a = self.waiting_run("a")
        os.kill(a.pid, signal.SIGKILL)
        a.wait(timeout=60)
        a.stdout.close()
        a.stderr.close()
        git = os.path.join(self.ws, ".git")
        self.assertTrue(os.path.isdir(git))  # benign: git ignores it
        p = self.git("status", check=False)
        self.assertIn(b"not a git repository", p.stderr)
        self.warden("run", "--rw", "--", "/bin/true", check=0)
        self.assertFalse(os.path.lexists(git))
        self.assertFalse(os.path.lexists(os.path.join(self.ws, ".maelys")))

    def test_host_side_rename_is_reported(self):
        """A host-side `git config` during the run rewrites .git/config by
        rename, which detaches the sandbox's read-only mount: said after."""
        self.init_repo()
        a = self.waiting_run("a")
        self.git("config", "user.name", "changed on the host")
        open(os.path.join(self.ws, "release-a"), "w").close()
        self.assertEqual(a.wait(timeout=60), 0)
        err = a.stderr.read().decode()
        a.stdout.close()
        a.stderr.close()
        self.assertIn("replaced or removed on the host during the run", err)
        self.assertIn(os.path.join(self.ws, ".git", "config"), err)

    def test_plan_file_round_trip_keeps_the_protections(self):
        plan = os.path.join(self.tmp, "plan-%s.json" % os.path.basename(
            self.ws))
        with open(plan, "wb") as f:
            f.write(self.warden("plan", "--rw", "--format", "jsonl",
                                "--field", "plan", check=0).stdout)
        self.assertFalse(os.path.lexists(os.path.join(self.ws, ".git")))
        p = self.warden("run", "--plan", plan, "--", "/bin/sh", "-c",
                        'mkdir .git; echo "mkdir=$?"', check=0)
        self.assert_failed((p.stdout + p.stderr).decode(), "mkdir")
        self.assertFalse(os.path.lexists(os.path.join(self.ws, ".git")))

    # ---------------------------------------------------------- secrets

    def make_secrets(self):
        for rel in (".env", ".env.local", "a/b/c/.npmrc", ".netrc",
                    ".git-credentials", ".aws/credentials", ".ssh/id_ed25519",
                    "a/.env.production", "keep/not-a-secret"):
            path = os.path.join(self.ws, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write("SECRET %s\n" % rel)
        os.makedirs(os.path.join(self.ws, "real"))
        with open(os.path.join(self.ws, "real", "token"), "w") as f:
            f.write("SECRET real/token\n")
        os.symlink("real/token", os.path.join(self.ws, ".envlink"))

    READ_ALL = ("for f in .env .env.local a/b/c/.npmrc .netrc .git-credentials "
                ".aws/credentials .ssh/id_ed25519 a/.env.production "
                "keep/not-a-secret real/token; do cat $f; done 2>&1; true")

    def test_secrets_denied_with_network_inherit(self):
        self.make_secrets()
        p = self.warden("run", "--ro", "--network", "inherit", "--",
                        "/bin/sh", "-c", self.READ_ALL, check=0)
        out = (p.stdout + p.stderr).decode()
        self.assertIn("SECRET keep/not-a-secret", out)
        self.assertEqual(out.count("SECRET"), 1, out)
        self.assertEqual(out.count("Permission denied"), 9, out)
        # --unprotect gives one back.
        p = self.warden("run", "--ro", "--network", "inherit", "--unprotect",
                        ".env", "--", "/bin/cat", ".env", check=0)
        self.assertIn(b"SECRET .env", p.stdout)

    def test_secrets_readable_without_network(self):
        self.make_secrets()
        p = self.warden("run", "--ro", "--", "/bin/sh", "-c", self.READ_ALL,
                        check=0)
        self.assertEqual(p.stdout.decode().count("SECRET"), 10)

    # ------------------------------------------------------------ agent

    def agent(self, script, *options, access="write", network="none",
              workspace=None):
        """`maelys-warden agent` on a spec (outside the workspace) that runs
        `script` under /bin/sh in it; its stdout and stderr together."""
        spec = os.path.join(self.tmp, "spec-%s.json" % os.path.basename(
            self.ws))
        with open(spec, "w") as f:
            json.dump({"format": "maelys-agent-spec/1",
                       "executable": "/bin/sh",
                       "argv": ["sh", "-c", "MARKER=%s\n%s" % (self.marker,
                                                                script)],
                       "workspace": {"path": workspace or self.ws,
                                     "access": access},
                       "environment": {"set": {"PATH": "/usr/bin:/bin",
                                               "HOME": "/tmp"}},
                       "network": network}, f)
        os.chmod(spec, 0o600)
        p = self.warden("agent", *options, spec,
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        return p, (p.stdout + p.stderr).decode(errors="replace")

    def test_agent_keeps_git_from_its_payload(self):
        """`agent` protects the spec's writable workspace as run does."""
        self.init_repo()
        receipts = os.path.join(self.tmp, "agent-receipts-" +
                                os.path.basename(self.ws))
        p, out = self.agent(self.planting() + r"""
            echo b > b && git add b &&
              git -c user.name=p -c user.email=p@x commit -q -m inside
            echo "commit=$?"
        """, "--trace", "--receipt-dir", receipts)
        self.assertEqual(p.returncode, 0, out)
        # The receipt says what was protected.
        [path] = glob.glob(os.path.join(receipts, "*.json"))
        with open(path) as f:
            context = json.load(f)["context"]
        got = {(i["path"], i["protection"])
               for i in context["host"]["protection"]["protected"]}
        git = os.path.join(self.ws, ".git")
        self.assertIn((git, "pinned"), got)
        self.assertIn((git + "/hooks", "read-only"), got)
        self.assertIn((git + "/config", "read-only"), got)
        self.assertIn("session", context)
        self.assert_failed(out, "hook", "fsmonitor", "append", "mvhooks",
                           "mvconfig", "rmconfig", "rmhooks", "link")
        self.assertIn("commit=0", out)
        self.assertIn("protected %s/.git/hooks (read-only)" % self.ws, out)
        self.host_git_runs_nothing_planted()
        # --unprotect opts out here too; naming nothing protected is refused.
        p, out = self.agent(r"""
            printf '#!/bin/sh\ntouch %s\n' "$MARKER" > .git/hooks/pre-commit
            echo "hook=$?"
        """, "--unprotect", ".git/hooks")
        self.assertIn("hook=0", out)
        p, out = self.agent("true", "--unprotect", ".nothing")
        self.assertEqual(p.returncode, 1, out)
        self.assertIn("is not protected", out)

    def test_agent_cannot_create_a_repository(self):
        p, out = self.agent(r"""
            git init -q . 2>/dev/null; echo "init=$?"
            mkdir .maelys; echo "maelys=$?"
        """)
        self.assert_failed(out, "init", "maelys")
        self.assertFalse(os.path.lexists(os.path.join(self.ws, ".git")))
        self.assertFalse(os.path.lexists(os.path.join(self.ws, ".maelys")))

    def test_agent_secrets_denied_with_network_inherit(self):
        self.make_secrets()
        p, out = self.agent(self.READ_ALL, access="read", network="inherit")
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("SECRET keep/not-a-secret", out)
        self.assertEqual(out.count("SECRET"), 1, out)
        p, out = self.agent(self.READ_ALL, access="read")
        self.assertEqual(out.count("SECRET"), 10, out)

    def test_agent_refuses_to_make_its_own_files_writable(self):
        """maelys-warden's configuration directory as the spec's writable
        workspace: refused as run refuses it (invariant 18)."""
        config = os.path.join(self.tmp, ".config", "maelys")
        os.makedirs(config, exist_ok=True)
        p, out = self.agent("true", workspace=config)
        err = self.failure(p, "ACCESS_DENIED")
        self.assertIn("the configuration directory", err["message"])
        p = self.warden("run", "--rw", "--workspace", config, "--",
                        "/bin/true", env=self.env(MAELYS_CLI_FORMAT="json"))
        self.assertIn("the configuration directory",
                      self.failure(p, "ACCESS_DENIED")["message"])

    def test_agent_remembers_and_respects_where_sandboxes_wrote(self):
        """As run: what an agent may write is recorded before it starts (a
        plan file there is refused afterwards), and a spec is never read
        from where an earlier sandbox could write."""
        p, out = self.agent("true")
        self.assertEqual(p.returncode, 0, out)
        planted = os.path.join(self.ws, "planted-plan.json")
        with open(planted, "wb") as f:
            f.write(self.warden("plan", "--ro", "--format", "jsonl",
                                "--field", "plan", check=0).stdout)
        os.chmod(planted, 0o600)
        p = self.warden("run", "--plan", planted, "--", "/bin/true",
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        self.assertIn("an earlier sandbox could write",
                      self.failure(p, "ACCESS_DENIED")["message"])
        # A spec in a directory a run made writable.
        other = os.path.join(self.tmp, "other-" + os.path.basename(self.ws))
        os.mkdir(other)
        self.warden("run", "--rw", "--workspace", other, "--", "/bin/true",
                    check=0)
        spec = os.path.join(other, "spec.json")
        with open(spec, "w") as f:
            json.dump({"format": "maelys-agent-spec/1",
                       "executable": "/bin/true",
                       "workspace": {"path": self.ws, "access": "read"},
                       "network": "none"}, f)
        os.chmod(spec, 0o600)
        p = self.warden("agent", spec, env=self.env(MAELYS_CLI_FORMAT="json"))
        err = self.failure(p, "ACCESS_DENIED")
        self.assertIn("an earlier sandbox could write", err["message"])

    # ---------------------------------------------------------- reports

    def test_receipt_and_explain_list_what_was_protected(self):
        self.init_repo()
        with open(os.path.join(self.ws, ".env"), "w") as f:
            f.write("SECRET\n")
        args = ["--rw", "--network", "inherit", "--unprotect", ".git/hooks",
                "--receipt-dir", os.path.join(self.tmp, "receipts-" +
                                              os.path.basename(self.ws))]
        self.warden("run", *args, "--", "/bin/true", check=0)
        [path] = glob.glob(os.path.join(args[-1], "*.json"))
        with open(path) as f:
            protection = json.load(f)["context"]["protection"]
        got = {(i["path"], i["protection"]) for i in protection["protected"]}
        git = os.path.join(self.ws, ".git")
        for want in [(git, "pinned"), (git + "/config", "read-only"),
                     (os.path.join(self.ws, ".maelys"), "reserved"),
                     (os.path.join(self.ws, ".env"), "denied")]:
            self.assertIn(want, got)
        self.assertNotIn((git + "/hooks", "read-only"), got)
        self.assertEqual(protection["unprotected"], [git + "/hooks"])
        self.assertIn(git + "/commondir", protection["checked_after_run"])
        p = self.warden("plan", "--explain", *args, check=0)
        text = p.stdout.decode()
        self.assertRegex(text, r"\nprotected\s+/")
        self.assertIn("%s/: pinned" % git, text)
        self.assertIn("%s/config: read-only" % git, text)
        self.assertRegex(text, r"denied\s+%s/.env" % self.ws)
        self.assertRegex(text, r"unprotected\s+%s/hooks" % git)
        self.assertIn("the host's network", text)


if __name__ == "__main__":
    main()
