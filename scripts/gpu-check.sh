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
# Exits 1 when anything failed. Full logs: $GPU_CHECK_OUT, else $CARGO_TARGET_DIR (or target)/gpu-check/.
#
#   scripts/gpu-check.sh                   everything
#   scripts/gpu-check.sh --no-bench        the suites only
#   scripts/gpu-check.sh --prebuilt DIR    on a machine without Rust: runs the executables that
#                                          scripts/gpu-pack.sh packed into DIR, with the CUDA
#                                          libraries the machine has (installs only what it lacks)
set -uo pipefail
cd "$(dirname "$0")/.."

bench=1
prebuilt=""
while (($# > 0)); do
    case "$1" in
        --no-bench) bench=0 ;;
        --prebuilt)
            prebuilt="${2:-}"
            [[ -n "$prebuilt" ]] || { echo "error: --prebuilt needs the folder scripts/gpu-pack.sh wrote" >&2; exit 2; }
            shift
            ;;
        *) echo "error: unknown argument \`$1\`; the arguments are --no-bench and --prebuilt DIR" >&2; exit 2 ;;
    esac
    shift
done

out="${GPU_CHECK_OUT:-${CARGO_TARGET_DIR:-target}/gpu-check}"
mkdir -p "$out"
python="${PYTHON:-python3}"
failures=()

section() { printf '\n== %s\n' "$*"; }
source scripts/cuda-wheels.sh

if [[ -n "$prebuilt" ]]; then
    section "executables packed by scripts/gpu-pack.sh ($prebuilt)"
    for name in unit all bench devcheck; do
        [[ -e "$prebuilt/$name.xz" ]] || { echo "error: $prebuilt/$name.xz is missing: run scripts/gpu-pack.sh $prebuilt" >&2; exit 1; }
        if command -v xz > /dev/null; then
            xz -dc "$prebuilt/$name.xz" > "$out/$name"
        else
            "$python" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
                "$prebuilt/$name.xz" "$out/$name"
        fi || { echo "error: could not unpack $prebuilt/$name.xz" >&2; exit 1; }
        chmod +x "$out/$name"
    done
    echo "commit $(cat "$prebuilt/commit" 2> /dev/null || echo unknown)"
    # The tests read their snapshots and fixtures under the folder they were built in.
    built_in="$(cat "$prebuilt/source-dir" 2> /dev/null || true)"
    if [[ -n "$built_in" && ! -e "$built_in" ]]; then
        if mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"; then
            echo "linked $built_in -> $PWD (the folder the tests were built in)"
        else
            echo "warning: the tests were built in $built_in, which is missing here; snapshot tests will fail" >&2
        fi
    fi
    section "CUDA libraries this machine has"
    if ! cuda_local_libs "$out/lib"; then
        echo "installing them from PyPI instead"
        cuda_wheels_nvrtc || { echo "error: could not find or install NVRTC and the CUDA headers" >&2; exit 1; }
        cuda_wheels_cublas || failures+=("cuBLAS: could not be found or installed; matmul on the GPU will fail")
    fi
else
    section "CUDA libraries from PyPI"
    cuda_wheels_nvrtc || { echo "error: could not install NVRTC and the CUDA headers" >&2; exit 1; }
    cuda_wheels_cublas || failures+=("cuBLAS: could not be found or installed; matmul on the GPU will fail")
fi
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "DEVCHECK_CUDA_INCLUDE=$DEVCHECK_CUDA_INCLUDE"
# Here a missing NVRTC fails the kernel suite instead of skipping it.
export DEVCHECK_REQUIRE_NVRTC=1

# The executables: cargo's, or the packed ones. With GPU_CHECK_TIMEOUT=SECONDS, each suite and the
# benchmarks are stopped after that long (a hang on the GPU then fails one suite, not the check).
limit=()
if [[ -n "${GPU_CHECK_TIMEOUT:-}" ]]; then
    limit=(timeout --kill-after=10 "$GPU_CHECK_TIMEOUT")
fi
devcheck() {
    if [[ -n "$prebuilt" ]]; then "$out/devcheck" "$@"; else cargo run --quiet -p devcheck-cli --bin devcheck -- "$@"; fi
}
unit_tests() {
    if [[ -n "$prebuilt" ]]; then "${limit[@]}" "$out/unit" "$@"; else "${limit[@]}" cargo test --lib "$@"; fi
}
suite_tests() {
    if [[ -n "$prebuilt" ]]; then "${limit[@]}" "$out/all" "$@"; else "${limit[@]}" cargo test --test all -- "$@"; fi
}
benchmarks() {
    if [[ -n "$prebuilt" ]]; then "${limit[@]}" "$out/bench" "$@"; else "${limit[@]}" cargo bench --quiet --bench bench -- "$@"; fi
}

section "devcheck env"
devcheck env || failures+=("devcheck env")

suites=(cuda_kernels cuda_allocator cuda_host_allocator cuda_device cuda_tensor)
if [[ -z "$prebuilt" ]]; then
    section "building the GPU suites"
    # The suites are modules of the one integration-test binary (tests/all.rs).
    if ! cargo test --quiet --no-run --lib --test all; then
        echo "error: the GPU suites do not build" >&2
        exit 1
    fi
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
    elif ((status == 124 || status == 137)) && ((${#limit[@]} > 0)); then
        failures+=("$suite: still running after GPU_CHECK_TIMEOUT=${GPU_CHECK_TIMEOUT}s, stopped (a hang? see $log)")
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
unit_tests backend::cuda > "$out/lib.log" 2>&1
summarize "unit tests (backend::cuda)" "$out/lib.log" $?
for suite in "${suites[@]}"; do
    echo "-- $suite"
    suite_tests "$suite::" > "$out/$suite.log" 2>&1
    summarize "$suite" "$out/$suite.log" $?
done

if ((bench)); then
    section "GPU benchmarks"
    if "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        if benchmarks --json gpu_ > "$out/bench.json" &&
            "$python" scripts/bench_peers.py measure-gpu "$out/torch.json"; then
            "$python" scripts/bench_peers.py table "$out/bench.json" --peers "$out/torch.json" ||
                failures+=("benchmark table")
        else
            failures+=("GPU benchmarks (see above)")
        fi
    else
        echo "(no PyTorch with CUDA for $python: devcheck's numbers alone, no comparison with cuBLAS through PyTorch)"
        benchmarks gpu_ | tee "$out/bench.txt"
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
