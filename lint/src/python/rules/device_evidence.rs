//! Whether a value is on the device by what the code around it does, and which parts of an
//! index are tensors: the evidence behind the index checks of D001 (a CPU tensor indexed with a
//! device tensor) and D004 (a host-made table kept on an object, indexed the same way).

use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::Ranged;
use smallvec::SmallVec;

use crate::python::api;
use crate::python::checker::Checker;
use crate::python::model::{BindingKind, Part};
use crate::python::typing::Kind;

use super::helpers::{checks_for_accelerator, is_cpu_device, is_dtype, keyword, literal_device};

/// Chains of bindings deeper than this are not followed.
pub(crate) const MAX_DEPTH: usize = 16;

/// The parts of `sub`'s index that may be tensors of more than one element: the index itself,
/// or each part of `x[mask, :]`, leaving out numbers, slices, keys and what may be 0-dim (which
/// PyTorch reads as a number wherever it is). Cheap first: most subscripts index with numbers
/// and slices.
pub(crate) fn tensor_indices<'e>(
    cx: &Checker<'_, '_>,
    sub: &'e ast::ExprSubscript,
) -> SmallVec<[&'e Expr; 4]> {
    let parts: SmallVec<[&Expr; 4]> = match &*sub.slice {
        Expr::Tuple(t) => t.elts.iter().collect(),
        one => std::iter::once(one).collect(),
    };
    parts
        .into_iter()
        .filter(|p| match p {
            Expr::NumberLiteral(_)
            | Expr::Slice(_)
            | Expr::StringLiteral(_)
            | Expr::NoneLiteral(_)
            | Expr::EllipsisLiteral(_) => false,
            // `x[-1]` is a number; `x[~mask]` is not.
            Expr::UnaryOp(u) => !matches!(&*u.operand, Expr::NumberLiteral(_)),
            _ => true,
        })
        .filter(|p| !may_be_0_dim(cx, p, 0))
        .collect()
}

/// Steps one [`device_evident`] question may take: it follows every caller of a parameter, and
/// a chain of helpers each called many times would otherwise take exponential time.
const EVIDENCE_STEPS: usize = 4096;

/// Can `index` be a 0-dim tensor (`y[0]`, `scores.argmax()`)? PyTorch reads a 0-dim integer
/// index as a number (a wait, not an error) wherever it is, so indexing a CPU tensor with one
/// from the device works.
fn may_be_0_dim(cx: &Checker<'_, '_>, index: &Expr, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    match index {
        // An element or a row picked out of another tensor: 0-dim when that one has one dimension.
        // One of the tensors a call returns (`torch.where(m)[0]`, `x.topk(k)[1]`): as many
        // dimensions as its input.
        Expr::Subscript(s)
            if matches!(&*s.slice, Expr::NumberLiteral(_))
                && matches!(&*s.value, Expr::Call(c) if returns_several(cx, c)) =>
        {
            false
        }
        Expr::Subscript(s) => match &*s.slice {
            // A slice keeps the dimension; a string key reads a dict (`batch["label"]`).
            Expr::Slice(_) | Expr::StringLiteral(_) => false,
            Expr::Tuple(t) => !t
                .elts
                .iter()
                .any(|e| matches!(e, Expr::Slice(_) | Expr::NoneLiteral(_) | Expr::EllipsisLiteral(_))),
            _ => true,
        },
        Expr::Call(c) => {
            if let Some(q) = cx.callee_name(c) {
                let name = q.strip_prefix("torch.").unwrap_or(&q);
                return match name {
                    // `torch.argmax(x)`, `torch.sum(x)`: every element reduced.
                    n if (REDUCTIONS.contains(&n) || matches!(n, "argmax" | "argmin"))
                        && c.arguments.args.len() <= 1
                        && !has_dim(c) =>
                    {
                        true
                    }
                    // `torch.tensor(3, device=d)`: one number.
                    "tensor" | "as_tensor" | "scalar_tensor" => !matches!(
                        c.arguments.args.first(),
                        Some(Expr::List(_) | Expr::Tuple(_) | Expr::ListComp(_))
                    ),
                    // `torch.randint(0, n, ())`: an empty shape.
                    _ => c.arguments.args.iter().any(|a| matches!(a, Expr::Tuple(t) if t.elts.is_empty())),
                };
            }
            match &*c.func {
                Expr::Attribute(a) => {
                    let m = a.attr.as_str();
                    reduces_to_0_dim(m, c)
                        || (matches!(m, "argmax" | "argmin") && c.arguments.args.is_empty() && !has_dim(c))
                        // `x.sum().long()`: what it converts.
                        || (matches!(m, "long" | "int" | "float" | "to" | "type" | "cuda" | "detach" | "clone")
                            && may_be_0_dim(cx, &a.value, depth + 1))
                }
                _ => false,
            }
        }
        // `pred.sum() > 0`: as many dimensions as its operands (numbers have none).
        Expr::Compare(c) => std::iter::once(&*c.left)
            .chain(c.comparators.iter())
            .all(|e| matches!(e, Expr::NumberLiteral(_)) || may_be_0_dim(cx, e, depth + 1)),
        Expr::BinOp(b) => [&*b.left, &*b.right]
            .iter()
            .all(|e| matches!(e, Expr::NumberLiteral(_)) || may_be_0_dim(cx, e, depth + 1)),
        Expr::Name(n) => cx.model.binding_of(n).is_some_and(|id| match cx.model.binding(id).kind {
            BindingKind::Assignment { value, part: Part::Whole, .. } => may_be_0_dim(cx, value, depth + 1),
            // A loop variable, over a tensor's rows or its elements: unknown.
            BindingKind::LoopVar { .. } => true,
            _ => false,
        }),
        _ => false,
    }
}

