//! The static device linter: device hazards in Rust code written against devcheck, candle, tch or
//! burn (read with `syn`, never compiled) and in PyTorch code (read with ruff's parser, never
//! imported or run), and the fixes for some of them.
//!
//! The crate is one house for two languages. At the root, what both use: the one rule table
//! ([`registry`]), diagnostics, configuration, suppressions, fixes, output, the file walk and the
//! per-file pipeline. Below it, one front end per language, each with its engine and its rules
//! (one file per rule, named the same in both): `rust/` and `python/`. A front end never imports
//! the other. Files are linted in parallel; a file that cannot be analysed (it does not parse,
//! cannot be read, is too large or nests too deeply) is reported as `D000` and the run goes on;
//! a rule that panics is reported as `D999` for that file only. Syntax trees are only ever built,
//! visited and dropped on stacks deep enough for them, so no input file can end the run.
//!
//! This file is the public API and nothing else.
//!
//! ```no_run
//! use devcheck_lint::{Settings, lint_source};
//! let report = lint_source("model.rs", "fn forward() {}", &Settings::default());
//! assert!(report.diagnostics.is_empty());
//! ```

mod add_ignore;
mod config;
mod diagnostic;
mod driver;
mod error;
mod fields;
mod fix;
mod inspect;
pub mod output;
mod pipeline;
mod python;
pub mod registry;
mod rust;
mod source;
mod stack;
mod suppress;
mod unlinted;

use std::path::Path;
use std::sync::Arc;

pub use add_ignore::add_ignores;
pub use config::{CONFIG_FILE, LintTable, Overrides, Settings, Target};
pub use diagnostic::{Applicability, CellPlace, Diagnostic, Edit, Fix, LineCol, LineIndex};
pub use driver::{LintRun, lint_paths};
pub use error::{ConfigError, LintError};
pub use fix::{Action, FileFix, FixMode, FixOutcome, FixSummary, apply_fixes, unified_diff};
pub use inspect::{FieldReport, InspectRun, StructReport, inspect_paths, inspect_source, render_inspect};
pub use pipeline::FileReport;
pub use registry::{RuleMeta, Severity};
pub use rust::depth::MAX_DEPTH;
pub use source::{Api, ApiSet, FileKind, Language};
pub use unlinted::MAX_FILE_BYTES;

/// Lints one file's text. `path` decides the file kind (library, test, example, ...) and is
/// what diagnostics name. Never panics: a failing rule becomes a `D999` diagnostic.
pub fn lint_source(path: impl AsRef<Path>, text: &str, settings: &Settings) -> FileReport {
    let path = path.as_ref();
    let shown = source::display_path(path);
    let mut project = python::Project::default();
    project.set_target(settings.target);
    let mut report =
        pipeline::lint_text(path, &shown, FileKind::of_path(path), Arc::from(text), settings, &project, None);
    // The text is the whole crate: its own call graph, and no package on disk to consult.
    if let Some(summary) = report.summary.as_mut() {
        summary.disk_path = None;
    }
    driver::resolve(std::slice::from_mut(&mut report));
    report
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
        let report = lint_source("src/model.rs", text, &Settings::with_preview());
        let d = report.diagnostics.first().expect("a D001 finding");
        assert_eq!(d.code, "D001");
        assert_eq!((d.start.line, d.start.column), (4, 5));
        assert!(text[d.range.clone()].starts_with("Tensor::zeros("));
    }
}
