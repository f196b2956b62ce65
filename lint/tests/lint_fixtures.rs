//! Runs every fixture under `fixtures/lint/` and checks that exactly the lines its header names
//! are flagged, then snapshots the rendered reports.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use devcheck_lint::output::{Format, RenderOptions, render};
use devcheck_lint::{LintRun, LintTable, Overrides, Settings, Target, lint_source};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// Every fixture, as a path relative to the crate root (what diagnostics show).
fn fixtures() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> =
            std::fs::read_dir(dir).expect("fixtures/lint is readable").flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs" || x == "py") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("fixtures/lint"), &mut out);
    out.into_iter().map(|p| p.strip_prefix(root()).expect("under the crate root").to_path_buf()).collect()
}

/// `//! expect: D001 at 3, 7` lines (`# expect:` in Python) → {(D001, 3), (D001, 7)};
/// `//! expect: none` → {}.
fn expected(text: &str) -> Option<BTreeSet<(String, usize)>> {
    let mut set = BTreeSet::new();
    let mut seen = false;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("//! expect:").or_else(|| line.strip_prefix("# expect:")) else {
            continue;
        };
        seen = true;
        let rest = rest.trim();
        if rest == "none" {
            continue;
        }
        let (code, lines) = rest.split_once(" at ").expect("`//! expect: CODE at L, L`");
        for l in lines.split(',') {
            set.insert((code.trim().to_string(), l.trim().parse().expect("a line number")));
        }
    }
    seen.then_some(set)
}

/// `// <- D001 D002` markers (`# <- D001` in Python) on flagged lines, for readers; they must
/// agree with the header.
fn markers(text: &str) -> BTreeSet<(String, usize)> {
    let mut set = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(pos) = line.find("// <- ").or_else(|| line.find("# <- ")) {
            let marker = if line[pos..].starts_with("//") { 6 } else { 5 };
            for code in line[pos + marker..].split_whitespace() {
                set.insert((code.to_string(), i + 1));
            }
        }
    }
    set
}

fn lint(path: &Path) -> (String, devcheck_lint::FileReport) {
    let text = std::fs::read_to_string(root().join(path)).expect("fixture is UTF-8");
    let report = lint_source(path, &text, &settings_for(path, &text));
    (text, report)
}

/// The default settings with the preview rules and patterns on: a fixture shows what a rule
/// finds, whatever its status (which follows the ecosystem check's held-out figures, in
/// `lint/tests/ecosystem_table.rs`). A `# target: any` (or `cuda`) line declares where the
/// fixture's code runs, as `target` in devcheck.toml would.
fn settings_for(_path: &Path, text: &str) -> Settings {
    let target =
        text.lines().find_map(|l| l.strip_prefix("# target: ").or_else(|| l.strip_prefix("//! target: ")));
    let target = target.map(|t| match t.split_whitespace().next().unwrap_or_default() {
        "any" => Target::Any,
        "cuda" => Target::Cuda,
        other => panic!("unknown target {other:?} in a fixture header"),
    });
    let overrides = Overrides { preview: true, target, ..Overrides::default() };
    Settings::from_table(LintTable::default(), PathBuf::from("."), None, &overrides).expect("valid settings")
}

#[test]
fn every_fixture_flags_exactly_the_lines_its_header_names() {
    let files = fixtures();
    assert!(files.len() >= 25, "expected the full fixture set, found {}", files.len());
    let mut problems = Vec::new();
    for path in &files {
        let (text, report) = lint(path);
        let Some(want) = expected(&text) else {
            problems.push(format!("{}: no `//! expect:` (`# expect:`) header", path.display()));
            continue;
        };
        if markers(&text) != want {
            problems.push(format!("{}: `// <-` markers disagree with the header", path.display()));
        }
        // A finding repeated in one function is reported once; each of its places counts.
        let got: BTreeSet<(String, usize)> = report
            .diagnostics
            .iter()
            .flat_map(|d| {
                std::iter::once(d.start.line)
                    .chain(d.also.iter().map(|p| p.line))
                    .map(|line| (d.code.to_string(), line))
            })
            .collect();
        for missing in want.difference(&got) {
            problems.push(format!(
                "{}:{}: expected {} but it was not reported",
                path.display(),
                missing.1,
                missing.0
            ));
        }
        for extra in got.difference(&want) {
            let d = report.diagnostics.iter().find(|d| d.code == extra.0 && d.start.line == extra.1);
            problems.push(format!(
                "{}:{}: unexpected {}: {}",
                path.display(),
                extra.1,
                extra.0,
                d.map(|d| d.message.as_str()).unwrap_or("")
            ));
        }
    }
    assert!(problems.is_empty(), "fixture mismatches:\n{}", problems.join("\n"));
}

#[test]
fn rendered_reports_match_snapshots() {
    let mut names = std::collections::HashSet::new();
    for path in fixtures() {
        let (_, report) = lint(&path);
        let run = LintRun::from(vec![report]);
        let human = render(&run, Format::Human, RenderOptions { color: false, width: 100, summary: true });
        let name = path
            .strip_prefix("fixtures/lint")
            .expect("fixture path")
            .with_extension("")
            .to_string_lossy()
            .replace(['/', '\\'], "__");
        // `model.rs` and `model.py` would share a snapshot: Python fixtures are `torch*.py`.
        assert!(names.insert(name.clone()), "two fixtures map to the snapshot name {name}");
        insta::assert_snapshot!(name, human);
    }
}
