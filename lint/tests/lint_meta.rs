//! Every rule has its docs (with the fixed sections), fixtures, snapshots, and well-formed
//! messages.

use std::path::{Path, PathBuf};

use devcheck_lint::registry::{self, Group};
use devcheck_lint::{Language, LintRun, LintTable, Overrides, Settings, Target, lint_paths};

const SECTIONS: [&str; 5] =
    ["### What it does", "### Why is this bad?", "### Example", "### Use instead", "### Fix safety"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root")
}

#[test]
fn every_rule_has_docs_with_the_fixed_sections_in_order() {
    for rule in registry::all() {
        let docs = rule.docs();
        let mut at = 0;
        for section in SECTIONS {
            let Some(pos) = docs[at..].find(section) else {
                panic!("{} docs lack `{section}` (after the previous section)", rule.code);
            };
            at += pos + section.len();
            let body = docs[at..].trim_start();
            assert!(!body.starts_with("###") && !body.is_empty(), "{}: `{section}` is empty", rule.code);
        }
        assert!(!rule.summary.ends_with('.'), "{}: summary ends with a period", rule.code);
        assert_eq!(devcheck_lint::explain(rule.code).map(|e| e.contains(&docs)), Some(true));
    }
}

#[test]
fn every_python_side_has_docs_with_the_fixed_sections_in_order() {
    for rule in registry::rules() {
        let Some(python) = rule.python() else { continue };
        let docs = python.docs();
        let mut at = 0;
        for section in SECTIONS {
            let Some(pos) = docs[at..].find(section) else {
                panic!("{} PyTorch docs lack `{section}` (after the previous section)", rule.code);
            };
            at += pos + section.len();
        }
        assert!(docs.contains("```python"), "{}: the PyTorch docs have no Python example", rule.code);
        let explained = devcheck_lint::explain(rule.code).unwrap_or_default();
        assert!(explained.contains(&docs), "{}: `explain` does not print the PyTorch docs", rule.code);
    }
}

#[test]
fn every_rule_says_which_languages_it_checks() {
    for rule in registry::rules() {
        let langs: Vec<Language> = rule.languages().map(|(l, _)| l).collect();
        assert!(langs.contains(&Language::Python), "{} does not check Python", rule.code);
        assert!(rule.status_in(Language::Python).is_some(), "{} has no Python status", rule.code);
        let explained = devcheck_lint::explain(rule.code).unwrap_or_default();
        for lang in langs {
            assert!(
                explained.contains(&format!("\n{}: ", lang.title())),
                "{}: no {lang:?} status in explain",
                rule.code
            );
        }
    }
}

#[test]
fn codes_and_names_are_unique_and_well_formed() {
    let all = registry::all();
    for (i, a) in all.iter().enumerate() {
        assert!(
            a.code.len() == 4 && a.code.starts_with('D') && a.code[1..].bytes().all(|b| b.is_ascii_digit())
        );
        assert!(a.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'), "{}", a.name);
        for b in &all[i + 1..] {
            assert_ne!(a.code, b.code);
            assert_ne!(a.name, b.name);
        }
    }
    assert_eq!(registry::rules().count(), 10);
}

#[test]
fn every_rule_has_fixtures_for_positives_and_a_snapshot_in_each_language() {
    for rule in registry::rules() {
        let dir = root().join("fixtures/lint").join(rule.code.to_ascii_lowercase());
        for (lang, _) in rule.languages() {
            // Rust fixtures are `*.rs`; Python ones `torch*.py`.
            let (ext, expect) = match lang {
                Language::Rust => ("rs", "//! expect:"),
                Language::Python => ("py", "# expect:"),
            };
            let fixtures: Vec<_> = std::fs::read_dir(&dir)
                .unwrap_or_else(|_| panic!("{} has no fixture directory {}", rule.code, dir.display()))
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == ext))
                .filter(|e| lang == Language::Rust || e.file_name().to_string_lossy().starts_with("torch"))
                .collect();
            assert!(!fixtures.is_empty(), "{} has no {lang:?} fixtures", rule.code);
            let flagged = fixtures.iter().any(|f| {
                std::fs::read_to_string(f.path())
                    .is_ok_and(|t| t.lines().any(|l| l.starts_with(&format!("{expect} {} at", rule.code))))
            });
            assert!(flagged, "no {lang:?} fixture of {} expects a finding", rule.code);
            for f in &fixtures {
                let stem = f.path().file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let snap = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/snapshots")
                    .join(format!("all__lint_fixtures__{}__{stem}.snap", rule.code.to_ascii_lowercase()));
                assert!(snap.is_file(), "{} has no snapshot {}", rule.code, snap.display());
            }
        }
    }
}

