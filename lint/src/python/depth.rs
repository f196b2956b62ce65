//! How deep a Python file's syntax tree can be, read before ruff's parser sees the file.
//!
//! ruff's parser descends recursively (a call chain per bracket, prefix operator, conditional,
//! lambda, right-associative `**`, nested f-string and nested block), and syntax trees are
//! visited and dropped recursively, so a file nested deep enough would end the process with a
//! stack overflow. Brackets are not the only way to nest: `not not not x`, `a + a + a ..`,
//! `x.a.a.a ..`, `x()()() ..`, `a if b else a if b else ..`, `lambda: lambda: ..`,
//! `f"{f"{f"{x}"}"}"` (nested f-strings may reuse their quotes since Python 3.12) and indented
//! blocks all build levels. [`check`] scans the file (comments and plain strings skipped,
//! f-strings' replacement fields read as code) and computes an over-estimate of the depth; a file
//! above [`MAX_DEPTH`] is not parsed.
//!
//! The estimate: every open bracket (and f-string, and replacement field) adds a level; inside
//! each, every operator character and keyword since the last `,` (or `;`, or the end of a
//! logical line) adds one more; each level of indentation adds [`BLOCK_LEVELS`]. Commas,
//! statement ends and names do not nest, so long lists and long files stay shallow. The tests
//! hold the estimate above the real nesting for every construct that nests, and hold the
//! deepest file it lets through within half the analysis threads' stack.

use crate::depth::TooDeep;

/// The largest estimated depth analysed. CPython itself refuses more than 200 nested brackets
/// and 100 levels of indentation, so real code is far below this.
pub(crate) const MAX_DEPTH: usize = 1000;

/// Levels one indented block counts for: a statement and its body.
const BLOCK_LEVELS: usize = 2;

/// Where the scanner is.
#[derive(Clone, Copy, Debug)]
enum Frame {
    /// Code inside a bracket (or at the top), or inside an f-string's `{..}` (`field`).
    Code { base: usize, run: usize, field: bool },
    /// The literal part of an f-string (or t-string) opened with `quote`.
    Str { base: usize, quote: u8, triple: bool },
    /// The format spec of a replacement field (`{x:>{width}}`): text until the field's `}`.
    Spec { base: usize },
}

impl Frame {
    fn depth(&self) -> usize {
        match *self {
            Frame::Code { base, run, .. } => base + run,
            Frame::Str { base, .. } | Frame::Spec { base } => base,
        }
    }
}

/// Keywords that start or continue an expression or statement a level deeper.
fn nests(word: &[u8]) -> bool {
    // Most words are names: rule them out by length and first letter before comparing.
    let [first, ..] = word else { return false };
    if !(2..=6).contains(&word.len()) || !NEST_FIRST[usize::from(*first)] {
        return false;
    }
    matches!(
        word,
        b"and"
            | b"as"
            | b"assert"
            | b"async"
            | b"await"
            | b"case"
            | b"class"
            | b"def"
            | b"del"
            | b"elif"
            | b"else"
            | b"except"
            | b"for"
            | b"from"
            | b"if"
            | b"import"
            | b"in"
            | b"is"
            | b"lambda"
            | b"match"
            | b"not"
            | b"or"
            | b"raise"
            | b"return"
            | b"try"
            | b"while"
            | b"with"
            | b"yield"
    )
}

/// First letters of the keywords [`nests`] knows.
static NEST_FIRST: [bool; 256] = {
    let mut table = [false; 256];
    let letters = b"acdefilmnortwy";
    let mut k = 0;
    while k < letters.len() {
        table[letters[k] as usize] = true;
        k += 1;
    }
    table
};

/// Bytes that continue a name (or a number): ASCII letters, digits, `_`, and every byte of a
/// non-ASCII character. A table: the scan spends most of its time in names.
static WORD_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
        b += 1;
    }
    table
};

fn is_word_byte(b: u8) -> bool {
    WORD_BYTE[usize::from(b)]
}

