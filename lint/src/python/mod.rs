//! The Python front end: PyTorch code read with ruff's parser (`ruff_python_parser`), checked
//! for the same device hazards as the Rust rules (same codes where the hazard is the same) and
//! for three of PyTorch's own (D008..D010).
//!
//! A file goes through three steps: parse (a syntax error, or a tree too deep to walk, is `D000`
//! and the run goes on), build the semantic model in one traversal ([`model`]: scopes, bindings,
//! imports resolved to qualified names, classes and their attributes, loops and calls), then one
//! walk in which the enabled rules read the model ([`checker`]). A file that never imports
//! `torch` stops after parsing: every rule is about PyTorch.

mod api;
mod checker;
mod compile;
mod depth;
mod fields;
pub(crate) mod inspect;
mod model;
pub(crate) mod notebook;
mod options;
pub(crate) mod project;
mod references;
pub mod rules;
mod typing;

use std::path::Path;

use ruff_python_ast::{ModModule, PySourceType};
use ruff_python_parser::Parsed;
use ruff_text_size::Ranged;

use crate::diagnostic::Finding;
use crate::registry;
use crate::source::FileKind;
use crate::unlinted::TooDeep;

pub(crate) use options::{configured as options_configured, passed as options_passed};
pub(crate) use project::Project;
pub(crate) use references::Code;

/// Parses and checks one Python file: the findings of the enabled rules. `project` holds the
/// classes of the run's other Python files ([`project`]).
/// `tree` is `text`'s tree when the index pass parsed it already ([`index_entry`]).
pub(crate) fn check(
    path: &Path,
    kind: FileKind,
    text: &str,
    enabled: &dyn Fn(&str) -> bool,
    project: &Project,
    tree: Option<Tree>,
) -> (Vec<Finding>, project::Calls) {
    let (parsed, depth) = match tree {
        Some(Tree::Kept { parsed, depth }) => (parsed, depth),
        Some(Tree::NoTorch) if !project.uses_torch_code(path) => return Default::default(),
        Some(Tree::NoTorch) | None => match parse(text, source_type(path)) {
            Ok(p) => p,
            Err(problem) => return (vec![*problem], project::Calls::default()),
        },
    };
    // The walk and the tree's `Drop` recurse once per level: on this thread's stack when it has
    // room for this tree (nearly every file), else on a fresh segment.
    let tree = std::cell::Cell::new(Some(parsed));
    let analysed = crate::stack::within(depth::stack_needed(depth), || {
        tree.take().map(|parsed| analyse(path, kind, text, enabled, project, parsed)).unwrap_or_default()
    });
    analysed.unwrap_or_else(|e| {
        // No segment: the tree is still here, and may be too deep to drop on this stack.
        if let Some(parsed) = tree.take() {
            depth::dismantle(parsed.into_syntax().body);
        }
        (vec![crate::unlinted::no_stack(&e)], project::Calls::default())
    })
}

/// The semantic model and the rules, on a tree [`parse`] let through; the tree is dropped here.
fn analyse(
    path: &Path,
    kind: FileKind,
    text: &str,
    enabled: &dyn Fn(&str) -> bool,
    project: &Project,
    parsed: Parsed<ModModule>,
) -> (Vec<Finding>, project::Calls) {
    // The cheap gate: no rule has anything to say about a file that never names torch, unless
    // it takes its classes or functions from the repository's modules that use torch.
    let uses_torch_code = project.uses_torch_code(path);
    if !names_torch(text) && !uses_torch_code {
        return Default::default();
    }
    let body = &parsed.syntax().body;
    let model = model::Model::build(text, body);
    if let Some(at) = model.too_deep_at {
        let at = at.to_std_range();
        return (vec![too_deep(TooDeep { at: at.start, len: at.len().max(1) })], project::Calls::default());
    }
    if !model.imports_torch && !uses_torch_code {
        return Default::default();
    }
    let rules = rules::Rules::enabled(enabled);
    if rules.is_empty() {
        return Default::default();
    }
    let (module, is_package) = project::module_path(path);
    let view = project::View::new(project, path, &module, is_package, project::Placement::of_text(text));
    checker::Checker::new(&model, kind, path, view).run(body, rules)
}

/// Does the text name torch, or Lightning (whose modules need not import torch)? A file that
/// names neither is not analysed.
fn names_torch(text: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), b"torch").is_some()
        || memchr::memmem::find(text.as_bytes(), b"lightning").is_some()
}

/// Could the text import torch or Lightning (the files the checker analyses do)? A file whose
/// text says neither `import torch`, `from torch` nor `lightning` is not analysed, whatever its
/// comments say.
pub(crate) fn may_import_torch(text: &str) -> bool {
    ["import torch", "from torch", "lightning"]
        .iter()
        .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
}

