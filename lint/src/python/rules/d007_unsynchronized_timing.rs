//! D007 for PyTorch code. What it finds, why, and its fixes: `d007_unsynchronized_timing.md` beside this file (what
//! `devcheck explain D007` prints); its row in the rule table is in [`crate::registry`].

use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};
use rustc_hash::FxHashSet;

use crate::diagnostic::Finding;
use crate::python::api;
use crate::python::checker::{Checker, Reads, Rule};
use crate::python::model::{BindingId, BindingKind, Callee, FunctionId, Part};
use crate::python::typing::Kind;
use crate::registry;

use super::helpers::{any_subexpr, calls_a_value, each_stmt, range};


#[derive(Default)]
pub(crate) struct Check;

impl Rule for Check {
    fn reads(&self) -> Reads {
        Reads::STATEMENT
    }

    fn stmt(&mut self, cx: &Checker<'_, '_>, stmt: &Stmt, out: &mut Vec<Finding>) {
        // A timer starts with a clock read in the body itself.
        if let Stmt::FunctionDef(def) = stmt
            && cx.facts.uses_accelerator
            && let Some(f) = cx.model.function_of_def(def)
            && cx.facts.reads_clock_in(Some(f))
        {
            check_body(cx, &def.body, Some(f), out);
        }
    }

    fn finish(&mut self, cx: &Checker<'_, '_>, out: &mut Vec<Finding>) {
        if cx.facts.uses_accelerator && cx.facts.reads_clock_in(None) {
            check_body(cx, cx.module_body, None, out);
        }
    }
}

/// A timer start: `t0 = time.time()`.
struct Start<'a> {
    binding: BindingId,
    stmt: &'a Stmt,
}

fn check_body(cx: &Checker<'_, '_>, body: &[Stmt], function: Option<FunctionId>, out: &mut Vec<Finding>) {
    let mut statements: Vec<&Stmt> = Vec::new();
    each_stmt(body, &mut |s| statements.push(s));
    let starts: Vec<Start<'_>> = statements
        .iter()
        .filter_map(|&s| {
            let Stmt::Assign(a) = s else { return None };
            let [Expr::Name(n)] = a.targets.as_slice() else { return None };
            if !is_clock_call(cx, &a.value) {
                return None;
            }
            Some(Start { binding: cx.model.definition_of(n)?, stmt: s })
        })
        .collect();
    if starts.is_empty() {
        return;
    }
    // One walk: the timer reads to check, and whether CUDA events time the work instead.
    let mut uses_events = false;
    let mut reported: FxHashSet<TextSize> = FxHashSet::default();
    let mut reads = Vec::new();
    for s in &statements {
        for e in own_exprs(s) {
            any_subexpr(e, &mut |sub| {
                match sub {
                    Expr::Call(c) if cx.callee_name(c).is_some_and(|q| q == "torch.cuda.Event") => {
                        uses_events = true;
                    }
                    Expr::BinOp(b)
                        if b.op == ast::Operator::Sub
                            && let Some(start) = start_of(cx, &b.right, &starts)
                            && let Some(end_at) = clock_read(cx, &b.left)
                            && end_at > start.stmt.end()
                            && reported.insert(b.start()) =>
                    {
                        reads.push((start, end_at, sub));
                    }
                    _ => {}
                }
                !uses_events
            });
            if uses_events {
                return;
            }
        }
    }
    for (start, end_at, read) in reads {
        check_timing(cx, &statements, start, end_at, read, function, out);
    }
}

/// The expressions a statement evaluates itself: its value, a loop's iterable, a condition,
/// a `with` item (not the blocks it holds, which [`each_stmt`] visits).
fn own_exprs(s: &Stmt) -> impl Iterator<Item = &Expr> {
    let first: Option<&Expr> = match s {
        Stmt::Expr(e) => Some(&e.value),
        Stmt::Assign(a) => Some(&a.value),
        Stmt::AugAssign(a) => Some(&a.value),
        Stmt::AnnAssign(a) => a.value.as_deref(),
        Stmt::Return(r) => r.value.as_deref(),
        Stmt::For(f) => Some(&f.iter),
        Stmt::While(w) => Some(&w.test),
        Stmt::If(i) => Some(&i.test),
        Stmt::Assert(a) => Some(&a.test),
        _ => None,
    };
    // Without a collection per statement: this runs for every statement of a timed body.
    let clauses: &[ast::ElifElseClause] = match s {
        Stmt::If(i) => &i.elif_else_clauses,
        _ => &[],
    };
    let items: &[ast::WithItem] = match s {
        Stmt::With(w) => &w.items,
        _ => &[],
    };
    first
        .into_iter()
        .chain(clauses.iter().filter_map(|c| c.test.as_ref()))
        .chain(items.iter().map(|i| &i.context_expr))
}