/// Does the call return several tensors, each with its input's dimensions (`torch.where(m)`,
/// `nonzero(as_tuple=True)`, `topk`, `sort`, `max(dim)`)?
fn returns_several(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> bool {
    let name = match cx.callee_name(c) {
        Some(q) => q.strip_prefix("torch.").map(str::to_string),
        None => match &*c.func {
            Expr::Attribute(a) => Some(a.attr.to_string()),
            _ => None,
        },
    };
    let dim = !c.arguments.args.is_empty() || has_dim(c);
    match name.as_deref() {
        Some("where" | "nonzero" | "topk" | "sort" | "unique" | "meshgrid" | "split" | "chunk") => true,
        Some("max" | "min" | "median" | "mode" | "kthvalue") => dim,
        _ => false,
    }
}

/// Is `e` on the device by what the code around it does: moved there (`.cuda()`,
/// `.to(device)`), made there (`device=device`), a module's output in a file that names an
/// accelerator, or computed from one of those? Stricter than D001's `device_side`: a parameter
/// counts only when this file's callers pass such a tensor, never because its callers are
/// unknown.
pub(crate) fn device_evident(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    evident(cx, e, 0, &std::cell::Cell::new(EVIDENCE_STEPS))
}

/// [`device_evident`] with what is left of its budget of steps.
fn evident(cx: &Checker<'_, '_>, e: &Expr, depth: usize, steps: &std::cell::Cell<usize>) -> bool {
    if !may_follow(cx, e, depth, steps) {
        return false;
    }
    let next = |e: &Expr| evident(cx, e, depth + 1, steps);
    match e {
        Expr::Name(n) => {
            let Some(id) = cx.model.binding_of(n) else { return false };
            let b = cx.model.binding(id);
            match b.kind {
                // `a, t = [], targets * gain`: the element bound.
                BindingKind::Assignment { value: Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }), part: Part::Element(i), .. } => {
                    elts.get(i).is_some_and(next)
                }
                BindingKind::Assignment { value, .. } => next(value),
                BindingKind::AugAssignment { value, .. } => {
                    next(value)
                        || b.shadowed.is_some_and(|s| matches!(cx.model.binding(s).kind, BindingKind::Assignment { value, .. } if next(value)))
                }
                BindingKind::Parameter { function: Some(f), position, variadic: false, .. } => {
                    let fun = cx.model.function(f);
                    let callers = &cx.facts.calls_to[f.index()];
                    let passed = |i: usize| {
                        let site = &cx.model.calls[i];
                        let shift = usize::from(matches!(&*site.call.func, Expr::Attribute(_)) && fun.receiver.is_some());
                        position
                            .checked_sub(shift)
                            .and_then(|p| site.call.arguments.args.get(p))
                            .or_else(|| site.call.arguments.find_keyword(b.name).map(|k| &k.value))
                    };
                    if callers.iter().any(|&i| passed(i).is_some_and(next)) {
                        return true;
                    }
                    // `.to(t.device)` in its function: its author expects `t` off the CPU, unless
                    // a caller of the file passes a tensor made on the host.
                    cx.facts.device_taken_from.contains(&(f, ruff_python_ast::name::Name::new(b.name)))
                        && !callers.iter().any(|&i| passed(i).is_some_and(|a| made_on_host(cx, a)))
                }
                _ => false,
            }
        }
        Expr::Call(c) => {
            // A module that holds no tensors (`nn.Softmax`) computes where its input is.
            if let Some(args) = stateless_module_call(cx, c) {
                return args.iter().any(next);
            }
            if cx.kind_of(&c.func) == Kind::Module {
                return cx.facts.uses_accelerator;
            }
            if let Some(q) = cx.callee_name(c) {
                if api::is_creation(&q) {
                    return match keyword(c, "device") {
                        Some(Expr::Attribute(a)) if follows_a_tensor(cx, a) => next(&a.value),
                        Some(d) => names_a_device(cx, d),
                        None => false,
                    };
                }
                if api::keeps_its_input(&q) {
                    return c.arguments.args.first().is_some_and(next);
                }
                return api::returns_tensor(&q)
                    && c.arguments.args.iter().chain(c.arguments.keywords.iter().map(|k| &k.value)).any(
                        |a| match a {
                            Expr::List(l) => l.elts.iter().any(next),
                            Expr::Tuple(t) => t.elts.iter().any(next),
                            other => next(other),
                        },
                    );
            }
            let Expr::Attribute(a) = &*c.func else { return false };
            match a.attr.as_str() {
                "cpu" | "numpy" | "item" | "tolist" => false,
                "cuda" => true,
                // `x.type(torch.LongTensor)`: a CPU type; `torch.cuda.LongTensor`: the GPU.
                "type"
                    if c.arguments
                        .args
                        .first()
                        .and_then(|t| cx.model.canonical_name(t))
                        .is_some_and(|q| q.ends_with("Tensor")) =>
                {
                    c.arguments
                        .args
                        .first()
                        .and_then(|t| cx.model.canonical_name(t))
                        .is_some_and(|q| q.starts_with("torch.cuda."))
                }
                "to" => match c.arguments.args.first().or_else(|| keyword(c, "device")) {
                    Some(t) if is_dtype(cx, t) => next(&a.value),
                    Some(Expr::Attribute(d)) if follows_a_tensor(cx, d) => next(&d.value),
                    Some(t) => names_a_device(cx, t),
                    None => next(&a.value),
                },
                m if api::tensor_method_returns_tensor(m) => next(&a.value),
                _ => false,
            }
        }
        Expr::BinOp(b) => next(&b.left) || next(&b.right),
        Expr::Compare(c) => next(&c.left) || c.comparators.iter().any(next),
        Expr::UnaryOp(u) => next(&u.operand),
        Expr::Subscript(s) => next(&s.value),
        _ => false,
    }
}

