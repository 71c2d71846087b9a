#!/usr/bin/env bash
# The main job: builds everything, then runs a command through
# `maelys-warden run --rw` (the built-in read-write profile: the workspace
# writable, the minimal runtime read-only, a private /tmp, no network). The
# command writes in its workspace, is denied a read outside it and a network
# connection; then the receipt is shown.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
bash ci/deps.sh
build="${MAELYS_DEMO_BUILD:-$here/build-demo}"
bash ci/build.sh "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
warden="$build/bin/maelys-warden"

workspace="$(mktemp -d /tmp/maelys-demo.XXXXXX)"
receipts="$(mktemp -d /tmp/maelys-receipts.XXXXXX)"
chmod 755 "$workspace"
trap 'rm -rf "$workspace" "$receipts"' EXIT
cd "$workspace"

echo "== what the backends proved"
"$warden" probe | sed -n '1,/^posix/p' | sed '$d'
echo "== maelys-warden run --rw in $workspace"
status=0
"$warden" run --rw --trace --receipt-dir "$receipts" -- /bin/bash -c '
  echo "hello from the sandbox" > note.txt &&
    echo "ALLOWED  write in the workspace: note.txt says: $(cat note.txt)"
  if cat /root/.bashrc /home/*/.bashrc /etc/shadow >/dev/null 2>&1; then
    echo "OPEN     read outside the workspace"
  else
    echo "DENIED   read outside the workspace (/root, /home, /etc/shadow are not in the sandbox)"
  fi
  if (exec 3<>/dev/tcp/127.0.0.1/22) 2>/dev/null; then
    echo "OPEN     network"
  else
    echo "DENIED   network connection to 127.0.0.1:22 (no network)"
  fi
  echo "identity inside: $(id)"
' || status=$?
echo "== on the host, the workspace holds: $(cat "$workspace/note.txt")"
echo "== the receipt"
cat "$receipts"/*.json
exit "$status"