/// A string prefix (`r`, `b`, `f`, `rb`, `Rf`, `t`, ..): `Some(interpolated)`.
fn string_prefix(word: &[u8]) -> Option<bool> {
    if word.len() > 2 || !word.iter().all(|c| b"rRbBuUfFtT".contains(c)) {
        return None;
    }
    Some(word.iter().any(|c| b"fFtT".contains(c)))
}

/// `Err` with the first byte past `max` if the file may nest deeper than `max` levels.
pub(crate) fn check(text: &str, max: usize) -> Result<(), TooDeep> {
    let b = text.as_bytes();
    let mut frames = vec![Frame::Code { base: 0, run: 0, field: false }];
    // Indentation widths of the open blocks (the tokenizer's stack).
    let mut indents: Vec<usize> = vec![0];
    let mut line_start = true;
    // Open `lambda` parameter lists: (frame, run at the `lambda`). Their commas do not end the
    // nesting; their `:` ends the list.
    let mut lambdas: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    let too_deep = |frames: &[Frame], at: usize| -> Result<(), TooDeep> {
        match frames.last() {
            Some(f) if f.depth() > max => Err(TooDeep { at, len: 1 }),
            _ => Ok(()),
        }
    };
    while i < b.len() {
        let top = frames.len() - 1;
        while lambdas.last().is_some_and(|&(f, _)| f > top) {
            lambdas.pop();
        }
        match frames[top] {
            Frame::Str { quote, triple, .. } => {
                let c = b[i];
                if c == b'\\' {
                    // An escaped character, but never a brace: `\{` still opens a field.
                    i += if matches!(b.get(i + 1), Some(b'{' | b'}')) { 1 } else { 2 };
                    continue;
                }
                if c == quote {
                    if !triple {
                        frames.pop();
                    } else if b.get(i + 1) == Some(&quote) && b.get(i + 2) == Some(&quote) {
                        frames.pop();
                        i += 2;
                    }
                } else if c == b'\n' && !triple {
                    // Unterminated: the parser reports it; the line ends the string here.
                    frames.pop();
                    continue;
                } else if c == b'{' {
                    if b.get(i + 1) == Some(&b'{') {
                        i += 1;
                    } else {
                        let base = frames[top].depth() + 1;
                        frames.push(Frame::Code { base, run: 0, field: true });
                        too_deep(&frames, i)?;
                    }
                }
                i += 1;
                continue;
            }
            Frame::Spec { base } => {
                match b[i] {
                    b'{' => {
                        frames.push(Frame::Code { base: base + 1, run: 0, field: true });
                        too_deep(&frames, i)?;
                    }
                    b'}' => {
                        // The spec ends with its field.
                        frames.pop();
                        frames.pop();
                    }
                    b'\n' => {
                        frames.pop();
                        frames.pop();
                        continue;
                    }
                    _ => {}
                }
                i += 1;
                continue;
            }
            Frame::Code { .. } => {}
        }
        let at_top = frames.len() == 1;
        if line_start && at_top {
            // The indentation of a logical line that holds code sets the block depth.
            // Spaces first (nearly all indentation), then the general walk for tabs and form feeds.
            let mut j = i + spaces(&b[i..]);
            let mut col = j - i;
            while j < b.len() && matches!(b[j], b' ' | b'\t' | b'\x0c') {
                col = match b[j] {
                    b'\t' => (col / 8 + 1) * 8,
                    b'\x0c' => 0,
                    _ => col + 1,
                };
                j += 1;
            }
            if j < b.len() && !matches!(b[j], b'\n' | b'\r' | b'#') {
                while indents.len() > 1 && indents.last().is_some_and(|&w| col < w) {
                    indents.pop();
                }
                if indents.last().is_some_and(|&w| col > w) {
                    indents.push(col);
                }
                let base = (indents.len() - 1) * BLOCK_LEVELS;
                frames[0] = Frame::Code { base, run: 0, field: false };
                line_start = false;
                too_deep(&frames, j)?;
            }
            i = j;
            if i >= b.len() {
                break;
            }
        }
        i = code_run(b, i, &mut frames, lambdas.is_empty(), max)?;
        let Some(&c) = b.get(i) else { break };
        // The run may have opened and closed brackets: where is it now?
        let top = frames.len() - 1;
        let at_top = top == 0;
        if !matches!(frames[top], Frame::Code { .. }) {
            continue;
        }
        match c {
            b'#' => {
                i = memchr::memchr(b'\n', &b[i..]).map_or(b.len(), |n| i + n);
                continue;
            }
            b'\\' if matches!(b.get(i + 1), Some(b'\n' | b'\r')) => {
                // A line continuation: the logical line goes on.
                i += if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') { 3 } else { 2 };
                continue;
            }
            b'\n' if at_top => {
                line_start = true;
                lambdas.clear();
                if let Frame::Code { run, .. } = &mut frames[0] {
                    *run = 0;
                }
            }
            b',' | b';' => {
                let mark = lambdas.last().filter(|&&(f, _)| f == top && c == b',').map_or(0, |&(_, r)| r);
                if let Frame::Code { run, .. } = &mut frames[top] {
                    *run = mark;
                }
            }
            b'(' | b'[' | b'{' => {
                if let Frame::Code { run, .. } = &mut frames[top] {
                    // `f()()()` and `x[0][0][0]` nest one level per pair.
                    *run += 1;
                }
                let base = frames[top].depth() + 1;
                frames.push(Frame::Code { base, run: 0, field: false });
                too_deep(&frames, i)?;
            }
            b')' | b']' | b'}' => {
                if let Frame::Code { field, .. } = frames[top] {
                    // A field ends only at its `}`; a stray closer elsewhere is the parser's error.
                    if top > 0 && (!field || c == b'}') {
                        frames.pop();
                    }
                }
            }
            b':' => {
                if lambdas.last().is_some_and(|&(f, _)| f == top) {
                    lambdas.pop();
                } else if let Frame::Code { field: true, .. } = frames[top] {
                    let base = frames[top].depth() + 1;
                    frames.push(Frame::Spec { base });
                    too_deep(&frames, i)?;
                }
            }
            b'\'' | b'"' => {
                i = skip_string(b, i, false, &mut frames)?;
                too_deep(&frames, i)?;
                continue;
            }
            // A string prefix or `lambda` ([`code_run`] takes every other name).
            _ if is_word_byte(c) => {
                let start = i;
                while i < b.len() && is_word_byte(b[i]) {
                    i += 1;
                }
                let word = &b[start..i];
                if let (Some(b'\'' | b'"'), Some(interpolated)) = (b.get(i), string_prefix(word)) {
                    i = skip_string(b, i, interpolated, &mut frames)?;
                    too_deep(&frames, start)?;
                } else if nests(word)
                    && let Frame::Code { run, .. } = &mut frames[top]
                {
                    *run += 1;
                    if word == b"lambda" {
                        lambdas.push((top, *run));
                    }
                    too_deep(&frames, start)?;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// What nearly all of a file is: code that changes only the code frames — names, spaces,
/// operator characters, brackets, separators, comments, line continuations and newlines inside
/// brackets. Scans it from `i` (the top frame a [`Frame::Code`]) and returns the first byte it
/// leaves to the full scan in [`check`]: a quote, a name that opens a string (`f"`) or is
/// `lambda` (from the name's first byte), a newline at the top, a `:` in a replacement field,
/// and — while a `lambda` is open (`no_lambdas` false) — any `,`, `;`, `:` or closer. A closer
/// that pops back into an f-string's text returns the byte after it.
fn code_run(
    b: &[u8],
    mut i: usize,
    frames: &mut Vec<Frame>,
    no_lambdas: bool,
    max: usize,
) -> Result<usize, TooDeep> {
    let mut top = frames.len() - 1;
    let Frame::Code { mut base, mut run, mut field } = frames[top] else { return Ok(i) };
    let out = loop {
        let Some(&c) = b.get(i) else { break Ok(i) };
        match BYTE_CLASS[usize::from(c)] {
            Class::Word => {
                let start = i;
                i += 1;
                while b.get(i).is_some_and(|&c| is_word_byte(c)) {
                    i += 1;
                }
                let word = &b[start..i];
                if matches!(b.get(i), Some(b'\'' | b'"')) && string_prefix(word).is_some() {
                    break Ok(start);
                }
                if nests(word) {
                    if word == b"lambda" {
                        break Ok(start);
                    }
                    run += 1;
                    if base + run > max {
                        break Err(TooDeep { at: start, len: 1 });
                    }
                }
            }
            Class::Space => i += spaces(&b[i..]),
            Class::Operator => {
                run += 1;
                if base + run > max {
                    break Err(TooDeep { at: i, len: 1 });
                }
                i += 1;
            }
            Class::Open => {
                // `f()()()` and `x[0][0][0]` nest one level per pair.
                run += 1;
                frames[top] = Frame::Code { base, run, field };
                (base, run, field) = (base + run + 1, 0, false);
                frames.push(Frame::Code { base, run, field });
                top += 1;
                if base > max {
                    break Err(TooDeep { at: i, len: 1 });
                }
                i += 1;
            }
            Class::Close if no_lambdas => {
                i += 1;
                // A field ends only at its `}`; a stray closer elsewhere is the parser's error.
                if top > 0 && (!field || c == b'}') {
                    frames.pop();
                    top -= 1;
                    match frames[top] {
                        Frame::Code { base: b0, run: r0, field: f0 } => (base, run, field) = (b0, r0, f0),
                        // Back in an f-string's text: the full scan goes on from here.
                        _ => return Ok(i),
                    }
                }
            }
            Class::Separator if no_lambdas => {
                run = 0;
                i += 1;
            }
            Class::Colon if no_lambdas && !field => i += 1,
            Class::Newline if top > 0 => i += 1,
            Class::Hash => i = memchr::memchr(b'\n', &b[i..]).map_or(b.len(), |n| i + n),
            Class::Backslash => {
                // A line continuation: the logical line goes on.
                i += match (b.get(i + 1), b.get(i + 2)) {
                    (Some(b'\r'), Some(b'\n')) => 3,
                    (Some(b'\n' | b'\r'), _) => 2,
                    _ => 1,
                };
            }
            Class::Skip => i += 1,
            _ => break Ok(i),
        }
    };
    frames[top] = Frame::Code { base, run, field };
    out
}

/// The number of spaces `b` starts with.
fn spaces(b: &[u8]) -> usize {
    b.iter().position(|&c| c != b' ').unwrap_or(b.len())
}

#[derive(Clone, Copy)]
enum Class {
    Word,
    Space,
    Operator,
    /// `(`, `[`, `{`.
    Open,
    /// `)`, `]`, `}`.
    Close,
    /// `,` and `;`: the end of an operator run.
    Separator,
    Colon,
    Newline,
    Hash,
    Backslash,
    /// Quotes: strings, for the full scan.
    Quote,
    /// Nothing to the estimate (tabs, `\r`, `$`, ..).
    Skip,
}

/// [`code_run`]'s view of a byte.
static BYTE_CLASS: [Class; 256] = {
    let mut table = [Class::Skip; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = if WORD_BYTE[b] {
            Class::Word
        } else if c == b' ' {
            Class::Space
        } else if matches!(
            c,
            b'+' | b'-'
                | b'*'
                | b'/'
                | b'%'
                | b'@'
                | b'&'
                | b'|'
                | b'^'
                | b'~'
                | b'<'
                | b'>'
                | b'='
                | b'!'
                | b'.'
        ) {
            Class::Operator
        } else {
            match c {
                b'(' | b'[' | b'{' => Class::Open,
                b')' | b']' | b'}' => Class::Close,
                b',' | b';' => Class::Separator,
                b':' => Class::Colon,
                b'\n' => Class::Newline,
                b'#' => Class::Hash,
                b'\\' => Class::Backslash,
                b'\'' | b'"' => Class::Quote,
                _ => Class::Skip,
            }
        };
        b += 1;
    }
    table
};

/// Past the string whose quote is at `i`; an interpolated one opens a [`Frame::Str`] instead.
fn skip_string(
    b: &[u8],
    mut i: usize,
    interpolated: bool,
    frames: &mut Vec<Frame>,
) -> Result<usize, TooDeep> {
    let quote = b[i];
    let triple = b.get(i + 1) == Some(&quote) && b.get(i + 2) == Some(&quote);
    i += if triple { 3 } else { 1 };
    if interpolated {
        let base = frames.last().map_or(0, Frame::depth) + 1;
        frames.push(Frame::Str { base, quote, triple });
        return Ok(i);
    }
    while i < b.len() {
        // Straight to the next byte that can end the string.
        match memchr::memchr3(quote, b'\\', b'\n', &b[i..]) {
            Some(n) => i += n,
            None => return Ok(b.len()),
        }
        match b[i] {
            b'\\' => {
                i += 2;
                continue;
            }
            c if c == quote => {
                if !triple {
                    return Ok(i + 1);
                }
                if b.get(i + 1) == Some(&quote) && b.get(i + 2) == Some(&quote) {
                    return Ok(i + 3);
                }
            }
            // Unterminated: the parser reports it.
            b'\n' if !triple => return Ok(i),
            _ => {}
        }
        i += 1;
    }
    Ok(i.min(b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_of(text: &str) -> usize {
        let (mut lo, mut hi) = (0, 100_000);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if check(text, mid).is_ok() { hi = mid } else { lo = mid + 1 }
        }
        lo
    }

    #[test]
    fn strings_and_comments_do_not_nest() {
        let text = format!(
            "# {}\ns = '{}'\nt = \"\"\"{}\"\"\"\nu = rb'\\'{}'\n",
            "(".repeat(5000),
            "[".repeat(5000),
            "{".repeat(5000),
            "(".repeat(5000)
        );
        assert!(depth_of(&text) < 5, "{}", depth_of(&text));
    }

    #[test]
    fn f_string_fields_are_code() {
        let nested = format!("x = {}x{}\n", "f\"{".repeat(100), "}\"".repeat(100));
        assert!(depth_of(&nested) > 200);
        let spec = format!("x = f\"{{x:{}w{}}}\"\n", "{w:".repeat(100), "}".repeat(100));
        assert!(depth_of(&spec) > 100);
        // Doubled braces are text.
        assert!(depth_of(&format!("x = f\"{}\"\n", "{{".repeat(1000))) < 5);
    }

    #[test]
    fn runs_of_operators_nest_and_separators_end_them() {
        assert!(depth_of(&format!("x = {}y\n", "not ".repeat(100))) > 100);
        assert!(depth_of(&format!("x = {}\n", ["a"; 100].join(" + "))) > 99);
        assert!(depth_of(&format!("x = y{}\n", ".a".repeat(100))) > 100);
        assert!(depth_of(&["x = a + b\n"; 1000].concat()) < 10);
        assert!(depth_of(&format!("x = f({})\n", ["a + 1"; 1000].join(", "))) < 10);
        assert!(depth_of(&format!("x = (\n{})\n", ["    a,\n"; 1000].concat())) < 10);
        // A continued line goes on counting.
        assert!(depth_of(&format!("x = {}y\n", "-\\\n".repeat(100))) > 100);
    }

    #[test]
    fn indentation_nests_blocks() {
        let mut text = String::new();
        for level in 0..100 {
            text.push_str(&format!("{}if x:\n", " ".repeat(level)));
        }
        text.push_str(&format!("{}pass\n", " ".repeat(100)));
        assert!(depth_of(&text) >= 200);
        // Blocks closed again do not add up.
        let flat = ["def f():\n    if x:\n        return 1\n"; 1000].concat();
        assert!(depth_of(&flat) < 10);
    }

    type Nest = fn(usize) -> String;

    /// Deep nesting of every kind ruff's parser builds recursively, as a forward pass's
    /// statement (so every rule looks at it).
    const NESTINGS: &[(&str, Nest)] = &[
        ("paren", |n| format!("{}x{}", "(".repeat(n), ")".repeat(n))),
        ("list", |n| format!("{}x{}", "[".repeat(n), "]".repeat(n))),
        ("dict", |n| format!("{}x{}", "{1: ".repeat(n), "}".repeat(n))),
        ("set", |n| format!("{}x{}", "{".repeat(n), "}".repeat(n))),
        ("tuple", |n| format!("{}x{}", "(x, ".repeat(n), ")".repeat(n))),
        ("call-args", |n| format!("{}x{}", "f(x, ".repeat(n), ")".repeat(n))),
        ("torch-call", |n| format!("{}x{}", "torch.zeros(".repeat(n), ")".repeat(n))),
        ("subscript-arg", |n| format!("{}x{}", "x[".repeat(n), "]".repeat(n))),
        ("add", |n| vec!["x"; n].join(" + ")),
        ("power", |n| vec!["x"; n].join(" ** ")),
        ("compare", |n| vec!["x"; n].join(" < ")),
        ("and", |n| vec!["x"; n].join(" and ")),
        ("neg", |n| format!("{}x", "-".repeat(n))),
        ("invert", |n| format!("{}x", "~".repeat(n))),
        ("not", |n| format!("{}x", "not ".repeat(n))),
        ("await", |n| format!("{}x", "await ".repeat(n))),
        ("field", |n| format!("x{}", ".a".repeat(n))),
        ("method", |n| format!("x{}", ".to(x)".repeat(n))),
        ("call", |n| format!("x{}", "()".repeat(n))),
        ("index", |n| format!("x{}", "[0]".repeat(n))),
        ("ternary", |n| format!("{}x", "x if x else ".repeat(n))),
        ("ternary-test", |n| format!("{}x{}", "(x if ".repeat(n), " else x)".repeat(n))),
        ("lambda", |n| format!("{}x", "lambda: ".repeat(n))),
        ("lambda-args", |n| format!("{}x", "lambda a, b=1: ".repeat(n))),
        ("walrus", |n| format!("{}x{}", "(a := ".repeat(n), ")".repeat(n))),
        ("starred", |n| format!("{}x{}", "[*".repeat(n), "]".repeat(n))),
        ("comprehension", |n| format!("{}x{}", "[x for x in ".repeat(n), "]".repeat(n))),
        ("generator", |n| format!("{}x{}", "(x for x in ".repeat(n), ")".repeat(n))),
        ("slice", |n| format!("{}x{}", "x[1:".repeat(n), "]".repeat(n))),
        ("f-string", |n| format!("{}x{}", "f\"{".repeat(n), "}\"".repeat(n))),
        ("f-string-spec", |n| format!("f\"{{x:{}w{}}}\"", "{w:".repeat(n), "}".repeat(n))),
        ("string-concat", |n| vec!["'a'"; n].join(" + ")),
        ("yield", |n| format!("{}x{}", "(yield ".repeat(n), ")".repeat(n))),
    ];

    /// Nestings of statements, as whole files.
    const BLOCKS: &[(&str, Nest)] = &[
        ("if", |n| {
            (0..n).map(|l| format!("{}if x:\n", " ".repeat(l))).collect::<String>() + &" ".repeat(n) + "x\n"
        }),
        ("def", |n| {
            (0..n).map(|l| format!("{}def f(x):\n", " ".repeat(l))).collect::<String>()
                + &" ".repeat(n)
                + "x\n"
        }),
        ("class", |n| {
            (0..n).map(|l| format!("{}class A(nn.Module):\n", " ".repeat(l))).collect::<String>()
                + &" ".repeat(n)
                + "x\n"
        }),
        ("for-with", |n| {
            (0..n)
                .map(|l| {
                    format!("{}{}\n", " ".repeat(l), if l % 2 == 0 { "for x in y:" } else { "with x as y:" })
                })
                .collect::<String>()
                + &" ".repeat(n)
                + "x.item()\n"
        }),
        ("try", |n| {
            (0..n).map(|l| format!("{}try:\n", " ".repeat(2 * l))).collect::<String>()
                + &" ".repeat(2 * n)
                + "x\n"
                + &(0..n)
                    .rev()
                    .map(|l| format!("{}finally:\n{}x\n", " ".repeat(2 * l), " ".repeat(2 * l + 1)))
                    .collect::<String>()
        }),
        ("tabs", |n| {
            (0..n).map(|l| format!("{}if x:\n", "\t".repeat(l))).collect::<String>() + &"\t".repeat(n) + "x\n"
        }),
    ];

    fn nested_forward(body: &str) -> String {
        format!(
            "import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def forward(self, x):\n        \
             y = {body}\n        return torch.zeros(3) + x\n"
        )
    }

    fn as_file(nest: Nest, blocks: bool, n: usize) -> String {
        if blocks { format!("import torch\n{}", nest(n)) } else { nested_forward(&nest(n)) }
    }

    /// The most levels of a nesting whose file stays within `max` (searched up to `4 * max`, so an
    /// estimate that missed levels would show).
    fn levels_within(nest: Nest, blocks: bool, max: usize) -> usize {
        let (mut lo, mut hi) = (0, 4 * max);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if check(&as_file(nest, blocks, mid), max).is_ok() { lo = mid } else { hi = mid - 1 }
        }
        lo
    }

    fn all() -> impl Iterator<Item = (&'static str, Nest, bool)> {
        NESTINGS.iter().map(|(n, f)| (*n, *f, false)).chain(BLOCKS.iter().map(|(n, f)| (*n, *f, true)))
    }

    #[test]
    fn the_estimate_counts_every_level_of_every_nesting() {
        for (name, nest, blocks) in all() {
            let n = levels_within(nest, blocks, 400);
            assert!(n < 400, "{name}: {n} levels estimated within 400");
        }
    }

    /// The guarantee: whatever a Python file holds, if the estimate lets it through, parsing,
    /// linting and dropping it fits in half the analysis threads' stack (in this unoptimised
    /// build, where frames are largest).
    #[test]
    fn every_nesting_at_the_limit_fits_in_half_the_stack() {
        let settings = crate::Settings::from_table(
            crate::LintTable::default(),
            std::path::PathBuf::from("."),
            None,
            &crate::Overrides { preview: true, ..crate::Overrides::default() },
        )
        .expect("settings");
        for (name, nest, blocks) in all() {
            let n = levels_within(nest, blocks, MAX_DEPTH);
            let text = as_file(nest, blocks, n);
            let report = crate::stack::run_with_stack(crate::stack::STACK_BYTES / 2, || {
                crate::lint_source("model.py", &text, &settings)
            });
            assert!(!report.diagnostics.iter().any(|d| d.message.contains("too deeply")), "{name}");
            // One level more is refused, not parsed.
            let deeper = crate::lint_source("model.py", &as_file(nest, blocks, n + 1), &settings);
            assert!(
                deeper
                    .diagnostics
                    .iter()
                    .any(|d| d.code == "D000" && d.message.contains("too deeply nested")),
                "{name}: {:?}",
                deeper.diagnostics
            );
        }
    }

    #[test]
    fn the_offending_byte_is_located() {
        let text = "x = ((((y))))\n";
        let e = check(text, 4).expect_err("too deep");
        assert_eq!(&text[e.at..e.at + e.len], "(");
        assert_eq!(e.at, 5);
    }
}
