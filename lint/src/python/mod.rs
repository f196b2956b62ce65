//! The Python front end: PyTorch code read with ruff's parser (`ruff_python_parser`), checked
//! for the same device hazards as the Rust rules (same codes where the hazard is the same) and
//! for three of PyTorch's own (D008..D010).
//!
//! A file goes through three steps: parse (a syntax error is `D000` and the run goes on), build
//! the semantic model in one traversal ([`model`]: scopes, bindings, imports resolved to
//! qualified names, classes and their attributes, loops and calls), then one walk in which the
//! enabled rules read the model ([`checker`]). A file that never imports `torch` stops after
//! parsing: every rule is about PyTorch.

mod api;
mod checker;
mod fields;
pub(crate) mod inspect;
mod model;
pub mod rules;
mod typing;

use std::path::Path;

use ruff_text_size::Ranged;

use crate::diagnostic::Finding;
use crate::registry;
use crate::source::FileKind;

/// Parses and checks one Python file: the findings of the enabled rules.
pub(crate) fn check(path: &Path, kind: FileKind, text: &str, enabled: &dyn Fn(&str) -> bool) -> Vec<Finding> {
    if let Some(problem) = unparseable(text) {
        return vec![problem];
    }
    let parsed = match ruff_python_parser::parse_module(text) {
        Ok(p) => p,
        Err(e) => return vec![parse_error(text, &e)],
    };
    // The cheap gate: no rule has anything to say about a file that never names torch.
    if !text.contains("torch") {
        return Vec::new();
    }
    let body = &parsed.syntax().body;
    let model = model::Model::build(text, body);
    if !model.imports_torch {
        return Vec::new();
    }
    let rules = rules::enabled(enabled);
    if rules.is_empty() {
        return Vec::new();
    }
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    checker::Checker::new(&model, kind, file_name).run(body, rules)
}

/// Does the text parse as Python (for fixes, which must leave a file that still parses)?
pub(crate) fn parses(text: &str) -> bool {
    unparseable(text).is_none() && ruff_python_parser::parse_module(text).is_ok()
}

/// Brackets nested deeper than this are a `D000` instead of parsed: CPython itself refuses more
/// than 200 (`too many nested parentheses`), and such files are generated.
const MAX_NESTING: usize = crate::MAX_NESTING;

/// A reason not to parse the text at all.
fn unparseable(text: &str) -> Option<Finding> {
    if text.len() > crate::MAX_FILE_BYTES {
        return Some(
            Finding::new(
                &registry::PARSE_ERROR,
                0..0,
                format!(
                    "file not linted: it is {} bytes, more than the limit of {} bytes",
                    text.len(),
                    crate::MAX_FILE_BYTES
                ),
            )
            .help("generated files this large are best excluded (`exclude` in devcheck.toml)"),
        );
    }
    let at = too_deep(text.as_bytes())?;
    Some(
        Finding::new(
            &registry::PARSE_ERROR,
            at..at + 1,
            format!("file not linted: brackets nest deeper than {MAX_NESTING} levels"),
        )
        .label("too deep")
        .help("such files are generated; exclude them (`exclude` in devcheck.toml)"),
    )
}

/// The offset where bracket nesting first exceeds [`MAX_NESTING`], outside strings and comments.
fn too_deep(b: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(i);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            quote @ (b'"' | b'\'') => {
                let triple = b.get(i + 1) == Some(&quote) && b.get(i + 2) == Some(&quote);
                i += if triple { 3 } else { 1 };
                while i < b.len() {
                    if b[i] == b'\\' {
                        i += 2;
                        continue;
                    }
                    if b[i] == quote
                        && (!triple || (b.get(i + 1) == Some(&quote) && b.get(i + 2) == Some(&quote)))
                    {
                        i += if triple { 2 } else { 0 };
                        break;
                    }
                    // A single-quoted string ends at the line's end (an error the parser reports).
                    if !triple && b[i] == b'\n' {
                        break;
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn parse_error(text: &str, e: &ruff_python_parser::ParseError) -> Finding {
    let r = e.range().to_std_range();
    let start = r.start.min(text.len());
    let end = r.end.clamp(start, text.len());
    Finding::new(&registry::PARSE_ERROR, start..end, crate::lowercase_first(&e.error.to_string()))
        .label("here")
        .help("the file was skipped; `python -m py_compile` shows the same error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_measured_outside_strings_and_comments() {
        let text = format!(
            "# {}\ns = '{}'\nt = \"\"\"{}\"\"\"\n",
            "(".repeat(500),
            "[".repeat(500),
            "{".repeat(500)
        );
        assert!(too_deep(text.as_bytes()).is_none());
        let deep = format!("x = {}", "[".repeat(MAX_NESTING + 1));
        assert!(too_deep(deep.as_bytes()).is_some());
    }

    #[test]
    fn a_syntax_error_is_a_parse_error_at_its_place() {
        let text = "import torch\ndef f(:\n    pass\n";
        let findings = check(Path::new("m.py"), FileKind::Library, text, &|_| true);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].rule.code, "D000");
        assert_eq!(&text[..findings[0].range.start].matches('\n').count(), &1);
    }
}
