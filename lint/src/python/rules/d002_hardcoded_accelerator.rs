//! D002 for PyTorch code. What it finds, why, and its fixes: `d002_hardcoded_accelerator.md` beside this file (what
//! `devcheck explain D002` prints); its row in the rule table is in [`crate::registry`].

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};
use rustc_hash::FxHashMap;

use crate::diagnostic::Finding;
use crate::python::checker::{Checker, Node, Reads, Rule};
use crate::python::model::FunctionId;
use crate::python::project::Placement;
use crate::registry;

use super::helpers::{
    accelerator, checks_for_accelerator, method_call, name_words, names_accelerator, range, str_lit,
};


#[derive(Default)]
pub(crate) struct Check {
    /// Per function with a candidate: [`FunctionCalls`], from the calls inside it.
    functions: FxHashMap<FunctionId, FunctionCalls>,
    /// The file's calls (indices into the model's) in source order, made on first use: the calls
    /// inside a function are one slice of it, found by binary search.
    by_start: Option<Vec<usize>>,
}

/// What the calls inside a function say about its placement.
#[derive(Clone, Copy)]
struct FunctionCalls {
    /// It calls `torch.distributed` collectives: with NCCL they need CUDA tensors, so `"cuda"`
    /// there is the backend's requirement, not a choice.
    collectives: bool,
    /// Where its first check for an accelerator (`torch.cuda.is_available()`) ends: a function
    /// that asks before this point (`if not torch.cuda.is_available(): return False`) has checked
    /// the placement.
    first_check: Option<TextSize>,
}

impl Rule for Check {
    fn reads(&self) -> Reads {
        Reads::CALL
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, out: &mut Vec<Finding>) {
        let Expr::Call(call) = e else { return };
        if cx.in_application() || !cx.kind.is_library() {
            return;
        }
        let (what, at, shown) = if let Some((_, _, "cuda")) = method_call(e) {
            // `.cuda(rank)` picks a device from a variable; `.cuda()` and `.cuda(0)` do not.
            match call.arguments.args.first() {
                None if call
                    .arguments
                    .keywords
                    .iter()
                    .all(|k| k.arg.as_ref().is_some_and(|a| a.as_str() != "device")) =>
                {
                    ("the current CUDA device".to_string(), call.range(), Shown::Whole(call.range()))
                }
                Some(Expr::NumberLiteral(n)) => {
                    (format!("cuda:{}", cx.text(n.range)), call.range(), Shown::Whole(call.range()))
                }
                _ => return,
            }
        } else {
            let Some((literal, shown, index)) = device_argument(cx, call) else { return };
            let Some(device) = str_lit(literal).and_then(accelerator) else { return };
            // `torch.device("cuda", 1)` is `cuda:1`.
            let device = match index {
                Some(i) if str_lit(literal).is_some_and(|l| l.trim() == "cuda") => {
                    format!("cuda:{}", cx.text(i.range()))
                }
                _ => device,
            };
            (device, literal.range(), shown)
        };
        if named_for_accelerator(cx, &what) {
            return;
        }
        let by_start = self.by_start.get_or_insert_with(|| {
            let mut order: Vec<usize> = (0..cx.model.calls.len()).collect();
            order.sort_by_key(|&i| cx.model.calls[i].call.start());
            order
        });
        let calls =
            cx.function.map(|f| *self.functions.entry(f).or_insert_with(|| function_calls(cx, by_start, f)));
        let collectives = calls.is_some_and(|c| c.collectives);
        let checked_before = calls.and_then(|c| c.first_check).is_some_and(|end| end <= at.start());
        if placement_is_checked(cx) || collectives || defines_a_move(cx) || checked_before {
            return;
        }
        let Some(bites) = Bites::on_a_gpu_run(cx.types.project().placement(), &what) else { return };
        let shown = shown.text(cx);
        out.push(
            Finding::new(
                &registry::D002,
                range(at),
                format!("`{shown}` hard-codes {what} in library code: {}", bites.why()),
            )
            .label(format!("always {what}"))
            .help("take the device from the inputs (`x.device`) or the module's weights, or as a parameter; let the script choose it"),
        );
    }
}

/// How a hard-coded device goes wrong on a GPU run of this project. Where it cannot (a codebase
/// that only ever runs on CUDA, where only a CPU run would fail), the rule says nothing.
#[derive(Clone, Copy)]
enum Bites {
    /// The project also runs on Apple's MPS, XLA or another accelerator.
    OtherAccelerator,
    /// One process per GPU: an explicit index puts every process's tensor on that GPU.
    EveryProcess,
    /// One process per GPU and nothing calls `torch.cuda.set_device`: the current device is GPU 0
    /// in every process.
    NoSetDevice,
    /// `"mps"` written into code that also runs on CUDA.
    Mps,
}

impl Bites {
    fn on_a_gpu_run(p: Placement, what: &str) -> Option<Bites> {
        if what == "mps" {
            return Some(Bites::Mps);
        }
        let indexed = what.starts_with("cuda:");
        if indexed && p.multi_process && !p.own_gpus {
            Some(Bites::EveryProcess)
        } else if p.other_accelerator && !p.cuda_only {
            Some(Bites::OtherAccelerator)
        } else if !indexed && p.multi_process && !p.sets_device && !p.cuda_only {
            Some(Bites::NoSetDevice)
        } else {
            None
        }
    }

