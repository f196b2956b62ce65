#!/usr/bin/env bash
# Measures devcheck and its peers (numpy, PyTorch CPU) on the same workloads in one run and prints
# one table with the ratios. Opt-in, never part of the tests: installing torch downloads ~5 GB.
#   scripts/bench-peers.sh            devcheck vs numpy and torch
#   scripts/bench-peers.sh --no-torch devcheck vs numpy only (a minute to set up)
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv/peers
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
packages=(numpy threadpoolctl)
[[ " $* " == *" --no-torch "* ]] || packages+=(torch)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}"

out=$(mktemp)
cargo bench --quiet --bench bench -- --json > "$out"
# This machine presets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for safety; they halve a current
# numpy's speed, so they are unset for the peers' command only.
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" scripts/bench_peers.py "$out" "$@"
rm -f "$out"
