//! D007 for Rust code. What it finds, why, and its fixes: `d007_unsynchronized_timing.md` beside this file (what
//! `devcheck explain D007` prints); its row in the rule table is in [`crate::registry`].

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use proc_macro2::TokenTree;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Expr, Stmt};

use crate::Api;
use crate::rust::crates::Condition;
use crate::diagnostic::Finding;
use crate::rust::api::{is_host_read, is_sync_method};
use crate::rust::syntax::{
    Ctor, as_ident, call_path, is_tensor_query, pat_ident, pat_idents, path_ends_with, peel,
};
use crate::rust::walker::{Rule, Checker};
use crate::registry;


#[derive(Default)]
pub(crate) struct Check {
    /// Per function: names holding results of device work (and tensor parameters), in program
    /// order, so a timed region knows what earlier code produced.
    device_values: Vec<HashSet<String>>,
    /// Per function: closures that do device work, and whether they leave it queued.
    closures: Vec<HashMap<String, bool>>,
    /// Per function: can it start a timer? Only then are the two above read, so a function
    /// whose text never names `Instant` skips following its values.
    timed: Vec<bool>,
}

fn is_instant_now(e: &Expr) -> bool {
    let Expr::Call(c) = peel(e) else { return false };
    call_path(c).is_some_and(|p| path_ends_with(p, &["Instant", "now"]))
}

/// The timer a statement starts: `let t = Instant::now();` or `t = Instant::now();`.
fn starts_timer(stmt: &Stmt) -> Option<String> {
    match stmt {
        Stmt::Local(local) => {
            let init = local.init.as_ref()?;
            is_instant_now(&init.expr).then(|| pat_ident(&local.pat).map(|i| i.to_string())).flatten()
        }
        Stmt::Expr(Expr::Assign(a), _) => {
            is_instant_now(&a.right).then(|| as_ident(&a.left).map(|i| i.to_string())).flatten()
        }
        _ => None,
    }
}

impl Rule for Check {
    fn enter_fn(&mut self, cx: &Checker<'_, '_>, _sig: &syn::Signature) {
        let params = cx.tensor_params();
        self.device_values.push(params);
        self.closures.push(HashMap::new());
        // A timer starts with `Instant::now()`, whose path names `Instant` in the body's text.
        let timed = cx.fun().is_none_or(|f| {
            let body = cx.file.snippet(&f.body_range);
            body.is_empty() || body.contains("Instant")
        });
        self.timed.push(timed);
    }

    fn exit_fn(&mut self, _cx: &Checker<'_, '_>, _out: &mut Vec<Finding>) {
        self.device_values.pop();
        self.closures.pop();
        self.timed.pop();
    }

    fn stmt(&mut self, cx: &Checker<'_, '_>, s: &Stmt, _out: &mut Vec<Finding>) {
        if self.timed.last() == Some(&false) {
            return;
        }
        let Stmt::Local(local) = s else { return };
        let Some(init) = &local.init else { return };
        let Some(values) = self.device_values.last_mut() else { return };
        let mut flow = Flow::new(cx, std::mem::take(values));
        if let (Expr::Closure(c), Some(name)) = (peel(&init.expr), pat_ident(&local.pat)) {
            flow.eval(&c.body);
            if flow.did_work
                && let Some(closures) = self.closures.last_mut()
            {
                closures.insert(name.to_string(), flow.pending);
            }
            *values = flow.values;
            return;
        }
        flow.eval(&init.expr);
        let device = (flow.did_work || flow.touched_device_value) && !flow.yields_host(&init.expr);
        *values = flow.values;
        let mut names = Vec::new();
        pat_idents(&local.pat, &mut names);
        for n in names {
            if device {
                values.insert(n);
            } else {
                values.remove(&n);
            }
        }
    }

