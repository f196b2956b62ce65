//! The user docs (README.md and docs/*.md) point only at what exists: every relative link names a
//! file of the repository (and a heading of it, when it has an anchor), and every repository path
//! written in backticks outside code blocks is there (`src/check/`, `tests/fuzz_*.rs`,
//! `benches/workloads/{gpt,cnn}.rs`, `tests/culprits/mask.rs:25:22`).
//!
//! A backticked word is taken for a repository path when it has no spaces and contains a `/`,
//! and either ends in an extension or starts with one of the repository's top-level folders.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// README.md and every `.md` file in docs/, relative to the root.
fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root).expect("under the root").to_path_buf())
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn every_relative_link_and_backticked_path_in_the_docs_exists() {
    let root = root();
    let mut problems = Vec::new();
    let mut links = 0;
    let mut paths = 0;
    for file in doc_files(&root) {
        let text =
            std::fs::read_to_string(root.join(&file)).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (line, target) in links_in(&text) {
            links += 1;
            if let Err(why) = check_link(&root, &file, &target) {
                problems.push(format!("{}:{line}: link `{target}`: {why}", file.display()));
            }
        }
        for (line, path) in backticked_paths(&root, &text) {
            paths += 1;
            if let Err(why) = check_path(&root, &path) {
                problems.push(format!("{}:{line}: path `{path}`: {why}", file.display()));
            }
        }
    }
    assert!(
        links > 10 && paths > 10,
        "the docs name only {links} links and {paths} paths: is the parser broken?"
    );
    assert!(problems.is_empty(), "the docs point at what does not exist:\n{}", problems.join("\n"));
}

/// The checks themselves catch what they are for (the docs may well hold no broken link today).
#[test]
fn a_broken_link_anchor_or_path_is_caught() {
    let root = root();
    let readme = Path::new("README.md");
    assert!(check_link(&root, readme, "docs/no-such-page.md").is_err());
    assert!(check_link(&root, readme, "#no-such-heading").is_err());
    assert!(check_link(&root, readme, "docs/safety.md#no-such-heading").is_err());
    assert!(check_link(&root, readme, "docs/safety.md#which-races-remain").is_ok());
    assert!(check_link(&root, Path::new("docs/safety.md"), "../README.md").is_ok());
    assert!(check_link(&root, readme, "https://example.invalid/x").is_ok());
    assert!(check_path(&root, "src/no_such_file.rs").is_err());
    assert!(check_path(&root, "tests/no_such_*.rs").is_err());
    assert!(check_path(&root, "cli/src/{main,no_such}.rs").is_err());
    assert!(check_path(&root, "cli/src/main.rs:1:1").is_ok());
    assert!(check_path(&root, "cli/tests/*.rs").is_ok());

    let text = "See [the page](docs/gone.md) and `lint/gone.rs`, not `a b/c.rs` or `x/2`.\n\
                ```\n[not a link](nowhere.md) `src/not_checked.rs`\n```\n## A `code` heading: yes\n";
    assert_eq!(links_in(text), vec![(1, "docs/gone.md".to_string())]);
    assert_eq!(backticked_paths(&root, text), vec![(1, "lint/gone.rs".to_string())]);
    assert_eq!(anchors(text), BTreeSet::from(["a-code-heading-yes".to_string()]));
}

// -- links -----------------------------------------------------------------------------------------

/// `[text](target)`, `![alt](target)` and `[ref]: target`, outside fenced code blocks and inline
/// code, with their line numbers.
fn links_in(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (line_no, line) in prose_lines(text) {
        let line = without_inline_code(line);
        if let Some(rest) = line.trim_start().strip_prefix('[')
            && let Some((_, target)) = rest.split_once("]: ")
        {
            out.push((line_no, target.trim().to_string()));
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((line_no, target.to_string()));
            rest = &after[end..];
        }
    }
    out
}

fn check_link(root: &Path, from: &Path, target: &str) -> Result<(), String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_path_buf()
    } else {
        normalize(&from.parent().unwrap_or(Path::new("")).join(path))
            .ok_or_else(|| "it leaves the repository".to_string())?
    };
    let full = root.join(&file);
    if !full.exists() {
        return Err(format!("{} does not exist", file.display()));
    }
    if let Some(anchor) = anchor {
        let text = std::fs::read_to_string(&full).map_err(|e| format!("{}: {e}", file.display()))?;
        if !anchors(&text).contains(anchor) {
            return Err(format!("{} has no heading with the anchor `#{anchor}`", file.display()));
        }
    }
    Ok(())
}

