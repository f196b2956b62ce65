//! Suppression comments, read from the raw text line by line (syn drops comments):
//! `// devcheck: ignore[D001]` on the finding's line or the line above,
//! `// devcheck: ignore` for every rule there, and `//! devcheck: ignore-file[D001, D005]`
//! anywhere in the file. In Python the same comments start with `#`
//! (`# devcheck: ignore[D001]`, `# devcheck: ignore-file[D005]`). `ignore[ALL]` is every rule;
//! `ignore[]` names none and suppresses nothing.

use std::collections::HashMap;

use super::registry;

/// Which codes are suppressed where; an empty list means every code.
#[derive(Debug, Default)]
pub(crate) struct Suppressions {
    file: Option<Vec<String>>,
    lines: HashMap<usize, Vec<String>>,
}

impl Suppressions {
    pub fn parse(text: &str) -> Self {
        Self::parse_with(text, rust_comment)
    }

    /// The suppression comments of a Python file.
    pub fn parse_python(text: &str) -> Self {
        Self::parse_with(text, python_comment)
    }

    fn parse_with(text: &str, comment_of: fn(&str) -> Option<&str>) -> Self {
        let mut s = Suppressions::default();
        if memchr::memmem::find(text.as_bytes(), b"devcheck:").is_none() {
            return s;
        }
        for (i, line) in crate::diagnostic::lines(text).enumerate() {
            let Some(comment) = comment_of(line) else { continue };
            let Some(rest) = comment.strip_prefix("devcheck:") else { continue };
            let rest = rest.trim();
            let (file_wide, rest) = match rest.strip_prefix("ignore-file") {
                Some(r) => (true, r),
                None => match rest.strip_prefix("ignore") {
                    Some(r) => (false, r),
                    None => continue,
                },
            };
            let codes = parse_codes(rest.trim());
            let Some(codes) = codes else { continue };
            if file_wide {
                match &mut s.file {
                    Some(existing) if !existing.is_empty() && !codes.is_empty() => existing.extend(codes),
                    Some(existing) => existing.clear(),
                    None => s.file = Some(codes),
                }
            } else {
                s.lines.insert(i + 1, codes);
            }
        }
        s
    }

    /// Is `code` suppressed for a finding that starts on 1-based `line`?
    pub fn suppresses(&self, code: &str, line: usize) -> bool {
        let covers = |codes: &Vec<String>| codes.is_empty() || codes.iter().any(|c| c == code);
        if self.file.as_ref().is_some_and(covers) {
            return true;
        }
        [line, line.saturating_sub(1)].iter().any(|l| self.lines.get(l).is_some_and(covers))
    }
}

/// The text of a `//`, `///` or `//!` comment on the line.
/// The text of the `//` (`///`, `//!`) comment that holds `devcheck:`, also after another
/// comment on the line (`x; // note // devcheck: ignore[D001]`) or a `//` in a string.
fn rust_comment(line: &str) -> Option<&str> {
    let at = line.find("devcheck:")?;
    let slashes = line[..at].rfind("//")?;
    line[slashes + 2..at].trim_start_matches(['/', '!']).trim().is_empty().then(|| line[at..].trim())
}

/// The text of the `#` comment that holds `devcheck:` (an earlier `#` may sit in a string).
fn python_comment(line: &str) -> Option<&str> {
    let at = line.find("devcheck:")?;
    let hash = line[..at].rfind('#')?;
    line[hash + 1..at].trim().is_empty().then(|| line[at..].trim())
}

/// `[D001, tensor-on-fixed-device]` → codes; nothing, or `[ALL]` → all codes (an empty list);
/// an empty `[]` names no rule, and anything else is not a suppression comment.
fn parse_codes(rest: &str) -> Option<Vec<String>> {
    if rest.is_empty() || !rest.starts_with('[') {
        // `// devcheck: ignore` alone, possibly followed by a reason after a space or colon.
        return (rest.is_empty() || rest.starts_with([' ', ':', '-', '('])).then(Vec::new);
    }
    let end = rest.find(']')?;
    let named: Vec<&str> = rest[1..end].split(',').map(str::trim).filter(|c| !c.is_empty()).collect();
    if named.is_empty() {
        return None;
    }
    if named.iter().any(|c| c.eq_ignore_ascii_case("ALL")) {
        return Some(Vec::new());
    }
    let codes = named
        .into_iter()
        .map(|c| registry::lookup(c).map(|r| r.code.to_string()).unwrap_or_else(|| c.to_ascii_uppercase()))
        .collect();
    Some(codes)
}