/// One more step of a walk that follows a tensor through the code: `false` once its budget of
/// steps or depth is spent, or when `e` is not a tensor (a number, a device, a numpy array).
pub(crate) fn may_follow(
    cx: &Checker<'_, '_>,
    e: &Expr,
    depth: usize,
    steps: &std::cell::Cell<usize>,
) -> bool {
    let left = steps.get();
    if left == 0
        || depth > MAX_DEPTH
        || matches!(cx.kind_of(e), Kind::Scalar | Kind::Other | Kind::Device | Kind::Numpy)
    {
        return false;
    }
    steps.set(left - 1);
    true
}

/// A tensor evidently made on the host: a creation with no device or the CPU's
/// (`torch.tensor([1, 2])`), or a move to the CPU (`x.cpu()`), possibly through a name.
fn made_on_host(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    let e = match e {
        Expr::Name(n) => match cx.model.binding_of(n).map(|b| cx.model.binding(b).kind) {
            Some(BindingKind::Assignment { value, part: Part::Whole, .. }) => value,
            _ => return false,
        },
        e => e,
    };
    let Expr::Call(c) = e else { return false };
    match cx.callee_name(c) {
        Some(q) if api::is_creation(&q) => keyword(c, "device").is_none_or(|d| is_cpu_device(cx, d)),
        Some(_) => false,
        None => matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "cpu"),
    }
}

