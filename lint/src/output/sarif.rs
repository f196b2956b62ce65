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
    let tool = json!({
        "driver": {
            "name": "devcheck",
            "semanticVersion": env!("CARGO_PKG_VERSION"),
            "rules": rules,
        }
    });
    // The results are written one at a time, one to a line: a value tree of every result of a
    // large run took gigabytes (80,000 findings: 935 MB); written one by one, the output is the
    // memory.
    let mut out = format!(
        "{{\n  \"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\",\n  \"version\": \"2.1.0\",\n  \
         \"runs\": [\n    {{\n      \"tool\": {},\n      \"columnKind\": \"unicodeCodePoints\",\n      \"results\": [",
        serde_json::to_string_pretty(&tool).unwrap_or_else(|_| "null".to_string())
    );
    let mut first = true;
    for file in &run.files {
        // The URI is the file's own name, byte for byte (the shown path escapes odd bytes).
        let uri = uri(&file.disk_path);
        for d in &file.diagnostics {
            let index = registry::all().iter().position(|r| r.code == d.code).unwrap_or(0);
            let mut message = format!("{}{}{}", super::github::cell_prefix(d), d.message, d.repeats());
            if let Some(help) = &d.help {
                message.push_str("\nhelp: ");
                message.push_str(help);
            }
            let result = json!({
                "ruleId": d.code,
                "ruleIndex": index,
                "level": level(d.severity),
                "message": { "text": message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri, "uriBaseId": "%SRCROOT%" },
                        "region": {
                            "startLine": d.shown_line(d.start.line),
                            "startColumn": d.start.column,
                            "endLine": d.shown_line(d.end.line),
                            "endColumn": d.end.column,
                        }
                    }
                }],
            });
            out.push_str(if first { "\n        " } else { ",\n        " });
            first = false;
            out.push_str(&compact(&result));
        }
    }
    out.push_str("\n      ]\n    }\n  ]\n}\n");
    super::printable::json_escaped(out)
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// The "What it does" text without its heading.
fn first_paragraph(docs: &str) -> String {
    docs.lines()
        .skip_while(|l| l.starts_with('#') || l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A relative URI reference for a file: its path's bytes (without a leading `./`), `/` between
/// folders, every byte but the unreserved ones percent-encoded.
fn uri(path: &std::path::Path) -> String {
    let bytes = path_bytes(path);
    let bytes = bytes.strip_prefix(b"./").unwrap_or(&bytes);
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        let b = if cfg!(windows) && b == b'\\' { b'/' } else { b };
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(unix)]
fn path_bytes(path: &std::path::Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt as _;
    path.as_os_str().as_bytes().to_vec()
}

#[cfg(not(unix))]
fn path_bytes(path: &std::path::Path) -> Vec<u8> {
    path.to_string_lossy().into_owned().into_bytes()
}
