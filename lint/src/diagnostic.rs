//! One runtime diagnostic type for every rule, built with a small builder
//! (`Finding::new(..).label(..).help(..).fix(..)`), then placed in a file by the driver.

use std::ops::Range;

use serde::Serialize;

use super::registry::{RuleMeta, Severity};

/// How far a fix can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applicability {
    /// Keeps the code's meaning apart from the device bug it removes; `--fix` applies it.
    Safe,
    /// Probably right, but may change behaviour or fail to compile; only `--unsafe-fixes`.
    Unsafe,
    /// Shown as a suggestion, never applied.
    DisplayOnly,
}

/// Replace `range` (bytes of the original file) with `replacement`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edit {
    #[serde(skip)]
    pub range: Range<usize>,
    pub replacement: String,
}

/// A rewrite that removes a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fix {
    pub applicability: Applicability,
    /// What the fix does, in the imperative: "make the mask on the input's device".
    pub message: String,
    pub edits: Vec<Edit>,
}

impl Fix {
    pub fn new(applicability: Applicability, message: impl Into<String>, edits: Vec<Edit>) -> Self {
        Fix { applicability, message: message.into(), edits }
    }
}

/// A finding as a rule reports it: a rule, a byte range of the file and words.
#[derive(Clone, Debug)]
pub struct Finding {
    pub rule: &'static RuleMeta,
    pub range: Range<usize>,
    pub message: String,
    pub label: Option<String>,
    pub help: Option<String>,
    pub fix: Option<Fix>,
    /// Further places worth showing (the use in `forward` of a field built elsewhere, ...).
    pub related: Vec<(Range<usize>, String)>,
    /// What must hold in the crate for the finding to be reported (all of them); checked once
    /// every file is read.
    pub(crate) conditions: Vec<Condition>,
    /// Where the function the finding is in starts (set by the front end): findings of one rule
    /// with the same message in one function are one cause, reported once with a count.
    pub(crate) scope: Option<usize>,
}

impl Finding {
    pub fn new(rule: &'static RuleMeta, range: Range<usize>, message: impl Into<String>) -> Self {
        Finding {
            rule,
            range,
            message: message.into(),
            label: None,
            help: None,
            fix: None,
            related: Vec::new(),
            conditions: Vec::new(),
            scope: None,
        }
    }

    /// Reported only if `condition` holds in the crate.
    pub(crate) fn only_if(mut self, condition: Condition) -> Self {
        self.conditions.push(condition);
        self
    }

    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn fix(mut self, fix: Option<Fix>) -> Self {
        self.fix = fix;
        self
    }

    pub fn related(mut self, range: Range<usize>, label: impl Into<String>) -> Self {
        self.related.push((range, label.into()));
        self
    }
}

/// A 1-based line and a 1-based column counted in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct LineCol {
    pub line: usize,
    pub column: usize,
}

impl LineCol {
    /// The line and column of byte `offset` (clamped to the text and to a char boundary),
    /// counted from the start of the text: no index to build, for a file with a finding or two.
    /// The same answer as [`LineIndex::line_col`].
    pub fn at(text: &str, offset: usize) -> LineCol {
        let offset = char_floor(text, offset);
        let bytes = text.as_bytes();
        let before = &bytes[..offset];
        // Past the last line break before `offset` (the `\r` of a `\r\n` is not one: the
        // `\n` is).
        let start =
            memchr::memrchr2_iter(b'\n', b'\r', before).find(|&i| is_break(bytes, i)).map_or(0, |i| i + 1);
        let line =
            memchr::memchr2_iter(b'\n', b'\r', &before[..start]).filter(|&i| is_break(bytes, i)).count() + 1;
        LineCol { line, column: text[start..offset].chars().count() + 1 }
    }
}

/// Does a line end at byte `i`? At a `\n`, and at a `\r` that no `\n` follows (old Mac files:
/// Python reads a lone `\r` as a line break, and so does every editor).
fn is_break(bytes: &[u8], i: usize) -> bool {
    match bytes[i] {
        b'\n' => true,
        b'\r' => bytes.get(i + 1) != Some(&b'\n'),
        _ => false,
    }
}

/// The lines of `text` without their breaks (`\n`, `\r\n`, or a lone `\r`), as [`LineIndex`]
/// numbers them.
pub(crate) fn lines(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut breaks = memchr::memchr2_iter(b'\n', b'\r', bytes).filter(move |&i| is_break(bytes, i));
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        match breaks.next() {
            Some(i) => {
                let end = if i > start && bytes[i] == b'\n' && bytes[i - 1] == b'\r' { i - 1 } else { i };
                let line = &text[start..end];
                start = i + 1;
                Some(line)
            }
            None => {
                done = true;
                // Like `str::lines`, no empty last line after a final break.
                (start < text.len()).then(|| &text[start..])
            }
        }
    })
}

