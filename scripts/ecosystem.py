#!/usr/bin/env python3
"""The ecosystem check (run through scripts/ecosystem.sh): lint pinned public repositories and
compare what devcheck reports with the findings labelled by reading the code.

fixtures/ecosystem/repos.tsv     repo, commit, lang, api, what (one line each)
fixtures/ecosystem/findings.tsv  repo, commit, path, line, code, label, reason, group
    label TRUE   reported, and a real hazard
          FALSE  reported, and not a hazard (a false alarm)
          MISS   a real hazard devcheck does not report (found by grep and reading; measures recall)
          ?      reported, not labelled yet (written by --update)
    group stable   reported by a plain `devcheck lint`
          preview  reported only with `--preview` (a preview rule, or a preview pattern of a
                   stable rule)
          -        a MISS row (rows written before the column existed read as stable)

The table has a row per rule for what a plain run reports (its precision is what a user who leaves
the rule on in CI sees; its recall counts a hazard found only with --preview as missed) and, where
--preview adds findings, a `preview` row for those alone (their precision) with the recall of a
run with --preview.

Only metadata is stored: paths, lines, codes and one-line reasons, never code.
"""

import argparse
import collections
import csv
import json
import os
import subprocess
import sys
import tarfile
import io
import difflib
import re
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPOS = ROOT / "fixtures/ecosystem/repos.tsv"
FINDINGS = ROOT / "fixtures/ecosystem/findings.tsv"
FINDING_COLUMNS = ["repo", "commit", "path", "line", "code", "label", "reason", "group"]
REPO_COLUMNS = ["repo", "commit", "lang", "api", "what"]
LABELS = {"TRUE", "FALSE", "ARGUABLE", "MISS", "?"}
SPLIT = ROOT / "fixtures/ecosystem/split.tsv"
GROUPS = {"stable", "preview", "-"}
# Not hazard rules: files that could not be read or parsed, and rule failures.
NOT_RULES = {"D000", "D999"}


def read_tsv(path, columns):
    if not path.exists():
        return []
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for number, row in enumerate(csv.reader(f, delimiter="\t"), 1):
            if not row or row[0].startswith("#"):
                continue
            if row == columns or row == columns[: len(row)]:
                continue  # the header (of this or of the earlier, shorter layout)
            if columns == FINDING_COLUMNS and len(row) == len(columns) - 1:
                # Written before the group column: a plain run reported it.
                row = row + ["-" if row[5] == "MISS" else "stable"]
            if len(row) != len(columns):
                sys.exit(f"{path}:{number}: expected {len(columns)} columns ({', '.join(columns)}), got {len(row)}")
            rows.append(dict(zip(columns, row)))
    return rows


