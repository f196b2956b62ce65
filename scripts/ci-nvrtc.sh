#!/usr/bin/env bash
# Compiles every CUDA kernel module through devcheck's own NVRTC path for sm_80 and sm_90 (NVRTC
# runs ptxas for real architectures, so this is a full compile), failing on any error. Needs no
# GPU: NVRTC and the CUDA headers come from NVIDIA's PyPI wheels, installed into a venv in the
# repository (.venv/nvrtc).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv/nvrtc  # under .venv/, which git ignores
if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79

nvidia="$("$venv/bin/python" -c 'import nvidia; print(list(nvidia.__path__)[0])')"
lib="$nvidia/cuda_nvrtc/lib"
include="$nvidia/cuda_runtime/include"
test -e "$lib/libnvrtc.so.12" || { echo "libnvrtc.so.12 missing in $lib" >&2; exit 1; }
test -e "$include/cuda_fp16.h" || { echo "cuda_fp16.h missing in $include" >&2; exit 1; }

export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEVCHECK_CUDA_INCLUDE="$include"
export DEVCHECK_REQUIRE_NVRTC=1

cargo run --quiet --bin devcheck -- env
cargo run --quiet --bin devcheck -- kernels check --arch sm_80 --arch sm_90 --include "$include"
# The same compile through the test suite, where a missing NVRTC fails instead of skipping.
cargo test --quiet --test cuda_kernels -- --nocapture
