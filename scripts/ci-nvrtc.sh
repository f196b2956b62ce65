#!/usr/bin/env bash
# Compiles every CUDA kernel module through devcheck's own NVRTC path for sm_80 and sm_90 (NVRTC
# runs ptxas for real architectures, so this is a full compile), failing on any error, and checks
# every kernel's parameters against what its launcher passes. Needs no GPU: NVRTC and the CUDA
# headers come from NVIDIA's PyPI wheels (scripts/cuda-wheels.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cuda-wheels.sh
cuda_wheels_nvrtc
export DEVCHECK_REQUIRE_NVRTC=1

cargo run --quiet -p devcheck-cli --bin devcheck -- env
cargo run --quiet -p devcheck-cli --bin devcheck -- kernels check --arch sm_80 --arch sm_90 --include "$DEVCHECK_CUDA_INCLUDE"
# The same compile through the test suite, where a missing NVRTC fails instead of skipping.
cargo test --quiet --test all -- cuda_kernels:: --nocapture
