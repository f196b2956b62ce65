//! What several Python rules need: reading calls and literals, following a batch back to its
//! DataLoader, finding where a value is used, and building edits that keep the file valid.

use std::ops::Range;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};

use rustc_hash::FxHashMap;

use crate::diagnostic::Edit;
use crate::python::api;
use crate::python::checker::{Checker, Node};
use crate::python::model::{BindingId, BindingKind, Model, Part};
use crate::python::typing::Kind;

/// Words looked for inside names, case-insensitively (`log` in `should_log`, `LOG_EVERY`): one
/// automaton per list, built on first use, so a lookup allocates nothing and reads each byte of
/// the name once.
pub(crate) struct NameWords {
    words: &'static [&'static str],
    matcher: OnceLock<Option<AhoCorasick>>,
}

impl NameWords {
    pub(crate) const fn new(words: &'static [&'static str]) -> NameWords {
        NameWords { words, matcher: OnceLock::new() }
    }

    /// Does `name` contain one of the words, in any case?
    pub(crate) fn in_name(&self, name: &str) -> bool {
        let matcher = self
            .matcher
            .get_or_init(|| AhoCorasick::builder().ascii_case_insensitive(true).build(self.words).ok());
        match matcher {
            Some(m) => m.is_match(name),
            // The automaton of a short fixed list always builds; this is only the slow way there.
            None => {
                let lower = name.to_ascii_lowercase();
                self.words.iter().any(|w| lower.contains(w))
            }
        }
    }
}

/// A byte range for a finding.
pub(crate) fn range(r: TextRange) -> Range<usize> {
    r.to_std_range()
}

/// The value of a plain string literal.
pub(crate) fn str_lit(e: &Expr) -> Option<&str> {
    match e {
        Expr::StringLiteral(s) => Some(s.value.to_str()),
        _ => None,
    }
}

/// `recv.method(..)`: the call, its receiver and the method's name.
pub(crate) fn method_call(e: &Expr) -> Option<(&ast::ExprCall, &Expr, &str)> {
    let Expr::Call(c) = e else { return None };
    let Expr::Attribute(a) = &*c.func else { return None };
    Some((c, &a.value, a.attr.as_str()))
}

/// Every name a `for` or assignment target binds.
pub(crate) fn target_names<'a>(target: &'a Expr, out: &mut Vec<&'a str>) {
    match target {
        Expr::Name(n) => out.push(n.id.as_str()),
        Expr::Tuple(t) => t.elts.iter().for_each(|e| target_names(e, out)),
        Expr::List(t) => t.elts.iter().for_each(|e| target_names(e, out)),
        Expr::Starred(s) => target_names(&s.value, out),
        _ => {}
    }
}

/// A string that names an accelerator (`"cuda"`, `"cuda:1"`, `"mps"`), as the device it means.
pub(crate) fn accelerator(s: &str) -> Option<String> {
    let s = s.trim();
    if s == "cuda" {
        return Some("the current CUDA device".to_string());
    }
    if s == "mps"
        || s.strip_prefix("cuda:").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    {
        return Some(s.to_string());
    }
    None
}

/// A device written as a literal: `"cpu"`, `"cuda:0"`, `torch.device("cpu")`.
pub(crate) fn literal_device(cx: &Checker<'_, '_>, e: &Expr) -> Option<String> {
    if let Some(s) = str_lit(e) {
        let s = s.trim();
        return (s == "cpu" || accelerator(s).is_some()).then(|| s.to_string());
    }
    let Expr::Call(c) = e else { return None };
    if cx.callee_name(c)?.as_ref() != "torch.device" {
        return None;
    }
    let first = c.arguments.args.first()?;
    let s = str_lit(first)?.trim();
    match c.arguments.args.get(1) {
        Some(Expr::NumberLiteral(n)) => Some(format!("{s}:{}", cx.text(n.range))),
        Some(_) => None,
        None => (s == "cpu" || accelerator(s).is_some()).then(|| s.to_string()),
    }
}

/// Is the device a CPU: `"cpu"`, `"cpu:0"`, `torch.device("cpu")`, or a name bound once to one?
pub(crate) fn is_cpu_device(cx: &Checker<'_, '_>, d: &Expr) -> bool {
    cpu_device_at(cx, d, 0)
}

fn cpu_device_at(cx: &Checker<'_, '_>, d: &Expr, depth: usize) -> bool {
    if depth > 4 {
        return false;
    }
    if let Expr::StringLiteral(s) = d {
        let s = s.value.to_str().trim();
        return s == "cpu" || s.starts_with("cpu:");
    }
    if let Expr::Call(c) = d
        && cx.callee_name(c).is_some_and(|q| q == "torch.device")
    {
        return c.arguments.args.first().is_some_and(|a| cpu_device_at(cx, a, depth + 1));
    }
    // `self.device` of a plain class whose every assignment is a CPU device, or a parameter that
    // defaults to one (`def __init__(self, n, device="cpu"): self.device = device`).
    if let Expr::Attribute(a) = d
        && let Some(class) = cx.types.receiver_class(&a.value)
        && cx.types.is_module_class(class) == crate::python::typing::Truth::No
    {
        let assigns = cx.types.class_attrs(class, a.attr.as_str());
        return !assigns.is_empty()
            && assigns.iter().all(|x| {
                x.value.is_some_and(|v| {
                    cpu_device_at(cx, v, depth + 1)
                        || name_binding(cx, v).is_some_and(|b| {
                            matches!(cx.model.binding(b).kind,
                                BindingKind::Parameter { default: Some(dflt), .. } if cpu_device_at(cx, dflt, depth + 1))
                        })
                })
            });
    }
    let Expr::Name(n) = d else { return false };
    let Some(id) = cx.model.binding_of(n) else { return false };
    match cx.model.binding(id) {
        crate::python::model::Binding {
            kind: BindingKind::Assignment { value, part: Part::Whole, .. },
            shadowed: None,
            ..
        } => cpu_device_at(cx, value, depth + 1),
        _ => false,
    }
}

/// Does an expression (a condition) ask whether an accelerator is there or in use:
/// `torch.cuda.is_available()`, `args.cuda`, `use_gpu`, `device.type == "cuda"`?
pub(crate) fn checks_for_accelerator(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    let mut found = false;
    any_subexpr(e, &mut |sub| {
        let hit = match sub {
            Expr::Name(n) => is_accelerator_word(n.id.as_str()),
            Expr::Attribute(a) => is_accelerator_word(a.attr.as_str()),
            Expr::StringLiteral(s) => accelerator(s.value.to_str()).is_some() || s.value.to_str() == "cpu",
            Expr::Call(c) => cx.callee_name(c).is_some_and(|q| q.ends_with("is_available")),
            _ => false,
        };
        found |= hit;
        !found
    });
    found
}

fn is_accelerator_word(name: &str) -> bool {
    static WORDS: NameWords = NameWords::new(&["cuda", "gpu", "device", "mps", "cpu", "accelerat"]);
    WORDS.in_name(name)
}

/// Calls `f` on `e` and every expression inside it, in source order, while `f` returns true.
pub(crate) fn any_subexpr<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr) -> bool) {
    use ruff_python_ast::visitor::{Visitor, walk_expr};
    struct Walk<'f, 'a> {
        f: &'f mut dyn FnMut(&'a Expr) -> bool,
        stop: bool,
        depth: usize,
    }
    impl<'a> Visitor<'a> for Walk<'_, 'a> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if self.stop || self.depth > crate::python::model::MAX_DEPTH {
                return;
            }
            if !(self.f)(e) {
                self.stop = true;
                return;
            }
            self.depth += 1;
            walk_expr(self, e);
            self.depth -= 1;
        }
    }
    Walk { f, stop: false, depth: 0 }.visit_expr(e);
}

/// Does some part of `e` (itself included) satisfy `test`?
pub(crate) fn any_subexpr_is(e: &Expr, test: impl Fn(&Expr) -> bool) -> bool {
    let mut found = false;
    any_subexpr(e, &mut |sub| {
        found |= test(sub);
        !found
    });
    found
}

/// Calls `f` on every statement of a body and the bodies inside it (not nested functions or
/// classes), in source order.
pub(crate) fn each_stmt<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    use ruff_python_ast::statement_visitor::{StatementVisitor, walk_stmt};
    struct Walk<'f, 'a> {
        f: &'f mut dyn FnMut(&'a Stmt),
        depth: usize,
    }
    impl<'a> StatementVisitor<'a> for Walk<'_, 'a> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if self.depth > crate::python::model::MAX_DEPTH {
                return;
            }
            (self.f)(s);
            if matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                return;
            }
            self.depth += 1;
            walk_stmt(self, s);
            self.depth -= 1;
        }
    }
    Walk { f, depth: 0 }.visit_body(body);
}

/// The root of a chain of calls, attributes and subscripts: `x` in `x.float().to(d)[0]`.
pub(crate) fn chain_root(e: &Expr) -> &Expr {
    let mut e = e;
    loop {
        e = match e {
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) => &a.value,
                _ => return e,
            },
            Expr::Attribute(a) => &a.value,
            Expr::Subscript(s) => &s.value,
            _ => return e,
        };
    }
}

/// The methods called along a chain, outermost first: `["numpy", "detach"]` for
/// `x.detach().numpy()`.
pub(crate) fn chain_methods(e: &Expr) -> Vec<&str> {
    let mut out = Vec::new();
    let mut e = e;
    loop {
        e = match e {
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) => {
                    out.push(a.attr.as_str());
                    &a.value
                }
                _ => return out,
            },
            Expr::Attribute(a) => &a.value,
            Expr::Subscript(s) => &s.value,
            _ => return out,
        };
    }
}

/// The binding a plain name reads.
pub(crate) fn name_binding(cx: &Checker<'_, '_>, e: &Expr) -> Option<BindingId> {
    let Expr::Name(n) = e else { return None };
    cx.model.binding_of(n)
}

/// Is `e` part of a batch drawn from a DataLoader: `x` in `for x, y in loader`, in
/// `for i, (x, y) in enumerate(train_loader)`, or in `x, y = batch` inside such a loop? Such a
/// value is a tensor (or a structure of them) as the loader's collate made it, on the host.
pub(crate) fn is_batch_element(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    let Some(b) = name_binding(cx, e) else { return false };
    match cx.model.binding(b).kind {
        // (`batch` in `for step, batch in enumerate(loader)` is the whole batch, which may be an
        // object whose `.to()` moves it in place, as a tokenizer's `BatchEncoding` does.)
        // (`i` in `for i, (x, y) in enumerate(loader)` is a count.)
        BindingKind::LoopVar { iter: Expr::Call(c), part: Part::Element(0 | 1), .. }
            if cx.callee_name(c).is_some_and(|q| q == "builtins.enumerate") =>
        {
            false
        }
        BindingKind::LoopVar { iter, part, .. } => part != Part::Whole && iterates_loader(cx, iter),
        BindingKind::Assignment { value, part: Part::Element(_), .. } => {
            let Some(batch) = name_binding(cx, value) else { return false };
            matches!(cx.model.binding(batch).kind, BindingKind::LoopVar { iter, part: Part::Whole, .. } if iterates_loader(cx, iter))
        }
        _ => false,
    }
}

/// `batch` in `for batch in loader:` or `for step, batch in enumerate(loader):`: the iterable.
pub(crate) fn whole_batch<'e>(cx: &Checker<'_, 'e>, batch: &Expr) -> Option<&'e Expr> {
    let b = name_binding(cx, batch)?;
    let iter = match cx.model.binding(b).kind {
        BindingKind::LoopVar { iter, part: Part::Whole } => iter,
        BindingKind::LoopVar { iter: iter @ Expr::Call(c), part: Part::Element(1) }
            if cx.callee_name(c).is_some_and(|q| q == "builtins.enumerate") =>
        {
            iter
        }
        _ => return None,
    };
    iterates_loader(cx, iter).then_some(iter)
}

/// Does a `for` loop's iterable draw batches from a DataLoader: the loader itself, a name bound
/// to one or called `*loader*`, or either wrapped in `enumerate`, `tqdm` or `iter`?
pub(crate) fn iterates_loader(cx: &Checker<'_, '_>, iter: &Expr) -> bool {
    loader_of(cx, iter).is_some() || named_for_loader(cx.model, iter)
}

/// Is an iterable, out of `enumerate(..)`, `tqdm(..)`, `iter(..)` or `zip(..)`, named for a data
/// loader (`loader`, `self.train_loader`, `dm.train_dataloader()`)? By its name alone.
pub(crate) fn named_for_loader(model: &Model<'_>, iter: &Expr) -> bool {
    static LOADER: NameWords = NameWords::new(&["loader"]);
    match unwrap_iteration(model, iter) {
        Expr::Name(n) => LOADER.in_name(n.id.as_str()),
        Expr::Attribute(a) => LOADER.in_name(a.attr.as_str()),
        Expr::Call(c) => matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str().ends_with("dataloader")),
        _ => false,
    }
}

/// `enumerate(x)`, `tqdm(x)`, `iter(x)`, `zip(x, ..)` → `x`.
pub(crate) fn unwrap_iteration<'e>(model: &Model<'_>, iter: &'e Expr) -> &'e Expr {
    let mut e = iter;
    for _ in 0..4 {
        let Expr::Call(c) = e else { break };
        let wrapper = model.canonical_name(&c.func).is_some_and(|q| {
            matches!(q.as_ref(), "builtins.enumerate" | "builtins.iter" | "builtins.zip")
                || q.starts_with("tqdm.")
                || q == "tqdm"
        });
        match c.arguments.args.first() {
            Some(first) if wrapper => e = first,
            _ => break,
        }
    }
    e
}

