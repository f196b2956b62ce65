//! `--add-ignore`: a suppression comment for every current finding, so that a team can adopt the
//! linter on an existing codebase and fail CI on new findings only.
//!
//! Each line with findings gets `# devcheck: ignore[D002, D005]` (`//` in Rust) at its end, or
//! its codes are added to the suppression comment already there. Where a comment cannot go at the
//! end of the line (the line ends inside a string, or with a `\` continuation), it goes on a line
//! of its own above, indented as the line. A comment is kept only if the file holds the same code
//! afterwards, token for token, comments and blank lines left out (a `#` inside a string would
//! change the string), and the finding is gone when the file is linted again. Every other byte
//! stays as it was, and files are written as `--fix` writes them ([`crate::fix`]).

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use crate::config::Settings;
use crate::diagnostic::{Edit, LineIndex};
use crate::driver::{LintRun, Root};
use crate::error::LintError;
use crate::fix::{Action, FileFix, FixOutcome, FixSummary, apply, apply_valid, outside};
use crate::pipeline::{FileReport, lint_text, same_code};
use crate::registry;
use crate::source::Language;

/// Adds suppression comments for every finding of the run (but `D000` and `D999`, which are
/// about files, not code), writes the files (when `write`), and re-lints them so the run reports
/// what is left. Files are handled in parallel; `Err` only when no threads could be started.
pub fn add_ignores(run: &mut LintRun, settings: &Settings, write: bool) -> Result<FixSummary, LintError> {
    let pool = crate::pipeline::pool()
        .map_err(|source| LintError::Io { path: std::path::PathBuf::from("."), source })?;
    let (roots, project) = (&run.roots, &*run.project);
    let files: Vec<FileFix> = pool.install(|| {
        run.files
            .par_iter_mut()
            .map(|report| FileFix {
                path: report.path.clone(),
                outcome: add_to_file(report, settings, project, write, roots),
            })
            .collect()
    });
    crate::driver::resolve(&mut run.files);
    Ok(FixSummary { files, action: Action::AddIgnore })
}

/// The codes to suppress on each line of a report (1-based lines).
fn wanted(report: &FileReport) -> BTreeMap<usize, BTreeSet<&'static str>> {
    let mut lines: BTreeMap<usize, BTreeSet<&'static str>> = BTreeMap::new();
    for d in &report.diagnostics {
        if d.code == registry::PARSE_ERROR.code || d.code == registry::INTERNAL_ERROR.code {
            continue;
        }
        for line in std::iter::once(d.start.line).chain(d.also.iter().map(|p| p.line)) {
            lines.entry(line).or_default().insert(d.code);
        }
    }
    lines
}