#[test]
fn every_message_starts_lowercase_without_a_trailing_period() {
    // With preview, so that the Python rules (all preview for now) speak too, and the code
    // declared to run also without a GPU, where D010 runs.
    let preview = Overrides { preview: true, target: Some(Target::Any), ..Overrides::default() };
    let settings =
        Settings::from_table(LintTable::default(), PathBuf::from("."), None, &preview).expect("settings");
    let run: LintRun = lint_paths(&[root().join("fixtures/lint")], &settings).expect("fixtures lint");
    let mut seen = std::collections::HashSet::new();
    for d in run.diagnostics() {
        seen.insert(d.code);
        let first = d.message.chars().next().expect("a message");
        assert!(!first.is_uppercase(), "{}: message starts uppercase: {}", d.code, d.message);
        assert!(!d.message.ends_with('.'), "{}: message ends with a period: {}", d.code, d.message);
        if let Some(label) = &d.label {
            assert!(!label.ends_with('.'), "{}: label ends with a period: {label}", d.code);
        }
        if let Some(help) = &d.help {
            assert!(!help.ends_with('.'), "{}: help ends with a period: {help}", d.code);
        }
    }
    for rule in registry::rules() {
        assert!(seen.contains(rule.code), "no fixture produced {}", rule.code);
    }
    assert!(
        registry::all()
            .iter()
            .filter(|r| r.group == Group::Meta)
            .all(|r| r.code == "D000" || r.code == "D999")
    );
}

/// The ```python block after `heading` in `docs`.
fn python_block<'a>(docs: &'a str, heading: &str) -> Option<&'a str> {
    let after = &docs[docs.find(heading)? + heading.len()..];
    let start = after.find("```python\n")? + "```python\n".len();
    let end = after[start..].find("```")?;
    Some(&after[start..start + end])
}

/// Every rule's PyTorch docs show code that the rule flags (`### Example`) and the same code
/// fixed, which it does not flag (`### Use instead`): the examples are linted, as users will
/// paste them.
#[test]
fn every_pytorch_example_is_flagged_and_its_fix_is_not() {
    let settings = Settings::from_table(
        LintTable::default(),
        PathBuf::from("."),
        None,
        // D010 runs only on code declared to run also without a GPU.
        &Overrides { preview: true, target: Some(Target::Any), ..Overrides::default() },
    )
    .expect("settings");
    let mut problems = Vec::new();
    for rule in registry::rules() {
        if rule.status_in(Language::Python).is_none() {
            continue;
        }
        let docs = rule.python().map(|p| p.docs()).unwrap_or_else(|| rule.docs());
        for (heading, flagged) in [("### Example", true), ("### Use instead", false)] {
            let Some(code) = python_block(&docs, heading) else {
                problems.push(format!("{}: no Python block under `{heading}`", rule.code));
                continue;
            };
            let report = devcheck_lint::lint_source("model.py", code, &settings);
            let codes: Vec<&str> = report.diagnostics.iter().map(|d| d.code).collect();
            if codes.contains(&"D000") {
                problems.push(format!("{}: `{heading}` does not parse: {:?}", rule.code, report.diagnostics));
            } else if codes.contains(&rule.code) != flagged {
                problems.push(format!(
                    "{}: `{heading}` is {}flagged (findings: {codes:?})",
                    rule.code,
                    if flagged { "not " } else { "" }
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