def write_findings(rows):
    rows = sorted(rows, key=lambda r: (r["repo"], r["path"], int(r["line"]), r["code"], r["label"]))
    with open(FINDINGS, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(FINDING_COLUMNS)
        for r in rows:
            w.writerow([r[c] for c in FINDING_COLUMNS])


def validate(repos, findings):
    """Every row names a pinned repository at its pinned commit, a known label and a reason."""
    pinned = {r["repo"]: r["commit"] for r in repos}
    problems = []
    seen = set()
    for r in findings:
        where = f"{r['repo']} {r['path']}:{r['line']} {r['code']}"
        if r["repo"] not in pinned:
            problems.append(f"{where}: repository not in repos.tsv")
        elif r["commit"] != pinned[r["repo"]]:
            problems.append(f"{where}: commit {r['commit']} is not the pinned {pinned[r['repo']]}")
        if r["label"] not in LABELS:
            problems.append(f"{where}: label {r['label']!r} is not one of {sorted(LABELS)}")
        if r["group"] not in GROUPS or (r["group"] == "-") != (r["label"] == "MISS"):
            problems.append(f"{where}: group {r['group']!r} does not fit the label {r['label']}")
        if r["label"] != "?" and not r["reason"].strip():
            problems.append(f"{where}: no reason given")
        if not r["line"].isdigit():
            problems.append(f"{where}: line is not a number")
        key = (r["repo"], r["path"], r["line"], r["code"])
        if key in seen:
            problems.append(f"{where}: labelled twice")
        seen.add(key)
    return problems


def inside_only(member, dest):
    """tarfile's `data` filter, skipping (not failing on) a member it refuses: a repository may
    hold a link to a path outside itself (a checkpoint folder on its author's disk)."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def ensure_tree(repo, commit, base, mirrors):
    """The repository's files at `commit` under `base`, exported from a mirror or cloned."""
    tree = base / repo.replace("/", "+")
    marker = tree / ".ecosystem-commit"
    if marker.exists() and marker.read_text().strip() == commit:
        return tree
    mirror = mirrors / repo.replace("/", "+") / "repo"
    if mirror.exists():
        archive = subprocess.run(
            ["git", "--git-dir", str(mirror), "archive", "--format=tar", commit],
            capture_output=True,
        )
        if tree.exists():
            subprocess.run(["rm", "-rf", str(tree)], check=True)
        tree.mkdir(parents=True)
        if archive.returncode == 0:
            with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as t:
                t.extractall(tree, filter=inside_only)
        else:
            # A snapshot may lack some large blobs (media, weights): export the files it has.
            skipped = export_available(mirror, commit, tree)
            print(f"{repo}: {skipped} file(s) missing from the mirror were skipped", file=sys.stderr)
        marker.write_text(commit + "\n")
        return tree
    clone = subprocess.run(
        ["git", "clone", "--quiet", "--filter=blob:none", f"https://github.com/{repo}", str(tree)],
        capture_output=True,
    )
    if clone.returncode == 0:
        if subprocess.run(["git", "-C", str(tree), "checkout", "--quiet", commit]).returncode == 0:
            marker.write_text(commit + "\n")
            return tree
    return None


def export_available(mirror, commit, tree):
    """Writes every regular file of `commit` whose blob the mirror has; returns how many it lacks."""
    listing = subprocess.run(
        ["git", "--git-dir", str(mirror), "ls-tree", "-r", "-z", commit], capture_output=True, check=True
    ).stdout
    entries = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode != b"120000":
            entries.append((sha, os.fsdecode(path)))
    batch = subprocess.run(
        ["git", "--git-dir", str(mirror), "cat-file", "--batch"],
        input=b"".join(sha + b"\n" for sha, _ in entries),
        capture_output=True,
    ).stdout
    skipped = 0
    at = 0
    for _, path in entries:
        end = batch.index(b"\n", at)
        header = batch[at:end].split()
        at = end + 1
        if len(header) != 3:  # `<sha> missing`
            skipped += 1
            continue
        size = int(header[2])
        data = batch[at:at + size]
        at += size + 1
        target = tree / path
        if ".." in Path(path).parts or Path(path).is_absolute():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return skipped


def lint(binary, tree, preview):
    cmd = [binary, "--color", "never", "lint", "--isolated", "--format", "json"]
    if preview:
        cmd.append("--preview")
    cmd.append(".")
    run = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    if run.returncode not in (0, 1):
        print(f"  devcheck exited with {run.returncode}: {run.stderr.strip()[:500]}", file=sys.stderr)
    try:
        found = json.loads(run.stdout or "[]")
    except json.JSONDecodeError:
        print(f"  devcheck printed no JSON: {run.stdout[:200]!r} {run.stderr[:300]!r}", file=sys.stderr)
        return []
    # A finding repeated in one function is reported once, with its other places in `also`;
    # labels are per place, so each place counts.
    places = []
    for f in found:
        places.append(f)
        for other in f.get("also", []):
            places.append({**f, "line": other["line"], "column": other["column"], "also": []})
    return places


SUPPRESSION = re.compile(r"^(?P<code>.*?)(?P<comment>\s*(#|//) devcheck: ignore\[[A-Z0-9, ]+\])$")


def only_comments_added(before, after):
    """Does `after` differ from `before` only by suppression comments: appended to a line, a
    code list extended, or on a line of its own? Returns the first offending line, or None."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        added = new[j1:j2]
        removed = old[i1:i2]
        if op == "insert" and all(re.fullmatch(r"\s*(#|//) devcheck: ignore\[[A-Z0-9, ]+\]\r?\n", l) for l in added):
            continue
        if op == "replace" and len(removed) == len(added):
            ok = True
            for o, n in zip(removed, added):
                ending = "\r\n" if n.endswith("\r\n") else "\n" if n.endswith("\n") else ""
                n_body, o_body = n[: len(n) - len(ending)], o.rstrip("\r\n")
                m = SUPPRESSION.match(n_body)
                if m and (m.group("code") == o_body or SUPPRESSION.match(o_body)):
                    continue
                ok = False
                break
            if ok:
                continue
        return (removed[:1] or [""])[0] + " -> " + (added[:1] or [""])[0]
    return None


def add_ignore_check(binary, tree):
    """`--add-ignore` on a copy of the tree; the problems found (empty when it holds)."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "tree"
        shutil.copytree(tree, copy, symlinks=True)
        before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.suffix in (".py", ".rs")}
        run = subprocess.run([binary, "--color", "never", "lint", "--isolated", "--add-ignore", "."], cwd=copy, capture_output=True, text=True)
        if run.returncode not in (0, 1):
            problems.append(f"--add-ignore exited with {run.returncode}: {run.stderr.strip()[-300:]}")
        left = [f for f in json.loads(subprocess.run([binary, "--color", "never", "lint", "--isolated", "--format", "json", "."], cwd=copy, capture_output=True, text=True).stdout or "[]") if f["code"] not in NOT_RULES]
        for f in left[:5]:
            problems.append(f"still reported: {f['path']}:{f['line']} {f['code']}")
        for path, old in before.items():
            new = path.read_bytes()
            if new != old:
                bad = only_comments_added(old.decode("utf-8", "replace"), new.decode("utf-8", "replace"))
                if bad:
                    problems.append(f"{path.relative_to(copy)}: more than comments changed: {bad.strip()[:200]}")
    return problems