/// `a/b/../c` as `a/c`; `None` when it climbs above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop()?;
            }
            std::path::Component::CurDir => {}
            other => parts.push(other.as_os_str()),
        }
    }
    Some(parts.iter().collect())
}

/// The anchors a renderer gives the file's headings: lowercased, punctuation other than `-` and
/// `_` dropped, spaces as `-`, and `-1`, `-2`... after repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else { continue };
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while out.contains(&unique) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
        out.insert(unique);
    }
    out
}

// -- backticked paths ------------------------------------------------------------------------------

/// Inline code spans that look like repository paths, with their line numbers.
fn backticked_paths(root: &Path, text: &str) -> Vec<(usize, String)> {
    let top_level: BTreeSet<String> = std::fs::read_dir(root)
        .expect("the root")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !matches!(name.as_str(), "target" | ".git"))
        .collect();
    let mut out = Vec::new();
    for (line_no, line) in prose_lines(text) {
        for span in inline_code(line) {
            if looks_like_a_path(span, &top_level) {
                out.push((line_no, span.to_string()));
            }
        }
    }
    out
}

fn looks_like_a_path(span: &str, top_level: &BTreeSet<String>) -> bool {
    if span.is_empty()
        || !span.contains('/')
        || span.contains("://")
        || span.starts_with(['/', '~', '$', '.'])
        || span.chars().any(|c| c.is_whitespace() || "()<>|=\"',;&!?`\\".contains(c))
    {
        return false;
    }
    let path = strip_location(span);
    let first = path.split('/').next().unwrap_or("");
    let last = path.rsplit('/').next().unwrap_or("");
    let has_extension = last.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty() && !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphanumeric())
    });
    has_extension || top_level.contains(first)
}

/// `path:12` and `path:12:5` as `path`.
fn strip_location(span: &str) -> &str {
    let mut path = span;
    for _ in 0..2 {
        if let Some((before, after)) = path.rsplit_once(':')
            && !after.is_empty()
            && after.chars().all(|c| c.is_ascii_digit())
        {
            path = before;
        }
    }
    path
}

/// The path exists; `*` matches within one name and `{a,b}` names each alternative.
fn check_path(root: &Path, span: &str) -> Result<(), String> {
    let path = strip_location(span).trim_end_matches('/');
    for alternative in expand_braces(path) {
        if matches(root, &alternative.split('/').collect::<Vec<_>>()) == 0 {
            return Err(format!("{alternative} does not exist"));
        }
    }
    Ok(())
}

fn expand_braces(path: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (path.find('{'), path.find('}')) else { return vec![path.to_string()] };
    if close < open {
        return vec![path.to_string()];
    }
    path[open + 1..close]
        .split(',')
        .flat_map(|choice| expand_braces(&format!("{}{choice}{}", &path[..open], &path[close + 1..])))
        .collect()
}

/// How many files or folders under `dir` match the path's parts.
fn matches(dir: &Path, parts: &[&str]) -> usize {
    let Some((first, rest)) = parts.split_first() else { return 1 };
    if !first.contains('*') {
        let next = dir.join(first);
        return if next.exists() { matches(&next, rest) } else { 0 };
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| wildcard(first, &e.file_name().to_string_lossy()))
        .map(|e| matches(&e.path(), rest))
        .sum()
}

fn wildcard(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else { return false };
            (0..=rest.len()).filter(|&i| rest.is_char_boundary(i)).any(|i| wildcard(tail, &rest[i..]))
        }
    }
}

// -- markdown --------------------------------------------------------------------------------------

/// Lines outside fenced code blocks and HTML comments, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match fence {
            Some(marker) => {
                if trimmed.starts_with(marker) {
                    fence = None;
                }
            }
            None if trimmed.starts_with("```") => fence = Some("```"),
            None if trimmed.starts_with("~~~") => fence = Some("~~~"),
            None if trimmed.starts_with("<!--") => {}
            None => out.push((i + 1, line)),
        }
    }
    out
}

/// The contents of a line's inline code spans (single or double backticks).
fn inline_code(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        let ticks = rest[open..].chars().take_while(|&c| c == '`').count();
        let marker = &rest[open..open + ticks];
        let body = &rest[open + ticks..];
        let Some(close) = body.find(marker) else { break };
        out.push(body[..close].trim());
        rest = &body[close + ticks..];
    }
    out
}

/// The line with its inline code spans blanked out, so that `[a](b)` written as code is no link.
fn without_inline_code(line: &str) -> String {
    let mut out = line.to_string();
    for span in inline_code(line) {
        if let Some(at) = out.find(span) {
            out.replace_range(at..at + span.len(), &" ".repeat(span.len()));
        }
    }
    out
}
