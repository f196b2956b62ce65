#!/usr/bin/env bash
# devcheck's test command: the Rust workspace's tests, then the Python package (ruff, pytest),
# the wheel (scripts/wheel-check.sh) and the pre-commit hooks (scripts/pre-commit-check.sh).
#
# It needs Rust, Python 3.10 or newer with venv and pip, git, and PyPI. The Python tools go into
# a virtual environment outside the clone, made on the first run and reused after:
#   DEVCHECK_VENV   default $HOME/.cache/devcheck/venv (torch from PyPI is about 5 GB with its
#                   CUDA libraries; it imports and the tests run without a GPU)
#   PYTHON          the interpreter that makes the virtual environments, default python3
#   CARGO_TARGET_DIR  shared by the tests, the wheel and the hook's build when set
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
venv="${DEVCHECK_VENV:-$HOME/.cache/devcheck/venv}"
# The versions the Python tests and the ruff format check were written against.
requirements=(torch==2.15.0 pytest==9.2.0 ruff==0.17.6 numpy==2.4.6)
started=$SECONDS
step() { printf '\n== %s (%d s)\n' "$*" "$((SECONDS - started))"; }

# cargo-nextest runs every test binary at once (the suite takes a tenth of `cargo test`'s time on
# two cores); it does not run doc tests, so those run apart. Without nextest, `cargo test`.
if cargo nextest --version >/dev/null 2>&1; then
    step "cargo nextest run --workspace --all-features, then the doc tests"
    cargo nextest run --workspace --all-features --no-fail-fast
    cargo test --workspace --all-features --doc
else
    step "cargo test --workspace --all-features"
    cargo test --workspace --all-features
fi

step "Python environment: $venv"
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
# Installs only what is missing or at another version, so a ready environment is left untouched.
if ! "$venv/bin/python" - "${requirements[@]}" <<'EOF'; then
import sys
from importlib.metadata import PackageNotFoundError, version

missing = []
for requirement in sys.argv[1:]:
    name, wanted = requirement.split("==")
    try:
        found = version(name)
    except PackageNotFoundError:
        found = None
    if found is None or found.split("+")[0] != wanted:
        missing.append(f"{requirement} (found {found})")
if missing:
    print("to install:", ", ".join(missing))
    sys.exit(1)
EOF
    "$venv/bin/pip" install --disable-pip-version-check --progress-bar off "${requirements[@]}"
fi
"$venv/bin/python" -c 'import torch, pytest, numpy; print("torch", torch.__version__)'

step "ruff check and ruff format --check: python benches/python"
"$venv/bin/ruff" check python benches/python
"$venv/bin/ruff" format --check python benches/python

step "pytest python/tests"
# `devcheck check` is tried through the command the Rust tests built.
DEVCHECK_BIN="${CARGO_TARGET_DIR:-$root/target}/debug/devcheck" PYTHONPATH=python \
    "$venv/bin/python" -m pytest python/tests -q

step "scripts/wheel-check.sh"
bash scripts/wheel-check.sh

step "scripts/pre-commit-check.sh"
bash scripts/pre-commit-check.sh

step "all tests passed"