fn is_clock_call(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    matches!(e, Expr::Call(c) if c.arguments.is_empty() && cx.callee_name(c).is_some_and(|q| api::is_clock(&q)))
}

/// The timer start a name refers to.
fn start_of<'s, 'a>(cx: &Checker<'_, '_>, e: &Expr, starts: &'s [Start<'a>]) -> Option<&'s Start<'a>> {
    let Expr::Name(n) = e else { return None };
    let b = cx.model.binding_of(n)?;
    starts.iter().find(|s| s.binding == b)
}

/// Where the clock is read: a clock call, or a name bound to one.
fn clock_read(cx: &Checker<'_, '_>, e: &Expr) -> Option<TextSize> {
    if is_clock_call(cx, e) {
        return Some(e.start());
    }
    let Expr::Name(n) = e else { return None };
    match cx.model.binding(cx.model.binding_of(n)?).kind {
        BindingKind::Assignment { value, part: Part::Whole, .. } if is_clock_call(cx, value) => {
            Some(value.start())
        }
        _ => None,
    }
}

fn check_timing(
    cx: &Checker<'_, '_>,
    statements: &[&Stmt],
    start: &Start<'_>,
    end_at: TextSize,
    read: &Expr,
    function: Option<FunctionId>,
    out: &mut Vec<Finding>,
) {
    // The code that runs between the two reads: what lies between them in the source, and when
    // the timer is read in a loop it was started outside of, the whole loop.
    let mut regions = vec![TextRange::new(start.stmt.end(), end_at)];
    let wrapping_loop = cx
        .model
        .loops()
        .filter(|(_, l)| l.function == function)
        .filter(|(_, l)| {
            l.stmt.range().contains(end_at) && !l.stmt.range().contains_range(start.stmt.range())
        })
        .map(|(_, l)| l.stmt.range())
        .min_by_key(|r| r.len());
    if let Some(r) = wrapping_loop {
        regions.push(r);
    }
    let inside = |r: TextRange| regions.iter().any(|region| region.contains_range(r));
    let mut scan = Scan { work: None, waits: false, depth: 0, function };
    for s in statements {
        if inside(s.range()) {
            scan.condition(cx, s);
        }
        for e in own_exprs(s) {
            if inside(e.range()) {
                scan.expr(cx, e);
            }
        }
    }
    let Some(work) = scan.work else { return };
    if scan.waits {
        return;
    }
    let timer = cx.short(read.range());
    out.push(
        Finding::new(
            &registry::D007,
            range(read.range()),
            format!("`{timer}` times CUDA work without waiting for it: it measures the launch, not the work"),
        )
        .label("read before the device has finished")
        .related(range(start.stmt.range()), "timer started here")
        .related(range(work), "device work queued here")
        .help("call `torch.cuda.synchronize()` before reading the clock, or time with `torch.cuda.Event(enable_timing=True)`"),
    );
}

/// A tensor made from host data (`torch.from_numpy(..)`, `torch.tensor(..)`), through methods
/// that keep it where it is (`.to(torch.float)`, `.float()`, `.view(..)`): on the host.
fn made_on_the_host(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    let mut at = e;
    for _ in 0..16 {
        let Expr::Call(c) = at else { return false };
        if cx
            .callee_name(c)
            .is_some_and(|q| matches!(q.as_ref(), "torch.from_numpy" | "torch.tensor" | "torch.as_tensor"))
        {
            return true;
        }
        let Expr::Attribute(a) = &*c.func else { return false };
        match a.attr.as_str() {
            "cuda" => return false,
            // A `.to(dtype)` keeps it on the host; a `.to(device)` does not.
            "to" if !c.arguments.args.first().is_some_and(|t| super::helpers::is_dtype(cx, t)) => return false,
            _ => at = &a.value,
        }
    }
    false
}

