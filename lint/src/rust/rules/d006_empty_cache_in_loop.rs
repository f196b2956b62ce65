//! D006 for Rust code. What it finds, why, and its fixes: `d006_empty_cache_in_loop.md` beside this file (what
//! `devcheck explain D006` prints); its row in the rule table is in [`crate::registry`].

use std::collections::HashMap;
use std::ops::Range;

use syn::spanned::Spanned;
use syn::{Expr, Stmt};

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::rust::syntax::{call_path, peel_result};
use crate::rust::walker::{Rule, Checker};
use crate::registry;


#[derive(Default)]
pub(crate) struct Check {
    /// Calls that form a whole statement, with the statement's range (by address in the tree).
    statements: HashMap<usize, Range<usize>>,
}

fn is_empty_cache(e: &Expr) -> bool {
    match e {
        Expr::Call(c) => {
            call_path(c).and_then(|p| p.segments.last()).is_some_and(|s| s.ident == "empty_cache")
        }
        Expr::MethodCall(m) => m.method == "empty_cache",
        _ => false,
    }
}

impl Rule for Check {
    fn stmt(&mut self, cx: &Checker<'_, '_>, s: &Stmt, _out: &mut Vec<Finding>) {
        if let Stmt::Expr(e, Some(_)) = s {
            let inner = peel_result(e);
            if is_empty_cache(inner) && cx.in_loop() {
                self.statements.insert(inner as *const Expr as usize, cx.file.range(s.span()));
            }
        }
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        if !is_empty_cache(e) || !cx.in_loop() || cx.in_test() || cx.file.apis.only_burn() {
            return;
        }
        if cx.scope.error_branch > 0 || cx.scope.gated > 0 {
            return;
        }
        let range = cx.file.range(e.span());
        let fix = self.statements.get(&(e as *const Expr as usize)).map(|stmt| {
            Fix::new(
                Applicability::Unsafe,
                "remove the call",
                vec![Edit { range: whole_lines(cx.file.text, stmt.clone()), replacement: String::new() }],
            )
        });
        out.push(
            Finding::new(
                &registry::D006,
                range,
                "`empty_cache()` in a loop hands cached memory back to the driver every iteration",
            )
            .label("called every iteration")
            .help("let the caching allocator reuse its blocks; empty it once, between phases (after training, before evaluation)")
            .fix(fix),
        );
    }
}

/// Widens a statement's range to its whole lines when no other code shares them (a trailing
/// comment about the statement goes with it).
pub(crate) fn whole_lines(text: &str, range: Range<usize>) -> Range<usize> {
    let line_start = text[..range.start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let before_blank = text[line_start..range.start].trim().is_empty();
    let line_end = text[range.end..].find('\n').map(|i| range.end + i + 1).unwrap_or(text.len());
    let after = text[range.end..line_end].trim();
    let after_blank = after.is_empty() || (after.starts_with("//") && !after.starts_with("///"));
    if before_blank && after_blank { line_start..line_end } else { range }
}