/// A call of a module that holds no tensors (`softmax(x)` with `softmax = nn.Softmax(dim=1)`, or
/// `nn.ReLU()(x)`): its arguments, whose device its output has.
fn stateless_module_call<'e>(cx: &Checker<'_, '_>, c: &'e ast::ExprCall) -> Option<&'e [Expr]> {
    let made = match &*c.func {
        Expr::Call(made) => made,
        Expr::Name(n) => {
            let id = cx.model.binding_of(n)?;
            match cx.model.binding(id) {
                crate::python::model::Binding {
                    kind: BindingKind::Assignment { value: Expr::Call(made), part: Part::Whole, .. },
                    shadowed: None,
                    ..
                } => made,
                _ => return None,
            }
        }
        _ => return None,
    };
    let q = cx.callee_name(made)?;
    api::class_holds_no_tensors(&q).then_some(&c.arguments.args[..])
}

/// Is the attribute `x.device` of a tensor `x`, so that it is where `x` is? Not `self.device`,
/// `args.device`, `opt.device`, `cfg.device` and the like, which name the device chosen for the
/// run.
fn follows_a_tensor(cx: &Checker<'_, '_>, a: &ast::ExprAttribute) -> bool {
    if a.attr.as_str() != "device" {
        return false;
    }
    match cx.kind_of(&a.value) {
        Kind::Tensor => true,
        Kind::Unknown => match &*a.value {
            Expr::Name(n) => {
                let name = n.id.as_str();
                let receiver = cx.function.is_some_and(|f| cx.model.function(f).receiver == Some(name));
                !receiver && !is_settings_name(name)
            }
            _ => false,
        },
        _ => false,
    }
}

/// A name that holds a run's settings (`args.device`, `opt.device`).
fn is_settings_name(name: &str) -> bool {
    matches!(
        name,
        "args"
            | "opt"
            | "opts"
            | "cfg"
            | "config"
            | "conf"
            | "hparams"
            | "hp"
            | "params"
            | "settings"
            | "options"
            | "flags"
    )
}

/// Does the expression given as a device name a device the code chose for its tensors, not the
/// CPU: a device object or setting (`device`, `args.device`, `torch.device("cuda")`, `"cuda:0"`)?
/// A dtype, a host tensor or a name of unknown meaning (`.to(host)`) is not.
pub(crate) fn names_a_device(cx: &Checker<'_, '_>, d: &Expr) -> bool {
    if is_cpu_device(cx, d) || is_dtype(cx, d) {
        return false;
    }
    if literal_device(cx, d).is_some() || cx.kind_of(d) == Kind::Device {
        return true;
    }
    let words = |name: &str| {
        super::helpers::name_words(name)
            .any(|w| matches!(w.to_ascii_lowercase().as_str(), "device" | "dev" | "cuda" | "gpu" | "rank"))
    };
    match d {
        Expr::Name(n) => words(n.id.as_str()),
        Expr::Attribute(a) => words(a.attr.as_str()),
        Expr::Call(c) => cx.callee_name(c).is_some_and(|q| q == "torch.device"),
        _ => false,
    }
}

/// Reductions of every element to one value when given no dimension.
pub(crate) const REDUCTIONS: [&str; 13] =
    ["sum", "mean", "prod", "max", "min", "amax", "amin", "norm", "std", "var", "all", "any", "median"];

/// Is a dimension given by keyword (`dim=`, or numpy's `axis=`; `dim=None` is none)?
pub(crate) fn has_dim(c: &ast::ExprCall) -> bool {
    c.arguments.keywords.iter().any(|k| {
        k.arg.as_ref().is_some_and(|a| matches!(a.as_str(), "dim" | "axis"))
            && !matches!(k.value, Expr::NoneLiteral(_))
    })
}

/// A method call that reduces every element to one value (`t.sum()`, `t.max()`, `t.norm()`): its
/// result is a 0-dim tensor.
pub(crate) fn reduces_to_0_dim(method: &str, c: &ast::ExprCall) -> bool {
    REDUCTIONS.contains(&method) && c.arguments.args.is_empty() && !has_dim(c)
}