/// What the index pass learnt from parsing a file ([`index_entry`]), handed on to its lint
/// ([`check`]) so that a linted file is read and parsed once for both passes.
pub(crate) enum Tree {
    /// Its tree. A tree takes about twelve times its text's bytes; the run keeps them within a
    /// budget (`driver::MAX_KEPT_BYTES`).
    Kept { parsed: Parsed<ModModule>, depth: usize },
    /// The file parses and never names torch: no rule has anything to say about it (its tree was
    /// dropped at once).
    NoTorch,
}

/// What one Python file tells the repository index ([`project`]): its top-level classes,
/// functions and re-exports; and what its lint can start from, the tree only when `keep()` says
/// it may be kept. No entry for a file that does not parse or is too deep (it gets its `D000`
/// when it is linted).
pub(crate) fn index_entry(
    path: &Path,
    text: &str,
    keep: &dyn Fn() -> bool,
) -> (Option<project::FileEntry>, Option<Tree>) {
    // A file that defines nothing and imports nothing adds nothing.
    if ["class ", "def ", "import "]
        .iter()
        .all(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_none())
    {
        return (None, None);
    }
    let Ok((parsed, depth)) = parse(text, source_type(path)) else { return (None, None) };
    // The same gate as the lint's ([`analyse`]).
    let no_torch = !names_torch(text);
    let tree = std::cell::Cell::new(Some(parsed));
    let entry = crate::stack::within(depth::stack_needed(depth), || {
        let parsed = tree.take()?;
        let mut entry = project::FileEntry::of(path, &parsed.syntax().body);
        entry.cpu_path = rules::names_cpu_path(text) && project::chooses_the_cpu(text);
        entry.accelerator = project::names_an_accelerator(text);
        // (A test that turns the checks off for itself says nothing of the training code.)
        entry.validation_off = !crate::source::FileKind::of_path(path).is_test_like()
            && project::turns_validation_off(text, &parsed.syntax().body);
        entry.placement = project::Placement::of_text(text);
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        entry.runs_itself = checker::named_for_running(file_name)
            || matches!(file_name, "setup.py" | "conftest.py" | "__main__.py" | "manage.py")
            || memchr::memmem::find(text.as_bytes(), b"__main__").is_some()
            || checker::reads_a_command_line(text);
        if crate::source::FileKind::of_path(path).is_test_like() {
            entry.placement = entry.placement.of_test(text);
        }
        if ["add_argument", "set_defaults"]
            .iter()
            .any(|w| memchr::memmem::find(text.as_bytes(), w.as_bytes()).is_some())
        {
            entry.options = options::declared(&parsed.syntax().body);
        }
        // A tree that is not kept is dropped here, on a stack deep enough for it.
        if !no_torch && keep() {
            tree.set(Some(parsed));
        }
        Some(entry)
    });
    match (entry, tree.take()) {
        (Ok(entry), _) if no_torch => (entry, Some(Tree::NoTorch)),
        (Ok(entry), parsed) => (entry, parsed.map(|parsed| Tree::Kept { parsed, depth })),
        // No stack for the walk: the tree is freed without recursion, and the file is parsed
        // again when it is linted (where it gets its `D000`).
        (Err(_), parsed) => {
            if let Some(parsed) = parsed {
                depth::dismantle(parsed.into_syntax().body);
            }
            (None, None)
        }
    }
}

/// A file's syntax tree, shallow enough to walk, with its estimated depth
/// ([`depth::stack_needed`] says how much stack walking it takes): `Err` is the file's `D000` —
/// too large, nested too deeply ([`depth`]), or not valid Python. A refused tree is freed
/// without recursion before this returns.
pub(crate) fn parse(
    text: &str,
    source_type: PySourceType,
) -> Result<(Parsed<ModModule>, usize), Box<Finding>> {
    if text.len() > crate::unlinted::MAX_FILE_BYTES {
        return Err(Box::new(crate::unlinted::too_large(u64::try_from(text.len()).ok())));
    }
    // A large file's depth is known before its tree is built: the parse itself can take
    // memory and time that grow with the nesting.
    if let Err(deep) = depth::check_source(text, source_type, depth::MAX_DEPTH) {
        return Err(Box::new(too_deep(deep)));
    }
    let parsed = ruff_python_parser::parse_unchecked_source(text, source_type);
    let problem = match depth::check(parsed.tokens(), depth::MAX_DEPTH, parsed.errors().is_empty()) {
        Err(deep) => Err(too_deep(deep)),
        Ok(depth) => match parsed.errors().first() {
            Some(e) => Err(parse_error(text, e)),
            None => Ok(depth),
        },
    };
    match problem {
        Err(problem) => {
            depth::dismantle(parsed.into_syntax().body);
            Err(Box::new(problem))
        }
        Ok(depth) => Ok((parsed, depth)),
    }
}

