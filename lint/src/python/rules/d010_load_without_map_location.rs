//! D010 for PyTorch code. What it finds, why, and its fixes: `d010_load_without_map_location.md` beside this file (what
//! `devcheck explain D010` prints); its row in the rule table is in [`crate::registry`].

use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::{Ranged, TextSize};

use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::python::checker::{Checker, Node, Reads, Rule};

use super::device_evidence::on_accelerator_side;
use super::helpers::{any_subexpr, has_splat, literal_device, name_binding, range};
use crate::python::model::BindingKind;
use crate::registry;


#[derive(Default)]
pub(crate) struct Check {
    /// [`has_cpu_path`], asked once per file.
    cpu_path: Option<bool>,
}

impl Rule for Check {
    fn reads(&self) -> Reads {
        Reads::CALL
    }

    fn calls(&self) -> &'static [&'static str] {
        &["load"]
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        // Its hazard is a machine without the GPU a checkpoint was saved from: only code declared
        // to run there (`target = "any"`) has it.
        if !cx.types.project().gpu_optional() {
            return;
        }
        let Expr::Call(call) = e else { return };
        if cx.callee_name(call).is_none_or(|q| q != "torch.load") {
            return;
        }
        let args = &call.arguments;
        if args.find_keyword("map_location").is_some() || args.args.len() >= 2 || has_splat(call) {
            return;
        }
        if args.args.iter().any(Expr::is_starred_expr)
            || cx.in_latent_code()
            || into_a_scheduler(cx)
            // `if torch.cuda.is_available(): torch.load(f) else: torch.load(f, map_location="cpu")`
            || on_accelerator_side(cx, call.range())
            || !*self.cpu_path.get_or_insert_with(|| has_cpu_path(cx))
            || saved_earlier_here(cx, call)
            || trained_earlier_here(cx, call)
            || args.args.first().is_some_and(|path| shipped_with_package(cx, path))
        {
            return;
        }
        // Insert after the last argument, before the closing parenthesis.
        let close = args.end() - TextSize::from(1);
        let last_end = args.args.iter().map(|a| a.end()).chain(args.keywords.iter().map(|k| k.end())).max();
        let edit = match last_end {
            Some(end) => Edit {
                range: end.to_usize()..end.to_usize(),
                replacement: ", map_location=\"cpu\"".to_string(),
            },
            None => Edit {
                range: close.to_usize()..close.to_usize(),
                replacement: "map_location=\"cpu\"".to_string(),
            },
        };
        out.push(
            Finding::new(
                &registry::D010,
                range(call.range()),
                "`torch.load` without `map_location` puts every tensor back on the device it was saved from",
            )
            .label("fails where that GPU is missing")
            .help("pass `map_location=device` (or `\"cpu\"`) so the checkpoint loads on the machine that runs this code")
            .fix(Some(Fix::new(Applicability::Unsafe, "load onto the CPU", vec![edit]))),
        );
    }
}

/// The file uses an accelerator and also runs without one: it checks for CUDA, names the CPU as a
/// device to run on, or takes the device as a command-line option ([`names_cpu_path`]); or another
/// file of the project ([`crate::python::project`]) does, and this one does not fix its device to
/// an accelerator (`device = "cuda"`: a script that cannot run without one).
fn has_cpu_path(cx: &Checker<'_, '_>) -> bool {
    cx.facts.uses_accelerator
        && (names_cpu_path(cx.model.source) || (cx.types.project().has_cpu_path() && !fixes_an_accelerator(cx)))
}

/// Does the file fix its device to an accelerator: bind a name to an accelerator device literal
/// (`device = "cuda"`, `dev = torch.device("cuda:0")`), or call `.cuda(..)`?
fn fixes_an_accelerator(cx: &Checker<'_, '_>) -> bool {
    memchr::memmem::find(cx.model.source.as_bytes(), b".cuda(").is_some()
        || cx.model.bindings().any(|b| {
        matches!(b.kind, BindingKind::Assignment { value, .. }
            if literal_device(cx, value).is_some_and(|d| d != "cpu"))
    })
}

