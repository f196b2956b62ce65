use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::python::checker::{Checker, Reads, Rule};
use crate::registry::declare_rule;

use super::helpers::{
    batch_loader, has_splat, is_dtype, is_true, keyword, literal_device, method_call, range,
};

declare_rule! {
    /// ### What it does
    /// Flags a batch from a DataLoader built in the same file that is copied to the accelerator
    /// in a way that cannot overlap with compute:
    ///
    /// - `x.to(device, non_blocking=True)` (or `.cuda(non_blocking=True)`) when the loader has no
    ///   `pin_memory=True`: the copy comes from pageable memory and is synchronous anyway;
    /// - `x.to(device)` or `x.cuda()` without `non_blocking=True` when the loader has
    ///   `pin_memory=True`: the batch was pinned for nothing.
    ///
    /// Loaders made elsewhere (passed in as a parameter) and `pin_memory` given as a variable are
    /// not judged.
    ///
    /// ### Why is this bad?
    /// A host-to-device copy overlaps with the kernels already queued only when the source is
    /// page-locked (pinned) and the copy is asynchronous. With only one of the two, the training
    /// loop waits for every batch's copy, and the flag (or the pinning thread's work and memory)
    /// buys nothing.
    ///
    /// ### Example
    /// ```python
    /// loader = DataLoader(dataset, batch_size=64, num_workers=4)
    /// for x, y in loader:
    ///     x = x.to(device, non_blocking=True)
    /// ```
    ///
    /// ### Use instead
    /// ```python
    /// loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    /// for x, y in loader:
    ///     x = x.to(device, non_blocking=True)
    /// ```
    ///
    /// ### Fix safety
    /// For a pinned batch moved blocking, the fix adds `non_blocking=True` (or turns an explicit
    /// `non_blocking=False`, by keyword or by position, into `True`); it is safe: kernels
    /// that use the batch run on the same stream, after the copy. A non-blocking copy from an
    /// unpinned loader has no fix: pinning is the loader's decision.
    pub struct D009IneffectiveNonBlocking {
        code: "D009",
        name: "ineffective-non-blocking",
        group: Perf,
        summary: "`non_blocking=True` copies from an unpinned DataLoader, or pinned batches moved blocking",
        fix: Safe,
        preview: "Precision 0.00 on 36 public PyTorch repositories: its two findings there are false alarms (a pinned batch consumed by the next kernel at once).",
        only: python_only,
    }
}

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
        let Some(loader) = batch_loader(cx, receiver) else { return };
        let pin = keyword(loader, "pin_memory");
        let pinned = match pin {
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
                    &D009IneffectiveNonBlocking::META,
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
                    &D009IneffectiveNonBlocking::META,
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

/// Where the call gives `non_blocking`: `Some(None)` when it does not, `Some(Some(value))` when
/// it does (by keyword, or by position: `Tensor.to(device, dtype, non_blocking)`,
/// `Tensor.to(dtype | other, non_blocking)`, `Tensor.cuda(device, non_blocking)`), `None` when
/// a positional argument may be it and cannot be told from a dtype.
fn non_blocking_argument<'e>(
    cx: &Checker<'_, '_>,
    call: &'e ast::ExprCall,
    method: &str,
) -> Option<Option<&'e Expr>> {
    if let Some(value) = keyword(call, "non_blocking") {
        return Some(Some(value));
    }
    let args = &call.arguments.args;
    if args.iter().any(Expr::is_starred_expr) {
        return None;
    }
    let at = match method {
        "cuda" => 1,
        // `.to(x, y, ..)`: `y` is the dtype (then `non_blocking` is third) unless it is a bool.
        _ => match args.get(1) {
            None => return Some(None),
            Some(second) if is_dtype(cx, second) => 2,
            Some(Expr::BooleanLiteral(_)) => 1,
            Some(_) => return None,
        },
    };
    Some(args.get(at))
}