/// The `DataLoader(..)` call that an iterable comes from, in this file.
pub(crate) fn loader_of<'e>(cx: &Checker<'_, 'e>, iter: &'e Expr) -> Option<&'e ast::ExprCall> {
    let inner = unwrap_iteration(cx.model, iter);
    // `for x, y in DataLoader(..):` itself.
    if let Expr::Call(c) = inner {
        return cx.callee_name(c).is_some_and(|q| api::is_data_loader(&q)).then_some(c);
    }
    let b = name_binding(cx, inner)?;
    let BindingKind::Assignment { value: Expr::Call(c), part: Part::Whole, .. } = cx.model.binding(b).kind
    else {
        return None;
    };
    cx.callee_name(c).is_some_and(|q| api::is_data_loader(&q)).then_some(c)
}

/// The keyword argument `name` of a call.
pub(crate) fn keyword<'e>(call: &'e ast::ExprCall, name: &str) -> Option<&'e Expr> {
    call.arguments.find_keyword(name).map(|k| &k.value)
}

/// Does the call pass `**kwargs` (which may hold any keyword)?
pub(crate) fn has_splat(call: &ast::ExprCall) -> bool {
    call.arguments.keywords.iter().any(|k| k.arg.is_none())
}

/// Is the literal `True`?
pub(crate) fn is_true(e: &Expr) -> bool {
    matches!(e, Expr::BooleanLiteral(b) if b.value)
}

/// Removing a statement, or replacing it with `pass` when it is alone in its block (a block
/// cannot be empty in Python). The whole lines go when nothing else is on them.
pub(crate) fn remove_statement(cx: &Checker<'_, '_>, stmt: &Stmt) -> Edit {
    // The statement itself is on the stack of parents too: its parent is the next one out.
    let alone = cx.parents.iter().rev().find_map(|n| match n {
        Node::Stmt(parent) if parent.range() != stmt.range() => {
            Some(block_of(parent, stmt).is_some_and(|b| b.len() == 1))
        }
        _ => None,
    });
    let r = range(stmt.range());
    if alone.unwrap_or(false) {
        return Edit { range: r, replacement: "pass".to_string() };
    }
    let text = cx.model.source;
    let line_start = text[..r.start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line_end = text[r.end..].find('\n').map(|i| r.end + i + 1).unwrap_or(text.len());
    let before_blank = text[line_start..r.start].trim().is_empty();
    let after = text[r.end..line_end].trim();
    if before_blank && (after.is_empty() || after.starts_with('#')) {
        Edit { range: line_start..line_end, replacement: String::new() }
    } else {
        Edit { range: r, replacement: "pass".to_string() }
    }
}

/// The block of `parent` that holds `stmt` directly.
fn block_of<'a>(parent: &'a Stmt, stmt: &Stmt) -> Option<&'a [Stmt]> {
    let holds = |b: &[Stmt]| b.iter().any(|s| s.range() == stmt.range());
    let blocks: Vec<&'a [Stmt]> = match parent {
        Stmt::FunctionDef(f) => vec![&f.body],
        Stmt::ClassDef(c) => vec![&c.body],
        _ => blocks(parent),
    };
    blocks.into_iter().find(|b| holds(b))
}

/// The blocks a compound statement runs as part of its own flow (an `if`'s branches, a loop's
/// body and `else`, a `try`'s clauses, a `match`'s cases); none for a `def` or `class`.
pub(crate) fn blocks(stmt: &Stmt) -> Vec<&[Stmt]> {
    match stmt {
        Stmt::For(f) => vec![&f.body, &f.orelse],
        Stmt::While(w) => vec![&w.body, &w.orelse],
        Stmt::If(i) => {
            std::iter::once(&*i.body).chain(i.elif_else_clauses.iter().map(|c| &*c.body)).collect()
        }
        Stmt::With(w) => vec![&w.body],
        Stmt::Try(t) => std::iter::once(&*t.body)
            .chain(t.handlers.iter().map(|h| {
                let ast::ExceptHandler::ExceptHandler(h) = h;
                &*h.body
            }))
            .chain([&*t.orelse, &*t.finalbody])
            .collect(),
        Stmt::Match(m) => m.cases.iter().map(|c| &*c.body).collect(),
        _ => Vec::new(),
    }
}

/// Where a tensor's value may be, as far as the code says: on an accelerator, and attached to
/// the autograd graph (requiring grad).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Provenance {
    pub on_accelerator: bool,
    pub requires_grad: bool,
}

impl Provenance {
    fn union(self, other: Provenance) -> Provenance {
        Provenance {
            on_accelerator: self.on_accelerator || other.on_accelerator,
            requires_grad: self.requires_grad || other.requires_grad,
        }
    }
}

/// A tensor method whose arguments are tensors of the receiver's shape, not sizes or dims: a
/// comparison or an arithmetic operation (`pred.eq(y)`, `a.mul(b)`).
pub(crate) fn is_operand_method(method: &str) -> bool {
    matches!(
        method,
        "eq" | "ne"
            | "lt"
            | "le"
            | "gt"
            | "ge"
            | "add"
            | "sub"
            | "mul"
            | "div"
            | "matmul"
            | "mm"
            | "bmm"
            | "dot"
            | "maximum"
            | "minimum"
            | "masked_fill"
            | "masked_select"
    )
}

/// Where the value of `e` may be: moved to an accelerator (`.cuda()`, `.to(device)`), the output
/// of a module (whose weights follow the model to its device, and require grad), a module's
/// parameter or buffer, an input of a forward pass, or computed from any of those. Values of
/// unknown origin are neither: a finding needs evidence.
pub(crate) fn provenance(cx: &Checker<'_, '_>, e: &Expr) -> Provenance {
    query(cx, e, cx.facts.uses_accelerator)
}

/// [`provenance`], where the file's tensors may be on an accelerator when any file of its project
/// names one ([`crate::python::checker::Facts::project_uses_accelerator`]).
pub(crate) fn provenance_in_project(cx: &Checker<'_, '_>, e: &Expr) -> Provenance {
    query(cx, e, cx.facts.project_uses_accelerator)
}

/// `self.mdl.forward_detect(..)`, `model.forward_features(x)`: a pass of a module, named for one,
/// run through a method of the module other than `forward` itself.
fn runs_a_forward_of(cx: &Checker<'_, '_>, func: &Expr) -> bool {
    let Expr::Attribute(a) = func else { return false };
    let name = a.attr.as_str();
    (name.starts_with("forward_") || name.ends_with("_forward"))
        && cx.kind_of(&a.value) == crate::python::typing::Kind::Module
}

/// One provenance query, with its own budget of steps; `accelerator`: whether tensors here can
/// be on an accelerator at all.
fn query(cx: &Checker<'_, '_>, e: &Expr, accelerator: bool) -> Provenance {
    cx.provenance_steps.set(PROVENANCE_STEPS);
    let p = provenance_at(cx, e, 0);
    Provenance {
        on_accelerator: p.on_accelerator && accelerator,
        requires_grad: p.requires_grad && cx.no_grad == 0,
    }
}

/// The expressions one provenance query may visit: far more than real code needs (a few dozen),
/// few enough that lists of lists of lists cannot make a query exponential.
const PROVENANCE_STEPS: u32 = 4096;

/// Does the tensor method (or torch function) of this name return integers or booleans, which
/// are not part of the autograd graph?
fn integer_result(name: &str) -> bool {
    matches!(
        name,
        "argmax"
            | "argmin"
            | "argsort"
            | "long"
            | "int"
            | "bool"
            | "byte"
            | "short"
            | "eq"
            | "ne"
            | "lt"
            | "le"
            | "gt"
            | "ge"
            | "nonzero"
            | "isnan"
            | "isinf"
            | "logical_not"
            | "any"
            | "all"
    )
}

/// Is `func` a name this function binds to a module it makes on the host (`block = Block(e0)`, a
/// plain constructor call given no device but the CPU, not under `with torch.device(..)` or a
/// default device) and never moves or converts in place (`block.to(device)`, `.cuda()`,
/// `.half()`, `.apply(..)`) nor hands to anything else (which may move it)?
fn module_made_here_and_kept(cx: &Checker<'_, '_>, func: &Expr) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    let Some(f) = cx.function else { return false };
    let Expr::Name(n) = func else { return false };
    let Some(b) = cx.model.binding_of(n) else { return false };
    let BindingKind::Assignment { value: Expr::Call(made), part: Part::Whole, .. } = cx.model.binding(b).kind
    else {
        return false;
    };
    let def = cx.model.function(f).def;
    // A constructor (`Block(..)`, `modules.Block(..)`), not a chain that moves (`Block().cuda()`).
    let constructor = match &*made.func {
        Expr::Name(_) => true,
        Expr::Attribute(a) => names_a_module(cx, &a.value),
        _ => false,
    };
    if !constructor
        || !def.range().contains_range(made.range())
        || cx.kind_of(func) != Kind::Module
        || cx.default_device_set()
    {
        return false;
    }
    // Made on a device other than the CPU (`nn.Linear(d, 1, device=device)`, `Block(e0, device)`):
    // not kept on the host. (`device="cpu"`, a `cpu_device` keep it there.)
    let positional = made.arguments.args.iter().filter(|a| {
        cx.kind_of(a) == Kind::Device
            || super::device_evidence::names_a_device(cx, a)
            || matches!(a, Expr::Name(n) if n.id.as_str().contains("device"))
    });
    let named = made
        .arguments
        .keywords
        .iter()
        .filter(|k| k.arg.as_ref().is_some_and(|n| n.as_str().contains("device")))
        .map(|k| &k.value);
    if positional.chain(named).any(|d| !is_cpu_device(cx, d)) {
        return false;
    }
    if let Some(&known) = cx.kept_modules.borrow().get(&b) {
        return known;
    }
    // Made under `with torch.device("cuda"):`, which places what is made there (not the CPU's).
    let under_device = |s: &Stmt| {
        matches!(s, Stmt::With(w) if w.range().contains_range(made.range())
            && w.items.iter().any(|i| matches!(&i.context_expr, Expr::Call(c)
                if cx.callee_name(c).is_some_and(|q| q == "torch.device")
                    && !c.arguments.args.first().is_some_and(|d| is_cpu_device(cx, d)))))
    };
    let mut placed = false;
    let mut stack: Vec<&Stmt> = def.body.iter().collect();
    while let Some(st) = stack.pop() {
        if !st.range().contains_range(made.range()) {
            continue;
        }
        if under_device(st) {
            placed = true;
            break;
        }
        match st {
            Stmt::With(w) => stack.extend(w.body.iter()),
            Stmt::If(i) => {
                stack.extend(i.body.iter());
                stack.extend(i.elif_else_clauses.iter().flat_map(|c| c.body.iter()));
            }
            Stmt::For(f) => stack.extend(f.body.iter().chain(f.orelse.iter())),
            Stmt::While(w) => stack.extend(w.body.iter().chain(w.orelse.iter())),
            Stmt::Try(t) => {
                stack.extend(t.body.iter().chain(t.finalbody.iter()).chain(t.orelse.iter()));
                for h in &t.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    stack.extend(h.body.iter());
                }
            }
            Stmt::Match(m) => stack.extend(m.cases.iter().flat_map(|c| c.body.iter())),
            _ => {}
        }
    }
    if placed {
        cx.kept_modules.borrow_mut().insert(b, false);
        return false;
    }
    // Every use of the name in the function is a call of it (`block(x)`) or of a method that
    // leaves it where it is (`block.eval()`).
    struct Uses<'c, 'm, 'e> {
        cx: &'c Checker<'m, 'e>,
        binding: BindingId,
        kept: bool,
    }
    impl<'a> Visitor<'a> for Uses<'_, '_, '_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if !self.kept {
                return;
            }
            let is_it =
                |e: &Expr| matches!(e, Expr::Name(m) if self.cx.model.binding_of(m) == Some(self.binding));
            match e {
                Expr::Call(c) if is_it(&c.func) => visitor::walk_arguments(self, &c.arguments),
                Expr::Call(c)
                    if matches!(&*c.func, Expr::Attribute(a) if is_it(&a.value)
                        && matches!(a.attr.as_str(), "eval" | "train" | "forward" | "requires_grad_" | "zero_grad")) =>
                {
                    visitor::walk_arguments(self, &c.arguments)
                }
                e if is_it(e) => self.kept = false,
                e => visitor::walk_expr(self, e),
            }
        }
    }
    let mut uses = Uses { cx, binding: b, kept: true };
    for s in &def.body {
        uses.visit_stmt(s);
    }
    cx.kept_modules.borrow_mut().insert(b, uses.kept);
    uses.kept
}

/// Is `e` the name of an imported module (`torch`, `F`, `np`)?
fn names_a_module(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    matches!(e, Expr::Name(n) if cx.model.binding_of(n).is_some_and(|b| matches!(
        cx.model.binding(b).kind,
        crate::python::model::BindingKind::Import { .. } | crate::python::model::BindingKind::ImportRoot
    )))
}