/// Does a file's text choose the CPU (or let its user choose the device): `is_available`,
/// `"cpu"` other than in `.to("cpu")` (which brings results back), or a `--device`/`--cpu`
/// command-line option?
pub(crate) fn names_cpu_path(text: &str) -> bool {
    let src = text.as_bytes();
    if memchr::memmem::find(src, b"is_available").is_some() {
        return true;
    }
    if ["\"--device\"", "'--device'", "\"--cpu\"", "'--cpu'"]
        .iter()
        .any(|option| memchr::memmem::find(src, option.as_bytes()).is_some())
    {
        return true;
    }
    // `"cpu"` and `'cpu'`, and how many of them are `.to("cpu")`: one pass over the text.
    let (mut cpu, mut results_back) = (0usize, 0usize);
    for at in memchr::memmem::find_iter(src, b"cpu") {
        let quote = at.checked_sub(1).and_then(|q| src.get(q));
        if !matches!(quote, Some(b'"' | b'\'')) || src.get(at + 3) != quote {
            continue;
        }
        cpu += 1;
        if at >= 5 && src.get(at - 5..at - 1) == Some(b".to(") && src.get(at + 4) == Some(&b')') {
            results_back += 1;
        }
    }
    cpu > results_back
}

/// `scheduler.load_state_dict(torch.load(..))`: a learning-rate scheduler's state is plain
/// numbers, with no tensor to put anywhere.
fn into_a_scheduler(cx: &Checker<'_, '_>) -> bool {
    matches!(cx.parent(), Some(Node::Expr(Expr::Call(outer)))
        if matches!(&*outer.func, Expr::Attribute(a)
            if a.attr.as_str() == "load_state_dict" && crate::python::project::named_for(&a.value, &["sched"])))
}

/// A path built from `__file__` (directly or through the name it was assigned to): weights
/// shipped inside the package, which its users load on every kind of machine.
fn shipped_with_package(cx: &Checker<'_, '_>, path: &Expr) -> bool {
    let mentions_file = |e: &Expr| {
        let mut found = false;
        any_subexpr(e, &mut |sub| {
            found |= matches!(sub, Expr::Name(n) if n.id.as_str() == "__file__");
            !found
        });
        found
    };
    mentions_file(path)
        || name_binding(cx, path).is_some_and(|b| {
            matches!(cx.model.binding(b).kind, BindingKind::Assignment { value, .. } if mentions_file(value))
        })
}

/// A training step (`.backward()`, an optimizer's or scheduler's `.step()`) earlier in the same
/// function: the load at the end of training reads back the best weights this run saved (through
/// an early-stopping helper, say), on this machine.
fn trained_earlier_here(cx: &Checker<'_, '_>, load: &ast::ExprCall) -> bool {
    cx.function.is_some() && training_steps(cx).any(|step| step.start() < load.start())
}

/// The training steps of the function (`.backward()`, an optimizer's `.step()`).
fn training_steps<'c>(cx: &'c Checker<'_, '_>) -> impl Iterator<Item = &'c ast::ExprCall> {
    cx.model.calls.iter().filter(|site| site.function == cx.function).map(|site| site.call).filter(|call| {
        matches!(&*call.func, Expr::Attribute(a) if a.attr.as_str() == "backward"
            || (a.attr.as_str() == "step" && crate::python::project::steps_training(&a.value)))
    })
}

/// A `torch.save` earlier in the same function (or both at the top level of a script): the load
/// reads back what this run saved, on this machine. Or a cache the function fills: a
/// `torch.save` to the same path anywhere in a function that trains nothing (`if
/// os.path.exists(cached): features = torch.load(cached) else: ..; torch.save(features, cached)`),
/// which holds what this code makes (a checkpoint resumed from and saved again after training
/// steps holds the model's state).
fn saved_earlier_here(cx: &Checker<'_, '_>, load: &ast::ExprCall) -> bool {
    let path = load.arguments.args.first().map(|p| cx.text(p.range()));
    let saves = || {
        cx.model.calls.iter().filter(|site| {
            site.function == cx.function && cx.model.canonical_name(&site.call.func).is_some_and(|q| q == "torch.save")
        })
    };
    saves().any(|site| site.call.start() < load.start())
        || (training_steps(cx).next().is_none()
            && saves().any(|site| {
                let args = &site.call.arguments;
                args.args
                    .get(1)
                    .or_else(|| args.find_keyword("f").map(|k| &k.value))
                    .is_some_and(|saved| path == Some(cx.text(saved.range())))
            }))
}

