//! How deep a Rust file's syntax tree can be, read before syn sees the file.
//!
//! syn parses, the walker visits and `Drop` frees a syntax tree recursively, one call per level,
//! so a file nested deep enough ends the process with a stack overflow, which no `catch_unwind`
//! can stop. Brackets are not the only way to nest: `!!!!x`, `a + a + a ..`, `x.a().a() ..`,
//! `&&&T`, `Box<Box<..>>`, `|x| |x| ..`, `return return ..`, `if .. {} else if .. {} ..` all
//! build one tree level per token. [`check`] lexes the file (comments, nested block comments,
//! strings, raw strings, char literals and lifetimes skipped as Rust skips them) and computes an
//! over-estimate of the tree's depth; a file above [`MAX_DEPTH`] is not parsed.
//!
//! The estimate: every open bracket adds a level, and inside each bracket, every operator,
//! postfix or expression keyword since the last `;` or `,` adds one more. A `}` ends such a run
//! only when what follows cannot continue the expression (`} else`, `} + 1`, `}.f()` continue
//! it). The estimate never under-counts a level of syn's tree (the tests hold it to that for
//! every construct that nests), so [`stack_needed`] of the estimate bounds what a file needs: the
//! analysis runs on the caller's stack when that much is left, else on a fresh segment.

use crate::unlinted::TooDeep;

/// The largest estimated depth analysed. Real code stays far below it (of six thousand files of
/// crates.io sources, 999 in 1000 estimate below 150 and the largest, generated Unicode tables,
/// about 1,400), and the costliest construct needs about 5.5 KB of stack per level in a debug
/// build, so a file at the limit uses about a third of [`crate::stack::STACK_BYTES`]
/// ([`stack_needed`] allows twice that).
pub const MAX_DEPTH: usize = 4000;

/// The estimated depth of the file's tree (at most `max`), or `Err` with the first token past
/// `max` if the file may nest deeper than `max` levels.
pub(crate) fn check(text: &str, max: usize) -> Result<usize, TooDeep> {
    let mut deepest = 0;
    let mut frames = vec![Frame::default()];
    // After a `}`: does the next token continue the expression the block belongs to?
    let mut after_brace = false;
    for token in Lexer::new(text.as_bytes()) {
        if after_brace {
            after_brace = false;
            if !token.kind.continues() {
                top(&mut frames).end_statement();
            }
        }
        let frame = top(&mut frames);
        match token.kind {
            Kind::Comma => frame.run = frame.lists.last().map_or(0, |l| l.run),
            Kind::Semicolon => frame.end_statement(),
            Kind::Open(b) => {
                // `f()()()` and `x[0][0][0]` nest one level per pair.
                if b != b'{' {
                    frame.run += 1;
                }
                let base = frame.depth() + 1;
                frames.push(Frame { base, ..Frame::default() });
            }
            Kind::Close(b) => {
                if frames.len() > 1 {
                    frames.pop();
                }
                after_brace = b == b'}';
            }
            Kind::Keyword { .. } => frame.run += 1,
            Kind::Nesting(list) => {
                frame.run += 1;
                match list {
                    List::None => {}
                    List::Open(c) => frame.lists.push(OpenList { by: c, run: frame.run }),
                    List::Close(c) => {
                        if frame.lists.last().is_some_and(|l| l.by == c) {
                            frame.lists.pop();
                        }
                    }
                    List::Toggle(c) => {
                        if frame.lists.last().is_some_and(|l| l.by == c) {
                            frame.lists.pop();
                        } else {
                            frame.lists.push(OpenList { by: c, run: frame.run });
                        }
                    }
                }
            }
            Kind::Other => {}
        }
        let depth = top(&mut frames).depth();
        if depth > max {
            return Err(TooDeep { at: token.start, len: token.len.max(1) });
        }
        deepest = deepest.max(depth);
    }
    Ok(deepest)
}

