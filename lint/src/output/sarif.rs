//! SARIF 2.1.0 as GitHub code scanning reads it: one run, the rules with descriptions and help,
//! results with relative URIs and 1-based regions.

use serde_json::{Value, json};

use crate::driver::LintRun;
use crate::registry::{self, Severity};

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

pub(super) fn render(run: &LintRun) -> String {
    let rules: Vec<Value> = registry::all()
        .iter()
        .map(|r| {
            let docs = r.docs();
            json!({
                "id": r.code,
                "name": r.name,
                "shortDescription": { "text": r.summary },
                "fullDescription": { "text": first_paragraph(&docs) },
                "help": { "text": docs, "markdown": docs },
                "defaultConfiguration": { "level": level(r.default_severity()) },
                "properties": { "tags": [r.group.as_str()] },
            })
        })
        .collect();
    let results: Vec<Value> = run
        .diagnostics()
        .map(|d| {
            let index = registry::all().iter().position(|r| r.code == d.code).unwrap_or(0);
            let mut message = d.message.clone();
            if let Some(help) = &d.help {
                message.push_str("\nhelp: ");
                message.push_str(help);
            }
            json!({
                "ruleId": d.code,
                "ruleIndex": index,
                "level": level(d.severity),
                "message": { "text": message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri(&d.path), "uriBaseId": "%SRCROOT%" },
                        "region": {
                            "startLine": d.start.line,
                            "startColumn": d.start.column,
                            "endLine": d.end.line,
                            "endColumn": d.end.column,
                        }
                    }
                }],
            })
        })
        .collect();
    let sarif = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "devcheck",
                    "semanticVersion": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                }
            },
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    });
    let mut out = super::printable::json_escaped(
        serde_json::to_string_pretty(&sarif).unwrap_or_else(|_| "{}".to_string()),
    );
    out.push('\n');
    out
}

/// The "What it does" text without its heading.
fn first_paragraph(docs: &str) -> String {
    docs.lines()
        .skip_while(|l| l.starts_with('#') || l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A relative URI reference: `/` separators, unsafe bytes percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
