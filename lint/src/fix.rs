//! Applying fixes: only those at or below the chosen applicability, never two that overlap, and
//! only when the fixed file still parses.

use std::path::PathBuf;

use super::config::Settings;
use super::diagnostic::{Applicability, Edit};
use super::driver::{FileReport, LintRun};
use super::error::LintError;

/// Which fixes to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixMode {
    /// `--fix`: safe fixes only.
    Safe,
    /// `--fix --unsafe-fixes`: safe and unsafe fixes.
    Unsafe,
}

impl FixMode {
    fn allows(self, a: Applicability) -> bool {
        match a {
            Applicability::Safe => true,
            Applicability::Unsafe => self == FixMode::Unsafe,
            Applicability::DisplayOnly => false,
        }
    }
}

/// What `--fix` did.
#[derive(Debug, Default)]
pub struct FixSummary {
    /// Findings removed by a fix.
    pub fixed: usize,
    /// Files rewritten.
    pub files: Vec<String>,
    /// Files whose fixed text did not parse, left untouched (a bug in a fix).
    pub rejected: Vec<String>,
}

/// Applies fixes to every file of the run, writes the files (when `write`), and re-lints them so
/// the run reports what is left.
pub fn apply_fixes(
    run: &mut LintRun,
    mode: FixMode,
    settings: &Settings,
    write: bool,
) -> Result<FixSummary, LintError> {
    let mut summary = FixSummary::default();
    for report in &mut run.files {
        let before = report.diagnostics.len();
        let mut changed = false;
        // Fixes can overlap; a few rounds apply the ones left out of the previous round.
        for _ in 0..4 {
            let fixable = count_fixable(report, mode);
            let Some(text) = fixed_text(report, mode) else { break };
            if !reparses(&report.path, &text) {
                summary.rejected.push(report.path.clone());
                break;
            }
            let path = PathBuf::from(&report.path);
            *report = super::lint_text(&path, &report.path, report.kind, text.into(), settings);
            changed = true;
            // A round that removed nothing would only apply the same edits again.
            if count_fixable(report, mode) >= fixable {
                break;
            }
        }
        if changed {
            if write {
                let path = PathBuf::from(&report.path);
                std::fs::write(&path, report.text.as_bytes())
                    .map_err(|source| LintError::Write { path, source })?;
            }
            summary.fixed += before.saturating_sub(report.diagnostics.len());
            summary.files.push(report.path.clone());
        }
    }
    Ok(summary)
}

fn count_fixable(report: &FileReport, mode: FixMode) -> usize {
    report.diagnostics.iter().filter(|d| d.fix.as_ref().is_some_and(|f| mode.allows(f.applicability))).count()
}

/// The text with every applicable, non-overlapping fix applied; `None` if there is none.
fn fixed_text(report: &FileReport, mode: FixMode) -> Option<String> {
    let mut fixes: Vec<&Vec<Edit>> = report
        .diagnostics
        .iter()
        .filter_map(|d| d.fix.as_ref())
        .filter(|f| mode.allows(f.applicability) && !f.edits.is_empty())
        .map(|f| &f.edits)
        .collect();
    fixes.sort_by_key(|edits| edits.iter().map(|e| e.range.start).min().unwrap_or(0));
    let mut chosen: Vec<&Edit> = Vec::new();
    for edits in fixes {
        let overlaps = edits.iter().any(|e| {
            chosen.iter().any(|c| {
                e.range.start < c.range.end && c.range.start < e.range.end
                    || (e.range.is_empty() && c.range.contains(&e.range.start))
                    || (c.range.is_empty() && e.range.contains(&c.range.start))
                    || (e.range.is_empty() && c.range.is_empty() && e.range.start == c.range.start)
            })
        });
        if !overlaps {
            chosen.extend(edits.iter());
        }
    }
    if chosen.is_empty() {
        return None;
    }
    chosen.sort_by_key(|e| (e.range.start, e.range.end));
    let text = &report.text;
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for e in chosen {
        if e.range.start < pos || e.range.end > text.len() {
            continue;
        }
        out.push_str(&text[pos..e.range.start]);
        out.push_str(&e.replacement);
        pos = e.range.end;
    }
    out.push_str(&text[pos..]);
    Some(out)
}

/// Does the fixed text still parse, in the file's language?
fn reparses(path: &str, text: &str) -> bool {
    match super::Language::of_named_file(std::path::Path::new(path)) {
        super::Language::Python => super::python::parses(text),
        super::Language::Rust => {
            let ok = syn::parse_file(&text[super::stripped_prefix(text)..]).is_ok();
            proc_macro2::extra::invalidate_current_thread_spans();
            ok
        }
    }
}