def read_split():
    """repo -> `tuning` or `heldout` (fixtures/ecosystem/split.tsv); a repository not listed is
    tuning."""
    out = {}
    if SPLIT.exists():
        for line in SPLIT.read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#") and not line.startswith("repo\t"):
                repo, split = line.split("\t")[:2]
                out[repo] = split
    return out


def run_of(rows):
    """How a rule runs in one language: `default` when a plain run reports it there (stable),
    else `--preview`. Its precision and recall are those of that run."""
    return "default" if any(r["group"] == "stable" and r["label"] != "MISS" for r in rows) else "--preview"


def measure(rows, run):
    """(true, arguable, false, unlabelled, found, known) of the rows for the run: findings of a
    plain run for `default`, of a --preview run for `--preview`; every TRUE and MISS is a known
    hazard, found only when the run reports it."""
    counted = [r for r in rows if r["label"] != "MISS" and (run == "--preview" or r["group"] == "stable")]
    c = collections.Counter(r["label"] for r in counted)
    known = sum(1 for r in rows if r["label"] in ("TRUE", "MISS"))
    return c["TRUE"], c["ARGUABLE"], c["FALSE"], c["?"], c["TRUE"], known


def fmt_precision(true, arguable, false):
    n = true + arguable + false
    return f"{true / n:.2f} ({n})" if n else "-"


def fmt_recall(found, known):
    return f"{found / known:.2f} ({found}/{known})" if known else "-"