/// Stack bytes that parsing, walking and dropping the tree of a file of estimated depth `depth`
/// may take: the analysis's own frames and a share per level, twice what the costliest construct
/// takes in a debug build (about 5.5 KB a level; the tests overflow at 5 KB). The tests run every
/// nesting at several depths, up to [`MAX_DEPTH`], on a stack of this size and the caller's
/// frames.
pub(crate) fn stack_needed(depth: usize) -> usize {
    const BASE: usize = 512 << 10;
    const PER_LEVEL: usize = 12 << 10;
    BASE + depth.min(MAX_DEPTH) * PER_LEVEL
}

/// The inside of one bracket.
#[derive(Default)]
struct Frame {
    /// The depth of the bracket.
    base: usize,
    /// Operators, postfixes and expression keywords since the start of the current list item.
    run: usize,
    /// Lists that are not in brackets, opened and not yet closed: generics (`<A, B>`) and closure
    /// parameters (`|a, b|`). A `,` inside one starts a new item at the list's own depth, not at
    /// the bracket's: `A<T, A<T, ..>>` nests. A `<` that is a comparison is never closed, which
    /// only makes the estimate larger.
    lists: Vec<OpenList>,
}

struct OpenList {
    /// `<` or `|`.
    by: u8,
    /// The run where the list starts.
    run: usize,
}

impl Frame {
    fn depth(&self) -> usize {
        self.base.saturating_add(self.run)
    }

    fn end_statement(&mut self) {
        self.run = 0;
        self.lists.clear();
    }
}

fn top(frames: &mut [Frame]) -> &mut Frame {
    // `check` never pops the first frame, so there is always one; this is only the borrow.
    let last = frames.len() - 1;
    &mut frames[last]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Comma,
    Semicolon,
    /// `(`, `[` or `{`.
    Open(u8),
    /// `)`, `]` or `}`.
    Close(u8),
    /// An operator or postfix; it may open or close a list that is not in brackets.
    Nesting(List),
    /// A keyword that takes an expression, pattern or type after it. `as` and `else` go on with
    /// the expression before them; the others start one.
    Keyword {
        continues: bool,
    },
    /// Identifiers, literals, lifetimes, `#`, `$`, `:`.
    Other,
}

/// How an operator bears on lists outside brackets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    Open(u8),
    Close(u8),
    /// `|` opens closure parameters or closes them.
    Toggle(u8),
}

impl Kind {
    /// Can this token continue an expression that ended with a block (`} else`, `} + 1`)?
    fn continues(self) -> bool {
        matches!(self, Kind::Nesting(_) | Kind::Keyword { continues: true } | Kind::Open(b'(' | b'['))
    }
}

#[derive(Clone, Copy, Debug)]
struct Token {
    kind: Kind,
    start: usize,
    len: usize,
}

/// Keywords after which an expression, pattern or type nests one level deeper.
const NESTING_KEYWORDS: &[&[u8]] = &[
    b"as", b"async", b"await", b"become", b"box", b"break", b"const", b"do", b"dyn", b"else", b"for", b"if",
    b"impl", b"in", b"let", b"loop", b"match", b"move", b"mut", b"raw", b"ref", b"return", b"static", b"try",
    b"unsafe", b"while", b"yield",
];