fn provenance_at(cx: &Checker<'_, '_>, e: &Expr, depth: usize) -> Provenance {
    const NONE: Provenance = Provenance { on_accelerator: false, requires_grad: false };
    let steps = cx.provenance_steps.get();
    if depth > 24 || steps == 0 {
        cx.provenance_cut.set(true);
        return NONE;
    }
    cx.provenance_steps.set(steps - 1);
    // A dict or list the function fills (`losses = {}`, then `losses["d"] = d_loss`): where what
    // it put there is.
    if depth < 12
        && let Some(b) = name_binding(cx, e)
        && filled_container(cx, b)
    {
        let mut p = NONE;
        each_put(cx, b, &mut |v| p = p.union(provenance_at(cx, v, depth + 1)));
        return Provenance { requires_grad: false, ..p };
    }
    // A batch moved item by item where it is bound (`for k in batch: batch[k] =
    // batch[k].to(device)`): on the device.
    if let Some(b) = name_binding(cx, e)
        && moved_item_by_item(cx, b)
    {
        return Provenance { on_accelerator: true, requires_grad: false };
    }
    match e {
        // A dict, list or tuple of tensors: where its items are.
        Expr::Dict(d) => {
            let p = d.items.iter().fold(NONE, |p, item| p.union(provenance_at(cx, &item.value, depth + 1)));
            return Provenance { requires_grad: false, ..p };
        }
        Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }) => {
            let p = elts.iter().fold(NONE, |p, e| p.union(provenance_at(cx, e, depth + 1)));
            return Provenance { requires_grad: false, ..p };
        }
        // `{k: v.to(device) for k, v in batch.items()}`: where each value is put.
        Expr::DictComp(d) => {
            return Provenance { requires_grad: false, ..provenance_at(cx, &d.value, depth + 1) };
        }
        // `[t.to(device) for t in batch]`, and `tuple(..)` of a generator.
        Expr::ListComp(ast::ExprListComp { elt, .. })
        | Expr::SetComp(ast::ExprSetComp { elt, .. })
        | Expr::Generator(ast::ExprGenerator { elt, .. }) => {
            return Provenance { requires_grad: false, ..provenance_at(cx, elt, depth + 1) };
        }
        // `v.to(device) if isinstance(v, torch.Tensor) else v`: either side.
        Expr::If(i) => {
            return provenance_at(cx, &i.body, depth + 1).union(provenance_at(cx, &i.orelse, depth + 1));
        }
        Expr::Call(c)
            if matches!(&c.arguments.args[..], [Expr::Generator(_) | Expr::ListComp(_)])
                && c.arguments.keywords.is_empty()
                && cx
                    .callee_name(c)
                    .is_some_and(|q| matches!(q.as_ref(), "builtins.tuple" | "builtins.list")) =>
        {
            return provenance_at(cx, &c.arguments.args[0], depth + 1);
        }
        _ => {}
    }
    let next = |e: &Expr| provenance_at(cx, e, depth + 1);
    match cx.kind_of(e) {
        Kind::Scalar | Kind::Device | Kind::Numpy => return NONE,
        // A dict of tensors a function of this file returns (`get_batch(raw, device)` returning
        // `{k: t.to(device) for k, t in raw.items()}`): where its values are.
        Kind::Other if let Expr::Call(c) = e => {
            return returned_value(cx, c, depth, &next).unwrap_or(NONE);
        }
        // A name of a dict or list is where what it holds is (its value says).
        Kind::Other if !matches!(e, Expr::Name(_)) => return NONE,
        _ => {}
    }
    match e {
        Expr::Call(c) => {
            // (`torch.isnan(x)` is a function of a module, not a method of `torch`.)
            if let Expr::Attribute(a) = &*c.func
                && !names_a_module(cx, &a.value)
            {
                let recv = || next(&a.value);
                // A tensor argument of a tensor method is on the receiver's device, so the result
                // is on an accelerator when either is (`pred.eq(targets)` with `targets` moved).
                // The operand of a comparison or arithmetic method is a tensor unless known not to
                // be; other methods' arguments of unknown kind are sizes and dims.
                let operand = is_operand_method(a.attr.as_str());
                let with_tensor_args = |p: Provenance| Provenance {
                    on_accelerator: p.on_accelerator
                        || c.arguments.args.iter().any(|arg| {
                            let kind = cx.kind_of(arg);
                            (kind == Kind::Tensor || (operand && kind == Kind::Unknown))
                                && next(arg).on_accelerator
                        }),
                    ..p
                };
                match a.attr.as_str() {
                    // `loss_dict.values()`: where the dict's values are.
                    "values" if c.arguments.is_empty() => return recv(),
                    "cpu" | "numpy" | "tolist" | "item" => {
                        return Provenance { on_accelerator: false, ..recv() };
                    }
                    "cuda" => return Provenance { on_accelerator: true, ..recv() },
                    "to" => {
                        let target = c.arguments.args.first().or_else(|| keyword(c, "device"));
                        let on = match target {
                            Some(t) if is_cpu_device(cx, t) => false,
                            Some(t) if cx.kind_of(t) == crate::python::typing::Kind::Tensor => {
                                next(t).on_accelerator
                            }
                            Some(t) if is_dtype(cx, t) => recv().on_accelerator,
                            Some(_) => true,
                            None => recv().on_accelerator,
                        };
                        return Provenance { on_accelerator: on, ..recv() };
                    }
                    "detach" => return Provenance { requires_grad: false, ..recv() },
                    // `x.type(torch.FloatTensor)`: a CPU tensor type moves it to the host;
                    // `torch.cuda.FloatTensor` to the current GPU; a dtype keeps it where it is.
                    "type" => {
                        let named = c.arguments.args.first().and_then(|t| match t {
                            Expr::StringLiteral(l) => Some(l.value.to_str().to_string()),
                            t => cx.model.canonical_name(t).map(|q| q.into_owned()),
                        });
                        if let Some(q) = named.filter(|q| q.starts_with("torch.") && q.ends_with("Tensor")) {
                            return Provenance { on_accelerator: q.starts_with("torch.cuda."), ..recv() };
                        }
                    }
                    // `w.type_as(x)`: on `x`'s device.
                    "type_as" => {
                        let on = c.arguments.args.first().is_some_and(|t| next(t).on_accelerator);
                        return Provenance { on_accelerator: on, ..recv() };
                    }
                    // Integer and boolean results are not part of the autograd graph.
                    m if integer_result(m) => {
                        return Provenance { requires_grad: false, ..with_tensor_args(recv()) };
                    }
                    _ => {}
                }
                // (`torch.nn.functional.relu(x)` is a function of a module, not a method.)
                if api::tensor_method_returns_tensor(a.attr.as_str())
                    && cx.kind_of(&a.value).may_be_tensor()
                    && cx.callee_name(c).is_none_or(|q| !api::returns_tensor(&q))
                {
                    // A tensor method's result is on its receiver's device (its tensor arguments
                    // must be there too; the others are sizes and dims); it carries the grad of
                    // all of them.
                    let p = with_tensor_args(recv());
                    let grad = c
                        .arguments
                        .args
                        .iter()
                        .any(|arg| cx.kind_of(arg) == Kind::Tensor && next(arg).requires_grad);
                    return Provenance { requires_grad: p.requires_grad || grad, ..p };
                }
            }
            // `super().training_step(model, inputs)` in a framework's step: the loss it takes,
            // on the device.
            if let Expr::Attribute(m) = &*c.func
                && matches!(m.attr.as_str(), "training_step" | "compute_loss")
                && matches!(&*m.value, Expr::Call(s) if matches!(&*s.func, Expr::Name(n) if n.id.as_str() == "super"))
                && cx
                    .function
                    .is_some_and(|f| crate::python::checker::batch_step(cx.model, &cx.types.project(), f))
            {
                return Provenance { on_accelerator: true, requires_grad: false };
            }
            // `AllReduce.apply(x)`: a custom autograd function's result, where its tensors are.
            if cx.types.autograd_apply(c) {
                return c.arguments.args.iter().fold(NONE, |p, arg| p.union(next(arg)));
            }
            if let Some(q) = cx.callee_name(c) {
                // `sum(loss_dict.values())`: where what it adds up is.
                if q == "builtins.sum"
                    && let [items] = &c.arguments.args[..]
                {
                    return next(items);
                }
                if api::is_creation(&q) {
                    let device = keyword(c, "device").map(|d| !is_cpu_device(cx, d));
                    let from_tensor = api::creation_takes_data(&q)
                        && c.arguments.args.first().is_some_and(|a| next(a).on_accelerator);
                    return Provenance {
                        // An explicit device wins over where the data came from.
                        on_accelerator: device.unwrap_or(cx.facts.sets_default_device || from_tensor),
                        requires_grad: keyword(c, "requires_grad").is_some_and(is_true),
                    };
                }
                if api::returns_tensor(&q) {
                    // Tensors given by keyword too (`F.cross_entropy(input=y_hat, target=y)`).
                    let by_keyword = c.arguments.keywords.iter().filter_map(|k| {
                        k.arg
                            .as_ref()
                            .filter(|a| {
                                matches!(
                                    a.as_str(),
                                    "input"
                                        | "target"
                                        | "other"
                                        | "tensor"
                                        | "logits"
                                        | "query"
                                        | "key"
                                        | "value"
                                        | "x1"
                                        | "x2"
                                        | "input1"
                                        | "input2"
                                        | "mat1"
                                        | "mat2"
                                )
                            })
                            .map(|_| &k.value)
                    });
                    let p = c.arguments.args.iter().chain(by_keyword).fold(NONE, |p, arg| p.union(next(arg)));
                    // `torch.argmax(q, dim=1)`: as the method.
                    let integer = q.strip_prefix("torch.").is_some_and(integer_result);
                    return Provenance { requires_grad: p.requires_grad && !integer, ..p };
                }
                if api::keeps_its_input(&q) {
                    return c.arguments.args.first().map_or(NONE, next);
                }
            }
            // A module this function makes and never moves (`stats = EnergyBlock(e0)`, then
            // `stats(batch.attrs)`): its weights stay on the host, so its output is where its
            // inputs are.
            if module_made_here_and_kept(cx, &c.func) {
                let p = call_inputs(c).fold(NONE, |p, a| p.union(next(a)));
                return Provenance { on_accelerator: p.on_accelerator, requires_grad: true };
            }
            // Calling a module (`self(x)` in one of its methods too): its output is where its
            // weights are, and carries their grad.
            if cx.kind_of(&c.func) == crate::python::typing::Kind::Module
                || (cx.types.receiver_class(&c.func).is_some() && cx.in_module_method())
                || (cx.in_module_method() && calls_a_layer_it_is_given(&c.func))
                || runs_a_forward_of(cx, &c.func)
            {
                return Provenance { on_accelerator: true, requires_grad: true };
            }
            // `batch = to_device(batch)`: a function of the project that moves all it returns.
            if returns_device_call(cx, c) {
                return moved_arguments(c, &next);
            }
            // `loss = train_step(model, batch, ..)`: a function of this file that returns a value
            // on the device (the loss it backpropagated) returns it there, whatever its inputs say.
            if let Some(p) = returned_value(cx, c, depth, &next)
                && p.on_accelerator
            {
                return p;
            }
            // Calling a value (a model passed in, `self.net`), or a function of the project (a
            // loss, a reduction across ranks): its output is where its inputs are.
            if calls_a_value(cx, c)
                || project_function(cx, c) == Some(false)
                || calls_a_component_method(cx, c)
                || calls_an_instance(cx, c)
                || calls_a_collaborator(cx, c)
            {
                let on = call_inputs(c).any(|a| next(a).on_accelerator);
                return Provenance { on_accelerator: on, requires_grad: false };
            }
            NONE
        }
        Expr::Attribute(a) => {
            if a.attr.as_str() == "data" {
                return Provenance { requires_grad: false, ..next(&a.value) };
            }
            // A gradient is where the parameter it was computed for is, and the parameters
            // training gives gradients follow the model (`p.grad` for `p` in the parameters a
            // clipping helper is handed).
            if a.attr.as_str() == "grad" {
                return Provenance { on_accelerator: true, requires_grad: false };
            }
            // `self.scheduler.timesteps` after `self.scheduler.set_timesteps(n, device=device)`
            // in the same function: a Diffusers scheduler's schedule, made where it was asked.
            if a.attr.as_str() == "timesteps" && timesteps_set_on_device(cx, &a.value) {
                return Provenance { on_accelerator: true, requires_grad: false };
            }
            // A model output's fields (`outputs.loss`, `out.logits`), the (values, indices) pair
            // of a reduction (`d.min(dim=-1).values`): where the output is.
            if matches!(
                a.attr.as_str(),
                "values"
                    | "indices"
                    | "loss"
                    | "logits"
                    | "last_hidden_state"
                    | "hidden_states"
                    | "pooler_output"
                    | "aux_loss"
                    | "z_loss"
            ) && cx.types.receiver_class(&a.value).is_none()
            {
                return next(&a.value);
            }
            // A layer's weights follow the model and are trained (a layer a Transformers model
            // hands out too: `text_encoder.get_input_embeddings().weight`).
            if matches!(a.attr.as_str(), "weight" | "bias")
                && (cx.kind_of(&a.value) == crate::python::typing::Kind::Module
                    || api::returns_a_layer(&a.value))
            {
                return Provenance { on_accelerator: true, requires_grad: true };
            }
            if let Some(class) = cx.types.receiver_class(&a.value) {
                let attrs = cx.types.class_attrs(class, a.attr.as_str());
                // An attribute of a plain class (a trainer's `self.mean_loss`): where what its
                // methods assign to it is.
                if cx.types.is_module_class(class) == crate::python::typing::Truth::No {
                    return plain_attribute(cx, class, a.attr.as_str(), &attrs, &next);
                }
                // A parameter or buffer of a module moves with the model.
                let registered = attrs.iter().any(|x| {
                    matches!(x.how, crate::python::model::AttrHow::Buffer { .. } | crate::python::model::AttrHow::Parameter)
                        || x.value.is_some_and(|v| {
                            matches!(v, Expr::Call(c) if cx.callee_name(c).is_some_and(|q| api::is_parameter_class(&q)))
                        })
                });
                let parameter = attrs.iter().any(|x| {
                    x.how == crate::python::model::AttrHow::Parameter
                        || x.value.is_some_and(|v| {
                            matches!(v, Expr::Call(c) if cx.callee_name(c).is_some_and(|q| api::is_parameter_class(&q)))
                        })
                });
                return Provenance { on_accelerator: registered, requires_grad: parameter };
            }
            // `top1.avg` of a meter this function updates (`top1.update(prec1, n)`, where
            // `update` keeps what it is given: `self.val = val`, `self.avg = self.sum /
            // self.count`): where what it is given is.
            if let Some(p) = kept_by_a_method(cx, a, &next) {
                return p;
            }
            // A field of an object moved to the device as a whole (`data = data.to(device)`: a
            // graph batch, a tokenizer's `BatchEncoding`): where the object is. (Not what
            // describes a tensor: its `shape`, `dtype`, `device`.)
            if !matches!(a.attr.as_str(), "shape" | "dtype" | "device" | "ndim" | "is_cuda" | "requires_grad")
                && !matches!(
                    cx.kind_of(&a.value),
                    crate::python::typing::Kind::Tensor | crate::python::typing::Kind::Module
                )
            {
                let p = next(&a.value);
                if p.on_accelerator {
                    return Provenance { requires_grad: false, ..p };
                }
            }
            NONE
        }
        // `result[1]` of `pad_packed_sequence(..)`: the lengths, on the host.
        Expr::Subscript(s) if host_field(cx, s) => NONE,
        Expr::Subscript(s) => next(&s.value),
        Expr::BinOp(b) => next(&b.left).union(next(&b.right)),
        Expr::Compare(c) => {
            let p = c.comparators.iter().fold(next(&c.left), |p, r| p.union(next(r)));
            Provenance { requires_grad: false, ..p }
        }
        Expr::UnaryOp(u) => next(&u.operand),
        Expr::Starred(s) => next(&s.value),
        Expr::Name(_) => {
            let Some(b) = name_binding(cx, e) else { return NONE };
            let binding = cx.model.binding(b);
            let mut p = if cx.facts.backward.contains(&b) {
                Provenance { on_accelerator: true, requires_grad: true }
            } else if cx.facts.loss_inputs.contains(&b) && !made_on_the_host(cx, b) {
                Provenance { on_accelerator: true, ..binding_value_provenance(cx, e, b, depth, next) }
            } else {
                binding_value_provenance(cx, e, b, depth, next)
            };
            // Bound again only on a branch a CUDA run never takes (`if mode == "cpu": x = x.cpu()`,
            // perhaps more than once): read after that branch, on a CUDA run it is what it was
            // before.
            let mut at = b;
            for _ in 0..64 {
                let Some(old) = cx.model.binding(at).shadowed else { break };
                if !rebound_on_another_device(cx, at, e.range()) {
                    break;
                }
                p = p.union(binding_value_provenance(cx, e, old, depth, next));
                at = old;
            }
            // Made under `torch.no_grad()`: not part of the autograd graph.
            if binding.in_no_grad { Provenance { requires_grad: false, ..p } } else { p }
        }
        _ => NONE,
    }
}