    fn why(self) -> &'static str {
        match self {
            Bites::OtherAccelerator => "the project also runs on other accelerators (MPS, XLA, ..), where this fails",
            Bites::EveryProcess => "with one process per GPU, every process puts this on the same GPU",
            Bites::NoSetDevice => {
                "with one process per GPU and no `torch.cuda.set_device`, every process puts this on GPU 0"
            }
            Bites::Mps => "a CUDA run fails here",
        }
    }
}

/// The device a call is given, and how to show it: `.to("cuda")`, `torch.device("cuda:0")`,
/// `device="cuda"`.
fn device_argument<'e>(
    cx: &Checker<'_, '_>,
    call: &'e ruff_python_ast::ExprCall,
) -> Option<(&'e Expr, Shown, Option<&'e Expr>)> {
    if let Some(k) = call.arguments.find_keyword("device") {
        return Some((&k.value, Shown::Whole(k.range()), None));
    }
    let first = call.arguments.args.first()?;
    if let Expr::Attribute(a) = &*call.func
        && a.attr.as_str() == "to"
    {
        return Some((first, Shown::To(first.range()), None));
    }
    if cx.callee_name(call).is_none_or(|q| q != "torch.device") {
        return None;
    }
    // `torch.device("cuda", rank)` picks a device from a variable, as `.cuda(rank)` does.
    let index = call.arguments.args.get(1).or_else(|| call.arguments.find_keyword("index").map(|k| &k.value));
    if index.is_some_and(|i| !matches!(i, Expr::NumberLiteral(_))) {
        return None;
    }
    let shown = TextRange::new(first.start(), index.map_or(first.end(), |i| i.end().max(first.end())));
    Some((first, Shown::Device(shown), index))
}

/// Is the code named for the accelerator it names: a file, class or function whose name has it
/// as a word (`accelerators/cuda.py`, `class CUDAAccelerator`, `class MPSBackend`,
/// `def cuda_graph_capture`)? Such code is the place that knows about that device; the caller
/// chose it by choosing the code.
fn named_for_accelerator(cx: &Checker<'_, '_>, what: &str) -> bool {
    let mps = what == "mps";
    let named = |name: &str| name_words(name).any(|w| names_accelerator(w, mps));
    let class =
        cx.function.and_then(|f| cx.model.function(f).class).map(|c| cx.model.class(c).def.name.as_str());
    (if mps { cx.facts.file_named_for_mps } else { cx.facts.file_named_for_cuda })
        || class.is_some_and(named)
        || cx.enclosing_functions().any(|f| named(cx.model.function(f).name()))
}

/// How a finding shows the code that names the device, written out only for a finding.
#[derive(Clone, Copy)]
enum Shown {
    /// The code itself: `x.cuda()`, `device="cuda"`.
    Whole(TextRange),
    /// `.to(<argument>)`.
    To(TextRange),
    /// `torch.device(<argument>)`.
    Device(TextRange),
}

impl Shown {
    fn text(self, cx: &Checker<'_, '_>) -> String {
        match self {
            Shown::Whole(r) => cx.short(r),
            Shown::To(r) => format!(".to({})", cx.short(r)),
            Shown::Device(r) => format!("torch.device({})", cx.short(r)),
        }
    }
}

/// Is the placement chosen by a check around it: a conditional expression or an `if` whose
/// condition asks about the accelerator, a parameter default, or a comparison?
fn placement_is_checked(cx: &Checker<'_, '_>) -> bool {
    cx.parents.iter().rev().any(|n| match n {
        Node::Expr(Expr::If(i)) => checks_for_accelerator(cx, &i.test),
        Node::Expr(Expr::Compare(_)) => true,
        Node::Stmt(Stmt::If(i)) => {
            checks_for_accelerator(cx, &i.test)
                || i.elif_else_clauses
                    .iter()
                    .filter_map(|c| c.test.as_ref())
                    .any(|t| checks_for_accelerator(cx, t))
        }
        // Defaults of a `def` are visited with the `def` as their parent: the caller chooses.
        Node::Stmt(Stmt::FunctionDef(_)) => false,
        _ => false,
    }) || matches!(cx.parent(), Some(Node::Stmt(Stmt::FunctionDef(_))))
}

/// [`FunctionCalls`] of `f`, from the calls inside its body (nested functions included).
fn function_calls(cx: &Checker<'_, '_>, by_start: &[usize], f: FunctionId) -> FunctionCalls {
    let def = cx.model.function(f).def.range();
    let mut out = FunctionCalls { collectives: false, first_check: None };
    let start_of = |i: &usize| cx.model.calls[*i].call.start();
    let first = by_start.partition_point(|i| start_of(i) < def.start());
    let inside = by_start[first..].iter().take_while(|i| start_of(i) < def.end());
    for s in inside.map(|&i| &cx.model.calls[i]).filter(|s| def.contains_range(s.call.range())) {
        let Some(q) = cx.model.canonical_name(&s.call.func) else { continue };
        out.collectives |= q.starts_with("torch.distributed.");
        if q.ends_with(".is_available") {
            let end = s.call.range().end();
            out.first_check = Some(out.first_check.map_or(end, |e| e.min(end)));
        }
    }
    out
}

/// A method that implements a move generically (`def to(self, device): self.model.to(device)`,
/// `_apply`): it is what the caller asked for. Methods named for the accelerator (`def cuda`,
/// `def to_gpu`) are [`named_for_accelerator`].
fn defines_a_move(cx: &Checker<'_, '_>) -> bool {
    cx.function_name().is_some_and(|n| matches!(n, "to" | "_apply"))
}
