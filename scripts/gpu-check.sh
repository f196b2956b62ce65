#!/usr/bin/env bash
# The first thing to run on a machine with an NVIDIA GPU. Nothing in devcheck's CUDA backend has
# run on a GPU where it was written; this runs all of it, in one command:
#   1. installs NVRTC, the CUDA headers and, when the machine has none, cuBLAS from NVIDIA's PyPI
#      wheels into .venv/nvrtc (scripts/cuda-wheels.sh) and points devcheck at them;
#   2. prints `devcheck env` (driver, devices, NVRTC, headers);
#   3. runs every GPU suite and prints one line per test; a test that says it skipped for want of
#      a CUDA device is a failure here (the machine has one), one that needs a second GPU is not;
#   4. runs the GPU benchmarks (`gpu_*` in benches/bench.rs): element-wise and reduction rates
#      as a share of the device's peak memory bandwidth, and, when a PyTorch with CUDA is
#      importable by `python3` (or $PYTHON), every workload against PyTorch (cuBLAS for matmul).
# Exits 1 when anything failed. Full logs: $CARGO_TARGET_DIR (or target)/gpu-check/.
#
#   scripts/gpu-check.sh              everything
#   scripts/gpu-check.sh --no-bench   the suites only
set -uo pipefail
cd "$(dirname "$0")/.."

bench=1
for arg in "$@"; do
    case "$arg" in
        --no-bench) bench=0 ;;
        *) echo "error: unknown argument \`$arg\`; the one argument is --no-bench" >&2; exit 2 ;;
    esac
done

out="${CARGO_TARGET_DIR:-target}/gpu-check"
mkdir -p "$out"
python="${PYTHON:-python3}"
failures=()

section() { printf '\n== %s\n' "$*"; }

section "CUDA libraries from PyPI"
source scripts/cuda-wheels.sh
cuda_wheels_nvrtc || { echo "error: could not install NVRTC and the CUDA headers" >&2; exit 1; }
cuda_wheels_cublas || failures+=("cuBLAS: could not be found or installed; matmul on the GPU will fail")
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "DEVCHECK_CUDA_INCLUDE=$DEVCHECK_CUDA_INCLUDE"
# Here a missing NVRTC fails the kernel suite instead of skipping it.
export DEVCHECK_REQUIRE_NVRTC=1

section "devcheck env"
cargo run --quiet -p devcheck-cli --bin devcheck -- env || failures+=("devcheck env")

section "building the GPU suites"
suites=(cuda_kernels cuda_allocator cuda_host_allocator cuda_device cuda_tensor)
# The suites are modules of the one integration-test binary (tests/all.rs).
if ! cargo test --quiet --no-run --lib --test all; then
    echo "error: the GPU suites do not build" >&2
    exit 1
fi

# Prints one line per test of a libtest log and records what failed. $1 = suite, $2 = log,
# $3 = the exit status of the run.
summarize() {
    local suite="$1" log="$2" status="$3" passed failed no_device
    passed=$(grep -c -E '^test .* \.\.\. ok$' "$log")
    failed=$(grep -c -E '^test .* \.\.\. FAILED$' "$log")
    no_device=$(grep -c 'skipped: no CUDA device' "$log")
    grep -E '^test .* \.\.\. (ok|FAILED|ignored)$' "$log" |
        sed -E 's/^test (.*) \.\.\. (ok|FAILED|ignored)$/  \2\t\1/' | sort -k2
    grep -E '^skipped: ' "$log" | sort -u | sed 's/^/  note\t/'
    echo "  $suite: $passed passed, $failed failed (log: $log)"
    if ((failed > 0)); then
        failures+=("$suite: $failed test(s) failed")
    elif ((status != 0)); then
        failures+=("$suite: exited with status $status (a crash? see $log)")
    fi
    if ((no_device > 0)); then
        failures+=("$suite: $no_device test(s) ran without seeing a CUDA device (\`devcheck env\` above says what the driver reported)")
    fi
}

section "GPU suites"
# The backend's own unit tests (launch plans, matrix views, context binding, host allocator).
echo "-- unit tests (backend::cuda)"
cargo test --lib backend::cuda > "$out/lib.log" 2>&1
summarize "unit tests (backend::cuda)" "$out/lib.log" $?
for suite in "${suites[@]}"; do
    echo "-- $suite"
    cargo test --test all -- "$suite::" > "$out/$suite.log" 2>&1
    summarize "$suite" "$out/$suite.log" $?
done

if ((bench)); then
    section "GPU benchmarks"
    if "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        if cargo bench --quiet --bench bench -- --json gpu_ > "$out/bench.json" &&
            "$python" scripts/bench_peers.py measure-gpu "$out/torch.json"; then
            "$python" scripts/bench_peers.py table "$out/bench.json" --peers "$out/torch.json" ||
                failures+=("benchmark table")
        else
            failures+=("GPU benchmarks (see above)")
        fi
    else
        echo "(no PyTorch with CUDA for $python: devcheck's numbers alone, no comparison with cuBLAS through PyTorch)"
        cargo bench --quiet --bench bench -- gpu_ | tee "$out/bench.txt"
        if ((PIPESTATUS[0] != 0)); then
            failures+=("GPU benchmarks")
        elif grep -q 'skipped: no CUDA device' "$out/bench.txt"; then
            failures+=("GPU benchmarks: no CUDA device")
        fi
    fi
fi

section "summary"
if ((${#failures[@]} == 0)); then
    echo "everything passed"
    exit 0
fi
for f in "${failures[@]}"; do
    echo "FAILED: $f"
done
exit 1