/// `offset` clamped to the text, then moved back to the start of the character it falls in.
fn char_floor(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// A finding placed in a file, with its level after configuration.
#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    pub message: String,
    pub path: String,
    pub range: Range<usize>,
    pub start: LineCol,
    pub end: LineCol,
    pub label: Option<String>,
    pub help: Option<String>,
    pub fix: Option<Fix>,
    pub related: Vec<(Range<usize>, String)>,
    /// The same finding (rule and message) elsewhere in the same function: one cause, reported
    /// once. Their fixes are part of [`Diagnostic::fix`].
    pub also: Vec<LineCol>,
    /// Where the function the finding is in starts, when the front end knows it.
    pub(crate) scope: Option<usize>,
    /// In a notebook: the cell the finding is in. Lines (`start`, `end`, `also`) are lines of
    /// the cells joined; [`Diagnostic::line`] and [`Diagnostic::location`] show them in the cell.
    pub cell: Option<CellPlace>,
}

/// A notebook cell: its number in the notebook (as Jupyter counts them, from 1) and the line of
/// the joined cells its code starts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellPlace {
    pub number: usize,
    pub first_line: usize,
}

/// Folds the findings of one rule with the same message in one function into the first of
/// them (sorted by position): `x.cuda()` six times in a function is one cause, reported once with
/// its count and the other lines. Their fixes are merged into one (when they apply alike), so
/// `--fix` still fixes every place. Running it again changes nothing.
pub(crate) fn group_repeats(diagnostics: &mut Vec<Diagnostic>) {
    if diagnostics.len() < 2 {
        return;
    }
    let mut first_of: std::collections::HashMap<(&'static str, usize, String), usize> =
        std::collections::HashMap::new();
    let mut keep = vec![true; diagnostics.len()];
    for i in 0..diagnostics.len() {
        let Some(scope) = diagnostics[i].scope else { continue };
        let key = (diagnostics[i].code, scope, diagnostics[i].message.clone());
        let Some(&first) = first_of.get(&key) else {
            first_of.insert(key, i);
            continue;
        };
        let same_fix_kind = match (&diagnostics[first].fix, &diagnostics[i].fix) {
            (None, None) => true,
            (Some(a), Some(b)) => a.applicability == b.applicability,
            _ => false,
        };
        if !same_fix_kind {
            continue;
        }
        keep[i] = false;
        let (start, fix) = (diagnostics[i].start, diagnostics[i].fix.take());
        let into = &mut diagnostics[first];
        into.also.push(start);
        if let (Some(into), Some(fix)) = (into.fix.as_mut(), fix) {
            into.edits.extend(fix.edits);
        }
    }
    let mut keep = keep.into_iter();
    diagnostics.retain(|_| keep.next().unwrap_or(true));
}

impl Diagnostic {
    /// How many places the finding covers: its own and [`Diagnostic::also`].
    pub fn count(&self) -> usize {
        1 + self.also.len()
    }

    /// A line of the file as shown: in a notebook, the line in the finding's cell.
    pub fn shown_line(&self, line: usize) -> usize {
        match self.cell {
            Some(cell) => (line + 1).saturating_sub(cell.first_line).max(1),
            None => line,
        }
    }

    /// `path:line:column`, or in a notebook `path:cell N:line:column`, unescaped.
    pub fn location(&self) -> String {
        let line = self.shown_line(self.start.line);
        match self.cell {
            Some(cell) => format!("{}:cell {}:{line}:{}", self.path, cell.number, self.start.column),
            None => format!("{}:{line}:{}", self.path, self.start.column),
        }
    }

    /// `(6 times in this function: also lines 12, 14, ..)`, for the text formats; empty for a
    /// finding in one place.
    pub fn repeats(&self) -> String {
        if self.also.is_empty() {
            return String::new();
        }
        let lines: Vec<String> =
            self.also.iter().take(8).map(|p| self.shown_line(p.line).to_string()).collect();
        let more = if self.also.len() > 8 { ", .." } else { "" };
        let word = if self.also.len() == 1 { "line" } else { "lines" };
        format!(" ({} times in this function: also {word} {}{more})", self.count(), lines.join(", "))
    }
}

/// Maps byte offsets to lines and columns.
#[derive(Clone, Debug)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        // Lines average some 30 bytes of source: room for most files without growing.
        let mut starts = Vec::with_capacity(text.len() / 32 + 1);
        starts.push(0);
        let bytes = text.as_bytes();
        starts
            .extend(memchr::memchr2_iter(b'\n', b'\r', bytes).filter(|&i| is_break(bytes, i)).map(|i| i + 1));
        LineIndex { starts }
    }

    /// The line and column of byte `offset` (clamped to the text and to a char boundary).
    pub fn line_col(&self, text: &str, offset: usize) -> LineCol {
        let offset = char_floor(text, offset);
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        LineCol { line, column: text[start..offset].chars().count() + 1 }
    }

    /// The byte range of 1-based `line` without its line break.
    pub fn line_range(&self, text: &str, line: usize) -> Range<usize> {
        let Some(&start) = self.starts.get(line.wrapping_sub(1)) else { return text.len()..text.len() };
        let end = self.starts.get(line).map(|&s| s - 1).unwrap_or(text.len());
        let end = if end > start && text.as_bytes().get(end - 1) == Some(&b'\r') { end - 1 } else { end };
        start..end.max(start)
    }

    pub fn line_count(&self) -> usize {
        self.starts.len()
    }
}

