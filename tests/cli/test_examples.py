#!/usr/bin/env python3
"""Every example is run (issue 17, item 9): the `maelys-warden` lines of the
README's sh blocks, its MCP client configurations (json blocks), the man
page's examples and each command's --help examples (from `describe`) are
extracted from the files themselves, so that changing an example changes the
test, and each must succeed.

An example names files a user has (a Makefile, server.py, an agent, a spec,
receipts): the test provides small stand-ins for them in a workspace. The
only text it replaces is this table of documented placeholders; an example
that still holds '...' after it is a failure, never a skip.

    test_examples.py --warden BIN --fixture BIN --schemas DIR --man FILE
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from wardentest import ARGS, WardenCase, main

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "README.md")
# The profiles the install ships (claude-code, codex, node-mcp, python-mcp).
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "bindings", "cli", "profiles")
# Agents the examples name and the test does not install: a stand-in of the
# same name in the workspace runs in their place (ci/agent-profiles runs the
# real ones).
AGENTS = ("claude", "codex")

MCP_REQUEST = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2024-11-05",
                                      "capabilities": {},
                                      "clientInfo": {"name": "test",
                                                     "version": "1"}}})
               + "\n").encode()

SERVER = r'''import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" in msg:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "result": {"serverInfo": {"name": "stand-in"}}}),
              flush=True)
'''


def sh_examples(text):
    """The maelys-warden lines of the ```sh blocks, comments dropped."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip())
            if line.startswith("maelys-warden "):
                found.append(line)
    return found


def mcp_configs(text):
    """The command lines of every MCP server the json blocks configure."""
    found = []
    for block in re.findall(r"```json\n(.*?)```", text, re.S):
        doc = json.loads(block)
        for server in doc.get("mcpServers", {}).values():
            found.append([server["command"]] + server["args"])
    return found


def unroff(text):
    return text.replace("\\-", "-").replace("\\e", "\\")


class Examples(WardenCase):
    def setUp(self):
        super().setUp()
        self.home = tempfile.mkdtemp(dir=self.tmp, prefix="home-")
        os.chmod(self.home, 0o755)
        self.server_dir = tempfile.mkdtemp(dir=self.tmp, prefix="mcp-")
        os.chmod(self.server_dir, 0o755)
        files = {
            "Makefile": "test:\n\t@echo tests passed\n",
            "server.py": SERVER,
            "agent": "#!/bin/sh\necho agent ran\n",
        }
        for name, text in files.items():
            with open(os.path.join(self.ws, name), "w") as f:
                f.write(text)
        os.chmod(os.path.join(self.ws, "agent"), 0o755)
        for name in AGENTS:
            path = os.path.join(self.ws, name)
            with open(path, "w") as f:
                f.write("#!/bin/sh\necho %s ran\n" % name)
            os.chmod(path, 0o755)
        # `--allow-write ../build`, `../shared-cache`: directories beside the
        # workspace.
        for name in ("build", "shared-cache"):
            os.makedirs(os.path.join(self.tmp, name), exist_ok=True)
        with open(os.path.join(self.server_dir, "files_server.py"), "w") as f:
            f.write(SERVER)
        # `agent ~/codex.json`: a spec kept where no sandbox writes.
        with open(os.path.join(self.home, "codex.json"), "w") as f:
            json.dump({"format": "maelys-agent-spec/1",
                       "executable": "/bin/echo",
                       "argv": ["echo", "agent ran"],
                       "workspace": {"path": self.ws, "access": "read"},
                       "network": "none"}, f)
        # `run --plan ~/agent-plan.json`: a plan file kept where no sandbox
        # writes (a workspace that was writable is refused as its place).
        with open(os.path.join(self.home, "agent-plan.json"), "wb") as f:
            f.write(self.shell("maelys-warden plan --ro --format jsonl "
                               "--field plan").stdout)
        self.key = json.loads(self.shell("maelys-warden probe --json")
                              .stdout)["data"]["receipt_signing_key"]

    def example_env(self):
        return {"PATH": "%s:/usr/bin:/bin" % os.path.dirname(ARGS.warden),
                "HOME": self.home, "LANG": "C.UTF-8",
                "MAELYS_WARDEN_SYSTEM_PROFILES": SHIPPED}

    def shell(self, line, cwd=None, stdin=b""):
        p = subprocess.run(["/bin/sh", "-c", line], input=stdin,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           cwd=cwd or self.ws, env=self.example_env(),
                           timeout=120)
        self.assertEqual(p.returncode, 0, "%s\nstderr: %s" % (
            line, p.stderr.decode(errors="replace")))
        return p

    def placeholders(self, text):
        table = {"ed25519:3b6a...": self.key, "ed25519:...": self.key,
                 "/path/to/project": self.ws, "/srv/project": self.ws,
                 "/opt/mcp": self.server_dir}
        for k, v in table.items():
            text = text.replace(k, v)
        for name in AGENTS:
            text = re.sub(r"(-- )%s\b" % name, r"\1./%s" % name, text)
        self.assertNotIn("...", text, "an example with an unknown "
                         "placeholder: %s" % text)
        return text

    def refresh_receipts(self):
        """`verify ... receipts/`: a copy of this user's receipts."""
        copy = os.path.join(self.ws, "receipts")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(os.path.join(self.home, ".local", "state", "maelys",
                                     "receipts"), copy)

    def running_execution(self):
        """`stop 3f2a`: an execution of this user's that runs (a payload that
        waits), listed by `ps`; its id replaces the example's."""
        proc = subprocess.Popen(
            [ARGS.warden, "run", "--ro", "--allow-read", ARGS.fixture, "--",
             ARGS.fixture, "sleep", "60000", "example-stop"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.ws,
            env=self.example_env())
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ps = json.loads(self.shell("maelys-warden ps --format json")
                            .stdout)["data"]["executions"]
            for e in ps:
                if e["pid"] == proc.pid:
                    return proc, e["id"]
            time.sleep(0.05)
        self.fail("ps never listed the run")

    def run_example(self, line):
        stopped = None
        if re.fullmatch(r"maelys-warden stop 3f2a", line):
            stopped, ident = self.running_execution()
            line = line.replace("3f2a", ident[:4])
        line = self.placeholders(line)
        if " verify " in line:
            self.refresh_receipts()
        mcp = "--io stdio" in line
        p = self.shell(line, stdin=MCP_REQUEST if mcp else b"")
        if mcp:
            self.assertIn(b'"result"', p.stdout, line)
        if stopped is not None:
            self.assertEqual(stopped.wait(timeout=30), 128 + 15)
        return p

    def run_mcp(self, argv, cwd):
        argv = [self.placeholders(a) for a in argv]
        self.assertEqual(argv[0], "maelys-warden")
        p = subprocess.run([ARGS.warden] + argv[1:], input=MCP_REQUEST,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           cwd=cwd, env=self.example_env(), timeout=120)
        self.assertEqual(p.returncode, 0, "%s from %s: %s" % (
            argv, cwd, p.stderr.decode(errors="replace")))
        reply = json.loads(p.stdout.decode().splitlines()[0])
        self.assertEqual(reply["id"], 1)
        self.assertIn("result", reply)

    # ------------------------------------------------------------ README

    def test_readme_examples(self):
        with open(README) as f:
            text = f.read()
        lines = sh_examples(text)
        self.assertGreaterEqual(len(lines), 8)
        for line in lines:
            with self.subTest(line):
                self.run_example(line)

    def test_readme_mcp_configuration_works_from_any_directory(self):
        with open(README) as f:
            configs = mcp_configs(f.read())
        self.assertGreaterEqual(len(configs), 1)
        for argv in configs:
            for cwd in ("/", self.home):
                with self.subTest(cwd=cwd, argv=argv):
                    self.run_mcp(argv, cwd)

    # ---------------------------------------------------------- man page

    def test_man_page_examples(self):
        with open(ARGS.man) as f:
            man = f.read()
        section = man.split(".SH EXAMPLES", 1)[1].split(".SH ", 1)[0]
        blocks = [unroff(b) for b in re.findall(r"\.nf\n(.*?)\.fi", section,
                                                re.S)]
        configs = [b for b in blocks if b.lstrip().startswith("{")]
        lines = [b.strip() for b in blocks if b.startswith("maelys-warden ")]
        self.assertGreaterEqual(len(configs), 1)
        self.assertGreaterEqual(len(lines), 5)
        for block in configs:
            doc = json.loads(block)
            for server in doc["mcpServers"].values():
                for cwd in ("/", self.home):
                    with self.subTest(cwd=cwd):
                        self.run_mcp([server["command"]] + server["args"],
                                     cwd)
        for line in lines:
            with self.subTest(line):
                self.run_example(line)

    # ------------------------------------------------------------ --help

    def test_help_examples(self):
        doc = json.loads(self.shell("maelys-warden describe --format json")
                         .stdout)["data"]
        count = 0
        for command in doc["commands"]:
            help_text = self.shell("maelys-warden help %s" % command["id"]
                                   ).stdout.decode()
            for example in command.get("examples", []):
                line = " ".join(["maelys-warden"] + example["words"])
                # What describe lists is what --help shows.
                self.assertIn(line, help_text)
                with self.subTest(line):
                    self.run_example(line)
                count += 1
        self.assertGreaterEqual(count, 8)


if __name__ == "__main__":
    main()
