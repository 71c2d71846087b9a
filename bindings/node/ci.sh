#!/usr/bin/env bash
# The Node package's part of CI, run by ci/test.sh (as root, and again as
# uid 65534 in its unprivileged copy of the tree): the dev dependencies from
# the lockfile, fetched from npm's registry, then `npm ci` again with no
# network, whose install script builds the addon, the bubblewrap helper and
# maelys-warden against the running Node's own headers with warnings as
# errors, then the suite under `node --test`.
set -euo pipefail
cd "$(dirname "$0")"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "bindings/node/ci.sh: $tool is not installed (Node.js 18.17 or later with npm and its headers)" >&2
    exit 1
  fi
done
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 18 || (a === 18 && b >= 17) ? 0 : 1)'; then
  echo "bindings/node/ci.sh: Node.js $(node -v) is older than 18.17" >&2
  exit 1
fi
echo "bindings/node/ci.sh: Node.js $(node -v), libuv $(node -p process.versions.uv), uid $(id -u)"

# Runs "$@" in a network namespace of its own: no network at all (as an
# unprivileged user, in a user namespace of its own too).
offline() {
  if [ "$(id -u)" -eq 0 ]; then
    unshare --net -- "$@"
  else
    unshare --map-root-user --net -- "$@"
  fi
}
if ! offline true; then
  echo "bindings/node/ci.sh: unshare --net failed: the offline build cannot be checked" >&2
  exit 1
fi

export MAELYS_EXECUTOR_WERROR=1
# The dev dependencies come from npm's registry, into npm's cache (this
# user's: the unprivileged run has a home of its own); nothing runs yet.
npm ci --no-audit --no-fund --ignore-scripts
# Then the documented install, `npm ci`, with no network at all: the
# packages from npm's cache and the install script's build (the addon, the
# helper, maelys-warden) from this Node's own headers. A build that needed
# a header tarball, or anything else from outside, fails here.
offline npm ci --offline --no-audit --no-fund
npm test
