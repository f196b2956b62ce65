//! Text from linted files (source lines, paths, identifiers quoted in messages) is the files'
//! author's, not ours: written raw to a terminal, an ESC, BEL or NUL in it could set the
//! terminal's title or colours, move the cursor or hide text, and bidirectional overrides could
//! make code read differently than it parses. Every format meant for terminals and logs writes
//! such characters as Rust escapes (`\u{1b}`), the way the JSON and SARIF formats escape them.

use std::borrow::Cow;

/// `text` with every control and bidirectional-override character escaped; line breaks and tabs
/// are kept (help texts have several lines).
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Like [`printable`], but line breaks are escaped too: for what must stay on one line (a path,
/// a message in a one-line format).
pub fn printable_line(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// Serialised JSON with the characters serde leaves raw (DEL, C1 controls, bidirectional
/// overrides, line separators) written as `\uXXXX` escapes: the same strings to a JSON reader,
/// harmless to a terminal. They can only occur inside strings, so the document's own line breaks
/// are kept.
pub fn json_escaped(json: String) -> String {
    if !json.chars().any(|c| needs_escape(c, false)) {
        return json;
    }
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if needs_escape(c, false) {
            // All of them are in the Basic Multilingual Plane: one `\uXXXX` each.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Must `c` be escaped? Tabs and (unless `one_line`) line feeds are shown as they are.
pub(crate) fn needs_escape(c: char, one_line: bool) -> bool {
    match c {
        '\t' => false,
        '\n' => one_line,
        c if c.is_control() => true,
        // Bidirectional embeddings, overrides and isolates (the "Trojan Source" characters), and
        // the Unicode line and paragraph separators.
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}' => true,
        _ => false,
    }
}

/// How an escaped character is written.
pub(crate) fn escaped(c: char) -> String {
    format!("\\u{{{:x}}}", u32::from(c))
}

fn escape(text: &str, one_line: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| needs_escape(c, one_line)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs_escape(c, one_line) {
            out.push_str(&escaped(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_its_meaning_and_loses_raw_overrides() {
        let json = serde_json::to_string_pretty(&["a\u{202e}b\u{7f}\u{1b}"]).expect("serialises");
        let escaped = json_escaped(json);
        assert_eq!(escaped, "[\n  \"a\\u202eb\\u007f\\u001b\"\n]");
        let back: Vec<String> = serde_json::from_str(&escaped).expect("still JSON");
        assert_eq!(back, ["a\u{202e}b\u{7f}\u{1b}"]);
    }

    #[test]
    fn terminal_controls_are_escaped() {
        assert_eq!(printable("a\u{1b}]0;owned\u{7}b\0c"), "a\\u{1b}]0;owned\\u{7}b\\u{0}c");
        assert_eq!(printable("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(printable("one\r\ntwo"), "one\\u{d}\ntwo");
    }

    #[test]
    fn plain_text_is_borrowed_and_tabs_and_lines_kept() {
        assert!(matches!(printable("fn f() {}\n\tx"), Cow::Borrowed(_)));
        assert_eq!(printable_line("a\nb\tc"), "a\\u{a}b\tc");
        assert_eq!(printable("größe"), "größe");
    }
}
