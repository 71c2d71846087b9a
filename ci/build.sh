#!/usr/bin/env bash
# ci/build.sh BUILD_DIR [CMAKE OPTIONS...] [--target TARGET...]: configures
# and builds (everything, or only the targets named after --target).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"
shift
options=()
targets=()
while [ "$#" -gt 0 ]; do
  if [ "$1" = "--target" ]; then
    shift
    targets=("$@")
    break
  fi
  options+=("$1")
  shift
done
cmake -S "$here" -B "$build" -DMAELYS_EXECUTOR_WERROR=ON "${options[@]}" >/dev/null
if [ "${#targets[@]}" -gt 0 ]; then
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$build" -j "$(nproc)"
fi
