//! The static device linter: reads Rust source with `syn` (it never compiles it) and flags device
//! hazards in code written against devcheck, candle, tch or burn; reads Python source with ruff's
//! parser and flags the same hazards, and a few of its own, in PyTorch code ([`python`]).
//!
//! Each file is parsed once and all rules run in a single pass over its tree ([`walker`]);
//! files are linted in parallel. A file that cannot be analysed (it does not parse, cannot be
//! read, is too large or nests too deeply) is reported as `D000` and the run goes on; a rule that
//! panics is reported as `D999` for that file only. Syntax trees are only ever built, visited
//! and dropped on threads with large stacks ([`stack`]), and [`depth`] keeps any file's tree
//! within them, so no input file can end the run.
//!
//! ```no_run
//! use devcheck_lint::{Settings, lint_source};
//! let report = lint_source("model.rs", "fn forward() {}", &Settings::default());
//! assert!(report.diagnostics.is_empty());
//! ```

mod config;
mod crates;
mod depth;
mod device;
mod diagnostic;
mod driver;
mod error;
mod facts;
mod fields;
mod fix;
mod inspect;
pub mod output;
mod profile;
pub mod python;
pub mod registry;
pub mod rules;
mod source;
mod stack;
mod suppress;
mod syntax;
mod walker;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

pub use config::{CONFIG_FILE, LintTable, Overrides, Settings};
pub use depth::MAX_DEPTH;
pub use diagnostic::{Applicability, Diagnostic, Edit, Fix, LineCol, LineIndex};
pub use driver::{FileReport, LintRun, lint_paths};
pub use error::{ConfigError, LintError};
pub use fix::{FileFix, FixMode, FixOutcome, FixSummary, apply_fixes};
pub use inspect::{FieldReport, InspectRun, StructReport, inspect_paths, inspect_source, render_inspect};
pub use profile::{Api, ApiSet};
pub use registry::{RuleMeta, Severity};
pub use source::{FileKind, Language};

use diagnostic::Finding;
use source::FileCx;
use suppress::Suppressions;

/// Up to this many findings in a file are placed without building its line index.
const FEW_FINDINGS: usize = 8;

/// Files larger than this are reported (`D000`) instead of parsed.
pub const MAX_FILE_BYTES: usize = 8 << 20;

/// Lints one file's text. `path` decides the file kind (library, test, example, ...) and is
/// what diagnostics name. Never panics: a failing rule becomes a `D999` diagnostic.
pub fn lint_source(path: impl AsRef<Path>, text: &str, settings: &Settings) -> FileReport {
    let path = path.as_ref();
    let mut report = lint_text(path, &display_path(path), FileKind::of_path(path), Arc::from(text), settings);
    // The text is the whole crate: its own call graph, and no package on disk to consult.
    if let Some(summary) = report.summary.as_mut() {
        summary.disk_path = None;
    }
    crates::resolve(std::slice::from_mut(&mut report));
    report
}

/// The path as diagnostics show it: without a leading `./`, with `/` between folders on every
/// system. A name that is not UTF-8 shows its odd bytes as `\xNN`; so that no two names ever
/// show alike, such a name (or one whose text holds a `\xNN` of its own) shows its backslashes
/// doubled. Only for showing: files are read and written through their `Path` (a `\` in a Unix
/// file name is a name, not a separator).
pub(crate) fn display_path(path: &Path) -> String {
    let shown = os_str_display(path.as_os_str());
    let shown = if cfg!(windows) { shown.replace('\\', "/") } else { shown };
    match shown.strip_prefix("./") {
        Some(rest) if !rest.is_empty() => rest.to_string(),
        _ => shown,
    }
}

