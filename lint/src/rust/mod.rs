//! The Rust front end: Rust source read with `syn` (it is never compiled) and checked for device
//! hazards in code written against devcheck, candle, tch or burn ([`api`] knows each).
//!
//! A file goes through three steps: its depth is read from the text ([`depth`]: a file nested
//! too deeply, or too large, is `D000`), it is parsed and its facts gathered ([`facts`]: the
//! functions, structs and fields the rules ask about), then one walk in which the enabled rules
//! ([`rules`], one file each) look at every node ([`walker`]). Findings that hold only if
//! something is true of the whole crate (a helper called per layer) wait for [`crates`], which
//! runs once every file is read.

pub(crate) mod api;
pub(crate) mod crates;
pub mod depth;
mod device;
mod facts;
mod fields;
pub(crate) mod inspect;
mod rules;
mod syntax;
mod targets;
mod walker;

use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use proc_macro2::Span;

use crate::config::Settings;
use crate::diagnostic::Finding;
use crate::registry;
use crate::source::{ApiSet, FileKind};
use crate::unlinted::MAX_FILE_BYTES;

/// What the Rust front end makes of a file: its findings, the APIs it was read with, and what
/// the crate-wide pass needs from it.
pub(crate) type Analysis = (Vec<Finding>, ApiSet, Option<crates::FileSummary>);

/// Checks one Rust file with the enabled rules, on a stack deep enough for its tree. `Err` when
/// the system gave no stack for it; `Ok(Err(..))` when a rule panicked (the caller reports it).
pub(crate) fn check(
    path: &Path,
    kind: FileKind,
    text: &str,
    settings: &Settings,
    enabled: &dyn Fn(&str) -> bool,
) -> std::io::Result<std::thread::Result<Analysis>> {
    // syn parses recursively: the depth, read from the text first, says how much stack the
    // parse, the walk and the drop take; they move to a fresh segment only when this thread
    // has less left. No hand-off to another thread.
    // Code under a backend or kernel folder (`backends/vulkan/mod.rs`) is held to other rules.
    let backend = path.parent().is_some_and(|dir| {
        dir.components().any(|c| c.as_os_str().to_str().is_some_and(walker::is_backend_name))
    });
    let shape = depth_of(text);
    let need = depth::stack_needed(*shape.as_ref().unwrap_or(&0));
    crate::stack::within(need, || {
        let result = catch_unwind(AssertUnwindSafe(|| match shape {
            Err(problem) => (vec![*problem], ApiSet::EMPTY, None),
            Ok(_) => analyse(kind, backend, text, settings, enabled),
        }));
        // Spans of this file are no longer needed; free the thread's source map.
        proc_macro2::extra::invalidate_current_thread_spans();
        result
    })
}

/// Parses and runs the rules. Returns the findings, the detected APIs and what the crate-wide
/// pass needs from the file.
fn analyse(
    kind: FileKind,
    backend: bool,
    text: &str,
    settings: &Settings,
    enabled: &dyn Fn(&str) -> bool,
) -> (Vec<Finding>, ApiSet, Option<crates::FileSummary>) {
    // Lets the tests prove that a failing rule becomes a `D999` instead of ending the run.
    #[cfg(test)]
    if text.contains("__devcheck_test_panic__") {
        panic!("a deliberate test panic");
    }
    let base = stripped_prefix(text);
    let ast = match syn::parse_file(&text[base..]) {
        Ok(ast) => ast,
        Err(e) => {
            let r = e.span().byte_range();
            let start = (r.start + base).min(text.len());
            let end = (r.end + base).clamp(start, text.len());
            let finding = Finding::new(
                &registry::PARSE_ERROR,
                start..end,
                crate::unlinted::lowercase_first(&e.to_string()),
            )
            .label("here")
            .help("the file was skipped; `cargo check` shows the same error");
            return (vec![finding], ApiSet::EMPTY, None);
        }
    };
    let apis = match settings.api {
        Some(a) => ApiSet::only(a),
        None => api::detect(&ast, text),
    };
    let file = FileCx { text, base, kind, apis, preview: settings.preview, backend };
    let facts = facts::Facts::gather(&file, &ast.items);
    let checks = rules::checks(enabled);
    let (findings, summary) = walker::Walker::new(&file, &facts, checks).run(&ast);
    (findings, apis, Some(summary))
}

