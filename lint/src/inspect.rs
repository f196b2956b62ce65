//! `devcheck inspect`: for every module struct in the source (every `nn.Module` class in Python),
//! what a device move carries (parameters, buffers, submodules) and what it leaves behind, with
//! the lint findings in the struct and its impls.
//!
//! Each front end reads its own files' structs ([`crate::rust::inspect`],
//! [`crate::python::inspect`]); this module runs them over the paths, holds the report they fill
//! in and renders it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::config::Settings;
use crate::diagnostic::Diagnostic;
use crate::error::LintError;
use crate::output::printable_line;
use crate::pipeline::FileReport;
use crate::registry::Severity;
use crate::source::Language;

pub use crate::fields::{FieldReport, StructReport};

/// The result of `devcheck inspect`.
#[derive(Debug, Default)]
pub struct InspectRun {
    pub structs: Vec<StructReport>,
    pub files: usize,
    /// Files that could not be read or parsed (`D000`).
    pub unparsed: Vec<Diagnostic>,
}

impl InspectRun {
    /// Is there a lint finding at `level` or above, or a field the derive rejects?
    pub fn fails_at(&self, level: Severity) -> bool {
        self.structs.iter().any(|s| !s.errors.is_empty() || s.findings.iter().any(|d| d.severity >= level))
            || self.unparsed.iter().any(|d| d.severity >= level)
    }
}

/// Inspects every Rust file under `paths`.
pub fn inspect_paths(paths: &[PathBuf], settings: &Settings) -> Result<InspectRun, LintError> {
    let run = super::driver::lint_paths(paths, settings)?;
    let pool =
        crate::pipeline::pool().map_err(|source| LintError::Io { path: PathBuf::from("."), source })?;
    let project = &*run.project;
    let per_file: Vec<InspectRun> =
        pool.install(|| run.files.into_par_iter().map(|r| inspect_report(r, settings, project)).collect());
    let mut out = InspectRun::default();
    for one in per_file {
        out.files += one.files;
        out.structs.extend(one.structs);
        out.unparsed.extend(one.unparsed);
    }
    Ok(out)
}

/// Inspects one file's text (lints it too, for the findings).
pub fn inspect_source(path: impl AsRef<Path>, text: &str, settings: &Settings) -> InspectRun {
    inspect_report(super::lint_source(path, text, settings), settings, &crate::python::Project::default())
}

/// The structs of a linted file, or its `D000` when it could not be analysed.
fn inspect_report(report: FileReport, settings: &Settings, project: &crate::python::Project) -> InspectRun {
    let mut out = InspectRun { files: 1, ..InspectRun::default() };
    let parse_error = |d: &Diagnostic| d.code == super::registry::PARSE_ERROR.code;
    if report.diagnostics.iter().any(parse_error) {
        out.unparsed = report.diagnostics.into_iter().filter(parse_error).collect();
        return out;
    }
    // The file is parsed again here, on a stack deep enough for its tree (a fresh segment only
    // when this thread has too little left).
    let structs = match Language::of_named_file(&report.disk_path) {
        Language::Python => crate::python::inspect::classes_in(&report, project),
        Language::Rust => crate::rust::inspect::structs_in(&report, settings),
    };
    match structs {
        Ok(structs) => out.structs = structs,
        Err(e) => out.unparsed.push(not_inspected(&report, &e)),
    }
    out
}

/// A `D000` for a file whose structs could not be read because the system gave no stack for its
/// tree.
fn not_inspected(report: &FileReport, error: &std::io::Error) -> Diagnostic {
    let start = super::diagnostic::LineCol { line: 1, column: 1 };
    Diagnostic {
        code: super::registry::PARSE_ERROR.code,
        name: super::registry::PARSE_ERROR.name,
        severity: super::registry::PARSE_ERROR.default_severity(),
        message: format!("file not inspected: no stack could be set up to analyse it ({error})"),
        path: report.path.clone(),
        range: 0..0,
        start,
        end: start,
        label: None,
        help: Some(
            "the system is out of threads or memory; run again with fewer other processes".to_string(),
        ),
        fix: None,
        related: Vec::new(),
        also: Vec::new(),
        scope: None,
        cell: None,
    }
}

