//! Findings and the one report error all checks render through.
//!
//! A [`Finding`] is one problem with a code, a severity, the source line it points at (shown as a
//! snippet when the file is readable from the working directory, as it is in tests) and a help
//! line. A [`CheckError`] gathers the findings of one check under a title; it is the
//! [`crate::Error::Check`] variant, so a failing check reads the same through `?`, `{:?}`, the
//! assertion macros and snapshots.

use std::collections::HashMap;
use std::fmt;
use std::panic::Location;
use std::sync::{Arc, Mutex, OnceLock};

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode, SourceSpan};

/// How bad a finding is. Errors and warnings make a report unclean; notes only inform.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Fails on the real device, or computes with data on the wrong one.
    Error,
    /// Works, but slowly or fragilely (a sync per step, a field a move will not carry).
    Warning,
    /// Worth knowing, nothing to fix.
    Note,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem a check found.
#[derive(Clone, Debug)]
pub struct Finding {
    code: &'static str,
    severity: Severity,
    message: String,
    location: Option<&'static Location<'static>>,
    label: String,
    details: Vec<String>,
    help: String,
    count: usize,
    snippet: Option<(NamedSource<Arc<str>>, SourceSpan)>,
}

impl Finding {
    pub(crate) fn new(code: &'static str, severity: Severity, message: impl Into<String>) -> Finding {
        Finding {
            code,
            severity,
            message: message.into(),
            location: None,
            label: String::new(),
            details: Vec::new(),
            help: String::new(),
            count: 1,
            snippet: None,
        }
    }

    /// Points the finding at a source line, labelled `label`.
    pub(crate) fn at(mut self, location: &'static Location<'static>, label: impl Into<String>) -> Finding {
        self.location = Some(location);
        self.label = label.into();
        self.snippet = snippet(location);
        self
    }

    /// A line under the message (an operand, a second site).
    pub(crate) fn detail(mut self, line: impl Into<String>) -> Finding {
        self.details.push(line.into());
        self
    }

    pub(crate) fn help(mut self, help: impl Into<String>) -> Finding {
        self.help = help.into();
        self
    }

    /// How many times it happened (a line in a loop fires once per iteration).
    pub(crate) fn times(mut self, count: usize) -> Finding {
        self.count = count;
        self
    }

    /// A stable kebab-case name: `device-mismatch`, `created-off-device`, `round-trip`, ...
    pub fn code(&self) -> &'static str {
        self.code
    }

    pub fn severity(&self) -> Severity {
        self.severity
    }

    /// The one-line message, without details.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The source line it points at.
    pub fn location(&self) -> Option<&'static Location<'static>> {
        self.location
    }

    /// `file:line:col` of [`Finding::location`].
    pub fn location_string(&self) -> Option<String> {
        self.location.map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
    }

    /// The lines under the message.
    pub fn details(&self) -> &[String] {
        &self.details
    }

    pub fn help_text(&self) -> &str {
        &self.help
    }

    /// How many times it happened.
    pub fn count(&self) -> usize {
        self.count
    }

    /// One line: `error[device-mismatch] message (3 times) at file:line:col`.
    pub fn one_line(&self) -> String {
        let mut out = format!("{}[{}] {}", self.severity, self.code, self.message);
        if self.count > 1 {
            out.push_str(&format!(" ({} times)", self.count));
        }
        if let Some(at) = self.location_string() {
            out.push_str(&format!(" at {at}"));
        }
        out
    }

    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "code": self.code,
            "severity": self.severity.as_str(),
            "message": self.message,
            "count": self.count,
            "path": self.location.map(|l| l.file()),
            "line": self.location.map(|l| l.line()),
            "column": self.location.map(|l| l.column()),
            "details": self.details,
            "help": self.help,
        })
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if self.count > 1 {
            write!(f, " ({} times)", self.count)?;
        }
        // Without a snippet, the location must be in the text.
        if self.snippet.is_none()
            && let Some(at) = self.location_string()
        {
            write!(f, "\n  at {at}")?;
        }
        for line in &self.details {
            write!(f, "\n  {line}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Finding {}

impl Diagnostic for Finding {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(format!("devcheck::check::{}", self.code.replace('-', "_"))))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
            Severity::Note => miette::Severity::Advice,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        (!self.help.is_empty()).then(|| Box::new(&self.help) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.snippet.as_ref().map(|(source, _)| source as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let (_, span) = self.snippet.as_ref()?;
        let label = (!self.label.is_empty()).then(|| self.label.clone());
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(label, *span))))
    }
}

