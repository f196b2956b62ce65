//! How deep a Python file's syntax tree can be, and how to free one too deep to drop.
//!
//! ruff's parser grows its own stack as it descends (it switches to a fresh stack segment when
//! the current one runs low), so parsing never overflows. What comes after does: the semantic
//! model, the rules and `Drop` walk the tree recursively, one call chain per level, and a file
//! nested deep enough would end the process with a stack overflow, which no `catch_unwind` can
//! stop. Brackets are not the only way to nest: `not not not x`, `a + a + a ..`, `x.a.a.a ..`,
//! `x()()() ..`, `a if b else a if b else ..`, `lambda: lambda: ..`, `f"{f"{f"{x}"}"}"` (nested
//! f-strings may reuse their quotes since Python 3.12) and indented blocks all build levels.
//!
//! So every file is parsed first, then [`check`] reads the parser's tokens and computes an
//! over-estimate of the tree's depth; a tree above [`MAX_DEPTH`] (or one with syntax errors,
//! whose shape follows the parser's recovery rather than the tokens) is never walked and is freed
//! by [`dismantle`], which takes it apart with a work list instead of recursion.
//!
//! Most files never need the estimate itself: [`quick_bound`] bounds it from above in one pass
//! without branches, and a file whose bound is small is answered with that.
//!
//! The estimate: every open bracket (and f-string, and replacement field, and format spec) adds a
//! level; inside each, every operator and keyword since the last `,` (or `;`, or the end of a
//! logical line) adds one more; each level of indentation adds [`BLOCK_LEVELS`]. Commas,
//! statement ends and names do not nest, so long lists and long files stay shallow. The tests
//! hold the estimate above the real nesting for every construct that nests, and hold the
//! deepest file it lets through within half the analysis threads' stack.

use std::cell::RefCell;

use ruff_python_ast::PySourceType;
use ruff_python_ast::token::{Token, TokenFlags, TokenKind};
use ruff_python_ast::visitor::transformer::{self, Transformer};
use ruff_python_ast::{self as ast, AtomicNodeIndex, Expr, InterpolatedStringElement, Pattern, Stmt};
use ruff_python_parser::AsMode as _;
use ruff_text_size::{Ranged, TextRange};

use crate::unlinted::TooDeep;

/// The largest estimated depth analysed. CPython itself refuses more than 200 nested brackets
/// and 100 levels of indentation, so real code is far below this.
pub(crate) const MAX_DEPTH: usize = 1000;

/// Levels one indented block counts for: a statement and its body.
const BLOCK_LEVELS: usize = 2;

/// What the innermost open frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    /// Code inside a bracket (or at the top).
    Code,
    /// Code inside an f-string's replacement field (`{..}`): only its `}` ends it.
    Field,
    /// The literal part of an f-string (or t-string).
    Str,
    /// The format spec of a replacement field (`{x:>{width}}`): text until the field's `}`.
    Spec,
}

/// What a token does to the estimate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Names, literals, comments, newlines inside brackets: nothing.
    Skip,
    /// Operators and the keywords that start or continue an expression or statement a level
    /// deeper.
    Nests,
    Lambda,
    /// `(`, `[`.
    Open,
    /// `{`: a bracket in code, a replacement field in an f-string's text or format spec.
    Lbrace,
    /// `)`, `]`.
    Close,
    /// `}`: also ends a replacement field (and its format spec).
    Rbrace,
    Comma,
    Semi,
    Colon,
    /// The end of a logical line.
    Newline,
    Indent,
    Dedent,
    StringStart,
    StringEnd,
}

