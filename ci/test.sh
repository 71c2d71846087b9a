#!/usr/bin/env bash
# The whole test suite, as CI runs it (the README's test command):
#   1. a plain build: unit, integration and valgrind tests, as this user,
#      then ci/lint.sh on it (format, clang-tidy, exported symbols);
#   2. an ASan+UBSan build: the same suite;
#   3. a ThreadSanitizer build of the threaded tests (ctest -L threads);
#   4. the Node package's suite (bindings/node/ci.sh);
#   5. when run as root, the plain and Node suites again as an unprivileged
#      user (bwrap behaves differently there).
# MAELYS_BWRAP_MUST_WORK=1: a bubblewrap test that cannot run fails.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"

bash ci/deps.sh
export MAELYS_BWRAP_MUST_WORK=1
jobs="$(nproc)"
out="${MAELYS_CI_BUILD_ROOT:-$here/build-ci}"
cleanup=()
trap 'rm -rf "${cleanup[@]}"' EXIT
if [ -z "${MAELYS_CI_BUILD_ROOT:-}" ] && [ "$(id -u)" -eq 0 ]; then
  # As root the landlock backend runs its payload under an identity of its
  # own, which must be able to read the launcher and the test programs: the
  # build goes where every ancestor is searchable (a fresh clone may sit in
  # a private 0700 directory).
  out="$(mktemp -d /var/tmp/maelys-ci.XXXXXX)"
  chmod 755 "$out"
  cleanup+=("$out")
fi
mkdir -p "$out"

echo "== plain build"
bash ci/build.sh "$out/plain" -DCMAKE_BUILD_TYPE=RelWithDebInfo
(cd "$out/plain" && ctest --output-on-failure -j "$jobs")
bash ci/lint.sh "$out/plain"

echo "== Node package (bindings/node)"
bash bindings/node/ci.sh

echo "== ASan+UBSan build"
bash ci/build.sh "$out/asan" -DCMAKE_BUILD_TYPE=Debug -DMAELYS_EXECUTOR_SANITIZE=ON
(cd "$out/asan" && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$jobs")

echo "== ThreadSanitizer build (the threaded tests)"
bash ci/build.sh "$out/tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMAELYS_EXECUTOR_TSAN=ON --target test-threads test-core test-receipts
(cd "$out/tsan" && ctest --output-on-failure -L threads)

if [ "$(id -u)" -eq 0 ]; then
  echo "== plain build as an unprivileged user (uid 65534)"
  # A private copy the unprivileged user owns, with ../shared beside it as in
  # the repository's checkout, so every path the tests use is reachable.
  unpriv="$(mktemp -d /var/tmp/maelys-unpriv.XXXXXX)"
  cleanup+=("$unpriv")
  chmod 755 "$unpriv"
  mkdir -p "$unpriv/main"
  tar -C "$here" --exclude='./build*' -cf - . | tar -C "$unpriv/main" -xf -
  if [ -d "$here/../shared" ]; then
    cp -a "$here/../shared" "$unpriv/shared"
  fi
  chown -R 65534:65534 "$unpriv"
  setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$unpriv" \
    MAELYS_BWRAP_MUST_WORK=1 bash -c "
      set -euo pipefail
      cd '$unpriv/main'
      bash ci/build.sh '$unpriv/build' -DCMAKE_BUILD_TYPE=RelWithDebInfo
      (cd '$unpriv/build' && ctest --output-on-failure -j $jobs)
      bash bindings/node/ci.sh"
fi
echo "== all tests passed"
