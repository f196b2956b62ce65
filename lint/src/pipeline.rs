//! One file in, findings out: the front end of the file's language ([`crate::rust`],
//! [`crate::python`]) runs the enabled rules, and this module turns their findings into
//! diagnostics (lines and columns, suppression comments, severities), reports a rule that panics
//! as `D999`, and keeps the findings that wait on the whole crate for the crate-wide pass. It is
//! also where the language's own compile checks are asked for (`--fix`), and where the worker
//! threads get stacks for the deepest tree either front end lets through.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Settings;
use crate::diagnostic::{Diagnostic, Finding, LineCol, LineIndex};
use crate::registry;
use crate::source::{ApiSet, FileKind, Language};
use crate::suppress::Suppressions;

/// The result for one file.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// As shown in diagnostics (relative, `/`-separated, odd bytes escaped): for people only.
    pub path: String,
    /// The file itself, as walked or given: what is read and, by `--fix`, written.
    pub disk_path: PathBuf,
    pub kind: FileKind,
    /// The APIs detected (or forced with `--api`).
    pub apis: ApiSet,
    pub text: Arc<str>,
    /// Sorted by position.
    pub diagnostics: Vec<Diagnostic>,
    /// What the crate-wide pass needs (kept, so that it can run again after fixes).
    pub(crate) summary: Option<Box<crate::rust::crates::FileSummary>>,
    /// The file's own text when it is not what was linted: a notebook's JSON (`text` is its
    /// code cells joined). Fixes are written back into it.
    pub(crate) source: Option<Arc<str>>,
    /// Python: the calls to functions of other files ([`crate::python::project`]).
    pub(crate) calls: crate::python::project::Calls,
    /// Rust: no target of the file's package compiles it (no `mod` declares it), so its findings
    /// are not reported.
    pub not_compiled: bool,
    /// Rust: the run's Rust code names no accelerator and runs on the CPU, so the rules whose
    /// hazard needs one (D001, D004, D005, D007) were not applied to the file.
    pub host_only: bool,
}

impl FileReport {
    /// The file as it is on disk, or would be once its linted text is written (for a notebook,
    /// its JSON with the cells of `text`): what `--diff` compares.
    pub fn disk_text(&self) -> std::borrow::Cow<'_, str> {
        match self.to_write(&self.text) {
            Ok((_, new)) if self.source.is_some() => new.into(),
            _ => std::borrow::Cow::Borrowed(&self.text),
        }
    }

    /// The file's bytes on disk, and the bytes it holds once its linted text becomes `new_text`
    /// (for a notebook, its JSON with the changed cells written back): what `--fix` and
    /// `--add-ignore` write.
    pub(crate) fn to_write(&self, new_text: &str) -> Result<(&str, String), String> {
        match &self.source {
            None => Ok((&self.text, new_text.to_string())),
            Some(json) => {
                let notebook = crate::python::notebook::Notebook::parse(json)?;
                Ok((json, notebook.write_back(json, new_text)?))
            }
        }
    }
}

/// Up to this many findings in a file are placed without building its line index.
const FEW_FINDINGS: usize = 8;

/// Lints one file's text (`tree`: a Python file's tree as the index pass left it, else it is
/// parsed here): the enabled rules of its language, its suppression comments, lines and
/// columns, severities; findings that wait on the whole crate go to its summary. Never panics: a
/// failing rule becomes a `D999` diagnostic.
pub(crate) fn lint_text(
    path: &Path,
    shown: &str,
    kind: FileKind,
    text: Arc<str>,
    settings: &Settings,
    project: &crate::python::Project,
    tree: Option<crate::python::Tree>,
) -> FileReport {
    let enabled = settings.enabled_for(path);
    let lang = Language::of_named_file(path);
    let mut calls = crate::python::project::Calls::default();
    let analysed = match lang {
        Language::Rust => crate::rust::check(path, kind, &text, settings, &|c| enabled.contains(c)),
        // ruff's parser grows its own stack, and the walk moves to a fresh segment when the tree
        // needs more than this thread has left.
        Language::Python => Ok(catch_unwind(AssertUnwindSafe(|| {
            let (findings, made) =
                crate::python::check(path, kind, &text, &|c| enabled.contains(c), project, tree);
            calls = made;
            (findings, ApiSet::EMPTY, None)
        }))),
    };
    let (findings, apis, summary) = match analysed {
        Ok(Ok(r)) => r,
        Err(e) => (vec![crate::unlinted::no_stack(&e)], ApiSet::EMPTY, None),
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
    // A file with a few findings (and calls to other files' functions at every step) counts lines
    // from the start for each; more share an index.
    let index =
        (findings.len().saturating_add(calls.hot.len()) > FEW_FINDINGS).then(|| LineIndex::new(&text));
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
                also: Vec::new(),
                scope: f.scope,
                cell: None,
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
    // A notebook's findings are shown by cell.
    if crate::python::source_type(path) == ruff_python_ast::PySourceType::Ipynb {
        let cells = crate::python::notebook::Cells::of(&text);
        for d in &mut diagnostics {
            d.cell = cells
                .place(d.start.line)
                .map(|(number, first_line)| crate::diagnostic::CellPlace { number, first_line });
        }
    }
    let summary = summary.map(|mut s| {
        s.disk_path = Some(path.to_path_buf());
        s.pending = pending;
        s.names_accelerator = crate::rust::crates::names_accelerator(&text);
        s.target_declared = settings.target.is_some();
        Box::new(s)
    });
    let cells = (!calls.hot.is_empty()
        && crate::python::source_type(path) == ruff_python_ast::PySourceType::Ipynb)
        .then(|| crate::python::notebook::Cells::of(&text));
    for call in &mut calls.hot {
        call.line = line_col(call.offset).line;
        if let Some((number, first_line)) = cells.as_ref().and_then(|c| c.place(call.line)) {
            call.line = (call.line + 1).saturating_sub(first_line).max(1);
            call.cell = Some(number);
        }
    }
    FileReport {
        path: shown.to_string(),
        disk_path: path.to_path_buf(),
        kind,
        apis,
        text,
        diagnostics,
        summary,
        source: None,
        calls,
        not_compiled: false,
        host_only: false,
    }
}

/// What the language's own compiler would refuse in `text`, as far as the linter can tell
/// without compiling it: `Err` with the syntax error (or why the text cannot be analysed), else
/// the errors a parse lets through that the compiler does not (Python's repeated keyword
/// arguments and the like). Independent of every setting: `--fix` asks it of fixed text.
pub(crate) fn compile_errors(path: &Path, text: &str) -> Result<Vec<String>, String> {
    match Language::of_named_file(path) {
        Language::Python => crate::python::compile_errors(text, crate::python::source_type(path)),
        Language::Rust => crate::rust::compile_errors(text),
    }
}

/// Does `after` hold the same code as `before` but for comments and blank lines?
pub(crate) fn same_code(path: &Path, before: &str, after: &str) -> bool {
    match Language::of_named_file(path) {
        Language::Python => crate::python::same_code(before, after, crate::python::source_type(path)),
        Language::Rust => crate::rust::same_code(before, after),
    }
}

/// A thread pool whose workers have stacks deep enough for any tree a front end lets through,
/// for linting, inspecting and fixing files in parallel.
pub(crate) fn pool() -> std::io::Result<rayon::ThreadPool> {
    crate::stack::pool()
}
