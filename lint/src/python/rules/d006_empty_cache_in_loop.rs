//! D006 for PyTorch code. What it finds, why, and its fixes: `d006_empty_cache_in_loop.md` beside this file (what
//! `devcheck explain D006` prints); its row in the rule table is in [`crate::registry`].

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use crate::diagnostic::{Applicability, Finding, Fix};
use crate::python::checker::{Checker, Hot, Node, Reads, Rule};
use crate::registry;

use super::helpers::{range, remove_statement};


#[derive(Default)]
pub(crate) struct Check;

impl Rule for Check {
    fn reads(&self) -> Reads {
        Reads::CALL
    }

    fn calls(&self) -> &'static [&'static str] {
        &["empty_cache"]
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        let Expr::Call(call) = e else { return };
        let Some(q) = cx.callee_name(call) else { return };
        if !matches!(q.as_ref(), "torch.cuda.empty_cache" | "torch.mps.empty_cache" | "torch.xpu.empty_cache")
        {
            return;
        }
        // An evaluation pass runs now and then: what it costs there is no training step's.
        if cx.in_except > 0
            || in_memory_branch(cx)
            || super::helpers::in_evaluation_pass(cx)
        {
            return;
        }
        let Some(hot) = cx.hot() else { return };
        let whole_statement = matches!(cx.parent(), Some(Node::Stmt(Stmt::Expr(_))));
        let fix = whole_statement
            .then(|| cx.statement())
            .flatten()
            .map(|stmt| Fix::new(Applicability::Unsafe, "remove the call", vec![remove_statement(cx, stmt)]));
        let (message, label) = match hot {
            Hot::Forward => (
                format!(
                    "`empty_cache()` in `{}` hands cached memory back to the driver at every {}",
                    cx.function_name().unwrap_or("forward"),
                    cx.pass_words()
                ),
                if cx.function_name() == Some("training_step") {
                    "called at every training step"
                } else {
                    "called at every forward pass"
                },
            ),
            Hot::CalledInLoop(_) => (
                "`empty_cache()` in a loop hands cached memory back to the driver every iteration"
                    .to_string(),
                "called every iteration",
            ),
            Hot::Step(_) => (
                format!(
                    "`empty_cache()` in `{}` hands cached memory back to the driver at every training step: each call takes one",
                    cx.function_name().unwrap_or("the function")
                ),
                "called at every training step",
            ),
            Hot::CalledElsewhere(i) => (
                match cx.facts.elsewhere.get(i) {
                    Some(c) => format!(
                        "`empty_cache()` in `{}` hands cached memory back to the driver every iteration: `{}` is called {} at {}:{}",
                        cx.function_name().unwrap_or(&c.function),
                        c.function,
                        c.how,
                        c.caller,
                        c.line
                    ),
                    None => "`empty_cache()` hands cached memory back to the driver every iteration".to_string(),
                },
                "called every iteration",
            ),
        };
        let mut finding = Finding::new(&registry::D006, range(call.range()), message)
            .label(label)
            .help("let the caching allocator reuse its blocks; empty it once, between phases (after training, before evaluation)")
            .fix(fix);
        if let (Hot::CalledInLoop(at), true) = (hot, cx.loops.is_empty()) {
            finding = finding.related(range(at), "called in a loop here");
        }
        out.push(finding);
    }
}

/// Inside a branch about running out of memory (`if has_oom:`, `if out_of_memory:`): recovery.
fn in_memory_branch(cx: &Checker<'_, '_>) -> bool {
    static MEMORY: super::helpers::NameWords = super::helpers::NameWords::new(&["oom", "memory"]);
    cx.parents.iter().any(|n| {
        let Node::Stmt(Stmt::If(i)) = n else { return false };
        let mut hit = false;
        super::helpers::any_subexpr(&i.test, &mut |e| {
            let name = match e {
                Expr::Name(n) => n.id.as_str(),
                Expr::Attribute(a) => a.attr.as_str(),
                _ => "",
            };
            hit |= MEMORY.in_name(name);
            !hit
        });
        hit
    })
}

