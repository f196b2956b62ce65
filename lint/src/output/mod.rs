//! Output formats of `devcheck lint`: human (miette reports), concise (one line each), JSON,
//! SARIF 2.1.0 and GitHub Actions annotations. Text taken from the linted files is escaped in
//! every format ([`printable`]; JSON and SARIF by their own escaping).

mod github;
mod human;
mod json;
mod printable;
mod sarif;

pub use printable::{json_escaped, printable, printable_line};

use std::fmt::Write as _;

use super::driver::LintRun;
use super::registry::Severity;

/// How findings are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// Reports with the source labelled and the help, as the compiler prints errors.
    Human,
    /// One line per finding: `path:line:col: CODE [level] message`.
    Concise,
    /// An array of objects: code, name, severity, message, path, line, column, end_line, end_column, help, fix.
    Json,
    /// SARIF 2.1.0, for GitHub code scanning and other tools.
    Sarif,
    /// GitHub Actions workflow commands (`::error file=..,line=..::..`).
    Github,
}

/// Rendering options.
#[derive(Clone, Copy, Debug)]
pub struct RenderOptions {
    pub color: bool,
    /// Line width for human reports.
    pub width: usize,
    /// Print the closing summary (human and concise formats).
    pub summary: bool,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions { color: false, width: 100, summary: true }
    }
}

/// Renders a run.
pub fn render(run: &LintRun, format: Format, opts: RenderOptions) -> String {
    match format {
        Format::Human => {
            let mut out = human::render(run, opts);
            if opts.summary {
                out.push_str(&summary(run));
            }
            out
        }
        Format::Concise => {
            let mut out = String::new();
            for d in run.diagnostics() {
                let _ = writeln!(out, "{}", concise_line(d));
            }
            if opts.summary {
                out.push_str(&summary(run));
            }
            out
        }
        Format::Json => json::render(run),
        Format::Sarif => sarif::render(run),
        Format::Github => github::render(run),
    }
}

/// The closing line: counts by level, files, and what `--fix` could do.
pub fn summary(run: &LintRun) -> String {
    let files = run.files.len();
    let errors = run.count(Severity::Error);
    let warnings = run.count(Severity::Warning);
    let total = errors + warnings;
    let files_word = if files == 1 { "file" } else { "files" };
    if total == 0 {
        return format!("No findings in {files} {files_word}.\n");
    }
    let with = run.files.iter().filter(|f| !f.diagnostics.is_empty()).count();
    let plural =
        |n: usize, one: &str, many: &str| if n == 1 { format!("{n} {one}") } else { format!("{n} {many}") };
    let mut line = format!(
        "Found {} ({}, {}) in {} of {files} {files_word}.",
        plural(total, "finding", "findings"),
        plural(errors, "error", "errors"),
        plural(warnings, "warning", "warnings"),
        with
    );
    let safe = run
        .diagnostics()
        .filter(|d| d.fix.as_ref().is_some_and(|f| f.applicability == super::Applicability::Safe))
        .count();
    let unsafe_ = run
        .diagnostics()
        .filter(|d| d.fix.as_ref().is_some_and(|f| f.applicability == super::Applicability::Unsafe))
        .count();
    if safe > 0 {
        let _ = write!(line, " {safe} fixable with `--fix`.");
    }
    if unsafe_ > 0 {
        let _ = write!(line, " {unsafe_} more with `--fix --unsafe-fixes`.");
    }
    line.push('\n');
    line
}

/// One finding on one line, as the concise format prints it: `path:line:col: CODE [severity]
/// message`, with `[*]` before the message when `--fix` fixes it, and control characters from the
/// file escaped.
pub(crate) fn concise_line(d: &crate::diagnostic::Diagnostic) -> String {
    let fixable = d.fix.as_ref().is_some_and(|f| f.applicability == super::Applicability::Safe);
    format!(
        "{}: {} [{}] {}{}{}",
        printable_line(&d.location()),
        d.code,
        d.severity.as_str(),
        if fixable { "[*] " } else { "" },
        printable_line(&d.message),
        d.repeats()
    )
}

/// `--statistics`: how many findings each rule has, most first, with how many `--fix` fixes.
pub fn statistics(run: &LintRun, format: Format) -> String {
    let mut counts: Vec<(&'static str, &'static str, usize, usize)> = Vec::new();
    for d in run.diagnostics() {
        let fixable =
            usize::from(d.fix.as_ref().is_some_and(|f| f.applicability == super::Applicability::Safe));
        match counts.iter_mut().find(|c| c.0 == d.code) {
            Some(c) => {
                c.2 += 1;
                c.3 += fixable;
            }
            None => counts.push((d.code, d.name, 1, fixable)),
        }
    }
    counts.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    if format == Format::Json {
        let rows: Vec<serde_json::Value> = counts
            .iter()
            .map(|(code, name, count, fixable)| {
                serde_json::json!({ "code": code, "name": name, "count": count, "fixable": fixable })
            })
            .collect();
        return serde_json::to_string_pretty(&rows).unwrap_or_default() + "\n";
    }
    let width = counts.iter().map(|c| c.2.to_string().len()).max().unwrap_or(1);
    let mut out = String::new();
    for (code, name, count, fixable) in &counts {
        let fix = if *fixable > 0 { format!(" ({fixable} fixable with `--fix`)") } else { String::new() };
        let _ = writeln!(out, "{count:>width$}  {code}  {name}{fix}");
    }
    out
}