/// [`Class`] by `TokenKind as usize`.
static CLASS: [Class; 256] = {
    use TokenKind as K;
    let mut table = [Class::Skip; 256];
    let nests = [
        K::Plus,
        K::Minus,
        K::Star,
        K::Slash,
        K::Vbar,
        K::Amper,
        K::Less,
        K::Greater,
        K::Equal,
        K::Dot,
        K::Percent,
        K::EqEqual,
        K::NotEqual,
        K::LessEqual,
        K::GreaterEqual,
        K::Tilde,
        K::CircumFlex,
        K::LeftShift,
        K::RightShift,
        K::DoubleStar,
        K::PlusEqual,
        K::MinusEqual,
        K::StarEqual,
        K::SlashEqual,
        K::PercentEqual,
        K::AmperEqual,
        K::VbarEqual,
        K::CircumflexEqual,
        K::LeftShiftEqual,
        K::RightShiftEqual,
        K::DoubleStarEqual,
        K::DoubleSlash,
        K::DoubleSlashEqual,
        K::At,
        K::AtEqual,
        K::Rarrow,
        K::ColonEqual,
        K::Exclamation,
        K::Question,
        K::And,
        K::As,
        K::Assert,
        K::Async,
        K::Await,
        K::Case,
        K::Class,
        K::Def,
        K::Del,
        K::Elif,
        K::Else,
        K::Except,
        K::For,
        K::From,
        K::If,
        K::Import,
        K::In,
        K::Is,
        K::Match,
        K::Not,
        K::Or,
        K::Raise,
        K::Return,
        K::Try,
        K::While,
        K::With,
        K::Yield,
    ];
    let mut k = 0;
    while k < nests.len() {
        table[nests[k] as usize] = Class::Nests;
        k += 1;
    }
    table[K::Lambda as usize] = Class::Lambda;
    table[K::Lpar as usize] = Class::Open;
    table[K::Lsqb as usize] = Class::Open;
    table[K::Lbrace as usize] = Class::Lbrace;
    table[K::Rpar as usize] = Class::Close;
    table[K::Rsqb as usize] = Class::Close;
    table[K::Rbrace as usize] = Class::Rbrace;
    table[K::Comma as usize] = Class::Comma;
    table[K::Semi as usize] = Class::Semi;
    table[K::Colon as usize] = Class::Colon;
    table[K::Newline as usize] = Class::Newline;
    table[K::Indent as usize] = Class::Indent;
    table[K::Dedent as usize] = Class::Dedent;
    table[K::FStringStart as usize] = Class::StringStart;
    table[K::TStringStart as usize] = Class::StringStart;
    table[K::FStringEnd as usize] = Class::StringEnd;
    table[K::TStringEnd as usize] = Class::StringEnd;
    table
};

/// A bound this low is answered as it is: the stack it asks for is small wherever the tree is
/// walked. Above it, the exact estimate is worked out (and decides whether the file is refused).
const QUICK_ENOUGH: usize = 128;

/// The estimated depth of the tree of a file with these tokens (at most `max`), or `Err` with the
/// first token past `max` if it may nest deeper than `max` levels. The answer may be above the
/// estimate, never below it: most files are answered by [`quick_bound`], which holds for `valid`
/// files (no syntax errors: their brackets and strings are balanced); whether a file is refused
/// is always the estimate's call.
pub(crate) fn check(tokens: &[Token], max: usize, valid: bool) -> Result<usize, TooDeep> {
    let bound = if valid { quick_bound(tokens) } else { usize::MAX };
    if bound <= max.min(QUICK_ENOUGH) {
        return Ok(bound);
    }
    estimate(tokens.iter().copied(), max)
}

/// Files larger than this are lexed, and their depth estimated, before ruff's parser builds their
/// tree. The parser recurses once per level of nesting, on stack segments it allocates as it
/// goes (about 1 KB a level), and nested f-strings take it time quadratic in their depth: an
/// 8 MiB file of unary minus once took 7.5 GB and 21 s. A smaller file cannot nest deep
/// enough to cost much (the deepest 64 KiB files measured: 70 MB, 0.3 s), and lexing every file
/// first would add a quarter of the parse to every run, so only larger files pay for it.
pub(crate) const LEX_FIRST: usize = 64 << 10;