// ---------------------------------------------------------------------------------------------
// The report error

/// A check that found problems: a title, summary lines, and every finding with its source line
/// and help. This is [`crate::Error::Check`]; its `Debug` (through `crate::Error`) and
/// [`CheckError::render`] show the full report.
#[derive(Clone)]
pub struct CheckError(Box<ReportBody>);

#[derive(Clone, Debug)]
struct ReportBody {
    code: &'static str,
    title: String,
    summary: Vec<String>,
    help: String,
    findings: Vec<Finding>,
}

impl CheckError {
    pub(crate) fn new(
        code: &'static str,
        title: impl Into<String>,
        summary: Vec<String>,
        help: impl Into<String>,
        findings: Vec<Finding>,
    ) -> CheckError {
        CheckError(Box::new(ReportBody { code, title: title.into(), summary, help: help.into(), findings }))
    }

    pub fn title(&self) -> &str {
        &self.0.title
    }

    pub fn findings(&self) -> &[Finding] {
        &self.0.findings
    }

    /// The full report without colour at `width` columns (what tests snapshot).
    pub fn render(&self, width: usize) -> String {
        crate::error::render_diagnostic(self, width)
    }
}

impl crate::error::LayerError for CheckError {
    /// The line of its first finding that has one.
    fn location(&self) -> Option<&'static Location<'static>> {
        self.findings().iter().find_map(|f| f.location())
    }
}

impl From<CheckError> for crate::Error {
    fn from(error: CheckError) -> crate::Error {
        crate::Error::Check(crate::error::LayerDetail::new(error))
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.title)?;
        for line in &self.0.summary {
            write!(f, "\n  {line}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\n")?;
        f.write_str(&self.render(100))
    }
}

impl std::error::Error for CheckError {}

impl Diagnostic for CheckError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(format!("devcheck::check::{}", self.0.code)))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        (!self.0.help.is_empty()).then(|| Box::new(&self.0.help) as Box<dyn fmt::Display>)
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        Some(Box::new(self.0.findings.iter().map(|f| f as &dyn Diagnostic)))
    }
}

/// `2 errors, 1 warning`, or `no problems`.
pub(crate) fn count_by_severity(findings: &[Finding]) -> String {
    let count = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
    let mut parts = Vec::new();
    for (severity, one, many) in [
        (Severity::Error, "error", "errors"),
        (Severity::Warning, "warning", "warnings"),
        (Severity::Note, "note", "notes"),
    ] {
        let n = count(severity);
        if n > 0 {
            parts.push(format!("{n} {}", if n == 1 { one } else { many }));
        }
    }
    if parts.is_empty() { "no problems".to_string() } else { parts.join(", ") }
}

/// Do these findings make a report unclean (any error or warning)?
pub(crate) fn any_problem(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity != Severity::Note)
}

/// Renders a report for a panic message: colour only when stderr is a terminal.
pub(crate) fn render_for_panic(error: &CheckError) -> String {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        let handler = miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode())
            .with_links(false)
            .with_width(100);
        let mut out = String::new();
        if handler.render_report(&mut out, error).is_ok() {
            return out;
        }
    }
    error.render(100)
}

// ---------------------------------------------------------------------------------------------
// Formatting helpers shared by the tables

/// `0 B`, `512 B`, `1.5 KiB`, `474.7 MiB`.
pub fn fmt_bytes(bytes: usize) -> String {
    crate::units::format_bytes(bytes, 1)
}