/// Is `range` on the CPU side of a device choice — the `else:` of `if torch.cuda.is_available():`
/// (or of `if args.cuda:`, `if device.type == "cuda":`), the body of `if not use_cuda:` or of
/// `if device == "cpu":` — in the file? The code there is for runs without an accelerator, where
/// a tensor made on the CPU meets only CPU tensors.
pub(crate) fn on_cpu_side(cx: &Checker<'_, '_>, range: ruff_text_size::TextRange) -> bool {
    on_side(cx, range, true)
}

/// Is `range` on the accelerator side of a device choice — the body of `if
/// torch.cuda.is_available():` (or `if args.cuda:`), the `else:` of `if device == "cpu":` — in
/// the file? The code there runs only where an accelerator is.
pub(crate) fn on_accelerator_side(cx: &Checker<'_, '_>, range: ruff_text_size::TextRange) -> bool {
    on_side(cx, range, false)
}

/// [`on_cpu_side`] (`cpu`) or [`on_accelerator_side`].
fn on_side(cx: &Checker<'_, '_>, range: ruff_text_size::TextRange, cpu: bool) -> bool {
    /// The statement of `body` that holds `range` (statements are in order: a binary search).
    fn holding(body: &[Stmt], range: ruff_text_size::TextRange) -> Option<&Stmt> {
        let at = body.partition_point(|s| s.end() < range.start());
        body.get(at).filter(|s| s.range().contains_range(range))
    }
    /// Is the branch a test leads into the CPU side: `Some(true)` for its body, `Some(false)`
    /// for what follows it (`elif`/`else`); `None` when the test is no device choice.
    fn cpu_side(cx: &Checker<'_, '_>, test: &Expr) -> Option<bool> {
        match test {
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => cpu_side(cx, &u.operand).map(|body| !body),
            Expr::Compare(c)
                if c.comparators.len() == 1
                    && std::iter::once(&*c.left)
                        .chain(c.comparators.iter())
                        .any(|e| is_cpu_device(cx, e)) =>
            {
                match c.ops.first() {
                    Some(ast::CmpOp::Eq | ast::CmpOp::Is) => Some(true),
                    Some(ast::CmpOp::NotEq | ast::CmpOp::IsNot) => Some(false),
                    _ => None,
                }
            }
            t if checks_for_accelerator(cx, t) => Some(false),
            _ => None,
        }
    }
    fn walk(
        cx: &Checker<'_, '_>,
        body: &[Stmt],
        range: ruff_text_size::TextRange,
        cpu: bool,
        depth: usize,
    ) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        let Some(s) = holding(body, range) else { return false };
        let walk = |body: &[Stmt]| walk(cx, body, range, cpu, depth + 1);
        match s {
            Stmt::If(i) => {
                if i.body.last().is_some_and(|b| b.end() >= range.end()) && i.test.end() <= range.start() {
                    return cpu_side(cx, &i.test) == Some(cpu) || walk(&i.body);
                }
                // An `elif`/`else`: the other side of the first test, or the side of its own.
                let at = i.elif_else_clauses.partition_point(|c| c.end() < range.start());
                let Some(clause) = i.elif_else_clauses.get(at) else { return false };
                cpu_side(cx, &i.test) == Some(!cpu)
                    || clause.test.as_ref().is_some_and(|t| cpu_side(cx, t) == Some(cpu))
                    || walk(&clause.body)
            }
            Stmt::For(f) => walk(&f.body) || walk(&f.orelse),
            Stmt::While(w) => walk(&w.body) || walk(&w.orelse),
            Stmt::With(w) => walk(&w.body),
            Stmt::Try(t) => {
                walk(&t.body)
                    || t.handlers.iter().any(|h| {
                        let ast::ExceptHandler::ExceptHandler(h) = h;
                        walk(&h.body)
                    })
                    || walk(&t.orelse)
                    || walk(&t.finalbody)
            }
            Stmt::FunctionDef(f) => walk(&f.body),
            Stmt::ClassDef(c) => walk(&c.body),
            _ => false,
        }
    }
    walk(cx, cx.module_body, range, cpu, 0)
}