/// Before parsing a file larger than [`LEX_FIRST`]: `Err` where the estimate of its tree's depth
/// goes past `max`, located at the first place it does. Linear in the file (the location takes a
/// few more lexes of prefixes of a file that is refused).
pub(crate) fn check_source(text: &str, source_type: PySourceType, max: usize) -> Result<(), TooDeep> {
    let mode = source_type.as_mode();
    if text.len() <= LEX_FIRST || estimate(lexed(text, mode), max).is_ok() {
        return Ok(());
    }
    // The lexer gives no offsets: the place is the shortest prefix that is already too deep.
    let (mut fits, mut too_deep) = (0, text.len());
    while too_deep - fits > 1 {
        let mut mid = fits + (too_deep - fits) / 2;
        while !text.is_char_boundary(mid) {
            mid += 1;
        }
        if mid >= too_deep {
            break;
        }
        if estimate(lexed(&text[..mid], mode), max).is_ok() { fits = mid } else { too_deep = mid }
    }
    let at = text[..too_deep].char_indices().next_back().map_or(0, |(i, _)| i);
    Err(TooDeep { at, len: too_deep - at })
}

/// The tokens of `text` as ruff's lexer makes them, without offsets (it does not give them).
fn lexed(text: &str, mode: ruff_python_parser::Mode) -> impl Iterator<Item = Token> + '_ {
    let mut lexer = ruff_python_parser::lexer::lex(text, mode);
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let kind = lexer.next_token();
        done = kind == TokenKind::EndOfFile;
        Some(Token::new(kind, TextRange::default(), TokenFlags::empty()))
    })
}

/// What a token adds to [`quick_bound`]: its weight, its change to the count of open brackets
/// and strings, its change to the indentation, and whether it ends a logical line.
#[derive(Clone, Copy)]
struct Quick {
    weight: u8,
    open: i8,
    block: i8,
    newline: bool,
}

/// [`Quick`] by `TokenKind as usize`, from [`CLASS`].
static QUICK: [Quick; 256] = {
    let mut table = [Quick { weight: 0, open: 0, block: 0, newline: false }; 256];
    let mut k = 0;
    while k < 256 {
        table[k] = match CLASS[k] {
            // A format spec's `:` adds a level, but only after its field's `{`, which adds one
            // level where the bound counts two.
            Class::Skip | Class::Comma | Class::Semi | Class::Colon => table[k],
            Class::Nests | Class::Lambda => Quick { weight: 1, ..table[k] },
            Class::Open | Class::Lbrace => Quick { weight: 2, open: 1, ..table[k] },
            Class::StringStart => Quick { weight: 1, open: 1, ..table[k] },
            Class::Close | Class::Rbrace | Class::StringEnd => Quick { open: -1, ..table[k] },
            Class::Newline => Quick { newline: true, ..table[k] },
            Class::Indent => Quick { block: 1, ..table[k] },
            Class::Dedent => Quick { block: -1, ..table[k] },
        };
        k += 1;
    }
    table
};

/// An upper bound of [`estimate`], in one pass without branches: the indentation's levels plus
/// the weights of every token since the start of the logical line — each token the estimate
/// counts, with the most it adds (an open bracket two: itself and the operator-run level it
/// closes over; a replacement field's `{` adds one in the estimate, and its format spec's `:`
/// one more). The estimate only ever goes down at the tokens this ignores (closers,
/// separators), and starts afresh at the end of each logical line outside brackets, as this
/// does.
fn quick_bound(tokens: &[Token]) -> usize {
    let (mut weight, mut open, mut blocks, mut deepest) = (0usize, 0isize, 0isize, 0usize);
    for token in tokens {
        let q = QUICK[token.kind() as usize];
        weight += usize::from(q.weight);
        open += isize::from(q.open);
        blocks = (blocks + isize::from(q.block)).max(0);
        deepest = deepest.max(blocks.unsigned_abs() * BLOCK_LEVELS + weight);
        // The end of a logical line outside every bracket: the next line starts afresh.
        let fresh = q.newline & (open == 0);
        weight &= usize::from(fresh).wrapping_sub(1);
    }
    deepest
}