/// Is binding `b` an assignment inside a branch a CUDA run never takes (the body of
/// `if mode == "cpu":`, the `else` of `if x.is_cuda:`), read at `at` outside that branch?
fn rebound_on_another_device(cx: &Checker<'_, '_>, b: BindingId, at: TextRange) -> bool {
    let BindingKind::Assignment { value, .. } = cx.model.binding(b).kind else { return false };
    if let Some(known) = cx.other_device_branches.borrow().get(&b) {
        return known.is_some_and(|branch| !branch.contains_range(at));
    }
    // The body of the innermost function around the assignment (the read may be in another one,
    // which the provenance of a parameter follows back to its callers), or the module's.
    let body = match function_around(cx, value.range()) {
        Some(f) => &cx.model.function(f).def.body[..],
        None => cx.module_body,
    };
    let branch = other_device_branch(body, value.range(), 0);
    cx.other_device_branches.borrow_mut().insert(b, branch);
    branch.is_some_and(|branch| !branch.contains_range(at))
}

/// The innermost function of the file whose `def` holds `range`: from the last one to start
/// before it, out through the functions around that one (definitions nest, so the one sought is
/// among them).
fn function_around(cx: &Checker<'_, '_>, range: TextRange) -> Option<crate::python::model::FunctionId> {
    let starts = cx.function_starts.get_or_init(|| {
        let mut starts: Vec<_> = cx.model.functions().map(|(id, f)| (f.def.range().start(), id)).collect();
        starts.sort_unstable();
        starts
    });
    let last = starts.partition_point(|(start, _)| *start <= range.start()).checked_sub(1)?;
    let mut f = Some(starts[last].1);
    while let Some(id) = f {
        if cx.model.function(id).def.range().contains_range(range) {
            return Some(id);
        }
        f = cx.model.function(id).parent;
    }
    None
}

/// The statements of the branch a CUDA run never takes that holds `at`, within `body`.
fn other_device_branch(body: &[Stmt], at: TextRange, depth: u32) -> Option<TextRange> {
    use crate::python::checker::device_branch;
    fn span(body: &[Stmt]) -> Option<TextRange> {
        Some(TextRange::new(body.first()?.start(), body.last()?.end()))
    }
    if depth > 64 {
        return None;
    }
    let inner = |stmts: &[Stmt]| other_device_branch(stmts, at, depth + 1);
    let stmt = body.iter().find(|s| s.range().contains_range(at))?;
    match stmt {
        Stmt::If(i) => {
            let side = device_branch(&i.test);
            if let Some(r) = span(&i.body).filter(|r| r.contains_range(at)) {
                return if side.is_some_and(|(body, _)| body) { Some(r) } else { inner(&i.body) };
            }
            let clause =
                i.elif_else_clauses.iter().find(|c| span(&c.body).is_some_and(|r| r.contains_range(at)))?;
            let other = match &clause.test {
                None => side.is_some_and(|(body, _)| !body),
                Some(t) => device_branch(t).is_some_and(|(body, _)| body),
            };
            if other { span(&clause.body) } else { inner(&clause.body) }
        }
        Stmt::For(f) => inner(&f.body).or_else(|| inner(&f.orelse)),
        Stmt::While(w) => inner(&w.body).or_else(|| inner(&w.orelse)),
        Stmt::With(w) => inner(&w.body),
        Stmt::Try(t) => inner(&t.body)
            .or_else(|| {
                t.handlers.iter().find_map(|h| match h {
                    ast::ExceptHandler::ExceptHandler(h) => inner(&h.body),
                })
            })
            .or_else(|| inner(&t.orelse))
            .or_else(|| inner(&t.finalbody)),
        _ => None,
    }
}

/// Is the binding a tensor made on the host from literal values (`w = torch.tensor([1.0, 1.0])`,
/// `torch.zeros(3)`) with no device, where no default device is set? A loss computed from it is
/// on the host too, so taking part in a loss does not put it on the device.
fn made_on_the_host(cx: &Checker<'_, '_>, b: BindingId) -> bool {
    if cx.facts.sets_default_device {
        return false;
    }
    let BindingKind::Assignment { value: Expr::Call(c), part: Part::Whole, .. } = cx.model.binding(b).kind
    else {
        return false;
    };
    let Some(q) = cx.callee_name(c) else { return false };
    if !api::is_creation(&q) || keyword(c, "device").is_some_and(|d| !is_cpu_device(cx, d)) {
        return false;
    }
    // Data given as literals (a tensor argument may be anywhere).
    !api::creation_takes_data(&q)
        || c.arguments.args.first().is_some_and(|a| {
            matches!(a, Expr::List(l) if l.elts.iter().all(|e| matches!(e, Expr::NumberLiteral(_) | Expr::UnaryOp(_))))
                || matches!(a, Expr::NumberLiteral(_))
        })
}

