#!/usr/bin/env bash
# Installs every Debian package Kiln's build, tests and benchmarks need (`kiln peers` times
# oneDNN and OpenBLAS; the CLI tests read JSON with python3 and .npy files with python3-numpy;
# the Python module builds with pybind11 and DLPack's header for Debian's python3, and its tests
# run pytest on NumPy arrays and PyTorch tensors;
# `make fuzz-parser` builds with clang-22 and its libFuzzer and sanitizer runtimes). Idempotent:
# when everything is present it does nothing (and needs no network).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  llvm-22-dev libzstd-dev zlib1g-dev libxml2-dev libedit-dev libffi-dev libcurl4-openssl-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libtbb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format clang-tidy
  libdnnl-dev libopenblas-dev python3 python3-numpy
  libxml2-utils
  python3-dev pybind11-dev python3-pybind11 libdlpack-dev python3-torch python3-pytest
  clang-22 libclang-rt-22-dev libfuzzer-22-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
