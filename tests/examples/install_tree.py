#!/usr/bin/env python3
"""What `cmake --build BUILD --target install` puts on a machine.

    install_tree.py --build DIR --prefix PREFIX

Installs into a temporary DESTDIR and checks the files a user relies on:
the program, its man page, its agent-cli/v2 manifest, the library, its
headers and pkg-config file, the helper, and the shell completion scripts
(bash, zsh and fish), which must be what `maelys-warden completion SHELL`
prints and must load in bash.
"""
import argparse
import os
import subprocess
import sys
import tempfile

EXPECTED = [
    "bin/maelys-warden",
    "share/man/man1/maelys-warden.1",
    "share/maelys/commands/warden.json",
    "include/maelys/executor.h",
    "include/maelys/backend.h",
    "lib/pkgconfig/maelys-executor.pc",
    "libexec/maelys-executor/maelys-executor-helper",
    "share/bash-completion/completions/maelys-warden",
    "share/zsh/site-functions/_maelys-warden",
    "share/fish/vendor_completions.d/maelys-warden.fish",
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--prefix", required=True)
    args = p.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as dest:
        run = subprocess.run(
            ["cmake", "--build", args.build, "--target", "install"],
            env=dict(os.environ, DESTDIR=dest), capture_output=True,
            text=True, timeout=600)
        if run.returncode != 0:
            sys.exit("install failed:\n" + run.stdout[-3000:] + run.stderr)
        root = dest + args.prefix
        for rel in EXPECTED:
            if not os.path.isfile(os.path.join(root, rel)):
                failures.append("not installed: " + rel)
        warden = os.path.join(args.build, "bin", "maelys-warden")
        for shell, rel in (("bash", EXPECTED[7]), ("zsh", EXPECTED[8]),
                           ("fish", EXPECTED[9])):
            path = os.path.join(root, rel)
            if not os.path.isfile(path):
                continue
            printed = subprocess.run([warden, "completion", shell],
                                     capture_output=True, check=True).stdout
            with open(path, "rb") as f:
                if f.read() != printed:
                    failures.append("%s differs from 'maelys-warden "
                                    "completion %s'" % (rel, shell))
        bash = os.path.join(root, EXPECTED[7])
        if os.path.isfile(bash):
            loaded = subprocess.run(
                ["bash", "-c", 'source "$1" && complete -p maelys-warden',
                 "bash", bash], capture_output=True, text=True)
            if loaded.returncode != 0 or "maelys-warden" not in loaded.stdout:
                failures.append("the bash completion does not load: " +
                                loaded.stderr)
    if failures:
        sys.exit("\n".join(failures))
    print("installed: %s" % ", ".join(EXPECTED))


if __name__ == "__main__":
    main()
