#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs, for a GPU machine without a Rust toolchain: the backend's
# unit tests, the GPU suites (tests/all.rs), the benchmarks and the CLI, stripped and compressed
# (xz) into DIR (default .gpu/, which git ignores), with the directory they were built in (tests
# find their snapshots and fixtures there) and the commit. Copy the checkout with DIR to the GPU
# machine (same processor family, glibc at least this machine's) and run there:
#
#   scripts/gpu-check.sh --prebuilt DIR
#
# which finds NVRTC, cuBLAS and the CUDA headers the machine already has (a CUDA toolkit, or the
# NVIDIA wheels of its PyTorch) before installing any.
#
#   scripts/gpu-pack.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${1:-.gpu}"
if (($# > 1)); then
    echo "error: one argument at most, the folder to write (default .gpu)" >&2
    exit 2
fi
for tool in xz python3; do
    command -v "$tool" > /dev/null || { echo "error: \`$tool\` is needed to pack the executables" >&2; exit 1; }
done
mkdir -p "$dir"
json="$(mktemp)"
trap 'rm -f "$json"' EXIT

# Every executable cargo builds is named by its target: the library's unit tests are `unit`.
{
    cargo test --no-run --lib --test all --message-format=json-render-diagnostics
    cargo bench --no-run --bench bench --message-format=json-render-diagnostics
    cargo build -p devcheck-cli --bin devcheck --message-format=json-render-diagnostics
} > "$json"

python3 - "$json" "$dir" << 'EOF'
import json, os, shutil, subprocess, sys

messages, out = sys.argv[1], sys.argv[2]
wanted = {("lib", "devcheck"): "unit", ("test", "all"): "all", ("bench", "bench"): "bench",
          ("bin", "devcheck"): "devcheck"}
found = {}
with open(messages) as f:
    for line in f:
        try:
            m = json.loads(line)
        except json.JSONDecodeError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        kind = m["target"]["kind"][0]
        name = wanted.get((kind, m["target"]["name"]))
        if name:
            found[name] = m["executable"]
missing = sorted(set(wanted.values()) - set(found))
if missing:
    sys.exit(f"error: cargo built no executable for {', '.join(missing)}")
strip = shutil.which("strip")
for name, exe in sorted(found.items()):
    tmp = os.path.join(out, name)
    if strip:
        subprocess.run([strip, "-o", tmp, exe], check=True)
    else:
        shutil.copyfile(exe, tmp)
    subprocess.run(["xz", "-6", "-T0", "-f", tmp], check=True)
    print(f"{name}: {os.path.getsize(tmp + '.xz') / 2**20:.1f} MiB ({exe})")
EOF
pwd > "$dir/source-dir"
{
    git rev-parse HEAD 2> /dev/null || echo unknown
    git diff --quiet HEAD 2> /dev/null || echo "with uncommitted changes"
} | paste -sd ' ' > "$dir/commit"
echo "packed into $dir/ (built in $(cat "$dir/source-dir"), commit $(cat "$dir/commit"))"
