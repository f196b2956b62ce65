//! `devcheck inspect`: for every module struct in the source, what a device move carries
//! (parameters, buffers, submodules) and what it leaves behind, with the lint findings in the
//! struct and its impls. Python files get the same report for each `nn.Module` class
//! ([`crate::python::inspect`]).
//!
//! devcheck structs are read with the derive's own classification (`devcheck-classify`); burn,
//! tch and candle structs with what the linter knows of those APIs (see [`super::fields`]).

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;
use syn::Item;

use super::config::Settings;
use super::diagnostic::{Diagnostic, LineIndex};
use super::driver::FileReport;
use super::error::LintError;
use super::facts::Facts;
use super::fields::{FieldFate, burn_fields, devcheck_fields, plain_struct_fields};
use super::output::printable_line;
use super::profile::{self, Api, ApiSet};
use super::registry::Severity;
use super::source::{FileCx, Language};
use super::syntax::{is_cfg_test, mentions_tensor, type_name};

/// One struct and what a device move does to it.
#[derive(Debug, Clone, Serialize)]
pub struct StructReport {
    pub path: String,
    pub line: usize,
    pub column: usize,
    /// `struct` (Rust) or `class` (Python).
    pub kind: &'static str,
    pub name: String,
    /// The API the struct is read with: `devcheck`, `burn`, `tch` or `candle`.
    pub api: &'static str,
    /// How the framework moves it, in words.
    pub mover: String,
    pub fields: Vec<FieldReport>,
    /// What the derive would reject, with its help.
    pub errors: Vec<String>,
    /// Lint findings in the struct and its impls.
    #[serde(serialize_with = "findings_json")]
    pub findings: Vec<Diagnostic>,
}

/// One field of a [`StructReport`].
#[derive(Debug, Clone, Serialize)]
pub struct FieldReport {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub class: String,
    /// `moves`, `left behind`, `stays` (candle), `rejected`, `unknown`, or `-` for plain data.
    pub fate: &'static str,
    pub saved: Option<bool>,
    pub note: Option<String>,
    pub line: usize,
}

impl StructReport {
    pub fn count(&self, fate: &str) -> usize {
        self.fields.iter().filter(|f| f.fate == fate).count()
    }
}

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
    let pool = super::stack::pool().map_err(|source| LintError::Io { path: PathBuf::from("."), source })?;
    let per_file: Vec<InspectRun> =
        pool.install(|| run.files.into_par_iter().map(|r| inspect_report(r, settings)).collect());
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
    inspect_report(super::lint_source(path, text, settings), settings)
}

/// The structs of a linted file, or its `D000` when it could not be analysed.
fn inspect_report(report: FileReport, settings: &Settings) -> InspectRun {
    let mut out = InspectRun { files: 1, ..InspectRun::default() };
    let parse_error = |d: &Diagnostic| d.code == super::registry::PARSE_ERROR.code;
    if report.diagnostics.iter().any(parse_error) {
        out.unparsed = report.diagnostics.into_iter().filter(parse_error).collect();
        return out;
    }
    // The file is parsed again here, on a stack deep enough for its tree (a fresh segment only
    // when this thread has too little left).
    let structs = match Language::of_named_file(&report.disk_path) {
        Language::Python => crate::python::inspect::classes_in(&report),
        Language::Rust => {
            // The file was linted, so its depth is within the limit.
            let depth = super::unparseable(&report.text).unwrap_or(super::depth::MAX_DEPTH);
            super::stack::within(super::depth::stack_needed(depth), || structs_in(&report, settings))
        }
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
    }
}

fn structs_in(report: &FileReport, settings: &Settings) -> Vec<StructReport> {
    let (text, kind, diagnostics) = (&*report.text, report.kind, &report.diagnostics[..]);
    let base = super::stripped_prefix(text);
    let Ok(ast) = syn::parse_file(&text[base..]) else {
        proc_macro2::extra::invalidate_current_thread_spans();
        return Vec::new();
    };
    let apis = settings.api.map(ApiSet::only).unwrap_or_else(|| profile::detect(&ast, text));
    let file = FileCx { text, base, kind, apis, preview: false, backend: false };
    let facts = Facts::gather(&file, &ast.items);
    let mut found = Vec::new();
    collect(&ast.items, &mut found);
    let mut impls: Vec<(String, Range<usize>)> = Vec::new();
    impl_ranges(&file, &ast.items, &mut impls);
    let index = LineIndex::new(text);
    let shown = report.path.clone();
    let reports = found
        .into_iter()
        .filter_map(|s| {
            let (api, mover, fields) = read_struct(&file, s, &facts)?;
            let name = s.ident.to_string();
            let own = file.range(s.struct_token.span).start..struct_end(&file, s);
            let mut ranges = vec![own];
            ranges.extend(impls.iter().filter(|(n, _)| *n == name).map(|(_, r)| r.clone()));
            let findings = diagnostics
                .iter()
                .filter(|d| ranges.iter().any(|r| r.contains(&d.range.start)))
                .cloned()
                .collect();
            let at = index.line_col(text, file.range(s.ident.span()).start);
            let errors =
                fields.iter().flat_map(|f| f.errors.iter().map(|e| format!("`{}`: {e}", f.name))).collect();
            Some(StructReport {
                path: shown.clone(),
                line: at.line,
                column: at.column,
                kind: "struct",
                name,
                api: api.as_str(),
                mover,
                fields: fields
                    .into_iter()
                    .map(|f| FieldReport {
                        line: index.line_col(text, f.range.start).line,
                        name: f.name,
                        ty: f.ty,
                        class: f.class,
                        fate: f.fate.as_str(),
                        saved: f.saved,
                        note: f.note,
                    })
                    .collect(),
                errors,
                findings,
            })
        })
        .collect();
    proc_macro2::extra::invalidate_current_thread_spans();
    reports
}