/// The estimated depth of the tree of a file with these tokens (at most `max`), or `Err` with the
/// first token past `max` if it may nest deeper than `max` levels.
fn estimate(tokens: impl IntoIterator<Item = Token>, max: usize) -> Result<usize, TooDeep> {
    // The innermost frame: the levels below it, the operators and keywords since its last
    // separator (`base + run` is its depth), and what it is. `below` holds the frames around it,
    // outermost first.
    let (mut base, mut run, mut frame) = (0usize, 0usize, Frame::Code);
    let mut deepest = 0;
    let mut below: Vec<(usize, usize, Frame)> = Vec::new();
    // Open indented blocks.
    let mut blocks = 0usize;
    // Open `lambda` parameter lists: (frame index, run at the `lambda`). Their commas do not end
    // the nesting; their `:` ends the list.
    let mut lambdas: Vec<(usize, usize)> = Vec::new();
    // Closes the innermost frame (never the outermost) and the `lambda`s open in it.
    let pop = |below: &mut Vec<(usize, usize, Frame)>, lambdas: &mut Vec<(usize, usize)>| {
        let outer = below.pop();
        while lambdas.last().is_some_and(|&(f, _)| f > below.len()) {
            lambdas.pop();
        }
        outer
    };
    for token in tokens {
        let class = CLASS[token.kind() as usize];
        let code = matches!(frame, Frame::Code | Frame::Field);
        match class {
            Class::Skip => continue,
            Class::Nests if code => run += 1,
            Class::Lambda if code => {
                run += 1;
                lambdas.push((below.len(), run));
            }
            Class::Open | Class::Lbrace if code => {
                // `f()()()` and `x[0][0][0]` nest one level per pair.
                run += 1;
                below.push((base, run, frame));
                (base, run, frame) = (base + run + 1, 0, Frame::Code);
            }
            Class::Lbrace => {
                // A replacement field in an f-string's text or format spec.
                below.push((base, run, frame));
                (base, run, frame) = (base + run + 1, 0, Frame::Field);
            }
            // A field ends only at its `}`; a stray closer elsewhere is the parser's error.
            Class::Close if frame == Frame::Code => {
                if let Some(outer) = pop(&mut below, &mut lambdas) {
                    (base, run, frame) = outer;
                }
                continue;
            }
            Class::Rbrace if code => {
                if let Some(outer) = pop(&mut below, &mut lambdas) {
                    (base, run, frame) = outer;
                }
                continue;
            }
            Class::Rbrace if frame == Frame::Spec => {
                // The spec ends with its field.
                if below.len() > 1 {
                    below.pop();
                    if let Some(outer) = pop(&mut below, &mut lambdas) {
                        (base, run, frame) = outer;
                    }
                }
                continue;
            }
            Class::Comma | Class::Semi if code => {
                run = match lambdas.last() {
                    Some(&(f, mark)) if f == below.len() && class == Class::Comma => mark,
                    _ => 0,
                };
                continue;
            }
            Class::Colon if code => {
                if lambdas.last().is_some_and(|&(f, _)| f == below.len()) {
                    lambdas.pop();
                    continue;
                }
                if frame != Frame::Field {
                    continue;
                }
                below.push((base, run, frame));
                (base, run, frame) = (base + run + 1, 0, Frame::Spec);
            }
            Class::Newline if code && below.is_empty() => {
                run = 0;
                lambdas.clear();
                continue;
            }
            Class::Indent | Class::Dedent => {
                blocks = if class == Class::Indent { blocks + 1 } else { blocks.saturating_sub(1) };
                match below.first_mut() {
                    Some((outermost, _, _)) => *outermost = blocks * BLOCK_LEVELS,
                    None => base = blocks * BLOCK_LEVELS,
                }
            }
            Class::StringStart => {
                below.push((base, run, frame));
                (base, run, frame) = (base + run + 1, 0, Frame::Str);
            }
            Class::StringEnd => {
                // Back out of the string (and of any field left open in it).
                while frame != Frame::Str {
                    let Some(outer) = pop(&mut below, &mut lambdas) else { break };
                    (base, run, frame) = outer;
                }
                if let Some(outer) = pop(&mut below, &mut lambdas) {
                    (base, run, frame) = outer;
                }
                continue;
            }
            _ => continue,
        }
        if base + run > max {
            let range = token.range();
            return Err(TooDeep { at: range.start().to_usize(), len: range.len().to_usize().max(1) });
        }
        deepest = deepest.max(base + run);
    }
    Ok(deepest)
}