/// What the timed code does: the first device work it queues, and whether anything waits.
struct Scan {
    work: Option<TextRange>,
    waits: bool,
    depth: usize,
    /// The function whose body is being read (for `self.method(..)` calls).
    function: Option<FunctionId>,
}

impl Scan {
    /// `if t:` and `while t:` on a tensor read it on the host.
    fn condition(&mut self, cx: &Checker<'_, '_>, s: &Stmt) {
        let test = match s {
            Stmt::If(i) => &*i.test,
            Stmt::While(w) => &*w.test,
            _ => return,
        };
        if cx.kind_of(test) == Kind::Tensor {
            self.waits = true;
        }
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr) {
        any_subexpr(e, &mut |sub| {
            if let Expr::Call(c) = sub {
                self.call(cx, c);
            }
            !self.waits
        });
    }

    fn call(&mut self, cx: &Checker<'_, '_>, c: &ast::ExprCall) {
        let q = cx.callee_name(c);
        let q = q.as_deref();
        if q.is_some_and(|q| q.ends_with(".synchronize")) {
            self.waits = true;
            return;
        }
        if let Expr::Attribute(a) = &*c.func {
            let (receiver, method) = (&*a.value, a.attr.as_str());
            // Data made on the host (`torch.from_numpy(x).to(torch.float).to(device)`): its
            // conversions run on the host, and its blocking copy to the device waits for the
            // device's queue before it returns.
            if made_on_the_host(cx, receiver) {
                let target = c.arguments.args.first().or_else(|| c.arguments.find_keyword("device").map(|k| &k.value));
                let moves = method == "cuda" || (method == "to" && target.is_some_and(|t| !super::helpers::is_dtype(cx, t)));
                if moves && super::helpers::blocking_copy(cx, c, method) {
                    self.waits = true;
                }
                return;
            }
            match method {
                "synchronize" | "item" | "tolist" | "numpy" | "cpu" | "wait" => {
                    self.waits = true;
                    return;
                }
                "backward" => {
                    self.work.get_or_insert(c.range());
                    return;
                }
                _ => {}
            }
            if cx.kind_of(receiver) == Kind::Tensor && api::tensor_method_returns_tensor(method) {
                self.work.get_or_insert(c.range());
                return;
            }
        }
        if let Some(q) = q {
            if matches!(
                q,
                "builtins.float"
                    | "builtins.int"
                    | "builtins.bool"
                    | "builtins.print"
                    | "builtins.str"
                    | "builtins.repr"
            ) && c.arguments.args.iter().any(|a| cx.kind_of(a) == Kind::Tensor)
            {
                self.waits = true;
                return;
            }
            if api::returns_tensor(q) && !api::is_creation(q) {
                self.work.get_or_insert(c.range());
                return;
            }
            if q.starts_with("builtins.") || q.starts_with("time.") || q.starts_with("torch.") {
                return;
            }
        }
        if cx.kind_of(&c.func) == Kind::Module || calls_a_value(cx, c) {
            self.work.get_or_insert(c.range());
            if let Some(forward) = cx.types.forward_of(&c.func) {
                self.function(cx, forward);
            }
            return;
        }
        match cx.model.callee(c, self.function) {
            Some(Callee::Function(f)) => self.function(cx, f),
            Some(Callee::Class(_)) => {}
            None => {
                // Code this file cannot see may read the tensors it is given.
                let gives_tensors = c
                    .arguments
                    .args
                    .iter()
                    .chain(c.arguments.keywords.iter().map(|k| &k.value))
                    .any(|a| matches!(cx.kind_of(a), Kind::Tensor | Kind::Module | Kind::Unknown));
                if gives_tensors {
                    self.waits = true;
                }
            }
        }
    }

    /// A call into a function of this file: what its body does counts.
    fn function(&mut self, cx: &Checker<'_, '_>, f: FunctionId) {
        if self.depth > 3 {
            // Too deep to know: assume it may wait.
            self.waits = true;
            return;
        }
        self.depth += 1;
        let caller = self.function.replace(f);
        let body = &cx.model.function(f).def.body;
        each_stmt(body, &mut |s| {
            if self.waits {
                return;
            }
            self.condition(cx, s);
            for e in own_exprs(s) {
                self.expr(cx, e);
            }
        });
        self.function = caller;
        self.depth -= 1;
    }
}