    fn block(&mut self, cx: &Checker<'_, '_>, b: &syn::Block, out: &mut Vec<Finding>) {
        if cx.in_test() {
            return;
        }
        for (i, stmt) in b.stmts.iter().enumerate() {
            let Some(timer) = starts_timer(stmt) else { continue };
            let Some(end) = b.stmts.iter().skip(i + 1).position(|s| reads_timer(s, &timer)) else { continue };
            let region = &b.stmts[i + 1..i + 1 + end];
            let end_stmt = &b.stmts[i + 1 + end];
            // Read only inside `debug!`/`trace!`: nothing is measured at the default log level.
            if debug_only(end_stmt) {
                continue;
            }
            // What the block computed before the timer started (the hook runs as the block is
            // entered, before its statements are read).
            let mut before = Flow::new(cx, self.device_values.last().cloned().unwrap_or_default());
            before.closures = self.closures.last().cloned().unwrap_or_default();
            for s in &b.stmts[..i] {
                before.stmt(s);
            }
            let mut flow = Flow::new(cx, before.values);
            flow.closures = before.closures;
            for s in region {
                flow.stmt(s);
            }
            flow.partial_end(end_stmt);
            let Some(work) = flow.first_work.clone() else { continue };
            if !flow.pending || cx.cpu_only() {
                continue;
            }
            let mut finding = Finding::new(
                &registry::D007,
                cx.file.range(end_stmt.span()),
                format!("`{timer}` times device work without waiting for the device: it measures the launch, not the work"),
            )
            .label("read before the device has finished")
            .related(cx.file.range(stmt.span()), "timer started here")
            .related(work.clone(), "device work queued here")
            .help(sync_help(cx.file.apis));
            // A file that names no tensor library is judged by its package's dependencies.
            if cx.file.apis.is_empty() {
                finding = finding.only_if(Condition::FrameworkKnown);
            }
            // A function of the crate called in the region that reads device data back (a decoder
            // that reads each token) waits for the device before the timer is read.
            let calls: Vec<usize> = calls_in(cx, region).into_iter().filter(|&at| at >= work.start).collect();
            if !calls.is_empty() {
                finding = finding.only_if(Condition::NoCallWaits(calls));
            }
            out.push(finding);
        }
    }
}

/// Is the statement a `debug!`/`trace!` (as `log::debug!` or `tracing::trace!` too)?
fn debug_only(s: &Stmt) -> bool {
    let mac = match s {
        Stmt::Macro(m) => &m.mac,
        Stmt::Expr(Expr::Macro(m), _) => &m.mac,
        _ => return false,
    };
    mac.path.segments.last().is_some_and(|s| s.ident == "debug" || s.ident == "trace")
}

/// Where the names of the calls in these statements start (how the crate-wide pass knows them).
/// A call in an `if` with no `else` (`if step == 0 { debug_stats(&x) }`) is left out: taken now
/// and then, it does not make the timer wait, as a wait there does not (see [`Flow::eval`]).
fn calls_in(cx: &Checker<'_, '_>, stmts: &[Stmt]) -> Vec<usize> {
    struct Calls<'c, 'a, 'f>(&'c Checker<'a, 'f>, Vec<usize>);
    impl<'ast> Visit<'ast> for Calls<'_, '_, '_> {
        fn visit_expr_if(&mut self, i: &'ast syn::ExprIf) {
            if i.else_branch.is_some() {
                visit::visit_expr_if(self, i);
            } else {
                self.visit_expr(&i.cond);
            }
        }
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            self.1.push(self.0.file.range(m.method.span()).start);
            visit::visit_expr_method_call(self, m);
        }
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            self.1.push(self.0.file.range(c.func.span()).start);
            visit::visit_expr_call(self, c);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut calls = Calls(cx, Vec::new());
    for s in stmts {
        calls.visit_stmt(s);
    }
    calls.1
}

