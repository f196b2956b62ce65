#!/usr/bin/env bash
# The pre-commit hooks (.pre-commit-hooks.yaml) as a project uses them, in throwaway git
# repositories made from fixtures/precommit/: the model whose causal mask is made on the CPU in
# `forward` (buggy/) must fail the hooks with the finding printed, and its clean twin must pass.
# `pre-commit run --all-files` with a .pre-commit-config.yaml naming this checkout and both hooks,
# `devcheck` and `devcheck-fix`, on clean/ and then on buggy/. (`pre-commit try-repo` runs the same
# hook from a store of its own: it would build the command a second time, about five minutes.)
# pre-commit comes from PyPI into a throwaway virtual environment. One line per check; exits 1 on
# the first failure, with what pre-commit printed.
#
# What is tried is the checkout's working tree as it is (tracked and untracked files that git
# does not ignore), committed to a snapshot repository: pre-commit itself would take HEAD and the
# changes to tracked files only. pre-commit builds each hook environment with pip, which builds
# the command with maturin and cargo, into $CARGO_TARGET_DIR when it is set (else the checkout's
# target/); its compiled dependencies are reused, the workspace's own crates are compiled again
# for the environment (a fresh clone), once for every run below.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
python="${PYTHON:-python3}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d "${TMPDIR:-/tmp}/devcheck-pre-commit.XXXXXX")"
trap 'rm -rf "$work"' EXIT
started=$SECONDS
# pre-commit's own store (cloned hook repositories and their environments), fresh for this run.
export PRE_COMMIT_HOME="$work/pre-commit-home"
# Commits in the throwaway repositories need a name, whatever the machine's git configuration.
export GIT_AUTHOR_NAME=devcheck GIT_AUTHOR_EMAIL=devcheck@localhost
export GIT_COMMITTER_NAME=devcheck GIT_COMMITTER_EMAIL=devcheck@localhost

ok() { printf 'ok    %s\n' "$*"; }
fail() {
    printf 'FAIL  %s\n' "$1" >&2
    if [[ -n "${2:-}" ]]; then sed 's/^/      | /' "$2" | tail -n 60 >&2; fi
    exit 1
}
elapsed() { printf '%d s' "$((SECONDS - $1))"; }

"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check pre-commit >"$work/pip.log" 2>&1 ||
    fail "install pre-commit from PyPI" "$work/pip.log"
pre_commit="$work/venv/bin/pre-commit"
ok "pre-commit $("$pre_commit" --version | cut -d' ' -f2) in a throwaway virtual environment"

# The checkout's working tree, committed to a snapshot repository.
snapshot="$work/devcheck"
mkdir "$snapshot"
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' file; do
        if [[ -e "$file" || -L "$file" ]]; then printf '%s\0' "$file"; fi
    done |
    tar --null -T - -cf - | tar -xf - -C "$snapshot"
git -C "$snapshot" init --quiet
git -C "$snapshot" add --all
git -C "$snapshot" commit --quiet --no-verify -m "devcheck working tree"
rev="$(git -C "$snapshot" rev-parse HEAD)"
ok "snapshot of the working tree: $(git -C "$snapshot" ls-files | wc -l) files"

# A git repository holding the fixture's configuration and one variant of the model.
fixture_repo() {
    local repo="$work/$1"
    mkdir "$repo"
    cp fixtures/precommit/devcheck.toml "$repo/"
    cp "fixtures/precommit/$1/attention.py" "$repo/"
    cat >"$repo/.pre-commit-config.yaml" <<EOF
repos:
  - repo: $snapshot
    rev: $rev
    hooks:
      - id: devcheck
      - id: devcheck-fix
EOF
    git -C "$repo" init --quiet
    git -C "$repo" add --all
    git -C "$repo" commit --quiet --no-verify -m fixture
    printf '%s' "$repo"
}
buggy="$(fixture_repo buggy)"
clean="$(fixture_repo clean)"

# -- a project's configuration ------ ----------------------------------------------------------------
log="$work/clean.log"
step=$SECONDS
(cd "$clean" && "$pre_commit" run --all-files --color never) >"$log" 2>&1 ||
    fail "pre-commit run passes on clean/attention.py" "$log"
grep -q "^devcheck\.*Passed" "$log" && grep -q "^devcheck (fix)\.*Passed" "$log" ||
    fail "hooks devcheck and devcheck-fix are reported as Passed" "$log"
ok "pre-commit run: devcheck and devcheck-fix pass on clean/attention.py ($(elapsed $step) with the hook's build)"

log="$work/buggy.log"
status=0
(cd "$buggy" && "$pre_commit" run --all-files --color never) >"$log" 2>&1 || status=$?
[[ $status -eq 1 ]] || fail "pre-commit run fails on the CPU mask (pre-commit exit $status, want 1)" "$log"
grep -q "^devcheck\.*Failed" "$log" && grep -q "^devcheck (fix)\.*Failed" "$log" ||
    fail "hooks devcheck and devcheck-fix are reported as Failed" "$log"
grep -q "attention.py:19" "$log" || fail "pre-commit run prints the finding at attention.py:19" "$log"
# `--fix` applies safe fixes only: devcheck-fix either rewrites the file into its clean twin, or,
# while the fix is an unsafe one, leaves the file as it was and prints the finding.
if cmp -s fixtures/precommit/clean/attention.py "$buggy/attention.py"; then
    what="rewrote it into clean/attention.py"
elif cmp -s fixtures/precommit/buggy/attention.py "$buggy/attention.py"; then
    what="left it as it was (D001's fix is unsafe)"
else
    diff -u fixtures/precommit/buggy/attention.py "$buggy/attention.py" >>"$log" || true
    fail "devcheck-fix either fixes buggy/attention.py into clean/attention.py or leaves it whole" "$log"
fi
ok "pre-commit run: devcheck and devcheck-fix fail on buggy/attention.py; devcheck-fix $what"

echo "pre-commit check passed in $(elapsed $started)"
