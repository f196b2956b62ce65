//! Runs the linter over paths: walks directories with the `ignore` crate (so `.gitignore` is
//! respected), lints files in parallel, and collects one report per file in path order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use super::config::Settings;
use super::diagnostic::{Diagnostic, Finding, LineIndex};
use super::error::LintError;
use super::profile::ApiSet;
use super::registry::{self, Severity};
use super::source::{FileKind, Language};

/// The result for one file.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// As shown in diagnostics (relative, `/`-separated).
    pub path: String,
    pub kind: FileKind,
    /// The APIs detected (or forced with `--api`).
    pub apis: ApiSet,
    pub text: Arc<str>,
    /// Sorted by position.
    pub diagnostics: Vec<Diagnostic>,
}

/// The result of a run.
#[derive(Debug, Default)]
pub struct LintRun {
    /// Every file linted, in path order (files without findings included).
    pub files: Vec<FileReport>,
}

impl LintRun {
    pub fn diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.files.iter().flat_map(|f| f.diagnostics.iter())
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics().filter(|d| d.severity == severity).count()
    }

    /// Did a rule fail on some file (`D999`)? The run's results are then incomplete.
    pub fn has_internal_errors(&self) -> bool {
        self.diagnostics().any(|d| d.code == registry::INTERNAL_ERROR.code)
    }

    /// Are there findings at `level` or above?
    pub fn fails_at(&self, level: Severity) -> bool {
        self.diagnostics().any(|d| d.severity >= level)
    }
}

/// Stack size of the lint threads: syn parses recursively.
const STACK_BYTES: usize = 64 << 20;

/// Lints every Rust and Python file under `paths` (files given explicitly are linted whatever
/// their extension or ignore rules: as Python when they end in `.py`, as Rust otherwise).
pub fn lint_paths(paths: &[PathBuf], settings: &Settings) -> Result<LintRun, LintError> {
    let files = collect_files(paths, settings)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .stack_size(STACK_BYTES)
        .thread_name(|i| format!("devcheck-lint-{i}"))
        .build()
        .map_err(|e| LintError::Io { path: PathBuf::from("."), source: std::io::Error::other(e) })?;
    let files: Vec<FileReport> = pool.install(|| files.par_iter().map(|p| lint_file(p, settings)).collect());
    Ok(LintRun { files })
}

fn collect_files(paths: &[PathBuf], settings: &Settings) -> Result<Vec<PathBuf>, LintError> {
    let mut files = Vec::new();
    for root in paths {
        if !root.exists() {
            return Err(LintError::NoSuchPath { path: root.clone() });
        }
        if root.is_file() {
            files.push(root.clone());
            continue;
        }
        let walker = ignore::WalkBuilder::new(root).require_git(false).follow_links(false).build();
        for entry in walker {
            let entry = match entry {
                Ok(e) => e,
                // An unreadable directory entry is skipped; files that fail to read are reported.
                Err(_) => continue,
            };
            let path = entry.path();
            if entry.file_type().is_some_and(|t| t.is_file())
                && Language::of_path(path).is_some()
                && !settings.is_excluded(path)
            {
                files.push(path.to_path_buf());
            }
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// Reads and lints one file; a file that cannot be read or is not UTF-8 gets a `D000`.
pub(crate) fn lint_file(path: &Path, settings: &Settings) -> FileReport {
    let shown = super::display_path(path);
    let kind = FileKind::of_path(path);
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            let message = format!("could not read the file: {e}");
            return unreadable(&shown, kind, message, "check the file's permissions", 0..0, "".into());
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => super::lint_text(path, &shown, kind, Arc::from(text), settings),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let lossy: Arc<str> = Arc::from(String::from_utf8_lossy(e.as_bytes()).into_owned());
            // The lossy text keeps the valid prefix byte for byte, so `at` still points there.
            let message = format!("file is not valid UTF-8 (invalid byte at offset {at})");
            unreadable(
                &shown,
                kind,
                message,
                "source files must be UTF-8; the file was skipped",
                at..at,
                lossy,
            )
        }
    }
}

fn unreadable(
    shown: &str,
    kind: FileKind,
    message: String,
    help: &str,
    range: std::ops::Range<usize>,
    text: Arc<str>,
) -> FileReport {
    let finding = Finding::new(&registry::PARSE_ERROR, range, message).help(help);
    let index = LineIndex::new(&text);
    let start = index.line_col(&text, finding.range.start);
    let diagnostic = Diagnostic {
        code: finding.rule.code,
        name: finding.rule.name,
        severity: finding.rule.default_severity(),
        message: finding.message,
        path: shown.to_string(),
        range: finding.range.clone(),
        start,
        end: start,
        label: None,
        help: finding.help,
        fix: None,
        related: Vec::new(),
    };
    FileReport { path: shown.to_string(), kind, apis: ApiSet::EMPTY, text, diagnostics: vec![diagnostic] }
}