/// Rust's tokens, well enough to tell code from comments, strings and char literals.
struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Lexer<'a> {
    fn new(b: &'a [u8]) -> Self {
        Lexer { b, i: 0 }
    }

    fn at(&self, i: usize) -> u8 {
        self.b.get(i).copied().unwrap_or(0)
    }

    fn skip_line(&mut self) {
        while self.i < self.b.len() && self.b[self.i] != b'\n' {
            self.i += 1;
        }
    }

    /// A block comment from its `/*`; block comments nest.
    fn skip_block_comment(&mut self) {
        let mut open = 0usize;
        while self.i < self.b.len() {
            if self.b[self.i] == b'/' && self.at(self.i + 1) == b'*' {
                open += 1;
                self.i += 2;
            } else if self.b[self.i] == b'*' && self.at(self.i + 1) == b'/' {
                open -= 1;
                self.i += 2;
                if open == 0 {
                    return;
                }
            } else {
                self.i += 1;
            }
        }
    }

    /// A string from its opening quote at `self.i`; `hashes` is `Some(n)` for a raw string
    /// opened with `n` `#`s.
    fn skip_string(&mut self, hashes: Option<usize>) {
        self.i += 1;
        while self.i < self.b.len() {
            let c = self.b[self.i];
            if c == b'\\' && hashes.is_none() {
                self.i += 2;
                continue;
            }
            self.i += 1;
            if c == b'"' {
                let n = hashes.unwrap_or(0);
                if self.b[self.i..].iter().take(n).take_while(|&&h| h == b'#').count() == n {
                    self.i += n;
                    return;
                }
            }
        }
    }

    /// After `'`: a char literal (`'x'`, `'\n'`, `'\u{1F600}'`, `'''` is not valid Rust) or a
    /// lifetime or label (`'a`, `'static`).
    fn skip_quote(&mut self) {
        let start = self.i;
        self.i += 1;
        if self.at(self.i) == b'\\' {
            // An escape: the literal ends at the next `'` (at most `\u{10FFFF}` away).
            let end = (self.i + 12).min(self.b.len());
            match self.b[self.i + 1..end].iter().position(|&c| c == b'\'') {
                Some(p) => self.i += p + 2,
                None => self.i += 1,
            }
            return;
        }
        let width = utf8_width(self.at(self.i));
        if self.at(self.i + width) == b'\'' && self.i < self.b.len() {
            self.i += width + 1;
            return;
        }
        // A lifetime: `'` and an identifier.
        while self.i < self.b.len() && is_ident_byte(self.b[self.i]) {
            self.i += 1;
        }
        if self.i == start + 1 && self.i < self.b.len() {
            // A lone `'` (not Rust): step over one character so the lexer moves on.
            self.i += width;
        }
    }

    fn skip_number(&mut self) {
        let hex = self.at(self.i) == b'0' && matches!(self.at(self.i + 1), b'x' | b'X');
        loop {
            let c = self.at(self.i);
            if c.is_ascii_alphanumeric() || c == b'_' {
                self.i += 1;
                if !hex && matches!(c, b'e' | b'E') && matches!(self.at(self.i), b'+' | b'-') {
                    self.i += 1;
                }
            } else if c == b'.' && self.at(self.i + 1).is_ascii_digit() {
                self.i += 1;
            } else {
                return;
            }
        }
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        loop {
            let start = self.i;
            let c = *self.b.get(start)?;
            let kind = match c {
                b'/' if self.at(start + 1) == b'/' => {
                    self.skip_line();
                    continue;
                }
                b'/' if self.at(start + 1) == b'*' => {
                    self.skip_block_comment();
                    continue;
                }
                c if c.is_ascii_whitespace() => {
                    self.i += 1;
                    continue;
                }
                b'"' => {
                    self.skip_string(None);
                    Kind::Other
                }
                b'\'' => {
                    self.skip_quote();
                    Kind::Other
                }
                b'0'..=b'9' => {
                    self.skip_number();
                    Kind::Other
                }
                b',' => {
                    self.i += 1;
                    Kind::Comma
                }
                b';' => {
                    self.i += 1;
                    Kind::Semicolon
                }
                b'(' | b'[' | b'{' => {
                    self.i += 1;
                    Kind::Open(c)
                }
                b')' | b']' | b'}' => {
                    self.i += 1;
                    Kind::Close(c)
                }
                b'#' | b'$' | b':' | b'\\' => {
                    self.i += 1;
                    Kind::Other
                }
                c if c != b'_' && c.is_ascii_punctuation() => self.operator(c),
                _ => self.word(),
            };
            return Some(Token { kind, start, len: self.i - start });
        }
    }
}

