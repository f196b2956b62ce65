//! Applying fixes: only those at or below the chosen applicability, never two that overlap, and
//! only when the fixed file still parses. Each file is fixed on its own: it gets its own outcome,
//! and a file that cannot be fixed or written never stops the others. Files are replaced
//! atomically ([`crate::atomic`]); when a write fails, the file and its report stay as they were.

use std::collections::BTreeMap;
use std::path::Path;

use rayon::prelude::*;

use super::config::Settings;
use super::diagnostic::{Applicability, Edit};
use super::driver::{LintRun, Root};
use super::error::LintError;
use super::output::printable_line;
use super::pipeline::FileReport;
use super::source::Language;
use crate::pipeline::compile_errors;

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
    /// `refused` fixes were left out because the text they made would not compile (a bug in a
    /// fix); `refused_because` says why the first was.
    Fixed { findings: usize, refused: usize, refused_because: Option<String> },
    /// There was nothing to fix.
    Unchanged,
    /// Every fix made text the language's compiler would refuse (a bug in a fix): nothing was
    /// applied to this file.
    Rejected { reason: String },
    /// The fixed text was not written (it could not be, or must not be); the file is as it was,
    /// and so is its report.
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
    /// What was done to the files: fixes, or suppression comments (`--add-ignore`).
    pub action: Action,
}

/// What a [`FixSummary`] reports on: `--fix` or `--add-ignore` (the same guarantees, other words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Action {
    #[default]
    Fix,
    AddIgnore,
}

impl Action {
    /// (done, not done, nothing to do, a part not applied, who to tell)
    fn words(self) -> (&'static str, &'static str, &'static str, (&'static str, &'static str), &'static str) {
        match self {
            Action::Fix => {
                ("fixed", "not fixed", "nothing to fix", ("fix", "fixes"), "a bug in a fix; please report it")
            }
            Action::AddIgnore => (
                "suppressed",
                "not suppressed",
                "nothing to suppress",
                ("comment", "comments"),
                "the comment would change the code; please report it",
            ),
        }
    }
}

