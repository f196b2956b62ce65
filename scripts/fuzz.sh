#!/usr/bin/env bash
# Runs the property tests that feed hostile input to the runtime, the checkpoint reader and the
# linter with many more cases than CI does: random and mutated checkpoint files, random shapes
# (huge ones included) and dims for creation, shape and reduction ops (tests/fuzz_*.rs); random
# and deeply nested source text for the linter, `inspect` and `--fix` (lint/tests/lint_hostile.rs).
#
#   scripts/fuzz.sh              # 20,000 cases per property
#   CASES=200000 scripts/fuzz.sh # longer
#
# A failure prints the smallest failing case proptest could shrink it to.
set -euo pipefail
cd "$(dirname "$0")/.."

export PROPTEST_CASES="${CASES:-20000}"
echo "== ${PROPTEST_CASES} cases per property"
# Optimised, with overflow checks kept on so that an unchecked size computation still fails loudly.
cargo test --release --config 'profile.release.overflow-checks=true' \
    --test all -- fuzz_checkpoint:: fuzz_tensor::
# The linter: every file gets an outcome, nothing panics or overflows the stack.
cargo test --release --config 'profile.release.overflow-checks=true' \
    -p devcheck-lint --test all -- lint_hostile
cargo test --release --config 'profile.release.overflow-checks=true' -p devcheck-lint --lib fix::
# Files: replacement under concurrent edits, special files, limits.
cargo test --release -p devcheck-files
cargo test --release -p devcheck-cli --test all -- cli_hostile
