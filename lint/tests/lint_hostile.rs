//! Property tests: whatever a file holds — random token soups, runs of brackets, operators and
//! keywords thousands deep, comments and strings hiding them, control bytes — the linter never
//! crashes (a stack overflow would end this test binary), every file of a run gets its report,
//! every output format renders, and fixing in memory finishes with an outcome per file.
//!
//! Cases per property: 32, or `PROPTEST_CASES` (`PROPTEST_CASES=5000 cargo test -p
//! devcheck-lint --test lint_hostile` for a long run).

use devcheck_lint::output::{Format, RenderOptions, render};
use devcheck_lint::{FixMode, Settings, apply_fixes, lint_paths, lint_source};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(32);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// Pieces of Rust and of what is not Rust, for soups.
const TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "|",
    "||",
    ",",
    ";",
    ".",
    "..",
    "..=",
    "!",
    "&",
    "&&",
    "*",
    "-",
    "+",
    "=",
    "==",
    "=>",
    "->",
    "?",
    ":",
    "::",
    "#",
    "$",
    "@",
    "'a",
    "'x'",
    "'\\''",
    "b'x'",
    "\"s\"",
    "\"\\\"\"",
    "r#\"(\"#",
    "br\"{\"",
    "c\"x\"",
    "/*",
    "*/",
    "//",
    "///",
    "\n",
    "\r\n",
    "\t",
    "0",
    "1.5e+3",
    "0x1F",
    "1u8",
    "as",
    "return",
    "fn",
    "let",
    "mut",
    "match",
    "if",
    "else",
    "for",
    "in",
    "loop",
    "while",
    "move",
    "async",
    "await",
    "impl",
    "dyn",
    "struct",
    "mod",
    "use",
    "pub",
    "unsafe",
    "const",
    "static",
    "r#match",
    "x",
    "xs",
    "self",
    "Self",
    "Tensor",
    "Device",
    "Device::Cpu",
    "Tensor::zeros",
    "forward",
    "candle_core",
    "vec!",
    "println!",
    "\u{1b}[31m",
    "\u{7}",
    "\u{0}",
    "\u{202e}",
    "é",
    "\u{feff}",
    "\\",
];

/// A statement's worth of code, nested `levels` deep by repeating a random piece.
const OPENERS: &[&str] = &[
    "(",
    "[",
    "{",
    "!",
    "-",
    "&",
    "*",
    "|x| ",
    "|a, b| ",
    "return ",
    "move || ",
    "Box<",
    "A<T, ",
    "if x { ",
    "match x { _ => ",
    "S { a: ",
    "vec![",
    "unsafe { ",
    "/* /* */ ( */ (",
    "x.a(",
    "&mut ",
    "..",
];
const POSTFIXES: &[&str] = &[".a()", "?", ".await", " as T", "[0]", "()", ".f", " + 1", " = x", " && x"];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec((prop::sample::select(TOKENS), prop::bool::ANY), 0..400).prop_map(|parts| {
        parts.into_iter().map(|(t, space)| if space { format!("{t} ") } else { t.to_string() }).collect()
    })
}

fn nesting() -> impl Strategy<Value = String> {
    (prop::sample::select(OPENERS), prop::sample::select(POSTFIXES), 0usize..12_000, 0usize..12_000, soup())
        .prop_map(|(open, post, n, m, noise)| {
            format!(
                "use candle_core::{{Device, Tensor}};\nfn forward(xs: &Tensor) -> Tensor {{\n    let y = {}x{};\n    {noise}\n}}\n",
                open.repeat(n),
                post.repeat(m)
            )
        })
}

/// No byte a terminal acts on besides line breaks and tabs.
fn printable(text: &str) -> bool {
    !text
        .chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || ('\u{202a}'..='\u{202e}').contains(&c))
}

fn lint_as_a_run(texts: &[String]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, text) in texts.iter().enumerate() {
        std::fs::write(dir.path().join(format!("f{i}.rs")), text).expect("write");
    }
    let settings = Settings::default();
    let mut run = lint_paths(&[dir.path().to_path_buf()], &settings).expect("the run finishes");
    prop_assert_eq!(run.files.len(), texts.len());
    for (i, report) in run.files.iter().enumerate() {
        let name = format!("f{i}.rs");
        prop_assert!(report.disk_path.ends_with(&name), "{} is not {}", report.path, name);
        prop_assert!(!report.diagnostics.iter().any(|d| d.code == "D999"), "{:?}", report.diagnostics);
        // A file not analysed is that and nothing else.
        if report.diagnostics.iter().any(|d| d.code == "D000") {
            prop_assert!(report.diagnostics.iter().all(|d| d.code == "D000"));
        }
    }
    for format in [Format::Human, Format::Concise, Format::Json, Format::Sarif, Format::Github] {
        let out = render(&run, format, RenderOptions::default());
        prop_assert!(printable(&out), "{:?} printed a control character", format);
    }
    let summary = apply_fixes(&mut run, FixMode::Unsafe, &settings, false).expect("fixing finishes");
    prop_assert_eq!(summary.files.len(), texts.len());
    prop_assert!(summary.rejected().next().is_none(), "a fix broke a file");
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn token_soups_never_crash_a_run(texts in prop::collection::vec(soup(), 1..5)) {
        lint_as_a_run(&texts)?;
    }

    #[test]
    fn deep_nestings_are_analysed_or_refused_never_crash(texts in prop::collection::vec(nesting(), 1..4)) {
        lint_as_a_run(&texts)?;
    }

    #[test]
    fn a_single_text_always_gets_a_report(text in prop_oneof![soup(), nesting()]) {
        let report = lint_source("src/model.rs", &text, &Settings::default());
        prop_assert!(!report.diagnostics.iter().any(|d| d.code == "D999"), "{:?}", report.diagnostics);
    }
}
