#!/usr/bin/env bash
# The ecosystem check: lint a pinned list of public repositories and compare the findings with the
# labelled ones in fixtures/ecosystem/findings.tsv (metadata only: none of their code is stored).
#
#   scripts/ecosystem.sh [--bin PATH] [--dir DIR] [--mirrors DIR] [--update] [--only REPO] [--lang rust|python]
#                        [--add-ignore-check]
#
# --dir      where the repositories are checked out (default: $ECOSYSTEM_DIR or ../ecosystem, outside
#            this repository). A missing one is exported from a bare mirror under --mirrors
#            (default: $ECOSYSTEM_MIRRORS or /work/.mirror, laid out as owner+name/repo), else cloned
#            from GitHub at its pinned commit when the network allows.
# --bin      the devcheck binary (default: builds `devcheck-cli` in release mode).
# --update   rewrite findings.tsv to the current findings: new ones get the label `?` (to be
#            labelled by reading the code), a TRUE one no longer found becomes MISS, a FALSE one no
#            longer found is dropped, a MISS now found becomes TRUE.
# --only     lint only this repository (repeatable).
# --lang     only repositories of this language.
# --add-ignore-check  instead of the table: `--add-ignore` on a copy of each tree, then check that
#            a plain run reports nothing and that only suppression comments were added.
# Prints per-rule findings, precision and recall, and the difference against the stored labels.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ -z "$bin" ]; then
  (cd "$root" && cargo build --quiet --release -p devcheck-cli)
  bin="${CARGO_TARGET_DIR:-$root/target}/release/devcheck"
fi
exec python3 "$root/scripts/ecosystem.py" --bin "$bin" "${args[@]}"