/// The estimated depth of a Rust file's tree ([`depth::stack_needed`] says how much stack it
/// takes), or the reason not to parse the text at all: too large, or nested too deeply.
pub(crate) fn depth_of(text: &str) -> Result<usize, Box<Finding>> {
    if text.len() > MAX_FILE_BYTES {
        return Err(Box::new(crate::unlinted::too_large(u64::try_from(text.len()).ok())));
    }
    match depth::check(text, depth::MAX_DEPTH) {
        Ok(depth) => Ok(depth),
        Err(deep) => Err(Box::new(
            Finding::new(&registry::PARSE_ERROR, deep.at..deep.at + deep.len, format!(
                "file not linted: it is too deeply nested to analyse (more than {} levels of brackets, operators or keywords)",
                depth::MAX_DEPTH
            ))
            .label("too deep")
            .help("such files are generated; exclude them (`exclude` in devcheck.toml)"),
        )),
    }
}

/// Bytes syn would skip: a byte-order mark and a shebang line (not an inner attribute `#![..]`).
pub(crate) fn stripped_prefix(text: &str) -> usize {
    let mut base = 0;
    if text.starts_with('\u{feff}') {
        base = '\u{feff}'.len_utf8();
    }
    let rest = &text[base..];
    if rest.starts_with("#!") && !rest[2..].trim_start().starts_with('[') {
        base += rest.find('\n').unwrap_or(rest.len());
    }
    base
}

/// What rustc would refuse in `text`, as far as a parse tells: `Err` with the syntax error (or
/// why the text is not analysed).
pub(crate) fn compile_errors(text: &str) -> Result<Vec<String>, String> {
    let depth = depth_of(text).map_err(|problem| problem.message)?;
    let base = stripped_prefix(text);
    let parsed = crate::stack::within(depth::stack_needed(depth), || {
        let result = syn::parse_file(&text[base..])
            .map(drop)
            .map_err(|e| crate::unlinted::lowercase_first(&e.to_string()));
        proc_macro2::extra::invalidate_current_thread_spans();
        result
    });
    parsed.map_err(|e| format!("no stack could be set up to check it ({e})"))??;
    Ok(Vec::new())
}

/// Does `b` hold the same code as `a`, token for token? Comments are not tokens (doc comments
/// are, as attributes). `--add-ignore` asks it: a suppression comment must change nothing else.
pub(crate) fn same_code(a: &str, b: &str) -> bool {
    fn code(text: &str) -> Option<String> {
        let depth = depth_of(text).ok()?;
        let base = stripped_prefix(text);
        crate::stack::within(depth::stack_needed(depth), || {
            let tokens = text[base..].parse::<proc_macro2::TokenStream>().ok().map(|t| t.to_string());
            proc_macro2::extra::invalidate_current_thread_spans();
            tokens
        })
        .ok()
        .flatten()
    }
    matches!((code(a), code(b)), (Some(x), Some(y)) if x == y)
}

/// A parsed file as the rules see it.
pub(crate) struct FileCx<'a> {
    pub text: &'a str,
    /// Bytes stripped before parsing (a BOM, a shebang line): add to every span offset.
    pub base: usize,
    pub kind: FileKind,
    pub apis: ApiSet,
    /// Preview patterns of stable rules run too (`--preview`).
    pub preview: bool,
    /// Under a backend or kernel directory (`backends/vulkan/mod.rs`, `src/cpu_backend/ops.rs`).
    pub backend: bool,
}

impl FileCx<'_> {
    /// The byte range of a span in the file's text.
    pub fn range(&self, span: Span) -> Range<usize> {
        let r = span.byte_range();
        (r.start + self.base)..(r.end + self.base)
    }

    /// The source text of a range, for messages; empty if out of bounds.
    pub fn snippet(&self, range: &Range<usize>) -> &str {
        self.text.get(range.clone()).unwrap_or("")
    }

    /// The source text of a range on one line, shortened for a message.
    pub fn short(&self, range: &Range<usize>) -> String {
        let s = self.snippet(range);
        let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > 60 {
            let cut: String = one_line.chars().take(57).collect();
            format!("{cut}...")
        } else {
            one_line
        }
    }
}
