#!/usr/bin/env bash
# ci/build.sh BUILD_DIR [CMAKE OPTIONS...]: configures and builds.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"
shift
cmake -S "$here" -B "$build" -DMAELYS_EXECUTOR_WERROR=ON "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