impl Lexer<'_> {
    /// An identifier or keyword, or the prefix of a string, byte or raw literal.
    fn word(&mut self) -> Kind {
        let start = self.i;
        while self.i < self.b.len() && is_ident_byte(self.b[self.i]) {
            self.i += 1;
        }
        if self.i == start {
            // A byte that starts nothing Rust knows (a stray control byte): step over it.
            self.i += 1;
            return Kind::Other;
        }
        let word = &self.b[start..self.i];
        let next = self.at(self.i);
        let raw = matches!(word, b"r" | b"br" | b"cr");
        if raw && (next == b'"' || next == b'#') {
            let hashes = self.b[self.i..].iter().take_while(|&&h| h == b'#').count();
            if self.at(self.i + hashes) == b'"' {
                self.i += hashes;
                self.skip_string(Some(hashes));
                return Kind::Other;
            }
            if word == b"r" && hashes == 1 {
                // A raw identifier `r#match`: never a keyword.
                self.i += 1;
                while self.i < self.b.len() && is_ident_byte(self.b[self.i]) {
                    self.i += 1;
                }
                return Kind::Other;
            }
        }
        if matches!(word, b"b" | b"c") && next == b'"' {
            self.skip_string(None);
            return Kind::Other;
        }
        if word == b"b" && next == b'\'' {
            self.skip_quote();
            return Kind::Other;
        }
        if NESTING_KEYWORDS.contains(&word) {
            Kind::Keyword { continues: matches!(word, b"as" | b"else") }
        } else {
            Kind::Other
        }
    }

    /// An operator: one character (so `&&x` counts two references), or the few that are one
    /// level however long, and must not read as `<`, `>` or `|` alone: `->`, `=>`, `<=`, `>=`,
    /// `||`, `..`, `..=`, `...`.
    fn operator(&mut self, c: u8) -> Kind {
        let next = self.at(self.i + 1);
        if c == b'.' && next == b'.' {
            self.i += 2;
            if matches!(self.at(self.i), b'.' | b'=') {
                self.i += 1;
            }
            return Kind::Nesting(List::None);
        }
        if matches!((c, next), (b'-', b'>') | (b'=', b'>') | (b'<', b'=') | (b'>', b'=') | (b'|', b'|')) {
            self.i += 2;
            return Kind::Nesting(List::None);
        }
        self.i += 1;
        Kind::Nesting(match c {
            b'<' => List::Open(b'<'),
            b'>' => List::Close(b'<'),
            b'|' => List::Toggle(b'|'),
            _ => List::None,
        })
    }
}