/// A function's index among the functions of its file.
pub(crate) type FnId = u32;

/// What a pending finding needs from the crate to be reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Condition {
    /// The function runs once per layer: it is called, directly or through other calls, from a
    /// per-layer loop.
    PerLayer(FnId),
    /// The function runs at every training step: it is called, directly or through other calls,
    /// from a loop that takes a step or from a function that takes one.
    PerStep(FnId),
    /// The function takes a training step: itself, or through a function it calls outside its
    /// loops.
    TakesStep(FnId),
    /// None of the functions reached by the calls whose names start at these bytes of the file
    /// reads device data back to the host (which would wait for the device).
    NoCallWaits(Vec<usize>),
    /// One of these loops of the file (by number) takes a training step through a call.
    InStepLoop(Vec<u32>),
    /// The function is not an entry point: not a free function that `main` calls.
    NotEntry(FnId),
    /// The crate handles devices somewhere (a device parameter or field, or `x.device()`): then a
    /// tensor on the default device can meet tensors that are elsewhere.
    UsesDevices,
    /// The crate defines no in-place method of this name (`fn to_device(&mut self, ..)`).
    NoInPlaceMethod(String),
    /// The file is not in a package made only of binaries (there, every module is application
    /// code).
    NotBinaryOnly,
    /// A tensor library is known for the file: from its `use` lines or its package's dependencies.
    FrameworkKnown,
    /// The function reached by the call whose name starts at byte `at` of the file reads its
    /// argument number `arg` back to the host.
    CalleeReadsArg { at: usize, arg: u32 },
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Counting from the start gives what the index gives, at every offset, including
        /// offsets inside a character, at a line break and past the end.
        #[test]
        fn a_position_counted_from_the_start_is_the_indexed_one(
            text in "(a|é|\u{1F600}|\n|\r\n|\r| ){0,40}",
            offsets in proptest::collection::vec(0usize..200, 1..8),
        ) {
            let index = LineIndex::new(&text);
            for offset in offsets {
                prop_assert_eq!(LineCol::at(&text, offset), index.line_col(&text, offset), "offset {}", offset);
            }
            // The lines the suppressions read are the index's lines.
            for (i, line) in lines(&text).enumerate() {
                prop_assert_eq!(line, &text[index.line_range(&text, i + 1)]);
            }
        }
    }

    #[test]
    fn a_lone_carriage_return_ends_a_line() {
        let text = "a\rb\r\nc\nd";
        assert_eq!(lines(text).collect::<Vec<_>>(), ["a", "b", "c", "d"]);
        assert_eq!(LineCol::at(text, 2), LineCol { line: 2, column: 1 });
        assert_eq!(LineCol::at(text, 5), LineCol { line: 3, column: 1 });
        assert_eq!(LineIndex::new(text).line_count(), 4);
    }

    #[test]
    fn lines_and_columns_count_from_one_and_columns_count_characters() {
        let text = "ab\né\u{1F600}x\n";
        assert_eq!(LineCol::at(text, 0), LineCol { line: 1, column: 1 });
        assert_eq!(LineCol::at(text, 3), LineCol { line: 2, column: 1 });
        // After `é` (2 bytes) and the emoji (4 bytes): the third character of line 2.
        assert_eq!(LineCol::at(text, 9), LineCol { line: 2, column: 3 });
        assert_eq!(LineCol::at(text, 11), LineCol { line: 3, column: 1 });
    }
}
