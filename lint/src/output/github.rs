//! GitHub Actions workflow commands: each finding becomes an annotation on the pull request.

use std::fmt::Write as _;

use crate::driver::LintRun;
use crate::registry::Severity;

pub(super) fn render(run: &LintRun) -> String {
    let mut out = String::new();
    for d in run.diagnostics() {
        let level = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let _ = writeln!(
            out,
            "::{level} file={},line={},col={},endLine={},endColumn={},title={}::{}",
            property(&d.path),
            d.shown_line(d.start.line),
            d.start.column,
            d.shown_line(d.end.line),
            d.end.column,
            property(&format!("{} {}", d.code, d.name)),
            data(&format!("{}{}{}", cell_prefix(d), d.message, d.repeats()))
        );
    }
    out
}

/// `cell 3: ` before a notebook finding's message (its line is the cell's).
pub(super) fn cell_prefix(d: &crate::diagnostic::Diagnostic) -> String {
    d.cell.map(|c| format!("cell {}: ", c.number)).unwrap_or_default()
}

/// Escapes a command's message: control characters as everywhere, then what the workflow
/// command syntax reserves.
fn data(s: &str) -> String {
    super::printable(s).replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a command's property value.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}