/// Where an attribute of a plain class is: where what its methods assign to it is (not part of
/// the autograd graph), worked out once per (class, name) — unless a query under it stopped at its
/// limit, knowing nothing.
fn plain_attribute(
    cx: &Checker<'_, '_>,
    class: crate::python::model::ClassId,
    name: &str,
    attrs: &[&crate::python::model::AttrAssign<'_>],
    next: &dyn Fn(&Expr) -> Provenance,
) -> Provenance {
    let key = (class, name.to_string());
    if let Some(known) = cx.plain_attributes.borrow().get(&key) {
        return known.unwrap_or_default();
    }
    cx.plain_attributes.borrow_mut().insert(key.clone(), None);
    let cut_before = cx.provenance_cut.replace(false);
    let p = attrs
        .iter()
        .filter(|x| x.how == crate::python::model::AttrHow::Assign)
        .filter_map(|x| x.value)
        .fold(Provenance::default(), |p, v| p.union(next(v)));
    let p = Provenance { requires_grad: false, ..p };
    let cut = cx.provenance_cut.get();
    cx.provenance_cut.set(cut_before || cut);
    if p.on_accelerator || !cut {
        cx.plain_attributes.borrow_mut().insert(key, Some(p));
    } else {
        cx.plain_attributes.borrow_mut().remove(&key);
    }
    p
}

/// `meter.avg` where `meter = AverageMeter()` (a plain class of this file or another file of the
/// project) and the function calls a method of it that keeps one of its parameters in that
/// attribute ([`crate::python::project::kept_parameters`]): where the arguments it is given
/// there are. (The instance's first few dozen calls in the function are looked at.)
fn kept_by_a_method(
    cx: &Checker<'_, '_>,
    a: &ast::ExprAttribute,
    next: &dyn Fn(&Expr) -> Provenance,
) -> Option<Provenance> {
    let Expr::Name(instance) = &*a.value else { return None };
    let made = cx.instance_made_by(&a.value)?;
    // The class, when this file defines it; else as another file of the project names it.
    let local = match cx.model.callee(made, cx.function) {
        Some(crate::python::model::Callee::Class(c)) => Some(c),
        _ => None,
    };
    let project = cx.types.project();
    let class = match local {
        Some(c) if cx.types.is_module_class(c) != crate::python::typing::Truth::No => return None,
        Some(_) => String::new(),
        // A plain class of another file (not a module: `model.to()` moves a module's tensors).
        None => match cx.instance_class(&a.value) {
            Some(class) if project.is_module(&class) == crate::python::typing::Truth::No => class,
            _ => star_imported_class(cx, made)?,
        },
    };
    let kept = |method: &str| -> std::rc::Rc<[(String, usize)]> {
        match local {
            Some(c) => {
                let Some((f, def)) =
                    cx.model.functions().find(|(_, f)| f.class == Some(c) && f.name() == method)
                else {
                    return std::rc::Rc::from([]);
                };
                cx.kept
                    .borrow_mut()
                    .entry(f)
                    .or_insert_with(|| crate::python::project::kept_parameters(def.def).into())
                    .clone()
            }
            None => project.kept_parameters(&class, method).into(),
        }
    };
    let mut found: Option<Provenance> = None;
    // The instance's own calls in the function (the first few dozen).
    let calls = cx
        .model
        .calls
        .iter()
        .filter(|s| {
            s.function == cx.function
                && matches!(&*s.call.func, Expr::Attribute(m) if matches!(&*m.value, Expr::Name(n) if n.id == instance.id))
        })
        .take(64);
    for site in calls {
        let Expr::Attribute(m) = &*site.call.func else { continue };
        for (_, i) in kept(m.attr.as_str()).iter().filter(|(k, _)| k == a.attr.as_str()) {
            if let Some(arg) = site.call.arguments.args.get(*i) {
                let p = next(arg);
                found = Some(found.map_or(p, |f| f.union(p)));
            }
        }
    }
    found.map(|p| Provenance { requires_grad: false, ..p })
}

/// `AverageMeter()` where the name is bound by nothing in the file but a star import
/// (`from utils import *`): the class as the last star-imported module of the project that
/// defines it as a plain class names it (`utils.AverageMeter`).
fn star_imported_class(cx: &Checker<'_, '_>, made: &ast::ExprCall) -> Option<String> {
    let Expr::Name(n) = &*made.func else { return None };
    if cx.model.binding_of(n).is_some() {
        return None;
    }
    let project = cx.types.project();
    // The last star import that binds it wins, as in Python.
    cx.module_body.iter().rev().find_map(|s| match s {
        Stmt::ImportFrom(i) if i.names.iter().any(|a| a.name.as_str() == "*") => {
            let module = i.module.as_ref().map_or("", |m| m.as_str());
            let dots = ".".repeat(i.level as usize);
            let class = if module.is_empty() {
                format!("{dots}{}", n.id)
            } else {
                format!("{dots}{module}.{}", n.id)
            };
            (project.is_module(&class) == crate::python::typing::Truth::No).then_some(class)
        }
        _ => None,
    })
}

/// Item `i` of what the function of this file that `c` calls returns, where each of its
/// `return`s is a tuple (`return ce_batch_loss, None`): the union of those items' provenance.
/// `None` when it is not such a function or a `return` is not a tuple.
fn returned_item(
    cx: &Checker<'_, '_>,
    c: &ast::ExprCall,
    i: usize,
    depth: usize,
    next: &dyn Fn(&Expr) -> Provenance,
) -> Option<Provenance> {
    let f = match cx.model.callee(c, cx.function)? {
        crate::python::model::Callee::Function(f) => f,
        crate::python::model::Callee::Class(_) => return None,
    };
    if depth > 12 {
        return None;
    }
    through_overrides(cx, f, |f| returned_item_of(cx, f, i, next))
}

/// What `returned` says of function `f`; of a method left to subclasses, the union of what it
/// says of their overrides (the call runs one of them).
fn through_overrides(
    cx: &Checker<'_, '_>,
    f: crate::python::model::FunctionId,
    returned: impl Fn(crate::python::model::FunctionId) -> Option<Provenance>,
) -> Option<Provenance> {
    let overrides = cx.model.overrides(f);
    if overrides.is_empty() {
        return returned(f);
    }
    overrides.into_iter().filter_map(returned).reduce(Provenance::union)
}

/// `self.get_input_embeddings()(input_ids)`, `self.language_model.get_output_embeddings()(h)`: in
/// a module's method, calling what a method of the module or of one of its parts hands out
/// calls one of its layers.
fn calls_a_layer_it_is_given(func: &Expr) -> bool {
    let Expr::Call(inner) = func else { return false };
    let Expr::Attribute(m) = &*inner.func else { return false };
    let mut receiver = &*m.value;
    while let Expr::Attribute(a) = receiver {
        receiver = &a.value;
    }
    matches!(receiver, Expr::Name(n) if n.id.as_str() == "self")
}

/// Where what a function of this file returns is, when it returns one value (not a tuple, which
/// [`returned_item`] takes item by item).
fn returned_value(
    cx: &Checker<'_, '_>,
    c: &ast::ExprCall,
    depth: usize,
    next: &dyn Fn(&Expr) -> Provenance,
) -> Option<Provenance> {
    let crate::python::model::Callee::Function(f) = cx.model.callee(c, cx.function)? else { return None };
    if depth > 12 {
        return None;
    }
    through_overrides(cx, f, |f| returned_value_of(cx, f, next))
}

/// [`returned_value`] of one function, worked out once.
fn returned_value_of(
    cx: &Checker<'_, '_>,
    f: crate::python::model::FunctionId,
    next: &dyn Fn(&Expr) -> Provenance,
) -> Option<Provenance> {
    // Worked out once per function, however many calls ask (a cycle of calls reads as nowhere).
    if let Some(known) = cx.returned_values.borrow().get(&f) {
        return known.unwrap_or(Some(Provenance::default()));
    }
    cx.returned_values.borrow_mut().insert(f, None);
    let cut_before = cx.provenance_cut.replace(false);
    let mut values = Vec::new();
    let mut single = true;
    each_stmt(&cx.model.function(f).def.body, &mut |s| {
        if let Stmt::Return(r) = s {
            match r.value.as_deref() {
                Some(Expr::Tuple(_)) => single = false,
                Some(v) if cx.kind_of(v).may_be_tensor() || holds_values(cx, v) => values.push(v),
                _ => {}
            }
        }
    });
    let p = single.then(|| values.into_iter().fold(Provenance::default(), |p, e| p.union(next(e))));
    let cut = cx.provenance_cut.get();
    cx.provenance_cut.set(cut_before || cut);
    if p.is_none_or(|p| p.on_accelerator) || !cut {
        cx.returned_values.borrow_mut().insert(f, Some(p));
    } else {
        cx.returned_values.borrow_mut().remove(&f);
    }
    p
}

/// Does the function call `scheduler.set_timesteps(.., device=d)` on this receiver with a device
/// other than the CPU?
fn timesteps_set_on_device(cx: &Checker<'_, '_>, scheduler: &Expr) -> bool {
    let Some(f) = cx.function else { return false };
    let receiver = cx.model.text(scheduler.range());
    cx.model.calls.iter().filter(|s| s.function == Some(f)).any(|s| {
        matches!(&*s.call.func, Expr::Attribute(m) if m.attr.as_str() == "set_timesteps"
            && cx.model.text(m.value.range()) == receiver)
            && s.call
                .arguments
                .find_keyword("device")
                .is_some_and(|d| !is_cpu_device(cx, &d.value) && !matches!(d.value, Expr::NoneLiteral(_)))
    })
}

/// A dict a function returns (`{"loss": loss, ..}`, `{k: t.to(device) ..}`, or a name bound to
/// one as a whole): where its values are.
fn holds_values(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    match e {
        Expr::Dict(_) | Expr::DictComp(_) => true,
        // (Not a dict filled item by item: what it is filled with is often text or numbers
        // taken from a batch.)
        Expr::Name(_) => name_binding(cx, e).is_some_and(|b| match cx.model.binding(b).kind {
            BindingKind::Assignment { value: Expr::Dict(d), part: Part::Whole, .. } => !d.items.is_empty(),
            BindingKind::Assignment { value: Expr::DictComp(_), part: Part::Whole, .. } => true,
            _ => false,
        }),
        _ => false,
    }
}

/// Item `i` of the tuples a function of this file returns ([`returned_item`]).
fn returned_item_of(
    cx: &Checker<'_, '_>,
    f: crate::python::model::FunctionId,
    i: usize,
    next: &dyn Fn(&Expr) -> Provenance,
) -> Option<Provenance> {
    let mut items = Vec::new();
    let mut tuples = true;
    each_stmt(&cx.model.function(f).def.body, &mut |s| {
        if let Stmt::Return(r) = s {
            match r.value.as_deref() {
                // A dict returned beside the tensors (`return loss, loss_stats`) is where what it
                // holds is.
                Some(Expr::Tuple(t)) if t.elts.len() > i => {
                    if cx.kind_of(&t.elts[i]).may_be_tensor() || holds_values(cx, &t.elts[i]) {
                        items.push(&t.elts[i]);
                    }
                }
                _ => tuples = false,
            }
        }
    });
    if !tuples {
        return None;
    }
    Some(items.into_iter().fold(Provenance::default(), |p, e| p.union(next(e))))
}

/// Does the call name a function of the project (of this file, or one the repository index
/// knows) that moves all it returns to the device ([`crate::python::project::returns_device`]:
/// `def to_cuda(*args): return [x.cuda() for x in args]`)?
pub(crate) fn returns_device_call(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> bool {
    match cx.model.callee(c, cx.function) {
        Some(crate::python::model::Callee::Function(f)) => *cx
            .moves_results
            .borrow_mut()
            .entry(f)
            .or_insert_with(|| crate::python::project::returns_device(cx.model.function(f).def)),
        Some(crate::python::model::Callee::Class(_)) => false,
        None => cx.callee_name(c).is_some_and(|q| cx.types.project().returns_device(&q)),
    }
}

/// The values a call is given, by position and by keyword.
fn call_inputs(c: &ast::ExprCall) -> impl Iterator<Item = &Expr> {
    c.arguments.args.iter().chain(c.arguments.keywords.iter().map(|k| &k.value))
}

/// What a call that moves its arguments to the device returns: on the device, requiring grad
/// where one of them does.
fn moved_arguments(c: &ast::ExprCall, next: &dyn Fn(&Expr) -> Provenance) -> Provenance {
    let requires_grad = call_inputs(c).any(|a| next(a).requires_grad);
    Provenance { on_accelerator: true, requires_grad }
}

/// Does the call name a function of the project: a top-level function of this file, or one of
/// another file that the repository index knows? `Some(true)` when every result it returns is
/// evidently on the host ([`crate::python::project::returns_host`]).
pub(crate) fn project_function(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> Option<bool> {
    if let Expr::Name(n) = &*c.func
        && let Some(b) = cx.model.binding_of(n)
        && let BindingKind::FunctionDef(f) = cx.model.binding(b).kind
    {
        let fun = cx.model.function(f);
        if fun.class.is_some() {
            return None;
        }
        let host = cx.host_functions();
        return Some(match fun.parent {
            None => host.contains(fun.name()),
            Some(_) => function_returns_host(cx, f),
        });
    }
    let q = cx.callee_name(c)?;
    let project = cx.types.project();
    project.function(&q).map(|_| project.returns_host(&q))
}

/// Does every result of a function of this file (nested, or a method) live on the host
/// ([`crate::python::project::returns_host`]), worked out once per function?
fn function_returns_host(cx: &Checker<'_, '_>, f: crate::python::model::FunctionId) -> bool {
    if let Some(&known) = cx.nested_host.borrow().get(&f) {
        return known;
    }
    let host = cx.host_functions();
    let torch = crate::python::project::torch_names(cx.module_body);
    let known = crate::python::project::returns_host(cx.model.function(f).def, &|n| host.contains(n), &torch);
    cx.nested_host.borrow_mut().insert(f, known);
    known
}

/// Does the call name a method of the module itself (`self.encode(x)`; also of a plain class, a
/// trainer's `self.train_batch(batch)`) or of a component it holds (`self.model.loss_function(..)`),
/// not one of a tensor's? Its result is where its inputs are, as a module's is.
fn calls_a_component_method(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> bool {
    let is_self = |e: &Expr| cx.types.receiver_class(e).is_some();
    let Expr::Attribute(method) = &*c.func else { return false };
    if api::tensor_method_returns_tensor(method.attr.as_str()) {
        return false;
    }
    match &*method.value {
        // `self.encode(x)` in a module, `self.train_batch(batch)` in a trainer (a plain class):
        // its own method, unless it hands back host values.
        receiver if is_self(receiver) => {
            let class = cx.function.and_then(|f| cx.model.function(f).class);
            let own = class.and_then(|class| cx.model.method(class, method.attr.as_str()));
            // (In a plain class, a method it defines: `self.host_loss(..)` may be an instance it
            // keeps, whose `__call__` is asked about elsewhere.)
            (cx.in_module_method()
                || (own.is_some()
                    && class
                        .is_some_and(|c| cx.types.is_module_class(c) == crate::python::typing::Truth::No)))
                && !own.is_some_and(|m| function_returns_host(cx, m))
        }
        Expr::Attribute(component) => {
            is_self(&component.value) && matches!(cx.kind_of(&method.value), Kind::Module | Kind::Unknown)
        }
        _ => false,
    }
}

/// Does the call call a method of an object the function was given (`training_box.forward_process(
/// x, y)`, `nets.discriminator(x)`: a parameter of unknown kind, not `self`), other than a
/// tensor's own method? Like a model passed in, its result is where its inputs are.
fn calls_a_collaborator(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> bool {
    let Expr::Attribute(method) = &*c.func else { return false };
    if api::tensor_method_returns_tensor(method.attr.as_str())
        || cx.types.receiver_class(&method.value).is_some()
    {
        return false;
    }
    // The object itself, or one of its attributes (`nets.discriminator`).
    let object = match &*method.value {
        Expr::Attribute(a) => &*a.value,
        e => e,
    };
    name_binding(cx, object).is_some_and(|b| {
        matches!(cx.model.binding(b).kind, BindingKind::Parameter { .. })
            && cx.types.binding_kind(b) == Kind::Unknown
    })
}

/// Does the call call an instance of a class of this file that defines `__call__` (`self.loss =
/// YOLOLoss(..)`, then `self.loss(preds, targets)`), unless that method hands back host values?
/// Its result is where its inputs are, as a function of the project's is.
fn calls_an_instance(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> bool {
    cx.instance_made_by(&c.func)
        .and_then(|made| cx.model.local_class(&made.func))
        .and_then(|class| cx.model.method(class, "__call__"))
        .is_some_and(|m| !function_returns_host(cx, m))
}

/// Is the binding an empty dict or list (`losses = {}`, `outs = []`, `dict()`), to be filled item
/// by item (what the file puts into it: [`each_put`])?
fn filled_container(cx: &Checker<'_, '_>, b: BindingId) -> bool {
    let BindingKind::Assignment { value, part: Part::Whole, .. } = cx.model.binding(b).kind else {
        return false;
    };
    match value {
        Expr::Dict(d) => d.items.is_empty(),
        Expr::List(l) => l.elts.is_empty(),
        Expr::Call(c) => {
            c.arguments.is_empty()
                && cx.callee_name(c).is_some_and(|q| matches!(q.as_ref(), "builtins.dict" | "builtins.list"))
        }
        _ => false,
    }
}

/// Does the file put into the container bound by `b` its own items moved to an accelerator
/// (`batch[k] = batch[k].to(device)`, `.cuda()`)?
fn moved_item_by_item(cx: &Checker<'_, '_>, b: BindingId) -> bool {
    cx.puts.get(&b).into_iter().flatten().take(16).any(|v| {
        let Some((call, receiver, method)) = method_call(v) else { return false };
        let own_item = matches!(receiver, Expr::Subscript(s) if name_binding(cx, &s.value) == Some(b));
        let target = call.arguments.args.first().or_else(|| keyword(call, "device"));
        own_item
            && match method {
                "cuda" => true,
                "to" => target.is_some_and(|t| !is_cpu_device(cx, t) && !is_dtype(cx, t)),
                _ => false,
            }
    })
}

/// Each value the file puts into the container bound by `b`: `d[k] = v`, `d.append(v)` (at most
/// 16; a value that reads the container itself is left out).
fn each_put<'a>(cx: &Checker<'_, 'a>, b: BindingId, f: &mut dyn FnMut(&'a Expr)) {
    let reads_container = |v: &Expr| {
        let mut found = false;
        any_subexpr(v, &mut |sub| {
            found |= name_binding(cx, sub) == Some(b);
            !found
        });
        found
    };
    for v in cx.puts.get(&b).into_iter().flatten().filter(|v| !reads_container(v)).take(16) {
        f(v);
    }
}

/// What the statements of a file put into each container a name holds (`d[k] = v`,
/// `d.append(v)`), by the container's binding.
pub(crate) fn container_puts<'a>(model: &Model<'a>, body: &'a [Stmt]) -> FxHashMap<BindingId, Vec<&'a Expr>> {
    let mut puts: FxHashMap<BindingId, Vec<&'a Expr>> = FxHashMap::default();
    let mut put = |container: &Expr, v: &'a Expr| {
        if let Expr::Name(n) = container
            && let Some(c) = model.binding_of(n)
        {
            puts.entry(c).or_default().push(v);
        }
    };
    // Every statement of the file, function and class bodies included.
    fn walk<'a>(body: &'a [Stmt], depth: usize, f: &mut dyn FnMut(&'a Stmt)) {
        each_stmt(body, &mut |s| {
            f(s);
            if depth < crate::python::model::MAX_DEPTH {
                match s {
                    Stmt::FunctionDef(d) => walk(&d.body, depth + 1, f),
                    Stmt::ClassDef(d) => walk(&d.body, depth + 1, f),
                    _ => {}
                }
            }
        });
    }
    walk(body, 0, &mut |s| match s {
        Stmt::Assign(a) => {
            for t in &a.targets {
                if let Expr::Subscript(sub) = t {
                    put(&sub.value, &a.value);
                }
            }
        }
        Stmt::Expr(e) => {
            if let Some((call, receiver, "append" | "extend" | "insert")) = method_call(&e.value)
                && let Some(v) = call.arguments.args.last()
            {
                put(receiver, v);
            }
        }
        _ => {}
    });
    puts
}

fn binding_value_provenance(
    cx: &Checker<'_, '_>,
    e: &Expr,
    b: BindingId,
    depth: usize,
    next: impl Fn(&Expr) -> Provenance,
) -> Provenance {
    const NONE: Provenance = Provenance { on_accelerator: false, requires_grad: false };
    let binding = cx.model.binding(b);
    match binding.kind {
        BindingKind::Assignment { value, part: Part::Whole, .. } => next(value),
        BindingKind::Assignment { value, part: Part::Element(i), .. } => match value {
            // `x, y = x.to(device), y.to(device)`
            Expr::Tuple(t) => t.elts.get(i).map(next).unwrap_or(NONE),
            // `scores, _ = pack_padded_sequence(scores, lengths)`: the data where the input is, the
            // batch sizes on the host.
            Expr::Call(c) if i > 0 && cx.callee_name(c).is_some_and(|q| api::host_fields_after_first(&q)) => {
                NONE
            }
            // `x, lengths = to_cuda(x, lengths)`: a function of the project that moves all it
            // returns to the device.
            Expr::Call(c) if returns_device_call(cx, c) => moved_arguments(c, &next),
            // `loss, logs = self.train_batch(batch)`: item `i` of the tuples a function of this
            // file returns.
            Expr::Call(c) if let Some(p) = returned_item(cx, c, i, depth, &next) => p,
            // `labels, boxes, scores, mask = self.assigner(..)`: the outputs of a module (whose
            // `forward` returns a tuple) are where its weights are.
            Expr::Call(c) if cx.kind_of(&c.func) == Kind::Module && cx.kind_of(e).may_be_tensor() => {
                // Item by item where the module's `forward` is in this file (`return x, (h, w)`:
                // sizes; `logits.argmax(-1)`: no grad); else on the device, grad unknown.
                cx.types
                    .forward_of(&c.func)
                    .filter(|_| depth <= 12)
                    .and_then(|forward| returned_item_of(cx, forward, i, &next))
                    .unwrap_or(Provenance { on_accelerator: true, requires_grad: false })
            }
            _ if cx.kind_of(e).may_be_tensor() => next(value),
            _ => NONE,
        },
        BindingKind::AugAssignment { value, .. } => {
            let old = binding.shadowed.map(|s| binding_provenance(cx, s, depth + 1)).unwrap_or_default();
            old.union(next(value))
        }
        // `for k, v in losses.items()`, `for v in losses.values()`: where the container's values
        // are; the keys are not tensors.
        // `for a, b in zip(xs, ys)`, `for i, x in enumerate(xs)`, `for x in xs`: where the
        // sequence's elements are.
        BindingKind::LoopVar { iter: iter @ Expr::Call(c), part } => match (method_call(iter), part) {
            (Some((_, receiver, "items")), Part::Element(1)) | (Some((_, receiver, "values")), _) => {
                next(receiver)
            }
            // A module's parameters and buffers are where the module is.
            (Some((_, receiver, "parameters" | "buffers")), Part::Whole)
            | (Some((_, receiver, "named_parameters" | "named_buffers")), Part::Element(1)) => next(receiver),
            _ => match (cx.callee_name(c).as_deref(), part) {
                (Some("builtins.zip"), Part::Element(i)) => c.arguments.args.get(i).map(next).unwrap_or(NONE),
                (Some("builtins.enumerate"), Part::Element(1)) => {
                    c.arguments.args.first().map(next).unwrap_or(NONE)
                }
                _ => NONE,
            },
        },
        BindingKind::LoopVar { iter: iter @ (Expr::Name(_) | Expr::Attribute(_)), part: Part::Whole } => {
            next(iter)
        }
        // `for p in group["params"]` in a method of an optimizer: the model's parameters, on the
        // accelerator where the model is, and requiring grad (outside `torch.no_grad()`).
        BindingKind::LoopVar { iter: Expr::Subscript(s), part: Part::Whole }
            if matches!(&*s.slice, Expr::StringLiteral(k) if k.value.to_str() == "params")
                && cx.function.is_some_and(|f| {
                    crate::python::checker::optimizer_method(cx.model, &cx.types.project(), f)
                }) =>
        {
            Provenance { on_accelerator: true, requires_grad: true }
        }
        BindingKind::Parameter { function: Some(f), position, .. } => {
            // The inputs of a forward pass are on the model's device.
            let fun = cx.model.function(f);
            let is_self = position == 0 && fun.receiver == Some(binding.name);
            let forward = (fun.name() == "forward" && fun.class.is_some())
                || crate::python::checker::batch_step(cx.model, &cx.types.project(), f);
            // A function another file calls at every step: where that file's arguments are.
            let passed = match cx.hot_of(f) {
                Some(crate::python::checker::Hot::CalledElsewhere(i)) => {
                    cx.facts.elsewhere.get(i).is_some_and(|c| {
                        let params = &fun.def.parameters;
                        let positional: Vec<&str> = params
                            .posonlyargs
                            .iter()
                            .chain(&params.args)
                            .map(|p| p.parameter.name.as_str())
                            .collect();
                        let named: Vec<&str> = positional
                            .iter()
                            .copied()
                            .chain(params.kwonlyargs.iter().map(|p| p.parameter.name.as_str()))
                            .collect();
                        let is =
                            |p: Option<&ast::Parameter>| p.is_some_and(|p| p.name.as_str() == binding.name);
                        let param = if is(params.vararg.as_deref()) {
                            crate::python::project::Param::Args
                        } else if is(params.kwarg.as_deref()) {
                            crate::python::project::Param::Kwargs
                        } else {
                            crate::python::project::Param::Named { position, name: binding.name }
                        };
                        c.passes(param, positional.len(), &named)
                    })
                }
                // A function or method called in a loop of this file (`self.step(batch)`): where
                // that call's argument is.
                Some(crate::python::checker::Hot::CalledInLoop(at)) => cx.facts.calls_to[f.index()]
                    .iter()
                    .filter_map(|&i| cx.model.calls.get(i))
                    .find(|s| s.call.range() == at)
                    .and_then(|s| argument_for(s.call, fun, position, binding.name))
                    .is_some_and(|a| next(a).on_accelerator),
                _ => false,
            };
            // A helper of a forward pass (`self._qk(q, k)`): where the forward passes call it with.
            let from_forward = !forward
                && !is_self
                && !passed
                && cx.is_forward(f)
                // The first few hundred calls say it (a file calling a helper from forward tens
                // of thousands of times would make every read here scan them all).
                && cx.facts.calls_to[f.index()].iter().take(256).filter_map(|&i| cx.model.calls.get(i)).any(|s| {
                    s.function.is_some_and(|g| cx.is_forward(g))
                        && argument_for(s.call, fun, position, binding.name).is_some_and(|a| next(a).on_accelerator)
                });
            // A function that runs its own loop of steps (`def generate(model, idx, n):` with a
            // token loop): where this file's calls of it pass, worked out once per parameter.
            let from_callers = !forward
                && !is_self
                && !passed
                && !from_forward
                && cx.hot_of(f).is_none()
                && passed_by_callers(cx, f, fun, position, binding.name, &next);
            Provenance {
                on_accelerator: (forward && !is_self) || passed || from_forward || from_callers,
                requires_grad: false,
            }
        }
        _ => NONE,
    }
}

/// Does some call of `f` in this file (the first few hundred) pass a tensor on the accelerator
/// for the parameter at `position`? Memoised per parameter: a chain of helpers each passing its
/// parameter on is one walk, not one per query; a cycle of calls reads as no. A "no" reached
/// only because a query hit its limits is not kept.
fn passed_by_callers(
    cx: &Checker<'_, '_>,
    f: crate::python::model::FunctionId,
    fun: &crate::python::model::Function<'_>,
    position: usize,
    name: &str,
    next: &impl Fn(&Expr) -> Provenance,
) -> bool {
    if let Some(known) = cx.passed_by_callers.borrow().get(&(f, position)) {
        return known.unwrap_or(false);
    }
    cx.passed_by_callers.borrow_mut().insert((f, position), None);
    let cut_before = cx.provenance_cut.replace(false);
    // Calls that pass the same name (`f(model, x)` sixty times) are asked about once.
    let mut asked: Vec<BindingId> = Vec::new();
    let passed = cx.facts.calls_to[f.index()]
        .iter()
        .take(256)
        .filter_map(|&i| cx.model.calls.get(i))
        .filter_map(|s| argument_or_handed_on(cx, s.call, fun, position, name))
        .filter(|a| match name_binding(cx, a) {
            Some(b) if asked.contains(&b) => false,
            Some(b) => {
                asked.push(b);
                true
            }
            None => true,
        })
        .any(|a| next(a).on_accelerator);
    let cut = cx.provenance_cut.get();
    cx.provenance_cut.set(cut_before || cut);
    if passed || !cut {
        cx.passed_by_callers.borrow_mut().insert((f, position), Some(passed));
    } else {
        cx.passed_by_callers.borrow_mut().remove(&(f, position));
    }
    passed
}

/// `packed[1]` where `packed` is (bound to) what `pack_padded_sequence` or `pad_packed_sequence`/// `packed[1]` where `packed` is (bound to) what `pack_padded_sequence` or `pad_packed_sequence`
/// returns: a field after the data, always on the host ([`api::host_fields_after_first`]).
fn host_field(cx: &Checker<'_, '_>, s: &ast::ExprSubscript) -> bool {
    let Expr::NumberLiteral(ast::ExprNumberLiteral { value: ast::Number::Int(i), .. }) = &*s.slice else {
        return false;
    };
    if i.as_u64().is_none_or(|i| i == 0) {
        return false;
    }
    let value = match &*s.value {
        v @ Expr::Name(_) => match name_binding(cx, v).map(|b| cx.model.binding(b).kind) {
            Some(BindingKind::Assignment { value, part: Part::Whole, .. }) => value,
            _ => return false,
        },
        v => v,
    };
    matches!(value, Expr::Call(c) if cx.callee_name(c).is_some_and(|q| api::host_fields_after_first(&q)))
}

/// The argument a call passes for the parameter at `position` (named `name`) of `fun`: by
/// keyword, or by position (a method called on its receiver, `self.m(a)`, takes `self` from it,
/// and `__init__` from the instance its call makes).
/// `None` when a `*args` before it hides where it lands.
pub(crate) fn argument_for<'a>(
    call: &'a ast::ExprCall,
    fun: &crate::python::model::Function<'_>,
    position: usize,
    name: &str,
) -> Option<&'a Expr> {
    if let Some(k) = call.arguments.find_keyword(name) {
        return Some(&k.value);
    }
    // `obj.m(a)`, `Class(a)` for its `__init__`, or `crit(a)` for its `__call__`: the receiver
    // is not among the arguments.
    let bound = fun.receiver.is_some()
        && (matches!(&*call.func, Expr::Attribute(_)) || matches!(fun.name(), "__init__" | "__call__"));
    let at = if bound { position.checked_sub(1)? } else { position };
    let args = &call.arguments.args;
    if args.iter().take(at).any(|a| matches!(a, Expr::Starred(_))) {
        return None;
    }
    args.get(at)
}

/// [`argument_for`], or, where the call hands on its caller's own keyword parameters
/// (`self.fwd(**kwargs)` in a `forward(self, mode, **kwargs)` that dispatches on a mode) and does
/// not give the parameter by position, those keywords; not a dict of values of all kinds built
/// there (`f(**stats)`).
fn argument_or_handed_on<'a>(
    cx: &Checker<'_, '_>,
    call: &'a ast::ExprCall,
    fun: &crate::python::model::Function<'_>,
    position: usize,
    name: &str,
) -> Option<&'a Expr> {
    argument_for(call, fun, position, name).or_else(|| {
        let handed = call.arguments.keywords.iter().find(|k| k.arg.is_none())?;
        name_binding(cx, &handed.value)
            .is_some_and(|b| {
                matches!(cx.model.binding(b).kind, BindingKind::Parameter { variadic: true, .. })
            })
            .then_some(&handed.value)
    })
}

