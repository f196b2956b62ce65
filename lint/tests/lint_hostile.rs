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

/// A chain of thousands of functions, each calling the next once, ending in one that takes a
/// training step and reads its loss: the crate-wide pass walks the calls backwards once (a
/// fixpoint over every call at each round would be quadratic), and the read is found.
#[test]
fn long_chains_of_step_functions_are_linted() {
    let n = 4000;
    let mut text = String::from(
        "use candle_core::{Result, Tensor};\n\npub struct T { opt: candle_nn::AdamW }\n\nimpl T {\n",
    );
    text.push_str(
        "    fn f0(&mut self, x: &Tensor) -> Result<f32> {\n        let loss = x.sqr()?.mean_all()?;\n        self.opt.backward_step(&loss)?;\n        loss.to_scalar::<f32>()\n    }\n",
    );
    for i in 1..n {
        text.push_str(&format!(
            "    fn f{i}(&mut self, x: &Tensor) -> Result<f32> {{\n        let v = self.f{}(x)?;\n        Ok(v + x.sum_all()?.to_scalar::<f32>()?)\n    }}\n",
            i - 1
        ));
    }
    text.push_str("    pub fn fit(&mut self, xs: &[Tensor]) -> Result<()> {\n        for x in xs {\n");
    text.push_str(&format!("            self.f{}(x)?;\n        }}\n        Ok(())\n    }}\n}}\n", n - 1));
    let overrides = devcheck_lint::Overrides { preview: true, ..Default::default() };
    let settings = Settings::from_table(
        devcheck_lint::LintTable::default(),
        std::path::PathBuf::from("."),
        None,
        &overrides,
    )
    .expect("settings");
    let report = lint_source("chain.rs", &text, &settings);
    let reads = report.diagnostics.iter().filter(|d| d.code == "D005").count();
    // Every function of the chain takes a step through the ones it calls: each read is found.
    assert_eq!(reads, n, "{:?}", report.diagnostics.first());
}
