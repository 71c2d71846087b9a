#!/usr/bin/env python3
"""A real MCP server driven through mcp-runtime with the Executor adapter.

maelys-mcp-confined is the runtime's own host program linked with the
example hook; its manifest federates @modelcontextprotocol/server-filesystem
(an mcp-proxy upstream) under the registry's "mcp-filesystem" profile:
bubblewrap, the server's npm prefix read-only, one workspace writable, no
network. The server is given "/" as its allowed directory, so the server
itself allows everything and only the sandbox can refuse.

Checked: the tools are listed and called through the runtime; a file in the
workspace is read and one written (it lands on the host); a file outside the
workspace that exists on the host, readable by anyone, is refused with the
filesystem's not-found error because the sandbox does not contain it; the
server runs in its own pid namespace and never as host root; closing the
client ends it within the runtime's grace + force; nothing is left running.
"""
import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

GRACE_MS = 2000  # the proxy's shutdown budget, each rung (mcp_proxy.c)
FORCE_MS = 2000


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def reap():
    """As the subreaper, collect the sandbox launchers' exited children
    (a zombie is not running; it only waits for its parent to read it)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def children_of(pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == pid:
            found.append(int(entry))
    return found


def with_cmdline(needle):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmd:
            found.append(int(entry))
    return found


class Client:
    def __init__(self, argv, stderr):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=stderr)
        self.next_id = 1

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method,
                   "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                fail(f"the host closed its output during {method}")
            reply = json.loads(line)
            if reply.get("id") == rid:
                return reply

    def call(self, tool, arguments):
        reply = self.request("tools/call", {"name": tool,
                                            "arguments": arguments})
        if "result" not in reply:
            fail(f"{tool}: {reply}")
        result = reply["result"]
        text = "".join(c.get("text", "") for c in result.get("content", []))
        return bool(result.get("isError")), text


def main():
    ap = argparse.ArgumentParser()
    for name in ("host", "node", "server", "workspace", "outside"):
        ap.add_argument("--" + name, required=True)
    args = ap.parse_args()

    # Whatever the host leaves behind is re-parented here, not to init.
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        fail("cannot become a subreaper")

    for d in (args.workspace, args.outside):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        os.chmod(d, 0o755)
    with open(os.path.join(args.workspace, "hello.txt"), "w") as f:
        f.write("hello from the workspace\n")
    secret = os.path.join(args.outside, "secret.txt")
    with open(secret, "w") as f:
        f.write("not for the sandbox\n")
    os.chmod(secret, 0o644)

    scratch = tempfile.mkdtemp(prefix="mcpx-fs-")
    manifest = os.path.join(scratch, "manifest.json")
    with open(manifest, "w") as f:
        json.dump({"manifestVersion": 2,
                   "providers": [{"type": "mcp-proxy", "path": args.node,
                                  "argv": [args.node, args.server, "/"],
                                  "executionProfile": "mcp-filesystem",
                                  "toolPrefix": "fs.",
                                  "defaultEffect": "execute",
                                  # The runtime's validator refuses keywords
                                  # such as minItems in some of the server's
                                  # schemas; the server validates its own.
                                  "schemaPolicy": "passthrough",
                                  "connectTimeoutMs": 30000,
                                  "callTimeoutMs": 20000}],
                   "allowEffects": ["execute"]}, f)
    stderr = open(os.path.join(scratch, "stderr"), "w+")
    client = Client([args.host, "--manifest", manifest], stderr)
    try:
        init = client.request("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "mcpx-test", "version": "1"}})
        if "result" not in init:
            stderr.seek(0)
            fail(f"initialize: {init}\n{stderr.read()}")
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized",
                     "params": {}})
        tools = client.request("tools/list", {})["result"]["tools"]
        names = sorted(t["name"] for t in tools)
        print("tools:", ", ".join(names))
        for needed in ("fs.read_text_file", "fs.write_file",
                       "fs.list_directory"):
            if needed not in names:
                fail(f"{needed} is not listed")

        # The sandbox's helper (its pid 1) and bwrap carry the payload's
        # argv too; the server is the process whose image is node.
        servers = [p for p in with_cmdline(args.server)
                   if os.path.realpath(f"/proc/{p}/exe") ==
                   os.path.realpath(args.node)]
        if len(servers) != 1:
            fail(f"expected one server process, found {servers}")
        with open(f"/proc/{servers[0]}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        nspid = status["NSpid"].split()
        uid = int(status["Uid"].split()[0])
        print(f"server: host pid {servers[0]}, NSpid {nspid}, uid {uid}")
        if len(nspid) < 2:
            fail("the server is not in a pid namespace of its own")
        if os.getuid() == 0 and uid == 0:
            fail("the server runs as host root")

        error, text = client.call("fs.read_text_file", {
            "path": os.path.join(args.workspace, "hello.txt")})
        if error or "hello from the workspace" not in text:
            fail(f"read in the workspace: {text}")
        error, text = client.call("fs.write_file", {
            "path": os.path.join(args.workspace, "written.txt"),
            "content": "written by the sandboxed server\n"})
        if error:
            fail(f"write in the workspace: {text}")
        with open(os.path.join(args.workspace, "written.txt")) as f:
            if f.read() != "written by the sandboxed server\n":
                fail("the write did not land in the workspace")

        # The file exists on the host and anyone may read it; the server
        # allows "/"; only the sandbox can make it absent.
        error, text = client.call("fs.read_text_file", {"path": secret})
        print("outside the workspace:", text.strip())
        if not error:
            fail(f"read outside the workspace succeeded: {text}")
        if "Access denied" in text or "outside allowed" in text:
            fail("the server refused, not the sandbox: " + text)
        if "ENOENT" not in text and "no such file" not in text.lower() \
                and "does not exist" not in text:
            fail("not the filesystem's not-found error: " + text)
        error, text = client.call("fs.list_directory", {"path": args.outside})
        if not error:
            fail(f"listing outside the workspace succeeded: {text}")
    except BaseException:
        client.proc.kill()
        client.proc.wait()
        raise

    # The client goes away: the runtime runs its ladder (graceful, then
    # forced) on the upstream, through the adapter.
    started = time.monotonic()
    client.proc.stdin.close()
    try:
        code = client.proc.wait(timeout=(GRACE_MS + FORCE_MS) / 1000 + 5)
    except subprocess.TimeoutExpired:
        client.proc.kill()
        fail("the host did not exit after its client left")
    elapsed = (time.monotonic() - started) * 1000
    print(f"host exited {code} after {elapsed:.0f} ms")
    if elapsed > GRACE_MS + FORCE_MS + 1000:
        fail(f"shutdown took {elapsed:.0f} ms, over grace + force")
    deadline = time.monotonic() + 5
    reap()
    while time.monotonic() < deadline and (children_of(os.getpid()) or
                                           with_cmdline(args.server)):
        time.sleep(0.05)
        reap()
    left = children_of(os.getpid()) + with_cmdline(args.server)
    if left:
        described = []
        for pid in left:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    described.append(f"{pid}: " + f.read().replace(
                        b"\0", b" ").decode(errors="replace"))
            except OSError:
                described.append(f"{pid}: gone")
        fail("left running: " + "; ".join(described))
    stderr.close()
    shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
