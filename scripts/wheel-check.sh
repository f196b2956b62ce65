#!/usr/bin/env bash
# The wheel as a user gets it: builds it with maturin (from PyPI, in a throwaway virtual
# environment), installs it into a fresh virtual environment without an index, and runs the
# installed command there with a PATH that has no cargo or rustc. One line per check; exits 1 on
# the first failure, with what the command printed.
#
#   scripts/wheel-check.sh              PYTHON=python3.12 scripts/wheel-check.sh
#
# The build goes to $CARGO_TARGET_DIR when it is set (CI sets it once, so the wheel reuses the
# test build's compiled dependencies), else to the checkout's target/.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d "${TMPDIR:-/tmp}/devcheck-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
started=$SECONDS

ok() { printf 'ok    %s\n' "$*"; }
fail() {
    printf 'FAIL  %s\n' "$1" >&2
    if [[ -n "${2:-}" ]]; then sed 's/^/      | /' "$2" | tail -n 40 >&2; fi
    exit 1
}

# -- build ---------------------------------------------------------------------------------------
"$python" -m venv "$work/build"
"$work/build/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.9,<2" \
    >"$work/pip.log" 2>&1 || fail "install maturin from PyPI" "$work/pip.log"
# DEVCHECK_WHEEL_PROFILE (default release): CI builds with `dev`, which reuses the test build's
# compiled dependencies; what is checked is the packaging, not the speed.
profile="${DEVCHECK_WHEEL_PROFILE:-release}"
"$work/build/bin/maturin" build --profile "$profile" --out "$work/dist" >"$work/build.log" 2>&1 ||
    fail "maturin build --profile $profile (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" "$work/build.log"
wheels=("$work"/dist/devcheck-*.whl)
[[ ${#wheels[@]} -eq 1 && -f "${wheels[0]}" ]] || fail "maturin build made one wheel: ${wheels[*]}" "$work/build.log"
wheel="${wheels[0]}"
ok "maturin build: $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

# -- install into a fresh environment, from the file alone -----------------------------------------
"$python" -m venv "$work/env"
"$work/env/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel" \
    >"$work/install.log" 2>&1 || fail "pip install --no-index the wheel" "$work/install.log"
ok "pip install --no-index into a fresh virtual environment"

# A PATH without the Rust toolchain: every folder that holds cargo or rustc is left out.
clean_path="$work/env/bin"
IFS=: read -ra folders <<<"$PATH"
for folder in "${folders[@]}"; do
    [[ -z "$folder" || -e "$folder/cargo" || -e "$folder/rustc" ]] && continue
    clean_path+=":$folder"
done
run() { env -u CARGO_TARGET_DIR -u RUSTUP_TOOLCHAIN PATH="$clean_path" "$@"; }
if run bash -c 'command -v cargo || command -v rustc' >"$work/which.log" 2>&1; then
    fail "PATH without cargo and rustc: still found $(cat "$work/which.log")"
fi
[[ "$(run bash -c 'command -v devcheck')" == "$work/env/bin/devcheck" ]] ||
    fail "the installed devcheck is the first on PATH"
ok "PATH has no cargo or rustc; devcheck is the installed one"

# -- the installed command ---------------------------------------------------------------------------
out="$work/out.log"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"

run devcheck --version >"$out" 2>&1 || fail "devcheck --version" "$out"
[[ "$(cat "$out")" == "devcheck $version" ]] || fail "devcheck --version prints 'devcheck $version'" "$out"
ok "devcheck --version: $(cat "$out")"

status=0
run devcheck lint --preview --format concise fixtures/lint/ >"$out" 2>&1 || status=$?
[[ $status -eq 1 ]] || fail "devcheck lint --preview fixtures/lint/ exits 1 (exit $status)" "$out"
finding='fixtures/lint/d001/devcheck.rs:16:25: D001 '
grep -q "^$finding" "$out" || fail "devcheck lint --preview fixtures/lint/ reports '$finding...'" "$out"
ok "devcheck lint --preview fixtures/lint/: exit 1, $(tail -n 1 "$out")"

run devcheck explain D001 >"$out" 2>&1 || fail "devcheck explain D001" "$out"
grep -q "tensor-on-fixed-device" "$out" || fail "devcheck explain D001 names the rule" "$out"
ok "devcheck explain D001: $(wc -l <"$out") lines"

run python -m devcheck --version >"$out" 2>&1 || fail "python -m devcheck --version" "$out"
[[ "$(cat "$out")" == "devcheck $version" ]] || fail "python -m devcheck --version prints 'devcheck $version'" "$out"
ok "python -m devcheck --version: $(cat "$out")"

# The Python package rides in the same wheel; without torch, devcheck.torch says how to get it.
run python -c 'import sys, devcheck; assert "torch" not in sys.modules; print(devcheck.find_devcheck_bin())' \
    >"$out" 2>&1 || fail "import devcheck (without importing torch)" "$out"
ok "import devcheck: the binary is $(cat "$out")"
if run python -c 'import devcheck.torch' >"$out" 2>&1 || ! grep -q "pip install torch" "$out"; then
    fail "import devcheck.torch without torch installed says 'pip install torch'" "$out"
fi
ok "import devcheck.torch without torch: ImportError saying pip install torch"

echo "wheel check passed in $((SECONDS - started)) s"