fn struct_end(file: &FileCx<'_>, s: &syn::ItemStruct) -> usize {
    match &s.fields {
        syn::Fields::Named(f) => file.range(f.brace_token.span.join()).end,
        syn::Fields::Unnamed(f) => file.range(f.paren_token.span.join()).end,
        syn::Fields::Unit => file.range(s.ident.span()).end,
    }
}

/// Which API reads the struct, how it moves, and its fields; `None` for a struct holding no
/// module state.
fn read_struct(
    file: &FileCx<'_>,
    s: &syn::ItemStruct,
    facts: &Facts,
) -> Option<(Api, String, Vec<FieldFate>)> {
    let apis = file.apis;
    let module = devcheck_classify::has_module_derive(&s.attrs);
    let name = &s.ident;
    if module && apis.is(Api::Burn) {
        return Some((
            Api::Burn,
            format!("`{name}::to_device(&device)` (burn's `Module`)"),
            burn_fields(file, s),
        ));
    }
    if module && (apis.is(Api::Devcheck) || apis.is_empty()) {
        return Some((
            Api::Devcheck,
            format!("`{name}::to(&device)` (devcheck's `Module`)"),
            devcheck_fields(file, s),
        ));
    }
    if !s.fields.iter().any(|f| mentions_tensor(&f.ty) || is_tch_module(&f.ty)) {
        return None;
    }
    let facts = facts.structs.get(&name.to_string());
    if apis.is(Api::Tch) {
        let fields = plain_struct_fields(file, s, facts, Api::Tch);
        return Some((Api::Tch, "`VarStore::set_device(device)` (tch)".to_string(), fields));
    }
    if apis.is(Api::Candle) {
        let fields = plain_struct_fields(file, s, facts, Api::Candle);
        return Some((
            Api::Candle,
            "nothing (candle modules do not move: each tensor stays where its constructor made it)"
                .to_string(),
            fields,
        ));
    }
    None
}

fn is_tch_module(ty: &syn::Type) -> bool {
    let syn::Type::Path(p) = ty else { return false };
    p.path.segments.len() >= 2 && p.path.segments[0].ident == "nn"
}

fn collect<'a>(items: &'a [Item], out: &mut Vec<&'a syn::ItemStruct>) {
    for item in items {
        match item {
            Item::Struct(s) if !is_cfg_test(&s.attrs) => out.push(s),
            Item::Mod(m) if !is_cfg_test(&m.attrs) => {
                if let Some((_, items)) = &m.content {
                    collect(items, out);
                }
            }
            _ => {}
        }
    }
}

fn impl_ranges(file: &FileCx<'_>, items: &[Item], out: &mut Vec<(String, Range<usize>)>) {
    for item in items {
        match item {
            Item::Impl(imp) => {
                if let Some(name) = type_name(&imp.self_ty) {
                    let start = file.range(imp.impl_token.span).start;
                    let end = file.range(imp.brace_token.span.join()).end;
                    out.push((name, start..end));
                }
            }
            Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    impl_ranges(file, items, out);
                }
            }
            _ => {}
        }
    }
}

fn findings_json<S: serde::Serializer>(findings: &[Diagnostic], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(findings.len()))?;
    for d in findings {
        seq.serialize_element(&serde_json::json!({
            "code": d.code,
            "name": d.name,
            "severity": d.severity.as_str(),
            "message": d.message,
            "path": d.path,
            "line": d.start.line,
            "column": d.start.column,
            "end_line": d.end.line,
            "end_column": d.end.column,
            "help": d.help,
        }))?;
    }
    seq.end()
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