def table(rows, split):
    """The table README shows: per rule and language, how the rule runs, its strict precision
    on the tuning and the held-out repositories (ARGUABLE counts as false), and its recall of the
    known hazards of the held-out ones."""
    lines = [
        "| rule | language | run | precision, tuning | precision, held-out | recall, held-out |",
        "|---|---|---|---|---|---|",
    ]
    by = collections.defaultdict(list)
    for r in rows:
        by[(r["code"], file_lang(r["path"]))].append(r)
    for (code, lang) in sorted(by):
        group = by[(code, lang)]
        run = run_of(group)
        cells = []
        for part in ("tuning", "heldout"):
            t, a, f, _, found, known = measure([r for r in group if split.get(r["repo"], "tuning") == part], run)
            cells.append((fmt_precision(t, a, f), fmt_recall(found, known)))
        lines.append(f"| {code} | {lang} | {run} | {cells[0][0]} | {cells[1][0]} | {cells[1][1]} |")
    return "\n".join(lines)


def file_lang(path):
    """A finding counts for the language of its file, whatever the repository's language."""
    return "python" if path.endswith(".py") or ".ipynb" in path else "rust"


def place(finding):
    """The file a finding is in, as stored: its path, and for a notebook its cell
    (`tools/demo.ipynb (cell 2)`, whose line is the line in that cell)."""
    path = finding.get("path", "").removeprefix("./")
    if finding.get("cell") is not None:
        path += f" (cell {finding['cell']})"
    return path


