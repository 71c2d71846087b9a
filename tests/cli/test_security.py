#!/usr/bin/env python3
"""The confused-deputy attacks (DESIGN invariants 17-22) through the built
maelys-warden: each test reproduces an attack a hostile payload (or a file it
planted in an earlier run) could mount, and checks it is refused or inert.

    test_security.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import os
import stat
import subprocess
import tarfile

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
        self.assertIn(b"done", p.stderr)
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
        out = p.stderr.decode()
        for route in ("chmod-suid", "chmod-sgid", "fchmod", "fchmodat",
                      "fchmodat2", "open", "openat", "creat", "tmpfile",
                      "mknod", "mknodat", "openat2", "dir-sgid", "fcap"):
            self.assertIn("setid-%s=blocked:" % route, out)
        self.assertIn("plain-modes=ok", out)
        self.assertEqual(setid_files(self.ws), [])


if __name__ == "__main__":
    main()