#[cfg(unix)]
fn os_str_display(s: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let bytes = s.as_bytes();
    if let Ok(text) = std::str::from_utf8(bytes)
        && !has_hex_escape(text)
    {
        return text.to_string();
    }
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// Does `text` hold `\x` and two hex digits, which would read as an escaped byte?
#[cfg(unix)]
fn has_hex_escape(text: &str) -> bool {
    text.as_bytes()
        .windows(4)
        .any(|w| w[0] == b'\\' && w[1] == b'x' && w[2].is_ascii_hexdigit() && w[3].is_ascii_hexdigit())
}

#[cfg(not(unix))]
fn os_str_display(s: &std::ffi::OsStr) -> String {
    s.to_string_lossy().into_owned()
}

pub(crate) fn lint_text(
    path: &Path,
    shown: &str,
    kind: FileKind,
    text: Arc<str>,
    settings: &Settings,
) -> FileReport {
    let enabled = settings.enabled_for(path);
    let backend = path.parent().is_some_and(|dir| {
        dir.components().any(|c| c.as_os_str().to_str().is_some_and(walker::is_backend_name))
    });
    let lang = Language::of_named_file(path);
    let analysed = match lang {
        // syn parses recursively: the depth, read from the text first, says how much stack the
        // parse, the walk and the drop take; they move to a fresh segment only when this thread
        // has less left. No hand-off to another thread.
        Language::Rust => {
            let shape = unparseable(&text);
            let need = depth::stack_needed(*shape.as_ref().unwrap_or(&0));
            stack::within(need, || {
                let result = catch_unwind(AssertUnwindSafe(|| match shape {
                    Err(problem) => (vec![*problem], ApiSet::EMPTY, None),
                    Ok(_) => check_text(kind, backend, &text, settings, &|c| enabled.contains(c)),
                }));
                // Spans of this file are no longer needed; free the thread's source map.
                proc_macro2::extra::invalidate_current_thread_spans();
                result
            })
        }
        // ruff's parser grows its own stack, and the walk moves to a fresh segment when the tree
        // needs more than this thread has left.
        Language::Python => Ok(catch_unwind(AssertUnwindSafe(|| {
            (python::check(path, kind, &text, &|c| enabled.contains(c)), ApiSet::EMPTY, None)
        }))),
    };
    let (findings, apis, summary) = match analysed {
        Ok(Ok(r)) => r,
        Err(e) => (vec![no_stack(&e)], ApiSet::EMPTY, None),
        Ok(Err(payload)) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            let finding = Finding::new(&registry::INTERNAL_ERROR, 0..0, format!("a rule failed on this file: {what}"))
                .help("this is a bug in devcheck; please report it with this file attached, and exclude the file meanwhile");
            (vec![finding], ApiSet::EMPTY, None)
        }
    };
    // Most files have no finding: their lines and suppression comments are read only when one does.
    let suppressions = std::cell::OnceCell::new();
    let suppressions = || {
        suppressions.get_or_init(|| match lang {
            Language::Rust => Suppressions::parse(&text),
            Language::Python => Suppressions::parse_python(&text),
        })
    };
    // A file with a few findings counts lines from the start for each; more share an index.
    let index = (findings.len() > FEW_FINDINGS).then(|| LineIndex::new(&text));
    let line_col =
        |offset| index.as_ref().map_or_else(|| LineCol::at(&text, offset), |i| i.line_col(&text, offset));
    let mut pending = Vec::new();
    let mut diagnostics: Vec<Diagnostic> = findings
        .into_iter()
        .filter(|f| f.rule.code == registry::INTERNAL_ERROR.code || enabled.contains(f.rule.code))
        .filter_map(|mut f| {
            let start = line_col(f.range.start);
            let end = line_col(f.range.end);
            if f.rule.code != registry::INTERNAL_ERROR.code
                && suppressions().suppresses(f.rule.code, start.line)
            {
                return None;
            }
            let conditions = std::mem::take(&mut f.conditions);
            let diagnostic = Diagnostic {
                code: f.rule.code,
                name: f.rule.name,
                severity: settings.severity(f.rule),
                message: f.message,
                path: shown.to_string(),
                range: f.range,
                start,
                end,
                label: f.label,
                help: f.help,
                fix: f.fix,
                related: f.related,
            };
            if conditions.is_empty() {
                Some(diagnostic)
            } else {
                pending.push((diagnostic, conditions));
                None
            }
        })
        .collect();
    diagnostics
        .sort_by(|a, b| (a.range.start, a.code, a.range.end).cmp(&(b.range.start, b.code, b.range.end)));
    diagnostics.dedup_by(|a, b| a.code == b.code && a.range == b.range);
    let summary = summary.map(|mut s| {
        s.disk_path = Some(path.to_path_buf());
        s.pending = pending;
        Box::new(s)
    });
    FileReport {
        path: shown.to_string(),
        disk_path: path.to_path_buf(),
        kind,
        apis,
        text,
        diagnostics,
        summary,
    }
}

