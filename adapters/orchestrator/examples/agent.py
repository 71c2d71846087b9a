#!/usr/bin/env python3
"""An agent-like payload for the orchestrator example.

It speaks line-delimited JSON on its stdin and stdout (one duplex socket,
MAELYS_EXEC_IO_DUPLEX_STDIO) and asks its host for three tool calls: a write
inside its workspace, then two writes outside it. It never touches those
files itself: the host runs each tool call as its own sandboxed execution.
"""
import json
import os
import sys


def send(message):
    sys.stdout.write(json.dumps(message, sort_keys=True) + "\n")
    sys.stdout.flush()


def main():
    workspace = os.environ["WORKSPACE"]
    calls = [
        {"id": "c1", "tool": "write_file", "path": workspace + "/notes.txt",
         "content": "written inside the workspace\n"},
        {"id": "c2", "tool": "write_file",
         "path": os.environ["OUTSIDE_A"] + "/report.txt",
         "content": "written outside, after approval\n"},
        {"id": "c3", "tool": "write_file",
         "path": os.environ["OUTSIDE_B"] + "/secret.txt",
         "content": "never written: the host denies it\n"},
    ]
    outcomes = {}
    for call in calls:
        send(dict(call, type="tool_call"))
        line = sys.stdin.readline()
        if not line:
            return 3
        reply = json.loads(line)
        if reply.get("id") != call["id"]:
            return 4
        outcomes[call["id"]] = reply.get("outcome")
    send({"type": "done", "outcomes": outcomes})
    return 0


if __name__ == "__main__":
    sys.exit(main())
