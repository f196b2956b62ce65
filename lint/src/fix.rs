//! Applying fixes: only those at or below the chosen applicability, never two that overlap, and
//! only when the fixed file still parses. Each file is fixed on its own: it gets its own outcome,
//! and a file that cannot be fixed or written never stops the others. Files are replaced
//! atomically ([`crate::atomic`]); when a write fails, the file and its report stay as they were.

use rayon::prelude::*;

use super::config::Settings;
use super::diagnostic::{Applicability, Edit};
use super::driver::{FileReport, LintRun};
use super::error::LintError;
use super::output::printable_line;
use super::registry;

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

/// What `--fix` did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixOutcome {
    /// Fixes were applied (and the file written, when writing): `findings` findings are gone.
    Fixed { findings: usize },
    /// There was nothing to fix.
    Unchanged,
    /// The fixed text did not parse (a bug in a fix): nothing was applied to this file.
    Rejected,
    /// The fixed text could not be written; the file is as it was, and so is its report.
    Failed { reason: String },
}

/// One file's outcome.
#[derive(Debug, Clone)]
pub struct FileFix {
    /// As shown in diagnostics.
    pub path: String,
    pub outcome: FixOutcome,
}

/// What `--fix` did: one outcome per file of the run, in the run's order.
#[derive(Debug, Default)]
pub struct FixSummary {
    pub files: Vec<FileFix>,
}

impl FixSummary {
    /// Findings removed by fixes.
    pub fn fixed(&self) -> usize {
        self.files
            .iter()
            .map(|f| match f.outcome {
                FixOutcome::Fixed { findings } => findings,
                _ => 0,
            })
            .sum()
    }

    /// Files whose outcome matches.
    pub fn with(&self, matches: impl Fn(&FixOutcome) -> bool) -> impl Iterator<Item = &FileFix> {
        self.files.iter().filter(move |f| matches(&f.outcome))
    }

    /// Files rewritten (or, without writing, fixed in memory).
    pub fn fixed_files(&self) -> impl Iterator<Item = &FileFix> {
        self.with(|o| matches!(o, FixOutcome::Fixed { .. }))
    }

    /// Files whose fixes did not parse.
    pub fn rejected(&self) -> impl Iterator<Item = &FileFix> {
        self.with(|o| *o == FixOutcome::Rejected)
    }

    /// Files that could not be written.
    pub fn failed(&self) -> impl Iterator<Item = &FileFix> {
        self.with(|o| matches!(o, FixOutcome::Failed { .. }))
    }

    /// Did fixing go wrong for some file (a fix that did not parse, a file not written)?
    pub fn has_errors(&self) -> bool {
        self.rejected().chain(self.failed()).next().is_some()
    }

    /// What `devcheck lint --fix` prints: a line for each file fixed or not fixed, then the
    /// counts (files with nothing to fix are only counted).
    pub fn render(&self) -> String {
        let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut out = String::new();
        for file in &self.files {
            let path = printable_line(&file.path);
            let line = match &file.outcome {
                FixOutcome::Fixed { findings } => {
                    format!("{path}: fixed {}", plural(*findings, "finding", "findings"))
                }
                FixOutcome::Unchanged => continue,
                FixOutcome::Rejected => format!(
                    "{path}: not fixed: the fixed text did not parse (a bug in a fix; please report it); the file is unchanged"
                ),
                FixOutcome::Failed { reason } => {
                    format!(
                        "{path}: not fixed: could not write it: {}; the file is unchanged",
                        printable_line(reason)
                    )
                }
            };
            out.push_str(&format!("devcheck: {line}\n"));
        }
        let fixed = self.fixed_files().count();
        let not_fixed = self.rejected().count() + self.failed().count();
        let unchanged = self.with(|o| *o == FixOutcome::Unchanged).count();
        let mut parts = vec![format!(
            "fixed {} in {}",
            plural(self.fixed(), "finding", "findings"),
            plural(fixed, "file", "files")
        )];
        if not_fixed > 0 {
            parts.push(format!("{} not fixed", plural(not_fixed, "file", "files")));
        }
        if unchanged > 0 {
            parts.push(format!("{} with nothing to fix", plural(unchanged, "file", "files")));
        }
        out.push_str(&format!("devcheck: {}\n", parts.join(", ")));
        out
    }
}

/// Applies fixes to every file of the run, writes the files (when `write`), and re-lints them so
/// the run reports what is left. Files are fixed in parallel; `Err` only when no threads could
/// be started.
pub fn apply_fixes(
    run: &mut LintRun,
    mode: FixMode,
    settings: &Settings,
    write: bool,
) -> Result<FixSummary, LintError> {
    let pool = super::stack::pool()
        .map_err(|source| LintError::Io { path: std::path::PathBuf::from("."), source })?;
    let files = pool.install(|| {
        run.files
            .par_iter_mut()
            .map(|report| FileFix {
                path: report.path.clone(),
                outcome: fix_file(report, mode, settings, write),
            })
            .collect()
    });
    Ok(FixSummary { files })
}

/// Fixes one file: rounds of fixes (they can overlap; each round applies the ones left out of the
/// previous one), each re-linted, then one atomic write.
fn fix_file(report: &mut FileReport, mode: FixMode, settings: &Settings, write: bool) -> FixOutcome {
    let original = report.clone();
    let mut fixed = report.clone();
    let mut changed = false;
    for _ in 0..4 {
        let fixable = count_fixable(&fixed, mode);
        let Some(text) = fixed_text(&fixed, mode) else { break };
        let next = super::lint_text(&fixed.disk_path, &fixed.path, fixed.kind, text.into(), settings);
        // The original parsed (rules ran on it), so a parse error now is the fix's.
        if next.diagnostics.iter().any(|d| d.code == registry::PARSE_ERROR.code) {
            return FixOutcome::Rejected;
        }
        fixed = next;
        changed = true;
        // A round that removed nothing would only apply the same edits again.
        if count_fixable(&fixed, mode) >= fixable {
            break;
        }
    }
    if !changed {
        return FixOutcome::Unchanged;
    }
    if write
        && let Err(e) =
            super::atomic::replace_file(&fixed.disk_path, original.text.as_bytes(), fixed.text.as_bytes())
    {
        return FixOutcome::Failed { reason: e.to_string() };
    }
    let findings = original.diagnostics.len().saturating_sub(fixed.diagnostics.len());
    *report = fixed;
    FixOutcome::Fixed { findings }
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
        if e.range.start < pos
            || e.range.end > text.len()
            || !text.is_char_boundary(e.range.start)
            || !text.is_char_boundary(e.range.end)
        {
            continue;
        }
        out.push_str(&text[pos..e.range.start]);
        out.push_str(&e.replacement);
        pos = e.range.end;
    }
    out.push_str(&text[pos..]);
    Some(out)
}