def coverage(repos, rows, split):
    """What the table stands on: repositories per language and split, labelled findings."""
    parts = []
    for lang in ("rust", "python"):
        of = [r for r in repos if r["lang"] == lang]
        held = sum(1 for r in of if split.get(r["repo"], "tuning") == "heldout")
        parts.append(f"{len(of)} {lang.title() if lang == 'rust' else 'PyTorch'} repositories ({len(of) - held} tuning, {held} held out)")
    labelled = sum(1 for r in rows if r["label"] != "?")
    return f"{parts[0]} and {parts[1]}; {labelled} places labelled by reading."


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="the devcheck binary")
    ap.add_argument("--dir", default=os.environ.get("ECOSYSTEM_DIR", str(ROOT.parent / "ecosystem")))
    ap.add_argument("--mirrors", default=os.environ.get("ECOSYSTEM_MIRRORS", "/work/.mirror"))
    ap.add_argument("--update", action="store_true", help="rewrite findings.tsv to the current findings")
    ap.add_argument("--only", action="append", default=[], help="only this repository (repeatable)")
    ap.add_argument("--lang", choices=["rust", "python"], help="only repositories of this language")
    ap.add_argument("--table", action="store_true", help="print the table of the stored labels and exit")
    ap.add_argument("--validate", action="store_true", help="check the stored files and exit")
    ap.add_argument(
        "--add-ignore-check",
        action="store_true",
        help="on a copy of each tree: `--add-ignore`, then check that a plain run reports nothing and "
        "that the files changed only by suppression comments",
    )
    args = ap.parse_args()

    repos = read_tsv(REPOS, REPO_COLUMNS)
    stored = read_tsv(FINDINGS, FINDING_COLUMNS)
    problems = validate(repos, stored)
    if args.validate or args.table:
        for p in problems:
            print(p, file=sys.stderr)
        if args.table:
            print(coverage(repos, stored, read_split()))
            print()
            print(table(stored, read_split()))
        sys.exit(1 if problems else 0)
    if problems:
        sys.exit("fixtures/ecosystem/findings.tsv has problems:\n" + "\n".join(problems))
    if not args.bin:
        sys.exit("--bin is required (scripts/ecosystem.sh builds it)")

    help_text = subprocess.run([args.bin, "lint", "--help"], capture_output=True, text=True).stdout
    preview = "--preview" in help_text
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    selected = [
        r for r in repos
        if (not args.only or r["repo"] in args.only) and (not args.lang or r["lang"] == args.lang)
    ]
    if args.add_ignore_check:
        failed = 0
        for repo in selected:
            tree = ensure_tree(repo["repo"], repo["commit"], base, Path(args.mirrors))
            if tree is None:
                print(f"{repo['repo']}: not available", file=sys.stderr)
                continue
            problems = add_ignore_check(args.bin, tree)
            failed += bool(problems)
            print(f"{repo['repo']}: " + ("ok" if not problems else "; ".join(problems)))
        print(f"--add-ignore: {len(selected) - failed} of {len(selected)} repositories fully suppressed with comments only")
        sys.exit(1 if failed else 0)
    by_key = {(r["repo"], r["path"], r["line"], r["code"]): r for r in stored}
    current = []  # the rows after this run, for the repositories linted
    diff = []
    missing = []
    not_rules = collections.Counter()
    for repo in selected:
        name, commit = repo["repo"], repo["commit"]
        tree = ensure_tree(name, commit, base, Path(args.mirrors))
        if tree is None:
            missing.append(name)
            print(f"{name}: not available (no mirror, no network); skipped", file=sys.stderr)
            continue
        found = set()
        plain = lint(args.bin, tree, False)
        stable_keys = {(name, place(f), str(f.get("line", 0)), f.get("code", "")) for f in plain}
        for f in (lint(args.bin, tree, True) if preview else plain):
            code = f.get("code", "")
            path = place(f)
            if code in NOT_RULES:
                not_rules[code] += 1
                continue
            key = (name, path, str(f.get("line", 0)), code)
            if key in found:
                continue
            found.add(key)
            group = "stable" if key in stable_keys else "preview"
            old = by_key.get(key)
            if old is None:
                row = dict(zip(FINDING_COLUMNS, [name, commit, key[1], key[2], code, "?", f.get("message", ""), group]))
                diff.append(f"+ new        {name} {key[1]}:{key[2]} {code} ({group})  {f.get('message', '')}")
            elif old["label"] == "MISS":
                # A person relabels it by reading it again; the script never turns a label.
                row = dict(old, label="?", group=group, reason=f"was MISS: {old['reason']}")
                diff.append(f"+ now found  {name} {key[1]}:{key[2]} {code} ({group})  (read it again: {old['reason']})")
            else:
                row = dict(old, group=group)
                if old["group"] != group:
                    diff.append(f"~ now {group:7} {name} {key[1]}:{key[2]} {code}  ({old['label']}: {old['reason']})")
            current.append(row)
        for key, old in by_key.items():
            if key[0] != name or key in found:
                continue
            if old["label"] == "TRUE":
                diff.append(f"- lost       {name} {key[1]}:{key[2]} {key[3]}  (a real hazard: {old['reason']})")
                current.append(dict(old, label="MISS", group="-"))
            elif old["label"] in ("FALSE", "ARGUABLE"):
                diff.append(f"- dropped    {name} {key[1]}:{key[2]} {key[3]}  ({old['label'].lower()}: {old['reason']})")
            elif old["label"] == "MISS":
                current.append(dict(old))
            # an unlabelled `?` row that is no longer reported simply goes away

    linted = {r["repo"] for r in selected} - set(missing)
    print(f"linted {len(linted)} of {len(selected)} repositories" + (f"; missing: {', '.join(missing)}" if missing else ""))
    if not_rules:
        print("not counted: " + ", ".join(f"{c} x{n}" for c, n in sorted(not_rules.items())))
    print()
    print("difference against fixtures/ecosystem/findings.tsv:")
    print("\n".join(diff) if diff else "  none")
    print()
    shown = [r for r in current if r["repo"] in linted]
    print(coverage([r for r in selected if r["repo"] in linted], shown, read_split()))
    print()
    print(table(shown, read_split()))
    if args.update:
        kept = [r for r in stored if r["repo"] not in linted]
        write_findings(kept + current)
        print(f"wrote {FINDINGS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