/// Stack bytes that walking and dropping a tree of estimated depth `depth` may take: the
/// analysis's own frames above the tree and a share per level. The tests run every nesting at
/// several depths, up to [`MAX_DEPTH`], on a stack of this size and the caller's frames (unoptimised, where frames
/// are largest); they pass at an eighth of the share (512 bytes a level), so this leaves room for
/// frames to grow.
pub(crate) fn stack_needed(depth: usize) -> usize {
    const BASE: usize = 256 << 10;
    const PER_LEVEL: usize = 4 << 10;
    BASE + depth.min(MAX_DEPTH) * PER_LEVEL
}

/// Frees a syntax tree of any depth without recursion: every statement, expression, pattern and
/// f-string element is moved out of its parent (a leaf left in its place) onto a work list, so
/// each node is dropped with its children already gone. Slower than `Drop`, so only for trees
/// [`check`] refused or the parser could not make sense of.
pub(crate) fn dismantle(body: impl IntoIterator<Item = Stmt>) {
    // Each pop ends its borrow before the walk pushes children.
    fn pop<T>(list: &RefCell<Vec<T>>) -> Option<T> {
        list.borrow_mut().pop()
    }
    let pending = Pending { stmts: RefCell::new(body.into_iter().collect()), ..Pending::default() };
    loop {
        if let Some(mut stmt) = pop(&pending.stmts) {
            transformer::walk_stmt(&pending, &mut stmt);
        } else if let Some(mut expr) = pop(&pending.exprs) {
            transformer::walk_expr(&pending, &mut expr);
        } else if let Some(mut pattern) = pop(&pending.patterns) {
            transformer::walk_pattern(&pending, &mut pattern);
        } else if let Some(mut element) = pop(&pending.elements) {
            transformer::walk_interpolated_string_element(&pending, &mut element);
        } else {
            break;
        }
    }
}

/// [`dismantle`]'s work lists: a visit moves the node out instead of descending into it.
#[derive(Default)]
struct Pending {
    stmts: RefCell<Vec<Stmt>>,
    exprs: RefCell<Vec<Expr>>,
    patterns: RefCell<Vec<Pattern>>,
    elements: RefCell<Vec<InterpolatedStringElement>>,
}

impl Transformer for Pending {
    fn visit_stmt(&self, stmt: &mut Stmt) {
        let leaf =
            Stmt::Pass(ast::StmtPass { node_index: AtomicNodeIndex::NONE, range: TextRange::default() });
        self.stmts.borrow_mut().push(std::mem::replace(stmt, leaf));
    }

    fn visit_expr(&self, expr: &mut Expr) {
        let leaf = Expr::NoneLiteral(ast::ExprNoneLiteral::default());
        self.exprs.borrow_mut().push(std::mem::replace(expr, leaf));
    }

    fn visit_pattern(&self, pattern: &mut Pattern) {
        let leaf = Pattern::MatchStar(ast::PatternMatchStar {
            node_index: AtomicNodeIndex::NONE,
            range: TextRange::default(),
            name: None,
        });
        self.patterns.borrow_mut().push(std::mem::replace(pattern, leaf));
    }