/// `1,234,567`.
pub fn fmt_count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1 tensor`, `1,024 tensors`.
pub(crate) fn plural(n: usize, word: &str) -> String {
    format!("{} {word}{}", fmt_count(n), if n == 1 { "" } else { "s" })
}

/// A plain-text table: columns padded to their widest cell, numbers right-aligned.
pub(crate) struct Table {
    header: Vec<&'static str>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// `columns`: (header, right-aligned).
    pub fn new(columns: &[(&'static str, bool)]) -> Table {
        Table {
            header: columns.iter().map(|(h, _)| *h).collect(),
            right: columns.iter().map(|(_, r)| *r).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Writes the table, each line prefixed with `indent`.
    pub fn write(&self, f: &mut fmt::Formatter<'_>, indent: &str) -> fmt::Result {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let header: Vec<String> = self.header.iter().map(|h| h.to_string()).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::from(indent);
            for (i, cell) in row.iter().enumerate() {
                let width = widths.get(i).copied().unwrap_or(0);
                let pad = width.saturating_sub(cell.chars().count());
                let last = i + 1 == row.len();
                if self.right.get(i).copied().unwrap_or(false) {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    if !last {
                        line.push_str(&" ".repeat(pad));
                    }
                }
                if !last {
                    line.push_str("  ");
                }
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Source snippets

/// The source around `location`, when its file can be read from the working directory (paths
/// in `Location` are relative to the package root, where `cargo test` runs). Files are read
/// once per process.
fn snippet(location: &'static Location<'static>) -> Option<(NamedSource<Arc<str>>, SourceSpan)> {
    /// File path → its text (`None`: unreadable).
    type SourceFiles = HashMap<&'static str, Option<Arc<str>>>;
    static FILES: OnceLock<Mutex<SourceFiles>> = OnceLock::new();
    let text = {
        let mut files = FILES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        files
            .entry(location.file())
            .or_insert_with(|| std::fs::read_to_string(location.file()).ok().map(Arc::from))
            .clone()?
    };
    let span = span_at(&text, location.line(), location.column())?;
    Some((NamedSource::new(location.file(), text), span))
}

/// The span of the expression starting at `line`:`column` (1-based; columns count chars): the
/// path or method name up to its argument list, at least one char.
fn span_at(text: &str, line: u32, column: u32) -> Option<SourceSpan> {
    let line_start =
        if line <= 1 { 0 } else { text.match_indices('\n').nth(line as usize - 2).map(|(i, _)| i + 1)? };
    let line_text = text[line_start..].split('\n').next()?;
    let start = line_text.char_indices().nth(column.saturating_sub(1) as usize).map(|(i, _)| i)?;
    let rest = &line_text[start..];
    let len = rest
        .char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '.'))
        .map_or(rest.len(), |(i, _)| i)
        .max(rest.chars().next().map_or(0, char::len_utf8));
    Some(SourceSpan::new((line_start + start).into(), len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_counts_read_well() {
        assert_eq!(fmt_bytes(0), "0 B");
        assert_eq!(fmt_bytes(1023), "1023 B");
        assert_eq!(fmt_bytes(1536), "1.5 KiB");
        assert_eq!(fmt_bytes(497_759_232), "474.7 MiB");
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1000), "1,000");
        assert_eq!(fmt_count(124_439_808), "124,439,808");
    }

    #[test]
    fn spans_cover_the_called_path() {
        let text = "fn f() {\n    let m = Tensor::ones([2], &cpu)?;\n    x.to(&d)\n}\n";
        let span = span_at(text, 2, 13).unwrap();
        assert_eq!(&text[span.offset()..span.offset() + span.len()], "Tensor::ones");
        let span = span_at(text, 3, 5).unwrap();
        assert_eq!(&text[span.offset()..span.offset() + span.len()], "x.to");
        assert!(span_at(text, 9, 1).is_none());
        assert!(span_at(text, 2, 200).is_none());
    }
}
