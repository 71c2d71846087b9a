#!/usr/bin/env python3
"""The README's library program is compiled and run exactly as written.

Usage: readme_snippet.py --readme README.md --cc CC --include DIR
                         --library LIBFILE --helper HELPER

It also shows what a first program would trip on: the same file compiled
with -std=c11 but without _GNU_SOURCE stops with the header's advice, not
with an error inside uv.h.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def snippet(readme):
    text = open(readme, encoding="utf-8").read()
    section = text.index("## Using the library\n")
    match = re.compile(r"```c\n(.*?)```", re.S).search(text, section)
    if match is None:
        sys.exit("no ```c block after '## Using the library' in " + readme)
    return match.group(1)


def compile_(args, source, out):
    uv = subprocess.run(["pkg-config", "--cflags", "--libs", "libuv"],
                        capture_output=True, text=True, check=True)
    libdir = os.path.dirname(args.library)
    return subprocess.run(
        [args.cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", args.include,
         source, "-o", out, args.library, "-Wl,-rpath," + libdir]
        + uv.stdout.split(), capture_output=True, text=True)


def main():
    p = argparse.ArgumentParser()
    for name in ("readme", "cc", "include", "library", "helper"):
        p.add_argument("--" + name, required=True)
    args = p.parse_args()
    code = snippet(args.readme)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "hello.c")
        open(source, "w").write(code)
        built = compile_(args, source, os.path.join(tmp, "hello"))
        if built.returncode != 0:
            sys.exit("the README program does not compile:\n" + built.stderr)
        env = dict(os.environ, MAELYS_HELPER=args.helper)
        run = subprocess.run([os.path.join(tmp, "hello")], env=env,
                             capture_output=True, text=True, timeout=60,
                             cwd=tmp)
        expected = "exit 0, wrote: hello from the sandbox\n"
        if run.returncode != 0 or run.stdout != expected:
            failures.append("the README program printed %r (status %d), "
                            "expected %r; stderr: %s" % (
                                run.stdout, run.returncode, expected,
                                run.stderr))
        strict = os.path.join(tmp, "strict.c")
        open(strict, "w").write(
            "\n".join(l for l in code.splitlines()
                      if not l.startswith("#define _GNU_SOURCE")) + "\n")
        built = compile_(args, strict, os.path.join(tmp, "strict"))
        if built.returncode == 0 or "needs POSIX" not in built.stderr:
            failures.append("-std=c11 without _GNU_SOURCE: expected the "
                            "header's advice, got status %d:\n%s" % (
                                built.returncode, built.stderr[:2000]))
        elif "uv.h" in built.stderr.split("needs POSIX")[0].splitlines()[-1]:
            failures.append("the first error points inside uv.h")
    if failures:
        sys.exit("\n".join(failures))
    print("README program: compiled with -std=c11, ran, printed %r" %
          expected)


if __name__ == "__main__":
    main()