impl FixSummary {
    /// Findings removed by fixes.
    pub fn fixed(&self) -> usize {
        self.files
            .iter()
            .map(|f| match f.outcome {
                FixOutcome::Fixed { findings, .. } => findings,
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

    /// Files none of whose fixes made valid text.
    pub fn rejected(&self) -> impl Iterator<Item = &FileFix> {
        self.with(|o| matches!(o, FixOutcome::Rejected { .. }))
    }

    /// Files that could not be written.
    pub fn failed(&self) -> impl Iterator<Item = &FileFix> {
        self.with(|o| matches!(o, FixOutcome::Failed { .. }))
    }

    /// Did fixing go wrong for some file (a fix that made invalid text, a file not written)?
    pub fn has_errors(&self) -> bool {
        self.files.iter().any(|f| match &f.outcome {
            FixOutcome::Fixed { refused, .. } => *refused > 0,
            FixOutcome::Unchanged => false,
            FixOutcome::Rejected { .. } | FixOutcome::Failed { .. } => true,
        })
    }

    /// What `devcheck lint --fix` prints: a line for each file fixed or not fixed, then the
    /// counts (files with nothing to fix are only counted).
    pub fn render(&self) -> String {
        let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let (done, not_done, nothing, (unit, units), report) = self.action.words();
        let mut out = String::new();
        for file in &self.files {
            let path = printable_line(&file.path);
            let line = match &file.outcome {
                FixOutcome::Fixed { findings, refused: 0, .. } => {
                    format!("{path}: {done} {}", plural(*findings, "finding", "findings"))
                }
                FixOutcome::Fixed { findings, refused, refused_because } => format!(
                    "{path}: {done} {}; {} not applied: {} ({report})",
                    plural(*findings, "finding", "findings"),
                    plural(*refused, unit, units),
                    printable_line(refused_because.as_deref().unwrap_or("the new text would not compile"))
                ),
                FixOutcome::Unchanged => continue,
                FixOutcome::Rejected { reason } => {
                    format!(
                        "{path}: {not_done}: {} ({report}); the file is unchanged",
                        printable_line(reason)
                    )
                }
                FixOutcome::Failed { reason } => {
                    format!("{path}: {not_done}: {}; the file is unchanged", printable_line(reason))
                }
            };
            out.push_str(&format!("devcheck: {line}\n"));
        }
        let fixed = self.fixed_files().count();
        let not_fixed = self.rejected().count() + self.failed().count();
        let unchanged = self.with(|o| *o == FixOutcome::Unchanged).count();
        let mut parts = vec![format!(
            "{done} {} in {}",
            plural(self.fixed(), "finding", "findings"),
            plural(fixed, "file", "files")
        )];
        if not_fixed > 0 {
            parts.push(format!("{} {not_done}", plural(not_fixed, "file", "files")));
        }
        if unchanged > 0 {
            parts.push(format!("{} with {nothing}", plural(unchanged, "file", "files")));
        }
        out.push_str(&format!("devcheck: {}\n", parts.join(", ")));
        out
    }
}

/// `--diff`: what `--fix` would write to a file, as a unified diff (`a/PATH`, `b/PATH`); empty
/// when nothing changes.
pub fn unified_diff(path: &str, before: &str, after: &str) -> String {
    if before == after {
        return String::new();
    }
    let shown = printable_line(path);
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{shown}"), &format!("b/{shown}"))
        .to_string()
}

/// Applies fixes to every file of the run, writes the files (when `write`), and re-lints them so
/// the run reports what is left. Files are fixed in parallel; `Err` only when no threads could
/// be started. A file is written only where it is: inside the paths the run was given (a
/// symbolic link in a folder that leads out of it is linted, not rewritten).
pub fn apply_fixes(
    run: &mut LintRun,
    mode: FixMode,
    settings: &Settings,
    write: bool,
) -> Result<FixSummary, LintError> {
    let pool = crate::pipeline::pool()
        .map_err(|source| LintError::Io { path: std::path::PathBuf::from("."), source })?;
    let before: Vec<usize> = run.files.iter().map(|r| r.diagnostics.len()).collect();
    let (roots, project) = (&run.roots, &*run.project);
    let mut files: Vec<FileFix> = pool.install(|| {
        run.files
            .par_iter_mut()
            .map(|report| FileFix {
                path: report.path.clone(),
                outcome: fix_file(report, mode, settings, project, write, roots),
            })
            .collect()
    });
    if files.iter().any(|f| matches!(f.outcome, FixOutcome::Fixed { .. })) {
        // The re-linted files' crate-wide findings (a helper called per layer, ...), then what
        // is really gone.
        crate::driver::resolve(&mut run.files);
        for ((file, report), before) in files.iter_mut().zip(&run.files).zip(before) {
            if let FixOutcome::Fixed { findings, .. } = &mut file.outcome {
                *findings = before.saturating_sub(report.diagnostics.len());
            }
        }
    }
    Ok(FixSummary { files, action: Action::Fix })
}

/// Fixes one file: rounds of fixes (they can overlap; each round applies the ones left out of the
/// previous one), each checked by the language's own rules and re-linted, then one atomic write.
fn fix_file(
    report: &mut FileReport,
    mode: FixMode,
    settings: &Settings,
    project: &crate::python::Project,
    write: bool,
    roots: &[Root],
) -> FixOutcome {
    if count_fixable(report, mode) == 0 {
        return FixOutcome::Unchanged;
    }
    let lang = Language::of_named_file(&report.disk_path);
    // What the compiler already refuses in the file is not a fix's doing. (The file parsed: its
    // rules ran.)
    let path = report.disk_path.clone();
    let already = compile_errors(&path, &report.text).unwrap_or_default();
    let valid = |text: &str| match compile_errors(&path, text) {
        Err(e) => Err(format!("the fixed text would not be valid {}: {e}", lang.title())),
        Ok(errors) => match new_errors(&already, errors) {
            Some(e) => Err(format!("the fixed text would not compile as {}: {e}", lang.title())),
            None => Ok(()),
        },
    };
    let original = report.clone();
    let mut fixed = report.clone();
    let mut changed = false;
    let (mut refused, mut refused_because) = (0, None);
    for _ in 0..4 {
        let fixable = count_fixable(&fixed, mode);
        let groups = non_overlapping(&fixed, mode);
        if groups.is_empty() {
            break;
        }
        let all = apply(&fixed.text, &groups);
        // Too large to lint again (and to check) is not a bug in a fix: the file stays as it is.
        if all.len() > crate::MAX_FILE_BYTES {
            return FixOutcome::Failed {
                reason: format!(
                    "the fixed text would be {} bytes, more than the limit of {} bytes",
                    all.len(),
                    crate::MAX_FILE_BYTES
                ),
            };
        }
        let round = apply_valid(&fixed.text, &groups, all, &valid);
        refused += round.refused;
        refused_because = refused_because.or(round.refused_because);
        let Some(text) = round.text else { break };
        fixed = crate::pipeline::lint_text(
            &fixed.disk_path,
            &fixed.path,
            fixed.kind,
            text.into(),
            settings,
            project,
            None,
        );
        changed = true;
        // A round that removed nothing would only apply the same edits again.
        if count_fixable(&fixed, mode) >= fixable {
            break;
        }
    }
    if !changed {
        return match refused_because {
            Some(reason) => FixOutcome::Rejected { reason },
            None => FixOutcome::Unchanged,
        };
    }
    if write {
        if let Some(reason) = outside(&fixed.disk_path, roots) {
            return FixOutcome::Failed { reason };
        }
        let (on_disk, new) = match original.to_write(&fixed.text) {
            Ok(pair) => pair,
            Err(reason) => return FixOutcome::Failed { reason },
        };
        if let Err(e) =
            devcheck_files::replace_if_unchanged(&fixed.disk_path, on_disk.as_bytes(), new.as_bytes())
        {
            return FixOutcome::Failed { reason: format!("could not write it: {e}") };
        }
        fixed.source = original.source.as_ref().map(|_| new.into());
    }
    let findings = original.diagnostics.len().saturating_sub(fixed.diagnostics.len());
    if fixed.source.is_none() {
        fixed.source.clone_from(&original.source);
    }
    *report = fixed;
    FixOutcome::Fixed { findings, refused, refused_because }
}

/// Why `file` must not be written: it resolves to a file outside every path the run was given
/// (a symbolic link inside a folder that points out of it). A run made without paths (by hand,
/// through the library) is not limited.
pub(crate) fn outside(file: &Path, roots: &[Root]) -> Option<String> {
    if roots.is_empty() {
        return None;
    }
    let resolved = std::fs::canonicalize(file).ok()?;
    let inside = roots.iter().any(|r| r.holds(&resolved));
    (!inside).then(|| {
        format!(
            "it is a link to `{}`, outside the paths given; name that file to fix it",
            crate::source::display_path(&resolved)
        )
    })
}

/// The first error of `now` that `before` does not account for (a multiset difference).
pub(crate) fn new_errors(before: &[String], now: Vec<String>) -> Option<String> {
    let mut left: Vec<&String> = before.iter().collect();
    for e in now {
        match left.iter().position(|b| **b == e) {
            Some(i) => {
                left.swap_remove(i);
            }
            None => return Some(e),
        }
    }
    None
}

fn count_fixable(report: &FileReport, mode: FixMode) -> usize {
    report.diagnostics.iter().filter(|d| d.fix.as_ref().is_some_and(|f| mode.allows(f.applicability))).count()
}

/// The applicable fixes (each a group of edits made together) that do not overlap an earlier
/// one, in order of position. Linear in the fixes (up to a log factor): a file can have tens of
/// thousands.
fn non_overlapping(report: &FileReport, mode: FixMode) -> Vec<&[Edit]> {
    let text_len = report.text.len();
    let mut fixes: Vec<&[Edit]> = report
        .diagnostics
        .iter()
        .filter_map(|d| d.fix.as_ref())
        .filter(|f| mode.allows(f.applicability) && !f.edits.is_empty())
        .map(|f| f.edits.as_slice())
        .filter(|edits| {
            edits.iter().all(|e| {
                e.range.start <= e.range.end
                    && e.range.end <= text_len
                    && report.text.is_char_boundary(e.range.start)
                    && report.text.is_char_boundary(e.range.end)
            })
        })
        .collect();
    fixes.sort_by_key(|edits| edits.iter().map(|e| e.range.start).min().unwrap_or(0));
    // Chosen edits by start: they never overlap one another, so an edit can only overlap the
    // last one starting before it and those starting inside it.
    let mut chosen: BTreeMap<usize, usize> = BTreeMap::new();
    let overlaps = |chosen: &BTreeMap<usize, usize>, e: &Edit| {
        let (s, t) = (e.range.start, e.range.end);
        let before = chosen.range(..s).next_back().is_some_and(|(_, &end)| end > s);
        let inside =
            chosen.range(s..=t).any(|(&cs, &ce)| cs < t || cs == s || (ce == cs && cs == t && s == t));
        before || inside
    };
    let mut out = Vec::new();
    for edits in fixes {
        if edits.iter().any(|e| overlaps(&chosen, e)) {
            continue;
        }
        // Two edits of one fix overlapping each other would not apply either.
        let mut own = BTreeMap::new();
        if edits.iter().any(|e| {
            let clash = overlaps(&own, e);
            own.insert(e.range.start, e.range.end);
            clash
        }) {
            continue;
        }
        chosen.extend(own);
        out.push(edits);
    }
    out
}

/// The text with these (non-overlapping) fixes applied.
pub(crate) fn apply(text: &str, fixes: &[&[Edit]]) -> String {
    let mut edits: Vec<&Edit> = fixes.iter().flat_map(|f| f.iter()).collect();
    edits.sort_by_key(|e| (e.range.start, e.range.end));
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for e in edits {
        out.push_str(&text[pos..e.range.start]);
        out.push_str(&e.replacement);
        pos = e.range.end;
    }
    out.push_str(&text[pos..]);
    out
}

/// One round of fixes: the text with every fix applied whose result the compiler accepts.
pub(crate) struct Round {
    /// `None` when no fix could be applied.
    pub text: Option<String>,
    pub refused: usize,
    pub refused_because: Option<String>,
}

/// Bisections of a round whose text is refused before the remaining fixes are refused without
/// looking: each costs a parse of the file.
const MAX_BISECTIONS: usize = 64;

/// Puts the halves of a part that failed on the list to try (the left one next); a single fix
/// that failed is refused.
fn split<'f, 'e>(part: &'f [&'e [Edit]], pending: &mut Vec<&'f [&'e [Edit]]>, refused: &mut usize) {
    if part.len() > 1 {
        let (left, right) = part.split_at(part.len() / 2);
        pending.push(right);
        pending.push(left);
    } else {
        *refused += part.len();
    }
}

/// Applies `fixes` (`all` is the text with all of them); when the result is not valid, finds the fixes that make it so by halving
/// (a few parses for a few bad fixes among many) and applies the others.
pub(crate) fn apply_valid(
    text: &str,
    fixes: &[&[Edit]],
    all: String,
    valid: &dyn Fn(&str) -> Result<(), String>,
) -> Round {
    let reason = match valid(&all) {
        Ok(()) => return Round { text: Some(all), refused: 0, refused_because: None },
        Err(reason) => reason,
    };
    let mut accepted: Vec<&[Edit]> = Vec::new();
    let mut refused = 0;
    // Parts still to try, the next last; the whole is known to fail, so it starts halved.
    let mut pending: Vec<&[&[Edit]]> = Vec::new();
    split(fixes, &mut pending, &mut refused);
    let mut parses = 0;
    while let Some(part) = pending.pop() {
        if parses >= MAX_BISECTIONS {
            refused += part.len();
            continue;
        }
        parses += 1;
        let mut candidate = accepted.clone();
        candidate.extend_from_slice(part);
        if valid(&apply(text, &candidate)).is_ok() {
            accepted = candidate;
        } else {
            split(part, &mut pending, &mut refused);
        }
    }
    let text = (!accepted.is_empty()).then(|| apply(text, &accepted));
    Round { text, refused, refused_because: Some(reason) }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::diagnostic::Fix;
    use crate::{Overrides, Settings};

    /// Preview on (D009, whose finding the tests borrow, is a preview rule), these rules off.
    fn settings(ignore: &[&str]) -> Settings {
        let overrides = Overrides {
            ignore: ignore.iter().map(|s| s.to_string()).collect(),
            preview: true,
            ..Overrides::default()
        };
        Settings::load(None, &overrides).expect("settings")
    }

    /// A Python file with one finding whose fix is replaced by `edits`.
    fn report_with_fix(text: &str, edits: Vec<Edit>) -> FileReport {
        let mut report = crate::lint_source("m.py", text, &settings(&[]));
        let d = report.diagnostics.first_mut().expect("a finding");
        d.fix = Some(Fix::new(Applicability::Safe, "a fix", edits));
        report
    }

    const MODEL: &str = "import torch\nfrom torch.utils.data import DataLoader\n\ndef train(ds, dev):\n    \
                         loader = DataLoader(ds, pin_memory=True)\n    for xb in loader:\n        \
                         xb = xb.to(dev)\n";

    #[test]
    fn a_fix_that_would_not_compile_is_refused_whatever_the_user_ignores() {
        let settings = settings(&["D000"]);
        let at = MODEL.find("xb.to(dev)").expect("the call") + "xb.to(dev".len();
        // A repeated keyword: ruff's parser takes it, CPython refuses the file.
        let bad = vec![Edit { range: at..at, replacement: ", non_blocking=True, non_blocking=True".into() }];
        let mut report = report_with_fix(MODEL, bad);
        let outcome =
            fix_file(&mut report, FixMode::Safe, &settings, &crate::python::Project::default(), false, &[]);
        assert_eq!(
            outcome,
            FixOutcome::Rejected {
                reason:
                    "the fixed text would not compile as Python: Duplicate keyword argument `non_blocking`"
                        .into()
            }
        );
        assert_eq!(&*report.text, MODEL);
        // One that does not parse at all.
        let broken = vec![Edit { range: at..at, replacement: "((".into() }];
        let mut report = report_with_fix(MODEL, broken);
        let outcome =
            fix_file(&mut report, FixMode::Safe, &settings, &crate::python::Project::default(), false, &[]);
        assert!(
            matches!(&outcome, FixOutcome::Rejected { reason } if reason.starts_with("the fixed text would not be valid Python")),
            "{outcome:?}"
        );
    }

    #[test]
    fn the_bad_fixes_of_a_round_are_found_and_the_good_ones_applied() {
        let text = "a = 1\n".repeat(40);
        let good = |i: usize| vec![Edit { range: i * 6..i * 6 + 1, replacement: "b".into() }];
        let bad = |i: usize| vec![Edit { range: i * 6 + 4..i * 6 + 5, replacement: "(".into() }];
        let fixes: Vec<Vec<Edit>> =
            (0..40).map(|i| if i == 7 || i == 31 { bad(i) } else { good(i) }).collect();
        let refs: Vec<&[Edit]> = fixes.iter().map(Vec::as_slice).collect();
        let valid = |t: &str| match compile_errors(Path::new("m.py"), t) {
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        let round = apply_valid(&text, &refs, apply(&text, &refs), &valid);
        assert_eq!(round.refused, 2);
        let fixed = round.text.expect("the good fixes");
        assert_eq!(fixed.matches("b = 1").count(), 38);
        assert_eq!(fixed.matches("a = 1").count(), 2);
    }

    /// The overlap rule as it was first written, pair by pair: the fast version must agree.
    fn overlaps_pairwise(chosen: &[Edit], e: &Edit) -> bool {
        chosen.iter().any(|c| {
            e.range.start < c.range.end && c.range.start < e.range.end
                || (e.range.is_empty() && c.range.contains(&e.range.start))
                || (c.range.is_empty() && e.range.contains(&c.range.start))
                || (e.range.is_empty() && c.range.is_empty() && e.range.start == c.range.start)
        })
    }

    proptest! {
        #[test]
        fn the_overlap_check_chooses_what_the_pairwise_one_chooses(
            fixes in proptest::collection::vec(
                proptest::collection::vec((0usize..60, 0usize..6), 1..3), 0..40),
        ) {
            let text = "x".repeat(80);
            let mut report = crate::lint_source("m.py", "", &Settings::default());
            report.text = text.as_str().into();
            report.diagnostics = fixes.iter().map(|edits| {
                let mut d = crate::lint_source("m.py", MODEL, &settings(&[])).diagnostics.remove(0);
                d.fix = Some(Fix::new(Applicability::Safe, "f", edits.iter().map(|&(s, l)| Edit { range: s..s + l, replacement: "y".into() }).collect()));
                d
            }).collect();
            let fast: Vec<Vec<Edit>> = non_overlapping(&report, FixMode::Safe).into_iter().map(<[Edit]>::to_vec).collect();
            // The reference: in order of first start, a fix whose edits overlap nothing chosen
            // (nor one another) is taken.
            let mut sorted: Vec<Vec<Edit>> = fixes.iter().map(|edits| edits.iter().map(|&(s, l)| Edit { range: s..s + l, replacement: "y".into() }).collect()).collect();
            sorted.sort_by_key(|edits: &Vec<Edit>| edits.iter().map(|e| e.range.start).min().unwrap_or(0));
            let mut chosen: Vec<Edit> = Vec::new();
            let mut slow = Vec::new();
            for edits in sorted {
                let mut own: Vec<Edit> = Vec::new();
                let clash = edits.iter().any(|e| {
                    let c = overlaps_pairwise(&chosen, e) || overlaps_pairwise(&own, e);
                    own.push(e.clone());
                    c
                });
                if !clash {
                    chosen.extend(own);
                    slow.push(edits);
                }
            }
            prop_assert_eq!(fast, slow);
        }
    }
}
