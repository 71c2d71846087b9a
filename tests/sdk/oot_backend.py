#!/usr/bin/env python3
"""An out-of-tree backend, built against the installed headers alone.

    oot_backend.py --build DIR --prefix PREFIX --cc CC

Installs the build into a temporary DESTDIR (the README's install step),
copies tests/sdk/oot-backend out of the source tree, configures it with
find_package(MaelysExecutor) pointed at that install and nothing else,
checks that no compile command reaches into the source or build tree, and
runs the host: the backend must prove a capability with a real probe run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_TREE = os.path.dirname(os.path.dirname(HERE))


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if r.returncode != 0:
        sys.exit("%s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode,
                                            r.stdout[-4000:], r.stderr[-4000:]))
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--cc", required=True)
    args = p.parse_args()
    build = os.path.realpath(args.build)
    with tempfile.TemporaryDirectory(prefix="maelys-oot-") as tmp:
        dest = os.path.join(tmp, "dest")
        run(["cmake", "--build", build, "--target", "install"],
            env=dict(os.environ, DESTDIR=dest))
        prefix = dest + args.prefix
        src = os.path.join(tmp, "src")
        shutil.copytree(os.path.join(HERE, "oot-backend"), src)
        obj = os.path.join(tmp, "build")
        run(["cmake", "-S", src, "-B", obj, "-DCMAKE_C_COMPILER=" + args.cc,
             "-DCMAKE_PREFIX_PATH=" + prefix,
             "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF",
             "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
        with open(os.path.join(obj, "compile_commands.json")) as f:
            for entry in json.load(f):
                for tree in (SOURCE_TREE, build):
                    if tree in entry["command"]:
                        sys.exit("the out-of-tree backend's compile command "
                                 "reaches %s: %s" % (tree, entry["command"]))
                if "-I" + prefix not in entry["command"] and \
                        "-isystem " + prefix not in entry["command"]:
                    sys.exit("the compile command does not use the installed "
                             "headers: " + entry["command"])
        run(["cmake", "--build", obj])
        host = subprocess.run([os.path.join(obj, "oot-host")],
                              capture_output=True, text=True, timeout=120)
        sys.stdout.write(host.stdout)
        sys.stderr.write(host.stderr)
        if host.returncode != 0:
            sys.exit("oot-host failed with status %d" % host.returncode)


if __name__ == "__main__":
    main()