/// Parses and runs the rules. Returns the findings, the detected APIs and what the crate-wide
/// pass needs from the file.
fn check_text(
    kind: FileKind,
    backend: bool,
    text: &str,
    settings: &Settings,
    enabled: &dyn Fn(&str) -> bool,
) -> (Vec<Finding>, ApiSet, Option<crates::FileSummary>) {
    // Lets the tests prove that a failing rule becomes a `D999` instead of ending the run.
    #[cfg(test)]
    if text.contains("__devcheck_test_panic__") {
        panic!("a deliberate test panic");
    }
    let base = stripped_prefix(text);
    let ast = match syn::parse_file(&text[base..]) {
        Ok(ast) => ast,
        Err(e) => {
            let r = e.span().byte_range();
            let start = (r.start + base).min(text.len());
            let end = (r.end + base).clamp(start, text.len());
            let finding = Finding::new(&registry::PARSE_ERROR, start..end, lowercase_first(&e.to_string()))
                .label("here")
                .help("the file was skipped; `cargo check` shows the same error");
            return (vec![finding], ApiSet::EMPTY, None);
        }
    };
    let apis = match settings.api {
        Some(a) => ApiSet::only(a),
        None => profile::detect(&ast, text),
    };
    let file = FileCx { text, base, kind, apis, preview: settings.preview, backend };
    let facts = facts::Facts::gather(&file, &ast.items);
    let checks = rules::checks(enabled);
    let (findings, summary) = walker::Walker::new(&file, &facts, checks).run(&ast);
    (findings, apis, Some(summary))
}

/// What the language's own compiler would refuse in `text`, as far as the linter can tell
/// without compiling it: `Err` with the syntax error (or why the text cannot be analysed), else
/// the errors a parse lets through that the compiler does not (Python's repeated keyword
/// arguments and the like). Independent of every setting: `--fix` asks it of fixed text.
pub(crate) fn compile_errors(lang: Language, text: &str) -> Result<Vec<String>, String> {
    match lang {
        Language::Python => python::compile_errors(text),
        Language::Rust => {
            let depth = unparseable(text).map_err(|problem| problem.message)?;
            let base = stripped_prefix(text);
            let parsed = stack::within(depth::stack_needed(depth), || {
                let result =
                    syn::parse_file(&text[base..]).map(drop).map_err(|e| lowercase_first(&e.to_string()));
                proc_macro2::extra::invalidate_current_thread_spans();
                result
            });
            parsed.map_err(|e| format!("no stack could be set up to check it ({e})"))??;
            Ok(Vec::new())
        }
    }
}

/// The estimated depth of a Rust file's tree ([`depth::stack_needed`] says how much stack it
/// takes), or the reason not to parse the text at all: too large, or nested too deeply.
fn unparseable(text: &str) -> Result<usize, Box<Finding>> {
    if text.len() > MAX_FILE_BYTES {
        return Err(Box::new(too_large(u64::try_from(text.len()).ok())));
    }
    match depth::check(text, depth::MAX_DEPTH) {
        Ok(depth) => Ok(depth),
        Err(deep) => Err(Box::new(
            Finding::new(&registry::PARSE_ERROR, deep.at..deep.at + deep.len, format!(
                "file not linted: it is too deeply nested to analyse (more than {} levels of brackets, operators or keywords)",
                depth::MAX_DEPTH
            ))
            .label("too deep")
            .help("such files are generated; exclude them (`exclude` in devcheck.toml)"),
        )),
    }
}

/// The `D000` of a file whose tree needed more stack than its thread had, when the system gave
/// none.
pub(crate) fn no_stack(error: &std::io::Error) -> Finding {
    Finding::new(
        &registry::PARSE_ERROR,
        0..0,
        format!("file not linted: no stack could be set up to analyse it ({error})"),
    )
    .help("the system is out of threads or memory; run again with fewer other processes")
}

/// The `D000` of a file larger than [`MAX_FILE_BYTES`] (`bytes` when its size is known).
pub(crate) fn too_large(bytes: Option<u64>) -> Finding {
    let message = match bytes {
        Some(b) => format!("file not linted: it is {b} bytes, more than the limit of {MAX_FILE_BYTES} bytes"),
        None => format!("file not linted: it is larger than the limit of {MAX_FILE_BYTES} bytes"),
    };
    Finding::new(&registry::PARSE_ERROR, 0..0, message)
        .help("generated files this large are best excluded (`exclude` in devcheck.toml)")
}