/// Does the statement read the timer (`t.elapsed()`, `Instant::now() - t`, `.duration_since(t)`)?
fn reads_timer(s: &Stmt, timer: &str) -> bool {
    struct Reads<'t>(&'t str, bool);
    impl<'ast> Visit<'ast> for Reads<'_> {
        fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
            if p.path.is_ident(self.0) {
                self.1 = true;
            }
        }
        fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
            // `t = Instant::now()` restarts the timer; it does not read it.
            if !(as_ident(&a.left).is_some_and(|i| i == self.0) && is_instant_now(&a.right)) {
                visit::visit_expr_assign(self, a);
            }
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            let mut stack = vec![m.tokens.clone()];
            while let Some(ts) = stack.pop() {
                for tt in ts {
                    match tt {
                        TokenTree::Ident(i) if i == self.0 => self.1 = true,
                        TokenTree::Group(g) => stack.push(g.stream()),
                        TokenTree::Literal(l) => {
                            // Inline format arguments: "{start:?}" or "{:?}" with `start.elapsed()`.
                            let text = l.to_string();
                            if text.contains(&format!("{{{}", self.0)) {
                                self.1 = true;
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut r = Reads(timer, false);
    r.visit_stmt(s);
    r.1
}

const DEVICE_WORK: &[&str] = &[
    "matmul",
    "broadcast_matmul",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "backward",
    "backward_step",
    "softmax",
    "log_softmax",
    "softmax_last_dim",
    "attention",
];

/// Calls on tensors (or on values holding them) that run no kernel: they ask about a tensor, or
/// store and pass it around.
fn is_metadata(name: &str) -> bool {
    is_tensor_query(name)
        || matches!(
            name,
            "is_contiguous"
                | "layout"
                | "stride"
                | "clone"
                | "shallow_clone"
                | "as_ref"
                | "borrow"
                | "unwrap"
                | "expect"
                | "map_err"
                | "ok"
                | "into"
                | "iter"
                | "into_iter"
                | "to_string"
                | "push"
                | "push_back"
                | "insert"
                | "extend"
                | "append"
                | "set"
                | "get"
                | "contains"
                | "send"
                | "blocking_send"
                | "try_send"
                | "collect"
                | "unwrap_or"
                | "entry"
                | "or_insert"
        )
}

/// Calls that hand device results to code that reads them on the host: a token sampler
/// (`logits_processor.sample(&logits)`), printing, saving, writing.
fn is_hand_off(name: &str, receiver: Option<&Expr>) -> bool {
    let recv_is_sampler = receiver.and_then(receiver_name).is_some_and(|n| {
        let n = n.to_ascii_lowercase();
        n.contains("processor") || n.contains("sampler")
    });
    name == "sample"
        || (name.starts_with("sample") && recv_is_sampler)
        || ["print", "save", "write", "to_vec", "to_scalar", "item", "metric", "accuracy", "sync"]
            .iter()
            .any(|w| name.contains(w))
}

/// The last name of a receiver (`logits_processor` in `self.logits_processor`).
fn receiver_name(e: &Expr) -> Option<String> {
    match peel(e) {
        Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        Expr::Field(f) => match &f.member {
            syn::Member::Named(n) => Some(n.to_string()),
            syn::Member::Unnamed(_) => None,
        },
        _ => None,
    }
}

/// What happens on the device between starting and reading a timer, in program order.
struct Flow<'c, 'a, 'f> {
    cx: &'c Checker<'a, 'f>,
    /// Names holding device results (and tensor parameters).
    values: HashSet<String>,
    /// The first device work seen.
    first_work: Option<Range<usize>>,
    /// Work queued since the last wait for the device.
    pending: bool,
    /// The expression just evaluated did device work, or computed on device values.
    did_work: bool,
    touched_device_value: bool,
    /// Waits seen so far (on any path).
    syncs: u32,
    /// Closures bound in the function that do device work, and whether they leave it queued
    /// (`true`) or wait for it before returning (`false`).
    closures: HashMap<String, bool>,
}

impl<'c, 'a, 'f> Flow<'c, 'a, 'f> {
    fn new(cx: &'c Checker<'a, 'f>, values: HashSet<String>) -> Self {
        Flow {
            cx,
            values,
            first_work: None,
            pending: false,
            did_work: false,
            touched_device_value: false,
            syncs: 0,
            closures: HashMap::new(),
        }
    }

    fn apis(&self) -> crate::ApiSet {
        self.cx.file.apis
    }

    fn work(&mut self, at: Range<usize>) {
        self.pending = true;
        self.did_work = true;
        if self.first_work.is_none() {
            self.first_work = Some(at);
        }
    }

    fn sync(&mut self) {
        self.pending = false;
        self.syncs += 1;
    }

    /// Does `e` name a device value (`logits`, `&x`, `self.w` is not known)?
    fn mentions_value(&self, e: &Expr) -> bool {
        let mut hit = false;
        crate::rust::syntax::for_each_ident(e, |i| hit |= self.values.contains(&i.to_string()));
        hit
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Local(local) => {
                let Some(init) = &local.init else { return };
                if let (Expr::Closure(c), Some(name)) = (peel(&init.expr), pat_ident(&local.pat)) {
                    let (pending, work, first) = (self.pending, self.did_work, self.first_work.clone());
                    self.did_work = false;
                    self.pending = false;
                    self.eval(&c.body);
                    if self.did_work {
                        self.closures.insert(name.to_string(), self.pending);
                    }
                    // Defining a closure runs nothing.
                    (self.pending, self.did_work, self.first_work) = (pending, work, first);
                    return;
                }
                let (work_before, touched_before) = (self.did_work, self.touched_device_value);
                self.did_work = false;
                self.touched_device_value = false;
                self.eval(&init.expr);
                if let Some((_, diverge)) = &init.diverge {
                    self.eval(diverge);
                }
                // What a sync, a host read, a move to the CPU or a sampler returns is host data.
                let device = (self.did_work || self.touched_device_value)
                    && !self.yields_host(&init.expr)
                    && !self.cx.is_host(&init.expr);
                let mut names = Vec::new();
                pat_idents(&local.pat, &mut names);
                for n in names {
                    if device {
                        self.values.insert(n);
                    } else {
                        self.values.remove(&n);
                    }
                }
                self.did_work |= work_before;
                self.touched_device_value |= touched_before;
            }
            Stmt::Expr(e, _) => self.eval(e),
            Stmt::Macro(m) => self.mac(&m.mac),
            Stmt::Item(_) => {}
        }
    }

    /// Does the value come back from the device (`x.to_vec1()?`, `sampler.sample(&logits)?`)?
    fn yields_host(&self, e: &Expr) -> bool {
        if matches!(crate::rust::syntax::peel_result(e), Expr::Macro(_)) {
            return true;
        }
        // After a wait in the chain (`sampler.sample(&x).map_err(..)?`) the value is on the host.
        crate::rust::syntax::chain_calls(e).iter().any(|m| {
            let name = m.method.to_string();
            is_sync_method(&name)
                || is_host_read(self.apis(), &name, m.turbofish.is_some())
                || is_hand_off(&name, Some(&m.receiver))
        })
    }

    /// The statement that reads the clock may wait first (`println!("{:?} {out}", t.elapsed())`
    /// prints a device result): printing device results counts as a wait.
    fn partial_end(&mut self, s: &Stmt) {
        if let Stmt::Macro(m) = s {
            self.mac(&m.mac);
        }
    }

    fn block(&mut self, b: &syn::Block) {
        for s in &b.stmts {
            self.stmt(s);
        }
    }

    fn loop_body(&mut self, b: &syn::Block) {
        let syncs_before = self.syncs;
        self.block(b);
        if self.syncs > syncs_before {
            self.pending = false;
        }
    }

    /// Evaluates an expression in the order it runs: a call after its receiver and arguments.
    fn eval(&mut self, e: &Expr) {
        match e {
            Expr::MethodCall(m) => {
                self.eval(&m.receiver);
                for a in &m.args {
                    self.eval(a);
                }
                self.method(m);
            }
            Expr::Call(c) => {
                for a in &c.args {
                    self.eval(a);
                }
                self.call(e, c);
            }
            Expr::If(i) => {
                self.eval(&i.cond);
                let start = self.pending;
                self.block(&i.then_branch);
                let then = self.pending;
                self.pending = start;
                if let Some((_, els)) = &i.else_branch {
                    self.eval(els);
                }
                self.pending |= then;
            }
            Expr::Match(m) => {
                self.eval(&m.expr);
                let start = self.pending;
                let mut any = false;
                for arm in &m.arms {
                    self.pending = start;
                    self.eval(&arm.body);
                    any |= self.pending;
                }
                self.pending = any;
            }
            // A loop body runs at least once in a timed region; its end state is the loop's. A
            // body that waits for the device on some path (every N steps, on the first one) leaves
            // at most one iteration unmeasured.
            Expr::ForLoop(f) => {
                self.eval(&f.expr);
                self.loop_body(&f.body);
            }
            Expr::While(w) => {
                self.eval(&w.cond);
                self.loop_body(&w.body);
            }
            Expr::Loop(l) => self.loop_body(&l.body),
            Expr::Block(b) => self.block(&b.block),
            Expr::Unsafe(u) => self.block(&u.block),
            Expr::Closure(c) => self.eval(&c.body),
            Expr::Macro(m) => self.mac(&m.mac),
            Expr::Path(_) => {
                if self.mentions_value(e) {
                    self.touched_device_value = true;
                }
            }
            _ => {
                // Operators, fields, references, `?`, `.await`: evaluate the parts in order.
                struct Parts<'x, 'c, 'a, 'f>(&'x mut Flow<'c, 'a, 'f>);
                impl<'ast> Visit<'ast> for Parts<'_, '_, '_, '_> {
                    fn visit_expr(&mut self, e: &'ast Expr) {
                        self.0.eval(e);
                    }
                    fn visit_item(&mut self, _: &'ast syn::Item) {}
                }
                visit::visit_expr(&mut Parts(self), e);
            }
        }
    }

    fn method(&mut self, m: &syn::ExprMethodCall) {
        let name = m.method.to_string();
        let at = self.cx.file.range(m.method.span());
        let tch = self.apis().is(Api::Tch);
        if is_sync_method(&name)
            || is_host_read(self.apis(), &name, m.turbofish.is_some())
            || name == "cpu"
            // tch's moves are blocking copies: they wait for the device.
            || (tch && matches!(name.as_str(), "to_device" | "to" | "to_kind_device"))
        {
            self.sync();
            return;
        }
        let on_value = self.mentions_value(&m.receiver);
        let with_value = m.args.iter().any(|a| self.mentions_value(a));
        if (on_value || with_value) && is_hand_off(&name, Some(&m.receiver)) {
            self.sync();
            return;
        }
        if is_metadata(&name) {
            self.touched_device_value |= on_value;
            return;
        }
        let named_work = name.contains("forward") || DEVICE_WORK.contains(&name.as_str());
        if named_work || on_value || with_value {
            self.work(at);
        }
    }

    fn call(&mut self, e: &Expr, c: &syn::ExprCall) {
        let Some(path) = call_path(c) else { return };
        let Some(last) = path.segments.last() else { return };
        let name = last.ident.to_string();
        // `Cuda::synchronize(0)`, `B::sync(&device)`, `tch::Tensor::f_cuda_synchronize(0)`.
        if is_sync_method(&name) {
            self.sync();
            return;
        }
        let at = self.cx.file.range(c.func.span());
        // A closure of the function that does device work: it leaves it queued or waits.
        if path.segments.len() == 1
            && let Some(&leaves_pending) = self.closures.get(&name)
        {
            self.work(at);
            if !leaves_pending {
                self.sync();
            }
            return;
        }
        // tch's `Vec::<f32>::try_from(&t)`, `f64::from(&t)`: a read back to the host.
        if matches!(name.as_str(), "try_from" | "from")
            && crate::rust::syntax::last_two(path).is_some_and(|(ty, _)| {
                matches!(
                    ty.to_string().as_str(),
                    "Vec" | "f32" | "f64" | "i64" | "i32" | "u8" | "bool" | "usize"
                )
            })
            && c.args.iter().any(|a| self.mentions_value(a))
        {
            self.sync();
            return;
        }
        if Ctor::of(self.apis(), e).is_some() {
            if !self.cx.is_host(e) {
                self.work(at);
            }
            return;
        }
        let with_value = c.args.iter().any(|a| self.mentions_value(a));
        if !with_value {
            return;
        }
        if is_hand_off(&name, None) {
            self.sync();
        } else if !is_metadata(&name) && !matches!(name.as_str(), "Ok" | "Some" | "Err" | "drop") {
            self.work(at);
        }
    }

    /// Printing device results reads them.
    fn mac(&mut self, m: &syn::Macro) {
        let name = m.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        if !matches!(
            name.as_str(),
            "println"
                | "print"
                | "eprintln"
                | "eprint"
                | "format"
                | "write"
                | "writeln"
                | "dbg"
                | "info"
                | "debug"
        ) || self.first_work.is_none()
        {
            return;
        }
        let mut stack = vec![m.tokens.clone()];
        while let Some(ts) = stack.pop() {
            for tt in ts {
                match tt {
                    TokenTree::Ident(i) if self.values.contains(&i.to_string()) => self.sync(),
                    TokenTree::Group(g) => stack.push(g.stream()),
                    TokenTree::Literal(l) => {
                        let text = l.to_string();
                        if self.values.iter().any(|p| text.contains(&format!("{{{p}"))) {
                            self.sync();
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

fn sync_help(apis: crate::ApiSet) -> &'static str {
    use crate::Api;
    if apis.is(Api::Tch) {
        "wait for the device before reading the clock (and before starting it): `tch::Cuda::synchronize(0)`"
    } else if apis.is(Api::Candle) {
        "wait for the device before reading the clock (and before starting it): `device.synchronize()?`"
    } else {
        "wait for the device before reading the clock (and before starting it): synchronise, or read a result back (`to_vec`, `to_scalar`)"
    }
}