fn add_to_file(
    report: &mut FileReport,
    settings: &Settings,
    project: &crate::python::Project,
    write: bool,
    roots: &[Root],
) -> FixOutcome {
    let lines = wanted(report);
    if lines.is_empty() {
        return FixOutcome::Unchanged;
    }
    let lang = Language::of_named_file(&report.disk_path);
    let original = report.clone();
    let valid = |text: &str| {
        if same_code(&original.disk_path, &original.text, text) {
            Ok(())
        } else {
            Err("the comment would change the code (it landed in a string or a continued line)".to_string())
        }
    };
    // Round one: at the end of each line (or into its comment). Round two, for the lines whose
    // findings are still there: on a line of their own above.
    let mut text = original.text.to_string();
    let mut current = original.clone();
    let mut refused_because = None;
    for place in [Place::EndOfLine, Place::Above] {
        let left = wanted(&current);
        if left.is_empty() {
            break;
        }
        let index = LineIndex::new(&text);
        let edits: Vec<Vec<Edit>> = left
            .iter()
            .filter_map(|(&line, codes)| comment_edit(lang, &text, &index, line, codes, place))
            .collect();
        let groups: Vec<&[Edit]> = edits.iter().map(Vec::as_slice).collect();
        if groups.is_empty() {
            continue;
        }
        let round = apply_valid(&text, &groups, apply(&text, &groups), &valid);
        refused_because = refused_because.or(round.refused_because);
        let Some(next) = round.text else { continue };
        if next.len() > crate::unlinted::MAX_FILE_BYTES {
            return FixOutcome::Failed {
                reason: format!(
                    "the new text would be {} bytes, more than the limit of {} bytes",
                    next.len(),
                    crate::unlinted::MAX_FILE_BYTES
                ),
            };
        }
        current = lint_text(
            &current.disk_path,
            &current.path,
            current.kind,
            next.as_str().into(),
            settings,
            project,
            None,
        );
        text = next;
    }
    let left: usize = wanted(&current).values().map(BTreeSet::len).sum();
    let before: usize = wanted(&original).values().map(BTreeSet::len).sum();
    if text == *original.text {
        return match refused_because {
            Some(reason) => FixOutcome::Rejected { reason },
            None => FixOutcome::Unchanged,
        };
    }
    if write {
        if let Some(reason) = outside(&current.disk_path, roots) {
            return FixOutcome::Failed { reason };
        }
        let (on_disk, new) = match original.to_write(&text) {
            Ok(pair) => pair,
            Err(reason) => return FixOutcome::Failed { reason },
        };
        if let Err(e) =
            devcheck_files::replace_if_unchanged(&current.disk_path, on_disk.as_bytes(), new.as_bytes())
        {
            return FixOutcome::Failed { reason: format!("could not write it: {e}") };
        }
        current.source = original.source.as_ref().map(|_| new.into());
    }
    if current.source.is_none() {
        current.source.clone_from(&original.source);
    }
    let findings = original.diagnostics.len().saturating_sub(current.diagnostics.len());
    *report = current;
    let refused = left;
    let refused_because = (refused > 0).then(|| {
        refused_because.unwrap_or_else(|| {
            format!("{left} of {before} findings are still reported with the comments in place")
        })
    });
    FixOutcome::Fixed { findings, refused, refused_because }
}

/// Where a suppression comment goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// At the end of the finding's line, or into the suppression comment already there.
    EndOfLine,
    /// On a line of its own just above, indented as the finding's line.
    Above,
}

/// The edit that suppresses `codes` on 1-based `line` of `text`.
fn comment_edit(
    lang: Language,
    text: &str,
    index: &LineIndex,
    line: usize,
    codes: &BTreeSet<&'static str>,
    place: Place,
) -> Option<Vec<Edit>> {
    let marker = match lang {
        Language::Python => "#",
        Language::Rust => "//",
    };
    let range = index.line_range(text, line);
    let content = text.get(range.clone())?;
    let list = |codes: &BTreeSet<&str>| codes.iter().copied().collect::<Vec<_>>().join(", ");
    match place {
        Place::EndOfLine => {
            if let Some(edit) = extend_existing(range.start, content, codes) {
                return Some(vec![edit]);
            }
            // A comment after a `\` continuation is a syntax error in Python.
            if content.trim_end().ends_with('\\') {
                return None;
            }
            let end = range.end;
            Some(vec![Edit {
                range: end..end,
                replacement: format!("  {marker} devcheck: ignore[{}]", list(codes)),
            }])
        }
        Place::Above => {
            let indent: String = content.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
            let newline = if text[range.end..].starts_with("\r\n") { "\r\n" } else { "\n" };
            let start = range.start;
            Some(vec![Edit {
                range: start..start,
                replacement: format!("{indent}{marker} devcheck: ignore[{}]{newline}", list(codes)),
            }])
        }
    }
}

/// `# devcheck: ignore[D001]` already on the line: the codes are added to its list.
fn extend_existing(line_start: usize, content: &str, codes: &BTreeSet<&'static str>) -> Option<Edit> {
    let at = content.find("devcheck: ignore[")?;
    let open = at + "devcheck: ignore[".len();
    let close = open + content[open..].find(']')?;
    let mut all: BTreeSet<String> =
        content[open..close].split(',').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
    all.extend(codes.iter().map(|c| c.to_string()));
    Some(Edit {
        range: line_start + open..line_start + close,
        replacement: all.into_iter().collect::<Vec<_>>().join(", "),
    })
}