/// Is the binding evidently a loss on the device, which the host never needs: `.backward()` is
/// called on it, or a Lightning `training_step` returns it (Lightning backpropagates it)?
pub(crate) fn binding_is_device_loss(cx: &Checker<'_, '_>, b: BindingId) -> bool {
    if cx.facts.backward.contains(&b) {
        return true;
    }
    let Some(f) =
        cx.function.filter(|&f| crate::python::checker::batch_step(cx.model, &cx.types.project(), f))
    else {
        return false;
    };
    if let Some(names) = cx.returned_names.borrow().get(&f) {
        return names.contains(&b);
    }
    let mut names = Vec::new();
    // The statements looked at: any real `training_step`'s (beyond them: not known to be
    // returned).
    let mut budget = 4096usize;
    each_stmt(&cx.model.function(f).def.body, &mut |s| {
        budget = budget.saturating_sub(1);
        if budget == 0 {
            return;
        }
        if let Stmt::Return(ast::StmtReturn { value: Some(v), .. }) = s {
            any_subexpr(v, &mut |e| {
                if let Expr::Name(n) = e
                    && let Some(d) = cx.model.definition_of(n)
                {
                    names.push(d);
                }
                true
            });
        }
    });
    let returned = names.contains(&b);
    cx.returned_names.borrow_mut().insert(f, names);
    returned
}

