//! D003 for PyTorch code. What it finds, why, and its fixes: `d003_discarded_transfer.md` beside this file (what
//! `devcheck explain D003` prints); its row in the rule table is in [`crate::registry`].

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::python::api;
use crate::python::checker::{Checker, Reads, Rule};
use crate::python::model::Callee;
use crate::python::typing::Kind;
use crate::registry;

use super::helpers::{is_batch_element, is_dtype, keyword, loader_of, method_call, range, whole_batch};


#[derive(Default)]
pub(crate) struct Check;

impl Rule for Check {
    fn reads(&self) -> Reads {
        Reads::STATEMENT
    }

    fn stmt(&mut self, cx: &Checker<'_, '_>, stmt: &Stmt, out: &mut Vec<Finding>) {
        let Stmt::Expr(s) = stmt else { return };
        let Some((call, receiver, method)) = method_call(&s.value) else { return };
        if !api::is_move_or_convert(method) {
            return;
        }
        // `x.type()` with no argument returns the type's name; `x.to()` does nothing.
        if matches!(method, "type" | "to") && call.arguments.is_empty() {
            return;
        }
        let tensor = match cx.kind_of(receiver) {
            Kind::Tensor => true,
            Kind::Module => false,
            _ => is_batch_element(cx, receiver) || is_tensor_batch(cx, receiver),
        };
        if !tensor {
            return;
        }
        let recv_text = cx.text(receiver.range());
        let call_text =
            if call.arguments.is_empty() { format!(".{method}()") } else { format!(".{method}(..)") };
        let dtype = changes_dtype(cx, method, call);
        let what = if dtype { "keeps its old dtype" } else { "stays on its old device" };
        let assignable = matches!(receiver, Expr::Name(_))
            || matches!(receiver, Expr::Attribute(a) if matches!(&*a.value, Expr::Name(_)));
        let help = if assignable {
            format!(
                "tensor moves are not in place (unlike `nn.Module.to`); assign the result: `{recv_text} = {recv_text}{call_text}`"
            )
        } else {
            "tensor moves are not in place (unlike `nn.Module.to`); use the returned tensor".to_string()
        };
        let fix = assignable.then(|| {
            Fix::new(
                Applicability::Unsafe,
                format!("assign the result back to `{recv_text}`"),
                vec![Edit {
                    range: stmt.start().to_usize()..stmt.start().to_usize(),
                    replacement: format!("{recv_text} = "),
                }],
            )
        });
        out.push(
            Finding::new(
                &registry::D003,
                range(stmt.range()),
                format!(
                    "the result of `{call_text}` is thrown away: `{}` {what}",
                    cx.short(receiver.range())
                ),
            )
            .label(if dtype {
                "the converted copy is dropped here"
            } else {
                "the moved copy is dropped here"
            })
            .help(help)
            .fix(fix),
        );
    }
}

/// `.half()`, `.float()`, `.to(torch.float16)`, `.to(dtype=..)`: a dtype change, not a move.
fn changes_dtype(cx: &Checker<'_, '_>, method: &str, call: &ruff_python_ast::ExprCall) -> bool {
    match method {
        "half" | "float" | "double" | "bfloat16" | "type" => true,
        "to" => {
            call.arguments.find_keyword("dtype").is_some()
                || call.arguments.args.first().is_some_and(|a| is_dtype(cx, a))
        }
        _ => false,
    }
}

/// `batch` in `for i, batch in enumerate(loader)` (or `for batch in loader`) when the loader's
/// `collate_fn` is a function of this file that returns a tensor it makes
/// (`return torch.tensor(ids)`, `pad_sequence(..)`): the batch is a plain tensor, whose `.to()`
/// moves nothing in place (a tokenizer's `BatchEncoding` would).
fn is_tensor_batch(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    let Some(iter) = whole_batch(cx, e) else { return false };
    let Some(loader) = loader_of(cx, iter) else { return false };
    let Some(Expr::Name(collate)) = keyword(loader, "collate_fn") else { return false };
    let Some(Callee::Function(f)) = cx.model.callee_of(&Expr::Name(collate.clone()), cx.function) else {
        return false;
    };
    let returns = &cx.model.function(f).returns;
    !returns.is_empty()
        && returns.iter().all(|r| {
            let Expr::Call(c) = r else { return false };
            cx.callee_name(c).is_some_and(|q| {
                api::is_creation(&q) || q == "torch.nn.utils.rnn.pad_sequence" || q == "torch.stack" || q == "torch.cat"
            })
        })
}
