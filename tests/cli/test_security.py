#!/usr/bin/env python3
"""The confused-deputy attacks (DESIGN invariants 17-22) through the built
maelys-warden: each test reproduces an attack a hostile payload (or a file it
planted in an earlier run) could mount, and checks it is refused or inert.

    test_security.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import glob
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import tarfile
import tempfile
import time

from wardentest import ARGS, WardenCase, main


def setid_files(top):
    """Paths below `top` with S_ISUID or S_ISGID, or a file capability."""
    found = []
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(path)
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            try:
                os.getxattr(path, "security.capability",
                            follow_symlinks=False)
                found.append(path + " (capability)")
            except OSError:
                pass
    return found


class Security(WardenCase):
    # ------------------------------------------------ invariant 17: set-id

    def test_no_setid_file_leaves_the_sandbox(self):
        """Ordinary tools that set S_ISUID or S_ISGID: every one of them
        fails to, and no file under the workspace has either bit after."""
        archive = os.path.join(self.ws, "evil.tar")
        member = os.path.join(self.tmp, "member")
        with open(member, "w") as f:
            f.write("#!/bin/sh\n")
        with tarfile.open(archive, "w") as t:
            info = t.gettarinfo(member, arcname="from-tar")
            info.mode = 0o4755
            with open(member, "rb") as f:
                t.addfile(info, f)
        script = r"""
            cp /usr/bin/id ./chmod-suid && chmod 4755 ./chmod-suid
            cp /usr/bin/id ./chmod-sgid && chmod g+s ./chmod-sgid
            install -m 4755 /usr/bin/id ./installed
            src=$(find /usr/bin -perm -4000 -type f | head -n 1)
            cp -p "$src" ./copied-p
            tar -xpf evil.tar
            python3 -c 'import os; open("py", "w").close(); os.chmod("py", 0o6755)'
            mkdir d && chmod 2775 d
            echo done
        """
        p = self.warden("run", "--rw", "--", "/bin/sh", "-c", script,
                        timeout=60)
        self.assertIn(b"done", p.stdout)
        self.assertIn(b"Operation not permitted", p.stderr)
        self.assertEqual(setid_files(self.ws), [])
        # What could be created was, without the bits: the refusal is of the
        # bits, not of the files.
        for name in ("chmod-suid", "installed", "copied-p", "from-tar", "py"):
            self.assertTrue(os.path.exists(os.path.join(self.ws, name)), name)

    def test_setid_routes_from_a_program(self):
        """Each system-call route, from a C payload (the fixture)."""
        p = self.warden(*self.run_args("--", ARGS.fixture, "escape", "setid",
                                       self.ws), timeout=60, check=0)
        out = p.stdout.decode()
        for route in ("chmod-suid", "chmod-sgid", "fchmod", "fchmodat",
                      "fchmodat2", "open", "openat", "creat", "tmpfile",
                      "mknod", "mknodat", "openat2", "dir-sgid", "fcap"):
            self.assertIn("setid-%s=blocked:" % route, out)
        self.assertIn("plain-modes=ok", out)
        self.assertEqual(setid_files(self.ws), [])

    # ------------------------- invariant 18: authority and planted paths

    def plan_json(self, extra_rules=()):
        p = self.warden("plan", "--rw", "--format", "json", check=0)
        plan = self.envelope(p.stdout)["data"]["plan"]
        plan.pop("digest", None)
        plan["rules"] = list(plan["rules"]) + list(extra_rules)
        return plan

    def test_plan_from_the_workspace_is_refused(self):
        """A plan file inside what the plan makes writable (the README's own
        `--plan plan.json` in a writable workspace) is refused: a payload of
        an earlier run could have rewritten it."""
        outside = os.path.join(self.tmp, "host-file")
        with open(outside, "w") as f:
            f.write("host\n")
        path = os.path.join(self.ws, "plan.json")
        with open(path, "w") as f:
            json.dump(self.plan_json([{"path": outside, "access": "write",
                                       "scope": "literal-file"}]), f)
        os.chmod(path, 0o600)
        p = self.warden("run", "--plan", path, "--", ARGS.fixture, "exit",
                        "0", env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("plan file", e["message"])
        self.assertIn(path, e["message"])
        with open(outside) as f:
            self.assertEqual(f.read(), "host\n")

    NOTHING_PLAN = {"format": "maelys-executor-plan/1", "mounts": [],
                    "rules": [], "network": {"mode": "inherit"},
                    "root": {"disposition": "host"},
                    "required_capabilities": [],
                    "process_tree_required": False, "rlimits": {},
                    "limits": {}, "channels": []}

    def test_authority_never_from_where_a_sandbox_wrote(self):
        """A plan planted by an earlier run's payload (as root its files
        land owned by the workspace's owner, so owner and mode checks cannot
        tell) is refused, also after the directory was moved, and so is a
        receipt directory there; copied out by the operator it is read, but
        a plan that confines nothing never picks the posix backend on its
        own."""
        env = self.env(MAELYS_CLI_FORMAT="json")
        self.warden("run", "--rw", "--", "/bin/sh", "-c",
                    'printf %s "$1" > planted.json', "sh",
                    json.dumps(self.NOTHING_PLAN), check=0)
        planted = os.path.join(self.ws, "planted.json")
        os.chmod(planted, 0o600)  # as the operator finds it: private
        p = self.warden("run", "--plan", planted, "--", ARGS.fixture, "exit",
                        "0", env=env, cwd=self.tmp)
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("earlier sandbox could write", e["message"])
        self.assertIn(self.ws, e["message"])
        moved = self.ws + "-moved"
        os.rename(self.ws, moved)
        p = self.warden("plan", "--plan", os.path.join(moved, "planted.json"),
                        env=env, cwd=self.tmp)
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("earlier sandbox could write", e["message"])
        p = self.warden("run", "--ro", "--receipt-dir",
                        os.path.join(moved, "r"), "--allow-read", ARGS.fixture, "--", ARGS.fixture,
                        "exit", "0", env=env, cwd=self.tmp)
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("receipts are never written there", e["message"])
        self.assertFalse(os.path.exists(os.path.join(moved, "r")))
        os.rename(moved, self.ws)
        reviewed = os.path.join(self.tmp, "reviewed.json")
        shutil.copy(planted, reviewed)
        os.chmod(reviewed, 0o600)
        p = self.warden("run", "--plan", reviewed, "--", ARGS.fixture, "exit",
                        "0", env=env, cwd=self.tmp)
        e = self.failure(p, "POLICY_FAILED")
        self.assertIn("posix confines nothing", e["message"])
        self.warden("run", "--plan", reviewed, "--backend", "posix", "--",
                    ARGS.fixture, "exit", "0", cwd=self.tmp, check=0)

    def record_lines(self, state):
        path = os.path.join(state, "maelys", "writable-paths")
        with open(path) as f:
            return [json.loads(line) for line in f]

    def test_written_record_keeps_one_line_per_workspace(self):
        """Runs of one workspace record it once: its placeholders (.git and
        .maelys are absent here) are made and removed by each run, so they
        are not kept paths. The record used to grow by a line per run (and
        every run read all of it, until its size refused every run); what
        it refuses stays refused."""
        state = tempfile.mkdtemp(dir=self.tmp, prefix="state-")
        env = self.env(XDG_STATE_HOME=state, MAELYS_CLI_FORMAT="json")
        for _ in range(3):
            self.warden("run", "--rw", "--", "/bin/true", env=env, check=0)
        lines = self.record_lines(state)
        self.assertEqual([e["path"] for e in lines], [self.ws], lines)
        self.assertEqual(lines[0]["readonly"], [])
        planted = os.path.join(self.ws, "plan.json")
        with open(planted, "w") as f:
            json.dump(self.NOTHING_PLAN, f)
        os.chmod(planted, 0o600)
        p = self.warden("run", "--plan", planted, "--", "/bin/true", env=env,
                        cwd=self.tmp)
        self.assertIn("earlier sandbox could write",
                      self.failure(p, "ACCESS_DENIED")["message"])

    def test_written_record_compacted(self):
        """A record an earlier version grew (a line per run, each keeping a
        placeholder long removed) is rewritten once: kept paths that are no
        longer the file kept are dropped and equal lines written once. A
        kept directory that still exists keeps exempting, and what was
        refused stays refused."""
        state = tempfile.mkdtemp(dir=self.tmp, prefix="state-")
        env = self.env(XDG_STATE_HOME=state, MAELYS_CLI_FORMAT="json")
        kept = os.path.join(self.ws, "kept")
        os.mkdir(kept)
        self.warden("run", "--rw", "--allow-read", kept, "--", "/bin/true",
                    env=env, check=0)
        lines = self.record_lines(state)
        self.assertEqual(len(lines), 1, lines)
        live = lines[0]
        self.assertEqual([r["path"] for r in live["readonly"]], [kept])
        st = os.stat(self.ws)
        grown = []
        for n in range(200):
            stale = dict(live)
            stale["readonly"] = live["readonly"] + [
                {"path": os.path.join(self.ws, ".git"), "dev": st.st_dev,
                 "ino": 10**9 + n, "born": n}]
            grown.append(stale)
        record = os.path.join(state, "maelys", "writable-paths")
        with open(record, "w") as f:
            for e in grown:
                f.write(json.dumps(e) + "\n")
        other = tempfile.mkdtemp(dir=self.tmp, prefix="other-")
        self.warden("run", "--rw", "--workspace", other, "--", "/bin/true",
                    env=env, check=0)
        lines = self.record_lines(state)
        self.assertEqual(sorted(e["path"] for e in lines),
                         sorted([self.ws, other]), lines)
        self.assertEqual(os.stat(record).st_mode & 0o777, 0o600)
        self.assertEqual(glob.glob(record + ".*"), [record + ".lock"])
        p = self.warden("plan", "--ro", "--format", "json", cwd=self.tmp,
                        check=0)
        plan = self.envelope(p.stdout)["data"]["plan"]
        plan.pop("digest", None)
        for where in (kept, self.ws):
            path = os.path.join(where, "plan.json")
            with open(path, "w") as f:
                json.dump(plan, f)
            os.chmod(path, 0o600)
        self.warden("plan", "--plan", os.path.join(kept, "plan.json"),
                    cwd=self.tmp, env=env, check=0)
        p = self.warden("plan", "--plan", os.path.join(self.ws, "plan.json"),
                        cwd=self.tmp, env=env)
        self.assertIn("earlier sandbox could write",
                      self.failure(p, "ACCESS_DENIED")["message"])

    def planted_plan_refused(self, workspace, env):
        planted = os.path.join(workspace, "plan.json")
        with open(planted, "w") as f:
            json.dump(self.NOTHING_PLAN, f)
        os.chmod(planted, 0o600)
        p = self.warden("plan", "--plan", planted, env=env, cwd=self.tmp)
        self.assertIn("earlier sandbox could write",
                      self.failure(p, "ACCESS_DENIED")["message"])

    def state_with_a_record(self):
        """A fresh state directory whose record holds one other workspace:
        (state, env, the record's path)."""
        state = tempfile.mkdtemp(dir=self.tmp, prefix="state-")
        env = self.env(XDG_STATE_HOME=state, MAELYS_CLI_FORMAT="json")
        other = tempfile.mkdtemp(dir=self.tmp, prefix="other-")
        self.warden("run", "--rw", "--workspace", other, "--", "/bin/true",
                    env=env, check=0)
        return state, env, os.path.join(state, "maelys", "writable-paths")

    def test_written_record_torn_line_swallows_nothing(self):
        """A record whose last line was cut short (a payload filled the
        disk and a run's append came back short; a run killed mid-write)
        is ended before the next append: the next run's writable path is
        recorded, not merged into the fragment and dropped with it (the
        adversarial review planted a plan that way)."""
        state, env, record = self.state_with_a_record()
        with open(record, "a") as f:
            f.write('{"path":"%s/torn' % self.tmp)
        self.warden("run", "--rw", "--", "/bin/true", env=env, check=0)
        self.assertIn(self.ws, [e["path"] for e in self.record_lines_lax(
            state)])
        self.planted_plan_refused(self.ws, env)

    def test_written_record_failed_append_leaves_no_fragment(self):
        """An append the file system refuses part way (here the file size
        limit; a full disk alike) refuses the run and is cut back off: the
        record is as it was, ending with a whole line."""
        state, env, record = self.state_with_a_record()
        # Larger than what the run writes before the record (its memfds),
        # so that the limit below stops the record's append alone.
        with open(record, "a") as f:
            for n in range(600):
                f.write(json.dumps({"path": "%s/gone-%d" % (self.tmp, n),
                                    "readonly": []}) + "\n")
        with open(record, "rb") as f:
            before = f.read()

        def limit():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE,
                               (len(before) + 20, len(before) + 20))
        p = subprocess.run([ARGS.warden, "run", "--rw", "--", "/bin/true"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, cwd=self.ws, timeout=60,
                           preexec_fn=limit)
        e = self.failure(p, "IO_FAILED")
        self.assertIn("nothing was launched", e["message"])
        with open(record, "rb") as f:
            self.assertEqual(f.read(), before)

    def record_lines_lax(self, state):
        """The record's entries, skipping what does not parse."""
        out = []
        with open(os.path.join(state, "maelys", "writable-paths")) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def test_authority_kept_read_only_inside_a_workspace(self):
        """A directory the run kept read-only inside its writable workspace
        (--allow-read of a subdirectory) may hold the operator's plan."""
        kept = os.path.join(self.ws, "kept")
        os.mkdir(kept)
        self.warden("run", "--rw", "--allow-read", kept, "--allow-read",
                    ARGS.fixture, "--", ARGS.fixture, "exit", "0", check=0)
        path = os.path.join(kept, "plan.json")
        p = self.warden("plan", "--ro", "--format", "json", cwd=self.tmp,
                        check=0)
        plan = self.envelope(p.stdout)["data"]["plan"]
        plan.pop("digest", None)
        with open(path, "w") as f:
            json.dump(plan, f)
        os.chmod(path, 0o600)
        self.warden("plan", "--plan", path, cwd=self.tmp, check=0)
        loose = os.path.join(self.ws, "plan.json")
        shutil.copy(path, loose)
        p = self.warden("plan", "--plan", loose, cwd=self.tmp,
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        self.failure(p, "ACCESS_DENIED")

    def test_kept_read_only_path_renamed_away(self):
        """A kept read-only directory exempts files only while it is the
        directory that was kept: renaming its parent away and building the
        same names anew (the payload cannot write below the read-only mount,
        but it can move it) does not carry the exemption."""
        plans = os.path.join(self.ws, "conf", "plans")
        os.makedirs(plans)
        p = self.warden("plan", "--ro", "--format", "json", cwd=self.tmp,
                        check=0)
        plan = self.envelope(p.stdout)["data"]["plan"]
        plan.pop("digest", None)
        self.warden("run", "--rw", "--allow-read", plans, "--", "/bin/sh",
                    "-c", 'mv conf conf.old && mkdir -p conf/plans && '
                    'printf %s "$1" > conf/plans/plan.json', "sh",
                    json.dumps(plan), check=0)
        planted = os.path.join(plans, "plan.json")
        self.assertTrue(os.path.exists(planted))
        os.chmod(planted, 0o600)
        p = self.warden("plan", "--plan", planted, cwd=self.tmp,
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("earlier sandbox could write", e["message"])

    def test_bwrap_never_from_path(self):
        """A `bwrap` on the caller's PATH (a directory a sandbox may have
        written) is never executed: the backend looks in the system's
        directories only."""
        fake_dir = os.path.join(self.tmp, "fake-bin")
        os.makedirs(fake_dir, exist_ok=True)
        marker = os.path.join(self.tmp, "fake-bwrap-ran")
        fake = os.path.join(fake_dir, "bwrap")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\ntouch %s\nexec /usr/bin/bwrap \"$@\"\n"
                    % marker)
        os.chmod(fake, 0o755)
        self.warden("run", "--ro", "--allow-read", ARGS.fixture, "--",
                    ARGS.fixture, "exit", "0",
                    env=self.env(PATH=fake_dir + ":/usr/bin:/bin"), check=0)
        self.assertFalse(os.path.exists(marker))

    def test_plan_file_owner_and_mode(self):
        path = os.path.join(self.tmp, "plan-mode.json")
        with open(path, "w") as f:
            json.dump(self.plan_json(), f)
        for mode in (0o622, 0o660, 0o666):
            os.chmod(path, mode)
            p = self.warden("plan", "--plan", path,
                            env=self.env(MAELYS_CLI_FORMAT="json"))
            e = self.failure(p, "ACCESS_DENIED")
            self.assertIn("writable by nobody else", e["message"])
        os.chmod(path, 0o600)
        self.warden("plan", "--plan", path, check=0)
        # A group-writable directory above it, without the sticky bit.
        shared = os.path.join(self.tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        inside = os.path.join(shared, "plan.json")
        with open(inside, "w") as f:
            json.dump(self.plan_json(), f)
        os.chmod(inside, 0o600)
        p = self.warden("plan", "--plan", inside,
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn(shared, e["message"])
        # Sticky and world-writable, as /tmp: fine for one's own file.
        os.chmod(shared, 0o1777)
        self.warden("plan", "--plan", inside, check=0)
        if os.geteuid() == 0:
            # Owned by neither the invoking uid nor root.
            os.chown(inside, 12345, 12345)
            p = self.warden("plan", "--plan", inside,
                            env=self.env(MAELYS_CLI_FORMAT="json"))
            self.failure(p, "ACCESS_DENIED")

    def test_plan_digest_pins_the_reviewed_plan(self):
        path = os.path.join(self.tmp, "pinned.json")
        with open(path, "w") as f:
            json.dump(self.plan_json(), f)
        os.chmod(path, 0o600)
        p = self.warden("plan", "--plan", path, "--format", "json", check=0)
        digest = self.envelope(p.stdout)["data"]["digest"]
        self.warden("plan", "--plan", path, "--plan-digest", digest, check=0)
        other = "sha256:" + "0" * 64
        p = self.warden("run", "--plan", path, "--plan-digest", other, "--",
                        ARGS.fixture, "exit", "0",
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn(digest, e["message"])

    def test_state_and_config_never_writable(self):
        """`--allow-write`-like routes that would cover maelys-warden's own
        configuration or state (a workspace that is the home, a plan that
        writes ~/.config) are refused."""
        home = os.path.join(self.tmp, "home")
        os.makedirs(os.path.join(home, "project"), exist_ok=True)
        env = self.env(MAELYS_CLI_FORMAT="json", HOME=home)
        env.pop("XDG_STATE_HOME")
        p = self.warden("run", "--rw", "--workspace", home, "--",
                        ARGS.fixture, "exit", "0", env=env)
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("maelys", e["message"])
        # A project below the home is fine.
        self.warden("run", "--rw", "--allow-read", ARGS.fixture,
                    "--workspace", os.path.join(home, "project"), "--",
                    ARGS.fixture, "exit", "0", env=env, check=0)
        path = os.path.join(self.tmp, "config-plan.json")
        with open(path, "w") as f:
            json.dump(self.plan_json([{"path": os.path.join(home, ".config"),
                                       "access": "write",
                                       "scope": "recursive-directory"}]), f)
        os.chmod(path, 0o600)
        os.makedirs(os.path.join(home, ".config"), exist_ok=True)
        p = self.warden("plan", "--plan", path, env=env)
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("configuration directory", e["message"])

    def test_planted_links_steer_nothing(self):
        """Links planted by an earlier run: `--allow-read vendor` with vendor
        -> a private directory, `cd sub/build` with sub/build -> /etc, and a
        --deny through a link are refused, naming the link and its target."""
        secret = os.path.join(self.tmp, "secret")
        os.makedirs(secret, exist_ok=True)
        os.symlink(secret, os.path.join(self.ws, "vendor"))
        p = self.warden("run", "--rw", "--allow-read", "vendor", "--",
                        ARGS.fixture, "exit", "0",
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("vendor", e["message"])
        self.assertIn(secret, e["message"])
        os.makedirs(os.path.join(self.ws, "sub"))
        os.symlink("/etc", os.path.join(self.ws, "sub", "build"))
        linked = os.path.join(self.ws, "sub", "build")
        p = self.warden("run", "--rw", "--", ARGS.fixture, "exit", "0",
                        cwd=linked,
                        env=self.env(MAELYS_CLI_FORMAT="json", PWD=linked))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("symbolic link", e["message"])
        # Given explicitly, the physical /etc is refused as a writable
        # system tree anyway.
        p = self.warden("run", "--rw", "--workspace", "/etc", "--",
                        ARGS.fixture, "exit", "0",
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("system tree", e["message"])
        # A stale $PWD naming another directory is ignored.
        self.warden("run", "--rw", "--allow-read", ARGS.fixture, "--",
                    ARGS.fixture, "exit", "0",
                    env=self.env(PWD=self.tmp), check=0)

    def test_warden_inside_a_writable_workspace(self):
        """--rw on a workspace that holds the maelys-warden program (a build
        tree inside the workspace) is refused."""
        build = os.path.dirname(os.path.dirname(ARGS.warden))
        p = self.warden("plan", "--rw", "--workspace", build,
                        env=self.env(MAELYS_CLI_FORMAT="json"))
        e = self.failure(p, "ACCESS_DENIED")
        self.assertIn("maelys-warden", e["message"])

    def test_socket_below_a_readable_directory(self):
        import socket
        d = os.path.join(self.tmp, "with-socket", "inner")
        os.makedirs(d)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(d, "agent.sock"))
        try:
            p = self.warden("plan", "--ro", "--allow-read",
                            os.path.dirname(d),
                            env=self.env(MAELYS_CLI_FORMAT="json"))
            e = self.failure(p, "ACCESS_DENIED")
            self.assertIn("agent.sock", e["message"])
        finally:
            s.close()

    # -------------------------------- invariant 21: no terminal enters

    def run_on_terminal(self, *args):
        """Runs maelys-warden with a fresh pseudo-terminal as its stdin,
        stdout and stderr; returns (status, what reached the terminal)."""
        import pty
        import select
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

    def test_closed_standard_descriptors(self):
        """Started with 0, 1 or 2 closed, maelys-warden runs normally, writes
        its receipt, and the payload's descriptors are /dev/null or the
        relay, never the host's epoll instance (the adversarial review
        crashed the loop through a stolen fd 2)."""
        receipts = os.path.join(self.tmp, "closed-fd-receipts")
        for closed, io in ((c, io) for c in (0, 1, 2)
                           for io in ("stdio", "auto")):
            with self.subTest(closed=closed, io=io):
                def count():
                    return len([f for f in os.listdir(receipts)
                                if f.endswith(".json")]) if os.path.isdir(
                                    receipts) else 0
                before = count()
                p = subprocess.run(
                    [ARGS.warden, "run", "--rw", "--io", io,
                     "--receipt-dir", receipts, "--", "/bin/sh", "-c",
                     "readlink /proc/self/fd/0 /proc/self/fd/2"],
                    stdin=subprocess.DEVNULL,
                    stdout=None if closed == 1 else subprocess.PIPE,
                    stderr=subprocess.PIPE, env=self.env(), cwd=self.ws,
                    preexec_fn=lambda c=closed: os.close(c), timeout=60)
                self.assertEqual(p.returncode, 0, p.stderr)
                if closed != 1:
                    self.assertNotIn(b"anon_inode", p.stdout)
                self.assertNotIn(b"anon_inode", p.stderr)
                self.assertEqual(count(), before + 1)

    def test_terminal_never_reaches_the_payload(self):
        """maelys-warden on a terminal: the payload holds none of it (not
        its stderr, not a descriptor to read typed input from), and what it
        writes reaches the terminal inert -- unless --raw-output."""
        code, seen = self.run_on_terminal(
            *self.run_args("--io", "stdio", "--", ARGS.fixture, "terminal"))
        self.assertEqual(code, 0, seen)
        self.assertIn(b"isatty=000 tcgetattr=0 winsize=0", seen)
        self.assertIn(b"osc52:\\x1b]52;c;SGVsbG8=\\x07", seen)
        self.assertNotIn(b"\x1b]52", seen)
        self.assertNotIn(b"\x1b[2J", seen)
        code, seen = self.run_on_terminal(
            *self.run_args("--io", "stdio", "--raw-output", "--",
                           ARGS.fixture, "terminal"))
        self.assertEqual(code, 0, seen)
        self.assertIn(b"\x1b[2J", seen)

    # --------------------------------- a receipt is never silently lost

    def test_unwritable_receipt_dir_refuses_the_run(self):
        marker = os.path.join(self.ws, "launched")
        blocker = os.path.join(self.tmp, "not-a-dir")
        with open(blocker, "w") as f:
            f.write("x")
        bad = [os.path.join(blocker, "receipts")]
        if os.geteuid() != 0:
            ro = os.path.join(self.tmp, "read-only")
            os.makedirs(ro, exist_ok=True)
            os.chmod(ro, 0o555)
            bad.append(ro)
        for d in bad:
            p = self.warden(*self.run_args("--receipt-dir", d, "--",
                                           ARGS.fixture, "escape", "write",
                                           marker),
                            env=self.env(MAELYS_CLI_FORMAT="json"))
            e = self.failure(p, "IO_FAILED")
            self.assertIn(d, e["message"])
            self.assertFalse(os.path.exists(marker))

    def test_receipt_lost_after_the_run_is_loud(self):
        receipts = os.path.join(self.tmp, "receipts-lost")
        proc = subprocess.Popen(
            [ARGS.warden] + self.run_args("--receipt-dir", receipts, "--",
                                          ARGS.fixture, "term-line", "1"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=self.env(MAELYS_CLI_FORMAT="json"),
            cwd=self.ws)
        self.assertEqual(proc.stdout.readline(), b"ready\n")
        os.rmdir(receipts)
        with open(receipts, "w") as f:
            f.write("in the way")
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read()
        self.assertEqual(proc.wait(timeout=30), 1)
        start = err.index(b"{")
        doc = self.envelope(err[start:err.index(b"\n}\n", start) + 3])
        self.assertEqual(doc["error"]["code"], "IO_FAILED")
        self.assertIn("receipt could not be written", doc["error"]["message"])
        for f in (proc.stdin, proc.stdout, proc.stderr):
            f.close()

    # ------------------------------------- invariant 19: forged outcomes

    def receipt_of(self, receipts):
        files = [f for f in os.listdir(receipts) if f.endswith(".json")]
        self.assertEqual(len(files), 1, files)
        with open(os.path.join(receipts, files[0])) as f:
            return json.load(f)

    def test_outcome_cannot_be_forged(self):
        """The payload tries the helper's descriptors (pidfd_getfd, /proc/1/fd)
        and writes forged status lines to everything it holds: a run ended by
        --wall-time still reports a forced kill, and one that exits 0 reports
        its exit, not a launch failure."""
        receipts = os.path.join(self.tmp, "receipts-forge")
        # Long enough for the payload to try every route before its wall
        # time ends it: 500 ms was not, once, under ASan on a loaded machine.
        p = self.warden(*self.run_args("--receipt-dir", receipts,
                                       "--wall-time", "3s", "--grace",
                                       "200ms", "--", ARGS.fixture, "forge",
                                       "60"), timeout=60)
        out = p.stdout.decode() + p.stderr.decode()
        for route in ("forge-pidfd-getfd", "forge-proc-fd"):
            self.assertIn(route + "=blocked", out)
        self.assertEqual(p.returncode, 128 + signal.SIGKILL, out)
        r = self.receipt_of(receipts)
        self.assertEqual(r["outcome"], {"kind": "signaled", "signal": 9})
        self.assertEqual(r["stop"]["ended_by"], "forced")
        self.assertEqual(r["stop"]["result"], "forced")
        # A payload that ran (and wrote) then forges a launch failure.
        receipts = os.path.join(self.tmp, "receipts-forge2")
        p = self.warden(*self.run_args("--receipt-dir", receipts, "--",
                                       ARGS.fixture, "forge", "0"), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.receipt_of(receipts)["outcome"],
                         {"kind": "exited", "exit_code": 0})

    # --------------------------------- invariant 22: nothing outlives it

    def pidns(self, pid):
        try:
            return os.stat("/proc/%d/ns/pid" % pid).st_ino
        except OSError:
            return None

    def alive(self, pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in "ZX"
        except OSError:
            return False

    def execution_spaces(self, marker):
        """The pid namespaces (inodes) below the host's own that the marked
        processes live in: the launcher's, and the sandbox's nested in it."""
        mine = self.pidns(os.getpid())
        spaces = set()
        for pid, _, _, _ in self.marked(marker):
            ns = self.pidns(pid)
            if ns is not None and ns != mine:
                spaces.add(ns)
        return spaces

    def survivors(self, marker, spaces):
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            pid = int(pid)
            if not self.alive(pid):
                continue
            if self.pidns(pid) in spaces:
                found.append(pid)
        found += [p[0] for p in self.marked(marker) if self.alive(p[0])]
        return sorted(set(found))

    def kill_cli(self, step, after_launch):
        """Starts a run, SIGKILLs the CLI `step` ms after it started (or after
        its launcher appeared) and returns what is left 1 s later."""
        marker = "cli-step-%d-%d-%d" % (os.getpid(), step, after_launch)
        proc = subprocess.Popen(
            [ARGS.warden] + self.run_args("--", ARGS.fixture, "sleep",
                                          "600000", marker),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=self.env(), cwd=self.ws)
        try:
            if after_launch:
                deadline = time.time() + 20
                while not self.marked(marker) and time.time() < deadline:
                    time.sleep(0.0005)
            time.sleep(step / 1000.0)
            spaces = self.execution_spaces(marker)
        finally:
            proc.kill()
            proc.wait(timeout=10)
            proc.stdin.close()
            proc.stdout.close()
        deadline = time.time() + 1.0
        left = self.survivors(marker, spaces)
        while left and time.time() < deadline:
            time.sleep(0.01)
            left = self.survivors(marker, spaces)
        return left

    def test_cli_killed_at_every_step(self):
        """maelys-warden is SIGKILLed 0..15 ms after its launcher appeared
        (the launcher's set-up, bwrap's, the sandbox's, the run) and 0..15 ms
        after it started (its registration probe): 1 s later no process of
        the execution is left, found by its pid namespaces as well as by its
        marker."""
        for after_launch in (True, False):
            for step in range(16):
                self.assertEqual(self.kill_cli(step, after_launch), [],
                                 "killed %d ms after %s" %
                                 (step, "the launcher appeared"
                                  if after_launch else "it started"))

if __name__ == "__main__":
    main()