fn binding_provenance(cx: &Checker<'_, '_>, b: BindingId, depth: usize) -> Provenance {
    match cx.model.binding(b).kind {
        BindingKind::Assignment { value, part: Part::Whole, .. } => provenance_at(cx, value, depth),
        _ => Provenance::default(),
    }
}

/// A dtype (`torch.float16`, or a name or attribute named for one: `dtype`, `x.dtype`), which
/// `.to(..)` takes for a conversion rather than a move.
pub(crate) fn is_dtype(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    // `x.to(dtype)`, `mask.to(inputs_embeds.dtype)`, `t.to(self.compute_dtype)`: named for one.
    let named = |name: &str| name == "dtype" || name.ends_with("_dtype");
    match e {
        Expr::Name(n) if named(n.id.as_str()) => return true,
        Expr::Attribute(a) if named(a.attr.as_str()) => return true,
        _ => {}
    }
    cx.model.canonical_name(e).is_some_and(|q| {
        q.strip_prefix("torch.").is_some_and(|d| {
            matches!(
                d,
                "float16"
                    | "half"
                    | "float32"
                    | "float"
                    | "float64"
                    | "double"
                    | "bfloat16"
                    | "int64"
                    | "long"
                    | "int32"
                    | "int"
                    | "int16"
                    | "short"
                    | "bool"
                    | "uint8"
                    | "int8"
                    | "complex64"
                    | "complex128"
            )
        })
    })
}

/// The DataLoader a value drawn from a loop over one comes from: `x` in `for x, y in loader`,
/// `batch` in `for batch in loader`, `x` in `x, y = batch`, `batch["x"]`.
pub(crate) fn batch_loader<'e>(cx: &Checker<'_, 'e>, e: &Expr) -> Option<&'e ast::ExprCall> {
    let root = chain_root(e);
    let b = name_binding(cx, root)?;
    match cx.model.binding(b).kind {
        BindingKind::LoopVar { iter, .. } => loader_of(cx, iter),
        BindingKind::Assignment { value, part: Part::Element(_), .. } => {
            let batch = name_binding(cx, chain_root(value))?;
            match cx.model.binding(batch).kind {
                BindingKind::LoopVar { iter, .. } => loader_of(cx, iter),
                _ => None,
            }
        }
        _ => None,
    }
}

/// How a tensor's device was fixed when it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fixed {
    /// No `device=`: the default device.
    Default,
    /// `device="cpu"`.
    Cpu,
}

/// A creation call that makes a tensor with more than 0 dimensions on a fixed device.
pub(crate) fn fixed_creation(cx: &Checker<'_, '_>, c: &ast::ExprCall, q: &str) -> Option<Fixed> {
    let how = match keyword(c, "device") {
        None => Fixed::Default,
        Some(d) if is_cpu_device(cx, d) => Fixed::Cpu,
        Some(_) => return None,
    };
    if api::creation_takes_data(q) && q != "torch.from_numpy" {
        let data = c.arguments.args.first().or_else(|| keyword(c, "data"))?;
        match data {
            // A list of values makes a 1-dim tensor or more.
            Expr::List(_) | Expr::Tuple(_) | Expr::ListComp(_) => {}
            _ => match cx.kind_of(data) {
                // `as_tensor(x)` of a tensor keeps it where it is; a Python scalar makes a 0-dim
                // tensor, which CUDA ops accept from the CPU.
                Kind::Numpy | Kind::Other => {}
                _ => return None,
            },
        }
    } else {
        // `torch.zeros(())` and `torch.zeros([])` are 0-dim; `torch.empty(0)` and
        // `torch.empty([0])` hold nothing (placeholders).
        let shape = c.arguments.args.first();
        let zero = |e: &Expr| matches!(e, Expr::NumberLiteral(n) if matches!(&n.value, ast::Number::Int(i) if i.as_u64() == Some(0)));
        let empty_or_zero = match shape {
            Some(Expr::Tuple(t)) => t.elts.is_empty() || (t.elts.len() == 1 && zero(&t.elts[0])),
            Some(Expr::List(l)) => l.elts.is_empty() || (l.elts.len() == 1 && zero(&l.elts[0])),
            Some(e) => zero(e) && c.arguments.args.len() == 1,
            None => false,
        };
        if empty_or_zero {
            return None;
        }
    }
    Some(how)
}

/// Is the callee a value (`model(x)`, `self.net(x)`), almost always a module?
pub(crate) fn calls_a_value(cx: &Checker<'_, '_>, c: &ast::ExprCall) -> bool {
    crate::python::checker::calls_a_value(cx.model, &cx.types, c)
}

/// The words of a Python name: split at `_`, and in CamelCase at each new capital word
/// (`CUDAAccelerator`: `CUDA`, `Accelerator`; `to_cuda`: `to`, `cuda`).
pub(crate) fn name_words(name: &str) -> impl Iterator<Item = &str> {
    name.split(|c: char| !c.is_ascii_alphanumeric()).flat_map(|part| {
        let b = part.as_bytes();
        let mut start = 0;
        std::iter::from_fn(move || {
            if start >= b.len() {
                return None;
            }
            // The next cut: a capital after a small letter, or the last capital of an acronym
            // before a small letter.
            let cut = (start + 1..b.len())
                .find(|&i| {
                    let (prev, cur) = (b[i - 1], b[i]);
                    (prev.is_ascii_lowercase() && cur.is_ascii_uppercase())
                        || (prev.is_ascii_uppercase()
                            && cur.is_ascii_uppercase()
                            && b.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()))
                })
                .unwrap_or(b.len());
            let word = &part[start..cut];
            start = cut;
            Some(word)
        })
    })
}

/// Is `word` (of a name: [`name_words`]) the name of an accelerator: `cuda` or `gpu`, or `mps`
/// when `mps`?
pub(crate) fn names_accelerator(word: &str, mps: bool) -> bool {
    if mps {
        word.eq_ignore_ascii_case("mps")
    } else {
        word.eq_ignore_ascii_case("cuda") || word.eq_ignore_ascii_case("gpu")
    }
}

/// Is the node in an evaluation pass: a `for` loop that trains nothing (no `backward()`, no
/// `.step(..)` in its body), in a function named for evaluation (`evaluate`, `validate`, `vali`,
/// `test_epoch`) or in a file named for it (`val.py`; not in a function named for training, not
/// in a sampler's loop over a schedule walked backwards, not in a function another file calls at
/// every step), or over data (not `range(..)`) under `no_grad` or in a function named for
/// prediction (`predict`, `inference`)? Such a pass runs now and then, between training epochs or
/// once at the end, so a read per batch there costs little; generation loops (over `range(..)`,
/// or `while`) are left to the rule.
pub(crate) fn in_evaluation_pass(cx: &Checker<'_, '_>) -> bool {
    // An optimizer's methods run under `torch.no_grad()` over its parameters at every training
    // step: no evaluation.
    if cx.function.is_some_and(|f| crate::python::checker::optimizer_method(cx.model, &cx.types.project(), f))
    {
        return false;
    }
    // A function named for evaluation and not for training (`train_and_test` trains).
    let named = |prefixes: &[&str]| {
        cx.enclosing_functions().any(|f| {
            let words = || name_words(cx.model.function(f).name()).map(str::to_ascii_lowercase);
            words().any(|w| prefixes.iter().any(|p| w.starts_with(p)))
                && !words().any(|w| w.starts_with("train"))
        })
    };
    let evaluation = named(&["eval", "vali", "test"]);
    // A file named for evaluation (`val.py`): unless the function is named for training (a
    // linear probe's `train`) or another file calls it at every step; not its sampling loops
    // over a schedule walked backwards.
    let file = cx.facts.file_named_for_evaluation
        && !matches!(cx.hot(), Some(crate::python::checker::Hot::CalledElsewhere(_)))
        && !cx.enclosing_functions().any(|f| {
            name_words(cx.model.function(f).name())
                .any(|w| crate::python::checker::names_training(&w.to_ascii_lowercase()))
        });
    let over_data = cx.no_grad > 0 || named(&["predict", "infer"]);
    // A helper of such a file without a loop of its own runs where the file's loops call it
    // (`process_batch(predn, labelsn, iouv)` for each image of a validation batch), unless other
    // files call into the file at every step (`likelihood_eval.py`'s losses, from a model's), or
    // the file trains too (`test_agent.py`, whose `select_action` acts in training and testing).
    // Only a helper this file's loops call (not a module's `forward`, nor a framework's step), and
    // none of them a sampling loop walked backwards.
    (file
        && cx.loops.is_empty()
        && cx.facts.elsewhere.is_empty()
        && !cx.facts.trains
        && matches!(cx.hot(), Some(crate::python::checker::Hot::CalledInLoop(_)))
        && cx.function.is_some_and(|f| {
            !cx.facts.calls_to[f.index()].iter().take(256).filter_map(|&i| cx.model.calls.get(i)).any(|site| {
                std::iter::successors(site.in_loop, |&l| cx.model.loop_(l).parent).any(|l| {
                    matches!(cx.model.loop_(l).stmt, Stmt::For(f) if walks_backwards(cx, &f.iter))
                })
            })
        }))
        || ((evaluation || file || over_data)
        && cx.loops.iter().any(|&l| {
            let Stmt::For(f) = cx.model.loop_(l).stmt else { return false };
            !trains(&f.body)
                && (evaluation || (file && !walks_backwards(cx, &f.iter)) || !is_range(cx, &f.iter))
        }))
        // `def test(): model.eval(); out = model(data.x, ..); acc = int(..)`: an evaluation of
        // the whole data set at once (no loop of its own), called between training epochs.
        || (evaluation
            && cx.loops.is_empty()
            && cx.function.is_some_and(|f| {
                let body = &cx.model.function(f).def.body;
                !trains(body) && (cx.no_grad > 0 || body.iter().any(|s| mode_call(s) == Some(Mode::Eval)))
            }))
        || cx.loops.iter().any(|&l| {
            // `model.eval()` then `for batch in eval_dataloader:` in a script's main function.
            if let Some(&known) = cx.evaluates.borrow().get(&l) {
                return known;
            }
            let known = loop_evaluates(cx, l);
            cx.evaluates.borrow_mut().insert(l, known);
            known
        })
        || called_once_per_input(cx)
        || cx.loops.iter().any(|&l| {
            // `for text in sentences: noise = torch.randn(..).to(device); wav = inference(text, noise)`:
            // the loop hands inputs to a prediction one after another.
            let Stmt::For(f) = cx.model.loop_(l).stmt else { return false };
            if is_range(cx, &f.iter) {
                return false;
            }
            // Asked at every place of the loop: its body is read once.
            if let Some(&known) = cx.calls_prediction.borrow().get(&l) {
                return known;
            }
            let known = !trains(&f.body) && !cx.loop_steps_training(l) && calls_prediction(&f.body);
            cx.calls_prediction.borrow_mut().insert(l, known);
            known
        })
}