/// What CPython's compiler would refuse in `text` beyond a syntax error: the messages of the
/// semantic syntax errors ruff's parser knows (a keyword argument repeated, a parameter named
/// twice, ...), or `Err` with the syntax error (or the reason the text is not analysed). `--fix`
/// accepts fixed text only when it adds none, whatever rules the user has turned off.
pub(crate) fn compile_errors(text: &str, source_type: PySourceType) -> Result<Vec<String>, String> {
    let (parsed, depth) = parse(text, source_type).map_err(|problem| problem.message)?;
    let tree = std::cell::Cell::new(Some(parsed));
    let found = crate::stack::within(depth::stack_needed(depth), || {
        let Some(parsed) = tree.take() else { return Vec::new() };
        let mut visitor = compile::Visitor::new(text);
        for stmt in &parsed.syntax().body {
            ruff_python_ast::visitor::Visitor::visit_stmt(&mut visitor, stmt);
        }
        visitor.into_errors()
    });
    found.map_err(|e| format!("no stack could be set up to check it ({e})"))
}

/// Does `b` hold the same code as `a`, token for token, once comments and blank lines are left
/// out? `--add-ignore` asks it: a suppression comment must change nothing else (a `#` that landed
/// inside a string would change the string). `false` when either does not parse.
pub(crate) fn same_code(a: &str, b: &str, source_type: PySourceType) -> bool {
    let code = |text: &str| -> Option<Vec<(ruff_python_ast::token::TokenKind, String)>> {
        use ruff_python_ast::token::TokenKind as K;
        let (parsed, depth) = parse(text, source_type).ok()?;
        let tree = std::cell::Cell::new(Some(parsed));
        crate::stack::within(depth::stack_needed(depth), || {
            let parsed = tree.take()?;
            let tokens = parsed
                .tokens()
                .iter()
                .filter(|t| !matches!(t.kind(), K::Comment | K::NonLogicalNewline))
                .map(|t| {
                    // Line breaks and indentation may be written differently; the rest is the text.
                    let shown = match t.kind() {
                        K::Newline | K::Indent | K::Dedent => "",
                        _ => text.get(t.range().to_std_range()).unwrap_or(""),
                    };
                    (t.kind(), shown.to_string())
                })
                .collect();
            Some(tokens)
        })
        .ok()
        .flatten()
    };
    matches!((code(a), code(b)), (Some(x), Some(y)) if x == y)
}

/// How a file's Python is read: as IPython in a notebook (`%magic`, `!shell`), else as Python.
pub(crate) fn source_type(path: &Path) -> PySourceType {
    if path.extension().is_some_and(|e| e == "ipynb") { PySourceType::Ipynb } else { PySourceType::Python }
}

fn too_deep(deep: TooDeep) -> Finding {
    Finding::new(&registry::PARSE_ERROR, deep.at..deep.at + deep.len, format!(
        "file not linted: it is too deeply nested to analyse (more than {} levels of brackets, operators, keywords or blocks)",
        depth::MAX_DEPTH
    ))
    .label("too deep")
    .help("such files are generated; exclude them (`exclude` in devcheck.toml)")
}

fn parse_error(text: &str, e: &ruff_python_parser::ParseError) -> Finding {
    let r = e.range().to_std_range();
    let start = r.start.min(text.len());
    let end = r.end.clamp(start, text.len());
    Finding::new(&registry::PARSE_ERROR, start..end, crate::unlinted::lowercase_first(&e.error.to_string()))
        .label("here")
        .help("the file was skipped; `python -m py_compile` shows the same error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_nested_too_deeply_is_a_parse_error_at_the_place() {
        let text = format!("import torch\nx = {}1{}\n", "(".repeat(5000), ")".repeat(5000));
        let (findings, _) =
            check(Path::new("m.py"), FileKind::Library, &text, &|_| true, &Project::default(), None);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].rule.code, "D000");
        assert!(findings[0].message.contains("too deeply nested"), "{}", findings[0].message);
        assert_eq!(&text[findings[0].range.clone()], "(");
    }

    #[test]
    fn a_syntax_error_is_a_parse_error_at_its_place() {
        let text = "import torch\ndef f(:\n    pass\n";
        let (findings, _) =
            check(Path::new("m.py"), FileKind::Library, text, &|_| true, &Project::default(), None);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].rule.code, "D000");
        assert_eq!(&text[..findings[0].range.start].matches('\n').count(), &1);
    }
}