    fn visit_interpolated_string_element(&self, element: &mut InterpolatedStringElement) {
        let leaf = InterpolatedStringElement::Literal(ast::InterpolatedStringLiteralElement {
            range: TextRange::default(),
            node_index: AtomicNodeIndex::NONE,
            value: Box::default(),
        });
        self.elements.borrow_mut().push(std::mem::replace(element, leaf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`check`] on the tokens of `text`.
    fn check_text(text: &str, max: usize) -> Result<usize, TooDeep> {
        let parsed = ruff_python_parser::parse_unchecked_source(text, ruff_python_ast::PySourceType::Python);
        let estimate = check(parsed.tokens(), max, parsed.errors().is_empty());
        dismantle(parsed.into_syntax().body);
        estimate
    }

    fn depth_of(text: &str) -> usize {
        let parsed = ruff_python_parser::parse_unchecked_source(text, ruff_python_ast::PySourceType::Python);
        let (mut lo, mut hi) = (0, 100_000);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if check(parsed.tokens(), mid, parsed.errors().is_empty()).is_ok() {
                hi = mid
            } else {
                lo = mid + 1
            }
        }
        dismantle(parsed.into_syntax().body);
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
            if check_text(&as_file(nest, blocks, mid), max).is_ok() { lo = mid } else { hi = mid - 1 }
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

    /// Every rule on, preview included.
    fn settings() -> crate::Settings {
        crate::Settings::from_table(
            crate::LintTable::default(),
            std::path::PathBuf::from("."),
            None,
            &crate::Overrides { preview: true, ..crate::Overrides::default() },
        )
        .expect("settings")
    }

    /// The guarantee: whatever a Python file holds, if the estimate lets it through, parsing,
    /// linting and dropping it fits in the stack [`stack_needed`] gives its estimated depth (in
    /// this unoptimised build, where frames are largest), at the limit and at the depths of real
    /// code, so the walk stays on the caller's stack exactly when the caller has that much left.
    /// A low estimate overflows the thread (the test process aborts); a caller's frames larger
    /// than the slack show as a move to a fresh segment.
    #[test]
    fn every_nesting_fits_in_the_stack_its_depth_needs() {
        // lint_source and the frames around it, below the walk.
        const CALLER: usize = 192 << 10;
        let settings = settings();
        for (name, nest, blocks) in all() {
            let top = levels_within(nest, blocks, MAX_DEPTH);
            for n in [1, 8, top / 8, top] {
                let text = as_file(nest, blocks, n);
                let depth = check_text(&text, MAX_DEPTH).expect("within the limit");
                let (report, grown) = crate::stack::run_with_stack(stack_needed(depth) + CALLER, || {
                    let report = crate::lint_source("model.py", &text, &settings);
                    (report, crate::stack::GROWN.with(std::cell::Cell::get))
                });
                assert!(!report.diagnostics.iter().any(|d| d.message.contains("too deeply")), "{name} {n}");
                assert_eq!(grown, 0, "{name}, {n} levels (estimated {depth}): moved to a fresh segment");
            }
            // One level more is refused, not parsed.
            let deeper = crate::lint_source("model.py", &as_file(nest, blocks, top + 1), &settings);
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

    /// A file at the limit linted on a thread with a small stack: the walk moves to a fresh
    /// segment, once, and the file is analysed like any other.
    #[test]
    fn a_deep_file_on_a_small_stack_is_walked_on_a_fresh_segment() {
        let settings = settings();
        for (name, nest, blocks) in all() {
            let text = as_file(nest, blocks, levels_within(nest, blocks, MAX_DEPTH));
            let (report, grown) = crate::stack::run_with_stack(256 << 10, || {
                let report = crate::lint_source("model.py", &text, &settings);
                (report, crate::stack::GROWN.with(std::cell::Cell::get))
            });
            assert!(!report.diagnostics.iter().any(|d| d.message.contains("too deeply")), "{name}");
            // `await` outside `async def` is a syntax error: that tree is never walked.
            let walked = !report.diagnostics.iter().any(|d| d.code == "D000");
            assert_eq!(grown, usize::from(walked), "{name}");
        }
    }

    /// When a deep file needs a fresh segment and the system refuses it, the file is a `D000`
    /// and `inspect`'s second parse an error, not a crash. (The refused tree is then taken apart
    /// without recursion; at the limit its ordinary drop would still fit these 256 KiB, so this
    /// test does not tell the two apart.)
    #[test]
    fn a_refused_segment_is_a_parse_error_and_the_tree_is_freed_without_recursion() {
        use crate::stack::REFUSE;
        let settings = settings();
        for (name, nest, blocks) in all() {
            let text = as_file(nest, blocks, levels_within(nest, blocks, MAX_DEPTH));
            let (refused, linted, inspected) = crate::stack::run_with_stack(256 << 10, || {
                REFUSE.with(|r| r.set(true));
                let refused = crate::lint_source("model.py", &text, &settings);
                REFUSE.with(|r| r.set(false));
                let linted = crate::lint_source("model.py", &text, &settings);
                REFUSE.with(|r| r.set(true));
                let inspected = super::super::inspect::classes_in(&linted, &super::super::Project::default())
                    .map(|c| c.len());
                (refused, linted, inspected)
            });
            // `await` outside `async def` is a syntax error: that tree is never walked.
            if linted.diagnostics.iter().any(|d| d.code == "D000") {
                continue;
            }
            assert!(
                refused
                    .diagnostics
                    .iter()
                    .any(|d| d.code == "D000" && d.message.contains("no stack could be set up")),
                "{name}: {:?}",
                refused.diagnostics
            );
            assert!(inspected.is_err(), "{name}");
        }
    }

    /// Far past the limit, where dropping the tree the ordinary way would overflow any stack:
    /// the parse grows its own stack and the refused tree is taken apart without recursion, on
    /// a thread with a small stack. Broken files too: their trees are never walked either.
    #[test]
    fn every_nesting_far_past_the_limit_is_refused_without_recursion() {
        let settings = settings();
        for (name, nest, blocks) in all() {
            // Blocks grow quadratically in bytes: 1,500 levels is up to 4.5 MB of indentation.
            let n = if blocks { 1_500 } else { 30_000 };
            let text = as_file(nest, blocks, n);
            for (text, message) in
                [(text.clone(), "too deeply nested"), (text.replace("import", "import import"), "")]
            {
                let report = crate::stack::run_with_stack(2 << 20, || {
                    crate::lint_source("model.py", &text, &settings)
                });
                assert!(
                    report.diagnostics.iter().any(|d| d.code == "D000" && d.message.contains(message)),
                    "{name}: {:?}",
                    report.diagnostics
                );
            }
        }
    }

    /// Valid Python (as text) built from every construct that nests: expressions, blocks,
    /// f-strings with fields and format specs, lambdas, comprehensions.
    fn python() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        const LEAVES: &[&str] = &["x", "1", "'s'", "f'plain'"];
        let leaf = proptest::sample::select(LEAVES).prop_map(str::to_string);
        let expr = leaf.clone().prop_recursive(8, 256, 3, |inner| {
            let two = (inner.clone(), inner.clone());
            let three = (inner.clone(), inner.clone(), inner.clone());
            prop_oneof![
                (
                    two.clone(),
                    prop_oneof![Just(" + "), Just(" ** "), Just(" < "), Just(" and "), Just(" @ ")]
                )
                    .prop_map(|((a, b), op)| format!("{a}{op}{b}")),
                three.clone().prop_map(|(a, b, c)| format!("{a} if {b} else {c}")),
                inner.clone().prop_map(|a| format!("-{a}")),
                inner.clone().prop_map(|a| format!("(not {a})")),
                inner.clone().prop_map(|a| format!("({a})")),
                inner.clone().prop_map(|a| format!("({a}).y")),
                two.clone().prop_map(|(a, b)| format!("({a})({b}, k={b})")),
                three.clone().prop_map(|(a, b, c)| format!("({a})[{b}:{c}]")),
                two.clone().prop_map(|(a, b)| format!("[{a}, {b}]")),
                two.clone().prop_map(|(a, b)| format!("{{{a}: {b}}}")),
                inner.clone().prop_map(|a| format!("({a},)")),
                inner.clone().prop_map(|a| format!("(lambda y, z=1: {a})")),
                two.clone().prop_map(|(a, b)| format!("[{a} for y in ({b}) if y]")),
                inner.clone().prop_map(|a| format!("(w := {a})")),
                inner.clone().prop_map(|a| format!("f\"a{{{a}}}b\"")),
                two.clone().prop_map(|(a, b)| format!("f\"{{{a}:>{{{b}}}}}\"")),
                inner.clone().prop_map(|a| format!("f(*{a}, **{a})")),
            ]
        });
        // Shallow statements too, where the bound has no slack.
        let expr = prop_oneof![1 => leaf, 3 => expr];
        let simple = prop_oneof![
            expr.clone().prop_map(|e| vec![format!("x = {e}")]),
            expr.clone().prop_map(|e| vec![format!("x += {e}; {e}")]),
            expr.clone().prop_map(|e| vec![format!("assert {e}, {e}")]),
        ];
        let block = simple.prop_recursive(6, 64, 3, move |inner| {
            let body = proptest::collection::vec(inner, 1..3)
                .prop_map(|stmts| stmts.concat().into_iter().map(|l| format!("    {l}")).collect::<Vec<_>>());
            prop_oneof![
                (expr.clone(), body.clone()).prop_map(|(e, b)| [vec![format!("if {e}:")], b].concat()),
                (expr.clone(), body.clone()).prop_map(|(e, b)| [vec![format!("for y in {e}:")], b].concat()),
                (expr.clone(), body.clone()).prop_map(|(e, b)| [vec![format!("def g(a={e}):")], b].concat()),
                (expr.clone(), body.clone()).prop_map(|(e, b)| [vec![format!("with {e} as y:")], b].concat()),
                (body.clone(), body).prop_map(|(b, c)| [
                    vec!["try:".to_string()],
                    b,
                    vec!["except E:".to_string()],
                    c
                ]
                .concat()),
            ]
        });
        proptest::collection::vec(block, 1..4).prop_map(|stmts| stmts.concat().join("\n") + "\n")
    }

    /// The quick bound is never below the estimate on valid Python, the only files whose
    /// trees are walked.
    #[test]
    fn the_quick_bound_is_never_below_the_estimate() {
        use proptest::prelude::*;
        proptest!(ProptestConfig::with_cases(1000), |(text in python())| {
            let parsed =
                ruff_python_parser::parse_unchecked_source(&text, ruff_python_ast::PySourceType::Python);
            let valid = parsed.errors().is_empty();
            let bound = quick_bound(parsed.tokens());
            let exact = estimate(parsed.tokens().iter().copied(), usize::MAX);
            dismantle(parsed.into_syntax().body);
            // The generator aims at valid Python; too many misses fail the test.
            prop_assume!(valid);
            prop_assert!(exact.is_ok_and(|e| e <= bound), "{text}: bound {bound}, estimate {exact:?}");
        });
        // And on every nesting, far past the quick answer's reach.
        for (name, nest, blocks) in all() {
            for n in [1, 10, 100, 600] {
                let parsed = ruff_python_parser::parse_unchecked_source(
                    &as_file(nest, blocks, n),
                    ruff_python_ast::PySourceType::Python,
                );
                let (bound, exact) =
                    (quick_bound(parsed.tokens()), estimate(parsed.tokens().iter().copied(), usize::MAX));
                dismantle(parsed.into_syntax().body);
                assert!(exact.is_ok_and(|e| e <= bound), "{name} {n}: bound {bound}, estimate {exact:?}");
            }
        }
    }

    /// Small files are answered by the quick bound; above it, by the estimate (lower).
    #[test]
    fn a_file_above_the_quick_bound_gets_the_estimate() {
        let shallow = "x = f(a, b)\n";
        let parsed =
            ruff_python_parser::parse_unchecked_source(shallow, ruff_python_ast::PySourceType::Python);
        assert_eq!(check(parsed.tokens(), MAX_DEPTH, true), Ok(quick_bound(parsed.tokens())));
        // A long call: every `=` adds to the bound, none to the estimate past its comma.
        let long = format!("x = f({})\n", ["a=1"; 300].join(", "));
        let parsed = ruff_python_parser::parse_unchecked_source(&long, ruff_python_ast::PySourceType::Python);
        assert!(quick_bound(parsed.tokens()) > QUICK_ENOUGH);
        let exact = estimate(parsed.tokens().iter().copied(), MAX_DEPTH);
        assert!(exact.is_ok_and(|e| e < 10), "{exact:?}");
        assert_eq!(check(parsed.tokens(), MAX_DEPTH, true), exact);
    }

    #[test]
    fn the_offending_byte_is_located() {
        let text = "x = ((((y))))\n";
        let e = check_text(text, 4).expect_err("too deep");
        assert_eq!(&text[e.at..e.at + e.len], "(");
        assert_eq!(e.at, 5);
    }
}
