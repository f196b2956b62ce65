#!/usr/bin/env bash
# Measures devcheck and its peers (numpy, PyTorch CPU) on the same workloads in one run and prints
# one table with the ratios. Opt-in, never part of the tests: installing torch downloads ~5 GB.
#   scripts/bench-peers.sh              devcheck vs numpy and torch
#   scripts/bench-peers.sh --no-torch   devcheck vs numpy only (a minute to set up)
#   scripts/bench-peers.sh --rounds N   N rounds (default 2) of devcheck then the peers; every
#                                       cell of the table is its best round
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=2
torch=(--with-torch)
while (($#)); do
    case "$1" in
        --no-torch) torch=(--no-torch) ;;
        --rounds) rounds="${2:?--rounds takes a number}"; shift ;;
        *) echo "error: unknown argument \`$1\`; arguments are --no-torch and --rounds N" >&2; exit 2 ;;
    esac
    shift
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "error: --rounds takes a positive number" >&2; exit 2; }

# The machine first: the tables are kept per machine kind (docs/performance.md), so every run says
# which CPU, which vector extensions and how many cores it ran on.
machine() {
    local model flags isa=()
    model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
    flags=" $(grep -m 1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    for f in avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_bf16; do
        [[ "$flags" == *" $f "* ]] && isa+=("$f")
    done
    printf 'machine: %s; %s CPUs; %s\n' "${model:-unknown CPU}" "$(nproc)" "${isa[*]:-no AVX2}"
    printf 'commit: %s; date: %s\n' "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$(date -u +%F)"
}
machine

venv=.venv/peers
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
packages=(numpy threadpoolctl)
[[ "${torch[0]}" == --no-torch ]] || packages+=(torch)
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${packages[@]}"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cargo bench --quiet --bench bench --no-run
ours=() peers=()
for ((i = 1; i <= rounds; i++)); do
    cargo bench --quiet --bench bench -- --json > "$dir/ours_$i.json"
    # This machine presets OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for safety; they halve a current
    # numpy's speed, so they are unset for the peers' command only.
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
        "$venv/bin/python" scripts/bench_peers.py measure "$dir/peers_$i.json" "${torch[@]}"
    ours+=("$dir/ours_$i.json")
    peers+=("$dir/peers_$i.json")
done
"$venv/bin/python" scripts/bench_peers.py table "${ours[@]}" --peers "${peers[@]}"