/// Identifier bytes; any non-ASCII byte counts, so non-ASCII identifiers stay one word.
fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The length of the UTF-8 sequence a byte starts (1 for a stray continuation byte).
fn utf8_width(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_of(text: &str) -> usize {
        // The smallest limit the text stays within.
        let mut lo = 0;
        let mut hi = text.len() + 2;
        while lo < hi {
            let mid = (lo + hi) / 2;
            if check(text, mid).is_ok() { hi = mid } else { lo = mid + 1 }
        }
        lo
    }

    #[test]
    fn comments_strings_chars_and_lifetimes_are_not_code() {
        let hidden = [
            "// (((((((((( \n",
            "/* ((((((((( */",
            "/* /* */ (((((((((( */",
            "\"((((((((((\"",
            "\"\\\"((((((((((\"",
            "r#\"((((((\"((((\"#",
            "br##\"(((((\"#((((\"##",
            "b\"((((((((((\"",
            "c\"((((((((((\"",
            "'('",
            "'\\''",
            "b'('",
            "'\\u{1F600}'",
        ];
        let plain = depth_of("fn f<'a>(x: &'a str) { let _ = 0; }");
        for h in hidden {
            let text = format!("fn f<'a>(x: &'a str) {{ let _ = {h}; }}");
            assert_eq!(depth_of(&text), plain, "{h}");
        }
    }

    #[test]
    fn nested_block_comments_do_not_hide_brackets_after_them() {
        // The old guard ended the comment at the first `*/` and read `) */` as code.
        let text = format!("/* /* */ ) */ fn f() {{ {} }}", "(".repeat(50));
        assert!(depth_of(&text) > 50);
        let text = format!("/* /* */ {} */ fn f() {{}}", "(".repeat(50));
        assert!(depth_of(&text) <= 2);
    }

    #[test]
    fn a_lifetime_is_not_a_char_literal() {
        // If `'a` opened a char literal, the bracket after it would be hidden.
        let text = format!("fn f<'a>(x: &'a [u8]) {{ {} }}", "(".repeat(30));
        assert!(depth_of(&text) > 30);
    }

    #[test]
    fn runs_of_operators_nest_and_separators_end_them() {
        assert!(depth_of(&format!("fn f() {{ let x = {}1; }}", "!".repeat(100))) > 100);
        assert!(depth_of(&format!("fn f() {{ {}; }}", ["1"; 100].join(" + "))) > 99);
        assert!(depth_of(&format!("fn f() {{ x{}; }}", ".a()".repeat(100))) > 100);
        assert!(depth_of(&format!("fn f() {{ {}; }}", "return ".repeat(100))) > 100);
        assert!(depth_of(&format!("fn f() {{ {} }}", ["let a = 1;"; 1000].concat())) < 10);
        assert!(depth_of(&format!("fn f() {{ g({}); }}", ["1"; 1000].join(", "))) < 10);
    }

    #[test]
    fn a_brace_ends_a_run_unless_the_expression_goes_on() {
        let items = ["impl A { fn f(&self) -> u8 { 1 } }\n"; 1000].concat();
        assert!(depth_of(&items) < 10);
        let else_ifs = format!("fn f() {{ {} }}", ["if a {} else "; 100].concat());
        assert!(depth_of(&else_ifs) > 100);
        let blocks = format!("fn f() {{ {} {{}} }}", ["{} + "; 100].concat());
        assert!(depth_of(&blocks) > 100);
    }

    #[test]
    fn commas_in_generics_and_closure_parameters_do_not_end_the_nesting() {
        let generics = format!("type T = {}u8{};", "A<u8, ".repeat(100), ">".repeat(100));
        assert!(depth_of(&generics) > 100);
        let closures = format!("fn f() {{ let c = {}x; }}", "|a, b| ".repeat(100));
        assert!(depth_of(&closures) > 100);
        // Closed lists are gone: a comma after them starts a new item at the bracket's depth.
        let flat = format!("fn f() {{ g({}); }}", ["Vec::<u8>::new()"; 1000].join(", "));
        assert!(depth_of(&flat) < 10);
        let calls = format!("fn f() {{ g({}); }}", ["|a, b| a"; 1000].join(", "));
        assert!(depth_of(&calls) < 10);
    }

    #[test]
    fn raw_identifiers_are_not_keywords() {
        let text = format!("fn f() {{ {}x; }}", "r#return ".repeat(100));
        assert!(depth_of(&text) < 5);
    }

    /// Source text nested `levels` deep.
    type Nest = fn(usize) -> String;

    /// Deep nesting of every kind syn builds recursively, as a forward pass's statement (so
    /// every rule looks at it).
    const NESTINGS: &[(&str, Nest)] = &[
        ("not", |n| format!("{}x", "!".repeat(n))),
        ("neg", |n| format!("{}x", "-".repeat(n))),
        ("ref", |n| format!("{}x", "&".repeat(n))),
        ("deref", |n| format!("{}x", "*".repeat(n))),
        ("add", |n| vec!["1"; n].join(" + ")),
        ("assign", |n| vec!["x"; n].join(" = ")),
        ("method", |n| format!("x{}", ".a()".repeat(n))),
        ("field", |n| format!("x{}", ".a".repeat(n))),
        ("call", |n| format!("x{}", "()".repeat(n))),
        ("index", |n| format!("x{}", "[0]".repeat(n))),
        ("try", |n| format!("x{}", "?".repeat(n))),
        ("await", |n| format!("x{}", ".await".repeat(n))),
        ("as", |n| format!("x{}", " as T".repeat(n))),
        ("return", |n| format!("{}x", "return ".repeat(n))),
        ("closure", |n| format!("{}x", "|x| ".repeat(n))),
        ("closure-params", |n| format!("{}x", "|a, b| ".repeat(n))),
        ("closure-block", |n| format!("{}x{}", "|| { ".repeat(n), "}".repeat(n))),
        ("paren", |n| format!("{}x{}", "(".repeat(n), ")".repeat(n))),
        ("block", |n| format!("{}x{}", "{".repeat(n), "}".repeat(n))),
        ("unsafe", |n| format!("{}x{}", "unsafe {".repeat(n), "}".repeat(n))),
        ("array", |n| format!("{}x{}", "[".repeat(n), "]".repeat(n))),
        ("tuple", |n| format!("{}x{}", "(x, ".repeat(n), ")".repeat(n))),
        ("call-args", |n| format!("{}x{}", "f(x, ".repeat(n), ")".repeat(n))),
        ("else-if", |n| format!("{}{{}}", "if x {} else ".repeat(n))),
        ("if", |n| format!("{}x{}", "if x { ".repeat(n), "} else { x }".repeat(n))),
        ("match", |n| format!("{}x{}", "match x { _ => ".repeat(n), "}".repeat(n))),
        ("loop", |n| format!("{}x{}", "loop { ".repeat(n), "}".repeat(n))),
        ("async", |n| format!("{}x{}", "async move { ".repeat(n), "}".repeat(n))),
        ("struct-literal", |n| format!("{}x{}", "S { a: ".repeat(n), " }".repeat(n))),
        ("let-chain", |n| format!("if {} {{}}", vec!["let Some(x) = x"; n].join(" && "))),
        ("macro", |n| format!("{}x{}", "vec![".repeat(n), "]".repeat(n))),
        ("generic", |n| format!("0 as {}T{}", "Box<".repeat(n), ">".repeat(n))),
        ("generic-args", |n| format!("0 as {}T{}", "A<T, ".repeat(n), ">".repeat(n))),
        ("dyn-fn", |n| format!("0 as {}T{}", "Box<dyn Fn() -> A<T, ".repeat(n), ">>".repeat(n))),
        ("ref-type", |n| format!("0 as {}T", "&".repeat(n))),
        ("fn-pointer", |n| format!("0 as {}T", "fn() -> ".repeat(n))),
        ("tuple-type", |n| format!("0 as {}T{}", "(".repeat(n), ",)".repeat(n))),
        ("qualified-path", |n| format!("{}T{}::c", "<".repeat(n), " as A>::B".repeat(n))),
        ("turbofish", |n| format!("x::<{}T{}>()", "a::<".repeat(n), ">".repeat(n))),
        ("tuple-pattern", |n| format!("{{ let {}x{} = x; x }}", "(".repeat(n), ",)".repeat(n))),
        ("ref-pattern", |n| format!("{{ let {}x = x; x }}", "&".repeat(n))),
        ("binding-pattern", |n| format!("{{ let {}x = x; x }}", "a @ ".repeat(n))),
        ("mod", |n| format!("{{ {}{} x }}", "mod a { ".repeat(n), "}".repeat(n))),
        ("fn", |n| format!("{{ {}{} x }}", "fn f() { ".repeat(n), "}".repeat(n))),
        ("impl-fn", |n| format!("{{ {}{} x }}", "impl S { fn f() { ".repeat(n), "} }".repeat(n))),
        ("impl-trait", |n| format!("{{ fn f() -> {}T{} {{}} x }}", "impl A<B = ".repeat(n), ">".repeat(n))),
        ("generic-params", |n| format!("{{ fn f<{}T{}>() {{}} x }}", "T: A<B, ".repeat(n), ">".repeat(n))),
    ];

    fn nested_forward(body: &str) -> String {
        format!(
            "use candle_core::{{Device, Tensor}};\n\
             fn forward(xs: &Tensor) -> candle_core::Result<Tensor> {{\n    let y = {body};\n    \
             Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu)?.add(xs)\n}}\n"
        )
    }

    /// The most levels of a nesting whose file stays within `max` (searched up to `4 * max`, so an
    /// estimate that missed levels would show).
    fn levels_within(nest: Nest, max: usize) -> usize {
        let (mut lo, mut hi) = (0, 4 * max);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if check(&nested_forward(&nest(mid)), max).is_ok() { lo = mid } else { hi = mid - 1 }
        }
        lo
    }

    #[test]
    fn the_estimate_counts_every_level_of_every_nesting() {
        for (name, nest) in NESTINGS {
            let n = levels_within(*nest, 1000);
            assert!(n < 1000, "{name}: {n} levels estimated within 1000");
        }
    }

    /// The guarantee: whatever a file holds, if the estimate lets it through, parsing, linting and
    /// dropping it fits in the stack [`stack_needed`] gives its estimated depth (in this
    /// unoptimised build, where frames are largest), at the limit and at the depths of real code,
    /// so the analysis stays on the caller's stack exactly when the caller has that much left. A
    /// low estimate overflows the thread (the test process aborts); a caller's frames larger than
    /// the slack show as a move to a fresh segment.
    #[test]
    fn every_nesting_fits_in_the_stack_its_depth_needs() {
        // lint_source and the frames around it, below the analysis.
        const CALLER: usize = 192 << 10;
        for (name, nest) in NESTINGS {
            let top = levels_within(*nest, MAX_DEPTH);
            for n in [1, 8, top / 8, top] {
                let text = nested_forward(&nest(n));
                let depth = check(&text, MAX_DEPTH).expect("within the limit");
                let (report, grown) = crate::stack::run_with_stack(stack_needed(depth) + CALLER, || {
                    let report = crate::lint_source("src/model.rs", &text, &crate::Settings::default());
                    (report, crate::stack::GROWN.with(std::cell::Cell::get))
                });
                assert!(
                    !report.diagnostics.iter().any(|d| d.code == "D000"),
                    "{name} {n}: {:?}",
                    report.diagnostics
                );
                assert_eq!(grown, 0, "{name}, {n} levels (estimated {depth}): moved to a fresh segment");
            }
            // One level more is refused, not parsed.
            let deeper = crate::lint_source(
                "src/model.rs",
                &nested_forward(&nest(top + 1)),
                &crate::Settings::default(),
            );
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

    /// A file at the limit linted on a thread with a small stack: the analysis moves to a fresh
    /// segment, once, and the file is analysed like any other.
    #[test]
    fn a_deep_file_on_a_small_stack_is_analysed_on_a_fresh_segment() {
        for (name, nest) in NESTINGS {
            let text = nested_forward(&nest(levels_within(*nest, MAX_DEPTH)));
            let (report, grown) = crate::stack::run_with_stack(256 << 10, || {
                let report = crate::lint_source("src/model.rs", &text, &crate::Settings::default());
                (report, crate::stack::GROWN.with(std::cell::Cell::get))
            });
            assert!(!report.diagnostics.iter().any(|d| d.code == "D000"), "{name}: {:?}", report.diagnostics);
            assert_eq!(grown, 1, "{name}");
        }
    }

    #[test]
    fn the_offending_token_is_located() {
        let text = "fn f() { ((((x)))) }";
        let e = check(text, 4).expect_err("too deep");
        assert_eq!(&text[e.at..e.at + e.len], "(");
        assert_eq!(e.at, 10);
    }

    #[test]
    fn pool_workers_have_room_for_a_tree_at_the_limit() {
        let pool = crate::pipeline::pool().expect("a pool");
        let need = stack_needed(MAX_DEPTH);
        let left = pool.install(stacker::remaining_stack).expect("the stack is known");
        assert!(left >= need, "{left} < {need}");
    }
}
