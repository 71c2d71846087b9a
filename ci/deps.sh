#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the demo need.
# Idempotent: only missing packages are installed (apt-get update first).
set -euo pipefail

packages=(
  build-essential cmake pkg-config libc6-dev
  libuv1-dev libseccomp-dev libcap-ng-dev libjansson-dev libsodium-dev
  libcmocka-dev bubblewrap valgrind util-linux procps
  python3 python3-jsonschema git make
  openssl nodejs
  clang clang-tidy clang-format libclang-rt-dev
  liburiparser-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "ci/deps.sh: all packages present"
  exit 0
fi

echo "ci/deps.sh: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