/// Renders an inspection: a table per struct (human) or an array of structs (JSON).
pub fn render_inspect(run: &InspectRun, json: bool, color: bool) -> String {
    if json {
        let mut out = serde_json::to_string_pretty(&run.structs).unwrap_or_else(|_| "[]".to_string());
        out.push('\n');
        return out;
    }
    let (red, green, bold, reset) =
        if color { ("\u{1b}[31m", "\u{1b}[32m", "\u{1b}[1m", "\u{1b}[0m") } else { ("", "", "", "") };
    let mut out = String::new();
    for s in &run.structs {
        let _ = writeln!(
            out,
            "{bold}{}:{}:{}: {} {}{reset} ({})",
            printable_line(&s.path),
            s.line,
            s.column,
            s.kind,
            s.name,
            s.api
        );
        let _ = writeln!(out, "  moved by {}", s.mover);
        let moves = s.count("moves");
        let behind = s.count("left behind");
        let stays = s.count("stays");
        let mut summary = format!("  {moves} of {} fields move", s.fields.len());
        if behind > 0 {
            let _ = write!(summary, ", {red}{behind} left behind{reset}");
        }
        if stays > 0 {
            let _ = write!(summary, ", {stays} stay where they were made");
        }
        let _ = writeln!(out, "{summary}");
        let w_name = s.fields.iter().map(|f| f.name.len()).max().unwrap_or(0).max(5);
        let w_ty = s.fields.iter().map(|f| f.ty.chars().count()).max().unwrap_or(0).clamp(4, 32);
        let w_class = s.fields.iter().map(|f| f.class.chars().count()).max().unwrap_or(0).clamp(10, 60);
        let _ = writeln!(
            out,
            "    {:<w_name$}  {:<w_ty$}  {:<w_class$}  {:<11}  saved",
            "field", "type", "what it is", "on a move"
        );
        for f in &s.fields {
            let saved = match f.saved {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            };
            let fate = match f.fate {
                "left behind" => format!("{red}{:<11}{reset}", f.fate),
                "moves" => format!("{green}{:<11}{reset}", f.fate),
                other => format!("{other:<11}"),
            };
            let _ = write!(
                out,
                "    {:<w_name$}  {:<w_ty$}  {:<w_class$}  {fate}  {saved}",
                f.name, f.ty, f.class
            );
            if let Some(note) = &f.note {
                let _ = write!(out, "  ({note})");
            }
            out.push('\n');
        }
        for e in &s.errors {
            let _ = writeln!(out, "  {red}rejected by the derive{reset}: {e}");
        }
        if !s.findings.is_empty() {
            let scope = if s.kind == "struct" { " and its impls" } else { "" };
            let _ = writeln!(out, "  findings in `{}`{scope}:", s.name);
            for d in &s.findings {
                let _ = writeln!(out, "    {}", super::output::concise_line(d));
            }
        }
        out.push('\n');
    }
    for d in &run.unparsed {
        let _ = writeln!(
            out,
            "{}:{}:{}: not inspected: {}",
            printable_line(&d.path),
            d.start.line,
            d.start.column,
            printable_line(&d.message)
        );
    }
    let behind: usize = run.structs.iter().map(|s| s.count("left behind")).sum();
    let _ = writeln!(
        out,
        "Inspected {} in {} file{}: {} field{} left behind by a device move.",
        inspected(run),
        run.files,
        if run.files == 1 { "" } else { "s" },
        behind,
        if behind == 1 { "" } else { "s" }
    );
    out
}

/// "3 structs", "1 class", "2 structs and 1 class".
fn inspected(run: &InspectRun) -> String {
    let count = |kind: &str| run.structs.iter().filter(|s| s.kind == kind).count();
    let (structs, classes) = (count("struct"), count("class"));
    let words = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    match (structs, classes) {
        (_, 0) => words(structs, "struct", "structs"),
        (0, _) => words(classes, "class", "classes"),
        _ => format!("{} and {}", words(structs, "struct", "structs"), words(classes, "class", "classes")),
    }
}