/// Bytes syn would skip: a byte-order mark and a shebang line (not an inner attribute `#![..]`).
fn stripped_prefix(text: &str) -> usize {
    let mut base = 0;
    if text.starts_with('\u{feff}') {
        base = '\u{feff}'.len_utf8();
    }
    let rest = &text[base..];
    if rest.starts_with("#!") && !rest[2..].trim_start().starts_with('[') {
        base += rest.find('\n').unwrap_or(rest.len());
    }
    base
}

pub(crate) fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_uppercase() && chars.clone().next().is_some_and(|n| n.is_lowercase()) => {
            c.to_lowercase().chain(chars).collect()
        }
        _ => s.to_string(),
    }
}

/// The documentation of a rule, as `devcheck explain` prints it: its status in each language it
/// checks, its docs, and for a rule shared with Rust, its PyTorch docs.
pub fn explain(code_or_name: &str) -> Option<String> {
    let rule = registry::lookup(code_or_name)?;
    let mut status = String::new();
    for (lang, s) in rule.languages() {
        match s {
            registry::Status::Stable => status.push_str(&format!(
                "\n{}: stable, on by default: a precision of at least 0.9 wherever the ecosystem check \
                 (`scripts/ecosystem.sh`) has findings of it.",
                lang.title()
            )),
            registry::Status::Preview(why) => status.push_str(&format!(
                "\n{}: preview, off unless `--preview` (or `preview = true` in devcheck.toml). {why}",
                lang.title()
            )),
        }
    }
    if let Some(what) = rule.preview_patterns {
        status.push_str(&format!("\nPreview patterns, only with `--preview`: {what}"));
    }
    let mut out = format!("{} ({}): {}\n{status}\n\n{}", rule.code, rule.name, rule.summary, rule.docs());
    if let Some(python) = rule.python() {
        out.truncate(out.trim_end().len());
        out.push_str("\n\n## In PyTorch code\n\n");
        out.push_str(&python.docs());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_rule_becomes_an_internal_error_diagnostic() {
        let report =
            lint_source("src/model.rs", "// __devcheck_test_panic__\nfn f() {}\n", &Settings::default());
        assert_eq!(report.diagnostics.len(), 1);
        let d = &report.diagnostics[0];
        assert_eq!((d.code, d.name), ("D999", "internal-error"));
        assert_eq!(d.message, "a rule failed on this file: a deliberate test panic");
        // The next file on the same thread lints normally.
        let ok = lint_source("src/model.rs", "fn f() {}\n", &Settings::default());
        assert!(ok.diagnostics.is_empty());
    }

    #[test]
    fn spans_account_for_a_byte_order_mark_and_a_shebang() {
        let text = "\u{feff}#!/usr/bin/env rust-script\nuse candle_core::{Device, Tensor};\n\
                    fn forward(xs: &Tensor) -> candle_core::Result<Tensor> {\n\
                    \x20   Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu)?.add(xs)\n}\n";
        let report = lint_source("src/model.rs", text, &Settings::default());
        let d = report.diagnostics.first().expect("a D001 finding");
        assert_eq!(d.code, "D001");
        assert_eq!((d.start.line, d.start.column), (4, 5));
        assert!(text[d.range.clone()].starts_with("Tensor::zeros("));
    }

    #[test]
    fn paths_are_shown_as_they_are_named() {
        assert_eq!(display_path(Path::new("./src/a.rs")), "src/a.rs");
        // On Unix a backslash is part of a name.
        #[cfg(unix)]
        assert_eq!(display_path(Path::new("src/a\\b.rs")), "src/a\\b.rs");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt as _;
            let name = std::ffi::OsStr::from_bytes(b"caf\xe9.rs");
            assert_eq!(display_path(Path::new(name)), "caf\\xE9.rs");
            // A name whose text is what the escape looks like shows differently.
            assert_eq!(display_path(Path::new("caf\\xE9.rs")), "caf\\\\xE9.rs");
            let both = std::ffi::OsStr::from_bytes(b"a\\b\xe9.rs");
            assert_eq!(display_path(Path::new(both)), "a\\\\b\\xE9.rs");
        }
    }
}
