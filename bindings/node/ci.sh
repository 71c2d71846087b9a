#!/usr/bin/env bash
# The Node package's part of CI, run by ci/test.sh (as root, and again as
# uid 65534 in its unprivileged copy of the tree): the dev dependencies from
# the lockfile (fetched from npm's registry only when node_modules does not
# already hold exactly them), the addon, the bubblewrap helper and
# maelys-warden built against the running Node's own headers with warnings
# as errors, then the suite under `node --test`.
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

export MAELYS_EXECUTOR_WERROR=1
if [ -d node_modules ] && npm ls --all >/dev/null 2>&1; then
  npm run --silent build
else
  npm ci --no-audit --no-fund # its install script builds
fi
npm test
