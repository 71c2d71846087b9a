#!/usr/bin/env bash
# The main job: builds everything, then runs a command in a bubblewrap
# sandbox (workspace writable, minimal runtime read-only, no network) that
# writes in its workspace, is denied a read outside it and a network
# connection, and shows the receipt.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
bash ci/deps.sh
build="${MAELYS_DEMO_BUILD:-$here/build-demo}"
bash ci/build.sh "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

workspace="$(mktemp -d /tmp/maelys-demo.XXXXXX)"
receipts="$(mktemp -d /tmp/maelys-receipts.XXXXXX)"
chmod 755 "$workspace"
trap 'rm -rf "$workspace" "$receipts"' EXIT
cd "$workspace"
echo "workspace: $workspace"
status=0
"$build/bin/example-host" "$build/bin/maelys-executor-helper" "$receipts" -- \
  /bin/bash -c '
    echo "hello from the sandbox" > note.txt && echo "ALLOWED  write in the workspace: $(cat note.txt)"
    if cat /root/.bashrc /home/*/.bashrc >/dev/null 2>&1; then echo "OPEN     read outside the workspace"; else echo "DENIED   read outside the workspace (/root, /home are not in the sandbox)"; fi
    if (exec 3<>/dev/tcp/127.0.0.1/22) 2>/dev/null; then echo "OPEN     network"; else echo "DENIED   network connection to 127.0.0.1:22"; fi
  ' || status=$?
echo "on the host: $(cat "$workspace/note.txt")"
exit "$status"