/// Does the loop `l` walk data (not `range(..)`), train nothing, and either walk data named for
/// evaluation (`eval_dataloader`, `val_loader`, `testloader`) or start after a statement that puts
/// a model in evaluation mode (`model.eval()`, `model.train(False)`), with no `.train()` between,
/// in its block or a block around it within the function?
fn loop_evaluates(cx: &Checker<'_, '_>, l: crate::python::model::LoopId) -> bool {
    let stmt = cx.model.loop_(l).stmt;
    let Stmt::For(f) = stmt else { return false };
    if trains(&f.body) || cx.loop_steps_training(l) || is_range(cx, &f.iter) {
        return false;
    }
    if names_evaluation_data(&f.iter) {
        return true;
    }
    // `model.eval()`, then `for step in tqdm(step_sequence):` taking gradients through a helper:
    // an optimisation over steps (an attack, a fit of inputs), not a pass over data.
    let steps = |e: &Expr| {
        any_subexpr_is(e, |e| {
            let name = match e {
                Expr::Name(n) => n.id.as_str(),
                Expr::Attribute(a) => a.attr.as_str(),
                _ => return false,
            };
            name_words(name).any(|w| {
                let w = w.to_ascii_lowercase();
                ["step", "steps", "epoch", "epochs", "iteration", "iterations", "iter", "iters", "it"]
                    .contains(&w.as_str())
            })
        })
    };
    if steps(&f.target) || steps(&f.iter) {
        return false;
    }
    let Some(mut at) = cx.parents.iter().rposition(|n| matches!(n, Node::Stmt(s) if std::ptr::eq(*s, stmt)))
    else {
        return false;
    };
    loop {
        let Some((block, place)) = cx.block_of(at) else { return false };
        for s in block[..place].iter().rev() {
            match mode_call(s) {
                Some(Mode::Eval) => return true,
                Some(Mode::Train) => return false,
                None => {}
            }
        }
        // Out to the statement around the block, not past the function's `def`.
        let Some(outer) = cx.parents[..at].iter().rposition(|n| matches!(n, Node::Stmt(_))) else {
            return false;
        };
        if matches!(cx.parents[outer], Node::Stmt(Stmt::FunctionDef(_) | Stmt::ClassDef(_))) {
            return false;
        }
        at = outer;
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Eval,
    Train,
}

/// `x.eval()` or `x.train(False)` (evaluation mode), `x.train()` or `x.train(True)` (training
/// mode), as a statement.
fn mode_call(s: &Stmt) -> Option<Mode> {
    let Stmt::Expr(e) = s else { return None };
    let Expr::Call(c) = &*e.value else { return None };
    let Expr::Attribute(a) = &*c.func else { return None };
    let args = &c.arguments;
    match (a.attr.as_str(), &args.args[..]) {
        ("eval", []) if args.keywords.is_empty() => Some(Mode::Eval),
        ("train", []) if args.keywords.is_empty() => Some(Mode::Train),
        ("train", [Expr::BooleanLiteral(b)]) => Some(if b.value { Mode::Train } else { Mode::Eval }),
        _ => None,
    }
}

/// Does the iterable name evaluation data: a name or attribute one of whose words, less a
/// loader's or data set's suffix, is `eval`, `val`, `valid`, `validation`, `test` or `dev`
/// (`eval_dataloader`, `self.val_loader`, `testloader`, `enumerate(dev_batches)`)?
fn names_evaluation_data(iter: &Expr) -> bool {
    const WHAT: &[&str] = &["eval", "evaluation", "val", "valid", "validation", "test", "testing", "dev"];
    const SUFFIXES: &[&str] =
        &["dataloader", "loader", "dataset", "data", "set", "batches", "iter", "dl", "ds"];
    let names_it = |name: &str| {
        let lower = name.to_ascii_lowercase();
        name_words(name).any(|w| {
            let w = w.to_ascii_lowercase();
            let stem =
                SUFFIXES.iter().find_map(|x| w.strip_suffix(x).filter(|s| !s.is_empty())).unwrap_or(&w);
            // `dev` alone may be a device (`for i in dev_ids`): data only beside a data word.
            WHAT.contains(&stem)
                && (stem != "dev" || ["loader", "data", "batch", "example"].iter().any(|d| lower.contains(d)))
        })
    };
    let mut found = false;
    any_subexpr(iter, &mut |e| {
        match e {
            Expr::Name(n) => found |= names_it(n.id.as_str()),
            Expr::Attribute(x) => found |= names_it(x.attr.as_str()),
            _ => {}
        }
        !found
    });
    found
}

/// Is a function's name one of prediction or evaluation (`inference`, `LFinference`,
/// `predict_batch`, `evaluate`, `validate`, `test_epoch`), and not of training?
fn names_prediction(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let words = || name_words(name).map(str::to_ascii_lowercase);
    (lower.contains("infer")
        || lower.contains("predict")
        || words().any(|w| ["eval", "vali", "test"].iter().any(|p| w.starts_with(p))))
        && !words().any(|w| w.starts_with("train"))
}

/// Does the body call a function named for prediction ([`names_prediction`])?
fn calls_prediction(body: &[Stmt]) -> bool {
    let mut found = false;
    each_stmt(body, &mut |s| {
        let mut look = |e: &Expr| {
            any_subexpr(e, &mut |e| {
                if let Expr::Call(c) = e {
                    let name = match &*c.func {
                        Expr::Name(n) => n.id.as_str(),
                        Expr::Attribute(a) => a.attr.as_str(),
                        _ => "",
                    };
                    found |= names_prediction(name);
                }
                !found
            });
        };
        match s {
            Stmt::Expr(e) => look(&e.value),
            Stmt::Assign(a) => look(&a.value),
            Stmt::AugAssign(a) => look(&a.value),
            Stmt::AnnAssign(a) => a.value.iter().for_each(|v| look(v)),
            _ => {}
        }
    });
    found
}

/// Is the current function run by loops over inputs only, through a function named for
/// prediction or evaluation (`for text in sentences: wav = inference(text)` in a demo, and the
/// helpers `inference` calls)? Such a loop takes one input after another, as an evaluation pass
/// over data does: it trains nothing and walks data, not `range(..)`. Every call of the function
/// in this file must be one (a call from a training loop runs it at every step), and a loop
/// inside the function itself (over tokens, over denoising steps) is the rule's, as above.
fn called_once_per_input(cx: &Checker<'_, '_>) -> bool {
    cx.loops.is_empty()
        && matches!(cx.hot(), Some(crate::python::checker::Hot::CalledInLoop(_)))
        && cx.function.is_some_and(|f| runs_per_input(cx, f, false, 0))
}

/// [`called_once_per_input`] for `f`, `named` when a function on the way to it is named for
/// prediction.
fn runs_per_input(
    cx: &Checker<'_, '_>,
    f: crate::python::model::FunctionId,
    named: bool,
    depth: usize,
) -> bool {
    use crate::python::checker::Hot;
    if depth > 8 || !matches!(cx.hot_of(f), Some(Hot::CalledInLoop(_))) {
        return false;
    }
    let named = named || names_prediction(cx.model.function(f).name());
    if let Some(&known) = cx.per_input.borrow().get(&(f, named)) {
        return known;
    }
    let sites = &cx.facts.calls_to[f.index()];
    let known = !sites.is_empty()
        && sites.len() <= 64
        && sites.iter().all(|&i| {
            let Some(site) = cx.model.calls.get(i) else { return false };
            match site.in_loop {
                // Every loop around the call trains nothing; the innermost walks data.
                Some(l) => {
                    let Stmt::For(each) = cx.model.loop_(l).stmt else { return false };
                    let mut around = Some(l);
                    let mut trains_around = false;
                    while let Some(at) = around {
                        let body = match cx.model.loop_(at).stmt {
                            Stmt::For(x) => &x.body[..],
                            Stmt::While(x) => &x.body[..],
                            _ => &[][..],
                        };
                        trains_around |= trains(body);
                        around = cx.model.loop_(at).parent;
                    }
                    named && !trains_around && !is_range(cx, &each.iter)
                }
                // Called once where it is (the top level), or by a function run per input.
                None => site.function.is_none_or(|caller| runs_per_input(cx, caller, named, depth + 1)),
            }
        });
    cx.per_input.borrow_mut().insert((f, named), known);
    known
}

/// Does the iterable walk a sequence backwards (`reversed(range(T))`: a sampler's schedule)?
fn walks_backwards(cx: &Checker<'_, '_>, iter: &Expr) -> bool {
    any_subexpr_is(
        iter,
        |e| matches!(e, Expr::Call(c) if cx.callee_name(c).is_some_and(|q| q == "builtins.reversed")),
    )
}

/// Is the iterable `range(..)` (or `enumerate(range(..))`, `tqdm(range(..))`), or a sequence
/// walked backwards (`zip(reversed(seq), reversed(seq_next))`: a schedule of timesteps, which a
/// data loader is not)?
fn is_range(cx: &Checker<'_, '_>, iter: &Expr) -> bool {
    is_range_within(cx, iter, 0)
}

/// [`is_range`], following names bound once to the iterable (`time_range = np.flip(timesteps)`,
/// then `iterator = tqdm(time_range)`, as DDIM samplers write it) a few links deep; a scheduler's
/// `timesteps` is a schedule too.
fn is_range_within(cx: &Checker<'_, '_>, iter: &Expr, depth: u32) -> bool {
    let mut found = false;
    any_subexpr(iter, &mut |e| {
        match e {
            Expr::Call(c)
                if cx.callee_name(c).is_some_and(|q| {
                    matches!(
                        q.as_ref(),
                        "builtins.range"
                            | "builtins.reversed"
                            | "numpy.flip"
                            | "torch.flip"
                            | "six.moves.xrange"
                            | "past.builtins.xrange"
                    )
                }) =>
            {
                found = true;
            }
            // Python 2's `range`, as code written for both spells it (`xrange = range` when the
            // name is missing).
            Expr::Call(c) if matches!(&*c.func, Expr::Name(n) if n.id.as_str() == "xrange") => found = true,
            // A scheduler's schedule (`self.scheduler.timesteps`), walked from noise to image.
            Expr::Attribute(a) if a.attr.as_str() == "timesteps" => found = true,
            Expr::Name(n) if depth < 4 => {
                // (A name bound on several paths may hold either value; but one wrapped in a
                // progress bar on one of them, `if progress: indices = tqdm(indices)`, holds the
                // same sequence on both.)
                let wraps_itself = |value: &Expr| matches!(value, Expr::Call(c) if matches!(&c.arguments.args[..], [Expr::Name(inner)] if inner.id == n.id));
                if let Some(b) = name_binding(cx, e)
                    && let BindingKind::Assignment { value, part: Part::Whole, .. } = cx.model.binding(b).kind
                    && (cx.model.binding(b).shadowed.is_none() || wraps_itself(value))
                {
                    found = is_range_within(cx, value, depth + 1);
                }
            }
            _ => {}
        }
        !found
    });
    found
}

/// Does the body run a training step: a `.backward(..)` or `.step(..)` call as a statement
/// (`loss.backward()`, `scaler.scale(loss).backward()`, `optimizer.step()`)?
fn trains(body: &[Stmt]) -> bool {
    let mut found = false;
    each_stmt(body, &mut |s| {
        if let Stmt::Expr(e) = s
            && let Some((_, _, "backward" | "step")) = method_call(&e.value)
        {
            found = true;
        }
    });
    found
}

/// Where the call gives `non_blocking`: `Some(None)` when it does not, `Some(Some(value))` when
/// it does (by keyword, or by position: `Tensor.to(device, dtype, non_blocking)`,
/// `Tensor.to(dtype | other, non_blocking)`, `Tensor.cuda(device, non_blocking)`), `None` when
/// a positional argument may be it and cannot be told from a dtype.
pub(crate) fn non_blocking_argument<'e>(
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

/// Is the copy `call` makes (`.to(..)`, `.cuda(..)`) a blocking one: no `non_blocking`, or
/// `non_blocking=False`?
pub(crate) fn blocking_copy(cx: &Checker<'_, '_>, call: &ast::ExprCall, method: &str) -> bool {
    matches!(
        non_blocking_argument(cx, call, method),
        Some(None | Some(Expr::BooleanLiteral(ast::ExprBooleanLiteral { value: false, .. })))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_words_at_underscores_and_capitals() {
        fn words(n: &str) -> Vec<&str> {
            name_words(n).collect()
        }
        assert_eq!(words("CUDAAccelerator"), ["CUDA", "Accelerator"]);
        assert_eq!(words("MPSBackend"), ["MPS", "Backend"]);
        assert_eq!(words("move_to_gpu"), ["move", "to", "gpu"]);
        assert_eq!(words("CudaGraphRunner"), ["Cuda", "Graph", "Runner"]);
        assert_eq!(words("gpu_utils2"), ["gpu", "utils2"]);
        assert_eq!(words("_"), Vec::<&str>::new());
        assert_eq!(words("x"), ["x"]);
        // Words inside other words are not words: `Dumps` has no `mps`.
        assert!(!name_words("Dumps").any(|w| names_accelerator(w, true)));
        assert!(name_words("TorchMPSDevice").any(|w| names_accelerator(w, true)));
    }
}
