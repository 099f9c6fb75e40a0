#!/usr/bin/env bash
# Installs the Debian packages torchmcu needs, only those missing.
# Uses sudo when not root. Safe to run again: it does nothing when all are there.
set -euo pipefail

packages=(gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib
          qemu-system-arm flatbuffers-compiler g++ make clang libclang-rt-14-dev)
python3 -c 'import ensurepip, venv' 2>/dev/null || packages+=(python3-venv)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  echo "setup: missing ${missing[*]} and no apt-get here; install them with your package manager" >&2
  exit 1
fi
sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
