//! D009 for PyTorch code. What it finds, why, and its fixes: `d009_ineffective_non_blocking.md` beside this file (what
//! `devcheck explain D009` prints); its row in the rule table is in [`crate::registry`].

use ruff_python_ast::Expr;
use ruff_text_size::Ranged;

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::python::checker::{Checker, Reads, Rule};
use crate::registry;

use super::helpers::{non_blocking_argument, in_evaluation_pass, 
    batch_loader, has_splat, is_dtype, is_true, keyword, literal_device, method_call, range,
};


#[derive(Default)]
pub(crate) struct Check;

impl Rule for Check {
    fn reads(&self) -> Reads {
        Reads::CALL
    }

    fn calls(&self) -> &'static [&'static str] {
        &["to", "cuda"]
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        let Some((call, receiver, method)) = method_call(e) else { return };
        if !matches!(method, "to" | "cuda") || has_splat(call) {
            return;
        }
        if method == "to" {
            // Only moves to an accelerator: not `.to("cpu")`, not `.to(torch.float16)`.
            let Some(target) = call.arguments.args.first().or_else(|| keyword(call, "device")) else {
                return;
            };
            if literal_device(cx, target).is_some_and(|d| d == "cpu") || is_dtype(cx, target) {
                return;
            }
        }
        // An evaluation pass, or code no run the project makes reaches: a copy that does not
        // overlap there costs no training step.
        if in_evaluation_pass(cx) || cx.in_latent_code() {
            return;
        }
        let Some(loader) = batch_loader(cx, receiver) else { return };
        let pin = keyword(loader, "pin_memory");
        let pinned = match pin {
            // `DataLoader(ds, **kwargs)`: the options may hold `pin_memory`.
            None if has_splat(loader) => return,
            None => false,
            Some(Expr::BooleanLiteral(b)) => b.value,
            // `pin_memory=args.pin`: decided elsewhere.
            Some(_) => return,
        };
        // `non_blocking` may be given by keyword or by position (`.to(dev, dtype, False)`,
        // `.cuda(0, False)`); a value that is not a literal, or a position that cannot be told,
        // is not judged.
        let given = match non_blocking_argument(cx, call, method) {
            Some(given) => given,
            None => return,
        };
        let non_blocking = match given {
            None => false,
            Some(v) if is_true(v) => true,
            Some(Expr::BooleanLiteral(_)) => false,
            Some(_) => return,
        };
        let text = cx.short(receiver.range());
        if non_blocking && !pinned {
            out.push(
                Finding::new(
                    &registry::D009,
                    range(call.range()),
                    format!("`non_blocking=True` has no effect: `{text}` comes from a DataLoader without `pin_memory=True`"),
                )
                .label("a synchronous copy from pageable memory")
                .help("pass `pin_memory=True` to the DataLoader so the copy can overlap with compute")
                .related(range(loader.range()), "the batches are not pinned"),
            );
        } else if pinned && !non_blocking {
            // An explicit `False` becomes `True`; never a second `non_blocking`.
            let edit = match given {
                Some(value) => Edit { range: range(value.range()), replacement: "True".to_string() },
                None => {
                    let close = call.arguments.end().to_usize().saturating_sub(1);
                    let separator = if call.arguments.is_empty() { "" } else { ", " };
                    Edit { range: close..close, replacement: format!("{separator}non_blocking=True") }
                }
            };
            out.push(
                Finding::new(
                    &registry::D009,
                    range(call.range()),
                    format!("`{text}` is pinned (`pin_memory=True`) but copied with a blocking `.{method}(..)`"),
                )
                .label("waits for the copy")
                .help("pass `non_blocking=True` so the copy of the pinned batch overlaps with the work already queued")
                .related(range(loader.range()), "pinned here")
                .fix(Some(Fix::new(
                    Applicability::Safe,
                    "copy without blocking",
                    vec![edit],
                ))),
            );
        }
    }
}

