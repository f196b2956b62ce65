use ruff_python_ast::Expr;
use ruff_text_size::Ranged;

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::python::checker::{Checker, Reads, Rule};
use crate::registry::declare_rule;

use super::helpers::{method_call, provenance, range};

declare_rule! {
    /// ### What it does
    /// Flags `.numpy()` on a tensor that may be on an accelerator with no `.cpu()` before it, or
    /// that may require grad with no `.detach()` (or `.data`) before it, outside
    /// `torch.no_grad()`. "May be on an accelerator" needs evidence in the same file: the tensor
    /// was moved with `.cuda()` or `.to(device)`, or is the output of a module, a parameter or
    /// buffer of one, an input of `forward`, or computed from those, in a file that uses an
    /// accelerator.
    ///
    /// ### Why is this bad?
    /// `.numpy()` shares memory with the tensor, so it only works on a CPU tensor that is not
    /// part of the autograd graph. On a CUDA tensor it raises "can't convert cuda:0 device type
    /// tensor to numpy"; on one that requires grad, "Can't call numpy() on Tensor that requires
    /// grad". The code works on the CPU during development and fails on the first GPU run, often
    /// at the end of an epoch, in the metrics.
    ///
    /// ### Example
    /// ```python
    /// logits = model(images.to(device))
    /// preds = logits.argmax(dim=1).numpy()
    /// ```
    ///
    /// ### Use instead
    /// ```python
    /// logits = model(images.to(device))
    /// preds = logits.argmax(dim=1).detach().cpu().numpy()
    /// ```
    ///
    /// ### Fix safety
    /// The fix inserts `.cpu()` (and `.detach()` where grad is the problem) before `.numpy()`.
    /// It is safe: on a CPU tensor that needs neither it changes nothing, and otherwise it is the
    /// only way `.numpy()` can work.
    pub struct D008HostConversionOfDeviceTensor {
        code: "D008",
        name: "host-conversion-of-device-tensor",
        group: Correctness,
        summary: "`.numpy()` on a tensor that may be on an accelerator (no `.cpu()`) or require grad (no `.detach()`)",
        fix: Safe,
        preview: "It reported two findings (both true) in the Python files of the ecosystem check and found 2 of their 3 known hazards: too few findings to measure its precision on real code.",
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
        &["numpy"]
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        let Some((call, receiver, "numpy")) = method_call(e) else { return };
        if !call.arguments.is_empty() || !cx.kind_of(receiver).may_be_tensor() {
            return;
        }
        let p = provenance(cx, receiver);
        let (insert, problem) = match (p.on_accelerator, p.requires_grad) {
            (true, true) => (".detach().cpu()", "may be on an accelerator and require grad"),
            (true, false) => (".cpu()", "may be on an accelerator"),
            (false, true) => (".detach()", "may require grad"),
            (false, false) => return,
        };
        let at = receiver.end().to_usize();
        out.push(
            Finding::new(
                &D008HostConversionOfDeviceTensor::META,
                range(call.range()),
                format!("`.numpy()` on `{}`, which {problem}", cx.short(receiver.range())),
            )
            .label(if p.on_accelerator { "fails on a GPU" } else { "fails while it requires grad" })
            .help(format!("call `{insert}` before `.numpy()`: numpy arrays live in host memory, outside the autograd graph"))
            .fix(Some(Fix::new(
                Applicability::Safe,
                format!("insert `{insert}` before `.numpy()`"),
                vec![Edit { range: at..at, replacement: insert.to_string() }],
            ))),
        );
    }
}
