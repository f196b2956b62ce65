//! D008 for PyTorch code. What it finds, why, and its fixes: `d008_host_conversion_of_device_tensor.md` beside this file (what
//! `devcheck explain D008` prints); its row in the rule table is in [`crate::registry`].

use ruff_python_ast::Expr;
use ruff_text_size::Ranged;

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::python::checker::{Checker, Reads, Rule};
use crate::registry;

use super::device_evidence::on_cpu_side;
use super::helpers::{method_call, name_words, provenance, range};


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
        // A committed test that converts a tensor passes where it is run: its tensors are made
        // on the host, and what it converts does not require grad.
        if !call.arguments.is_empty() || !cx.kind_of(receiver).may_be_tensor() || cx.kind.is_test_like() {
            return;
        }
        let p = provenance(cx, receiver);
        // On the CPU side of a device choice (`if self.device == cpu:`), the tensor is on the host.
        let on_accelerator = p.on_accelerator && !on_cpu_side(cx, call.range()) && !in_cpu_implementation(cx);
        // A module's method for testing (`forward_test`, `simple_test`, `aug_test`): the runners
        // of the libraries that name them so call them under `torch.no_grad()`, so their outputs
        // need no grad.
        let requires_grad = p.requires_grad && !in_module_test_method(cx);
        let (insert, problem) = match (on_accelerator, requires_grad) {
            (true, true) => (".detach().cpu()", "may be on an accelerator and require grad"),
            (true, false) => (".cpu()", "may be on an accelerator"),
            (false, true) => (".detach()", "may require grad"),
            (false, false) => return,
        };
        let at = receiver.end().to_usize();
        out.push(
            Finding::new(
                &registry::D008,
                range(call.range()),
                format!("`.numpy()` on `{}`, which {problem}", cx.short(receiver.range())),
            )
            .label(if on_accelerator { "fails on a GPU" } else { "fails while it requires grad" })
            .help(format!("call `{insert}` before `.numpy()`: numpy arrays live in host memory, outside the autograd graph"))
            .fix(Some(Fix::new(
                Applicability::Safe,
                format!("insert `{insert}` before `.numpy()`"),
                vec![Edit { range: at..at, replacement: insert.to_string() }],
            ))),
        );
    }
}

/// In a method of a module named for testing (`forward_test`, `simple_test`): called under
/// `torch.no_grad()` by the runners of the libraries that use the names (MMCV's and their users').
fn in_module_test_method(cx: &Checker<'_, '_>) -> bool {
    cx.enclosing_functions().any(|f| {
        let fun = cx.model.function(f);
        fun.class.is_some_and(|c| cx.types.is_module_class(c) != crate::python::typing::Truth::No)
            && name_words(fun.name()).any(|w| w.eq_ignore_ascii_case("test"))
    })
}

/// In a function named for the CPU (`nms_cpu`, `forward_cpu`, `cpu_nms`; not `to_cpu`): the CPU
/// implementation of something a GPU one does elsewhere, given host tensors.
fn in_cpu_implementation(cx: &Checker<'_, '_>) -> bool {
    cx.enclosing_functions().any(|f| {
        let words: Vec<String> = name_words(cx.model.function(f).name()).map(str::to_ascii_lowercase).collect();
        words.iter().enumerate().any(|(i, w)| w == "cpu" && (i == 0 || words[i - 1] != "to"))
    })
}
