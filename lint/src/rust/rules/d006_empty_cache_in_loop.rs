use std::collections::HashMap;
use std::ops::Range;

use syn::spanned::Spanned;
use syn::{Expr, Stmt};

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::registry::declare_rule;
use crate::syntax::{call_path, peel_result};
use crate::walker::{Check, Cx};

declare_rule! {
    /// ### What it does
    /// Flags a call to `empty_cache()` (any path or receiver: `devcheck::cuda::empty_cache()`,
    /// `Cuda::empty_cache()`, `allocator.empty_cache()`) inside a loop. Calls in error or
    /// out-of-memory branches (`Err(e) => { empty_cache(); retry }`) and in periodic branches
    /// (`if step % 1000 == 0`) are not flagged.
    ///
    /// ### Why is this bad?
    /// The caching allocator keeps freed blocks so the next iteration can reuse them without
    /// asking the driver. Emptying the cache every iteration hands them back and makes every
    /// allocation of the next iteration a slow driver call (and a synchronisation). It frees no
    /// memory held by live tensors, so it does not prevent out-of-memory errors either.
    ///
    /// ### Example
    /// ```ignore
    /// for batch in loader {
    ///     let loss = step(&model, &batch?)?;
    ///     devcheck::cuda::empty_cache();
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```ignore
    /// for batch in loader {
    ///     let loss = step(&model, &batch?)?;
    /// }
    /// // once, between phases that need the memory for something else:
    /// devcheck::cuda::empty_cache();
    /// ```
    ///
    /// ### Fix safety
    /// The fix deletes the statement. It is unsafe: results do not change, but memory held by
    /// the process between iterations does, which matters when another process shares the GPU.
    pub struct D006EmptyCacheInLoop {
        code: "D006",
        name: "empty-cache-in-loop",
        group: Perf,
        summary: "`empty_cache()` inside a loop",
        fix: Unsafe,
    }
}

#[derive(Default)]
pub(crate) struct Check006 {
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

impl Check for Check006 {
    fn stmt(&mut self, cx: &Cx<'_, '_>, s: &Stmt, _out: &mut Vec<Finding>) {
        if let Stmt::Expr(e, Some(_)) = s {
            let inner = peel_result(e);
            if is_empty_cache(inner) && cx.in_loop() {
                self.statements.insert(inner as *const Expr as usize, cx.file.range(s.span()));
            }
        }
    }

    fn expr(&mut self, cx: &Cx<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
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
                &D006EmptyCacheInLoop::META,
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
