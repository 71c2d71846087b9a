#!/usr/bin/env python3
"""What `cmake --build BUILD --target install` puts on a machine.

    install_tree.py --build DIR --prefix PREFIX

Installs into a temporary DESTDIR and checks the files a user relies on:
the program, its man page, its agent-cli/v2 manifest, the library, its
headers and pkg-config file, the helper, and the shell completion scripts
(bash, zsh and fish), which must be what `maelys-warden completion SHELL`
prints and must load in bash; the JSON Schemas of plan and profile files;
and the shipped profiles in SYSCONFDIR/maelys/profiles, writable by nobody
but their owner, which `plan --profile NAME` accepts from there.
"""
import argparse
import json
import os
import stat
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
    "share/maelys/schemas/maelys-executor-plan-1.schema.json",
    "share/maelys/schemas/maelys-warden-profile-1.schema.json",
]
PROFILES = ("claude-code", "codex", "node-mcp", "python-mcp")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--sysconfdir", required=True,
                   help="CMAKE_INSTALL_FULL_SYSCONFDIR")
    args = p.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as dest, \
            tempfile.TemporaryDirectory() as ws:
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
        profiles = os.path.join(dest + args.sysconfdir, "maelys", "profiles")
        for name in PROFILES:
            path = os.path.join(profiles, name + ".json")
            if not os.path.isfile(path):
                failures.append("not installed: " + path[len(dest):])
                continue
            if os.stat(path).st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                failures.append("%s is writable by others" % path[len(dest):])
            # (The workspace elsewhere: a profile inside it is refused.)
            planned = subprocess.run(
                [warden, "plan", "--profile", name, "--format", "json"],
                cwd=ws, capture_output=True, text=True, timeout=120,
                env=dict(os.environ, MAELYS_WARDEN_SYSTEM_PROFILES=profiles,
                         XDG_CONFIG_HOME=os.path.join(dest, "no-config")))
            if planned.returncode != 0:
                failures.append("plan --profile %s from the installed "
                                "directory: %s" % (name, planned.stderr))
            else:
                json.loads(planned.stdout)
    if failures:
        sys.exit("\n".join(failures))
    print("installed: %s" % ", ".join(EXPECTED))


if __name__ == "__main__":
    main()
