//! JSON: an array of findings (the fields DESIGN.md fixes, plus the fix, and for a finding
//! repeated in one function, its `count` and the other places, `also`).

use serde::Serialize;

use crate::diagnostic::{Applicability, LineIndex};
use crate::driver::LintRun;

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    code: &'a str,
    name: &'a str,
    severity: &'a str,
    message: &'a str,
    path: &'a str,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    help: Option<&'a str>,
    fix: Option<JsonFix<'a>>,
    /// In a notebook: the cell's number (lines and columns are in the cell).
    #[serde(skip_serializing_if = "Option::is_none")]
    cell: Option<usize>,
    /// The same finding elsewhere in the same function (one cause, reported once): present only
    /// when there are such places, with `count` the number of places in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    also: Vec<JsonPlace>,
}

#[derive(Serialize)]
struct JsonPlace {
    line: usize,
    column: usize,
}

#[derive(Serialize)]
struct JsonFix<'a> {
    applicability: Applicability,
    message: &'a str,
    edits: Vec<JsonEdit<'a>>,
}

#[derive(Serialize)]
struct JsonEdit<'a> {
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    content: &'a str,
}

pub(super) fn render(run: &LintRun) -> String {
    let mut all = Vec::new();
    for file in &run.files {
        if file.diagnostics.is_empty() {
            continue;
        }
        let index = LineIndex::new(&file.text);
        for d in &file.diagnostics {
            let fix = d.fix.as_ref().map(|f| JsonFix {
                applicability: f.applicability,
                message: &f.message,
                edits: f
                    .edits
                    .iter()
                    .map(|e| {
                        let s = index.line_col(&file.text, e.range.start);
                        let t = index.line_col(&file.text, e.range.end);
                        JsonEdit {
                            line: d.shown_line(s.line),
                            column: s.column,
                            end_line: d.shown_line(t.line),
                            end_column: t.column,
                            content: &e.replacement,
                        }
                    })
                    .collect(),
            });
            all.push(JsonDiagnostic {
                code: d.code,
                name: d.name,
                severity: d.severity.as_str(),
                message: &d.message,
                path: &d.path,
                line: d.shown_line(d.start.line),
                column: d.start.column,
                end_line: d.shown_line(d.end.line),
                end_column: d.end.column,
                help: d.help.as_deref(),
                fix,
                cell: d.cell.map(|c| c.number),
                count: (!d.also.is_empty()).then(|| d.count()),
                also: d
                    .also
                    .iter()
                    .map(|p| JsonPlace { line: d.shown_line(p.line), column: p.column })
                    .collect(),
            });
        }
    }
    let mut out = super::printable::json_escaped(
        serde_json::to_string_pretty(&all).unwrap_or_else(|_| "[]".to_string()),
    );
    out.push('\n');
    out
}
