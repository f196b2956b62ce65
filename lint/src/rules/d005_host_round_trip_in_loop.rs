use std::collections::HashSet;
use std::ops::Range;

use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Expr, ExprMethodCall};

use crate::device::{DevSrc, FixedKind, classify_options};
use crate::diagnostic::Finding;
use crate::profile::{is_host_read, is_transfer_method};
use crate::registry::declare_rule;
use crate::source::FileCx;
use crate::syntax::{Ctor, as_ident, chain_root, for_each_ident, pat_idents};
use crate::walker::{Check, Cx, LoopBody, cond_flags};

declare_rule! {
    /// ### What it does
    /// Flags a read of device data on the host (`to_vec1/2/3`, `to_scalar`, `item`,
    /// `into_scalar`, `into_data`, `int64_value`, `double_value`, a move to the CPU) inside a
    /// loop when either
    ///
    /// - the loop is in a forward pass: any loop of a `forward*` function, or a loop over the
    ///   module's own layers (`for layer in &self.layers`) in a method with tensor inputs; or
    /// - the value read goes back to the device in the same loop (it ends up in a tensor
    ///   constructor or a move to a device): a host round trip per iteration.
    ///
    /// Reads inside printing or logging macros, and in branches gated on debugging, logging, an
    /// environment variable or a step count (`if step % 100 == 0`), are not flagged; nor is
    /// once-per-batch logging in a training loop.
    ///
    /// ### Why is this bad?
    /// Kernels on an accelerator run asynchronously. A host read waits until all queued work
    /// has finished and then copies the data back, so the loop stops feeding the device at
    /// every iteration; sending the value back adds a second transfer. In a per-layer or
    /// per-token loop this often costs more than the computation.
    ///
    /// ### Example
    /// ```ignore
    /// for layer in &self.layers {
    ///     xs = layer.forward(&xs)?;
    ///     let scale = xs.abs()?.max_all()?.to_scalar::<f32>()?;
    ///     xs = (xs / scale as f64)?;
    /// }
    /// ```
    ///
    /// ### Use instead
    /// ```ignore
    /// for layer in &self.layers {
    ///     xs = layer.forward(&xs)?;
    ///     let scale = xs.abs()?.max_keepdim(D::Minus1)?;
    ///     xs = xs.broadcast_div(&scale)?;
    /// }
    /// ```
    ///
    /// ### Fix safety
    /// There is no automatic fix: keeping the value on the device needs a different op.
    pub struct D005HostRoundTripInLoop {
        code: "D005",
        name: "host-round-trip-in-loop",
        group: Perf,
        summary: "device→host reads (`to_vec*`, `to_scalar`, `item`, move to CPU) inside a per-step/per-layer loop",
        fix: None,
    }
}

#[derive(Default)]
pub(crate) struct Check005 {
    reported: HashSet<usize>,
}

impl Check for Check005 {
    fn enter_loop(&mut self, cx: &Cx<'_, '_>, body: LoopBody<'_>, out: &mut Vec<Finding>) {
        if cx.in_test() || cx.quiet() || cx.scope.device_branch > 0 {
            return;
        }
        let Some(f) = cx.fun() else { return };
        let per_layer = f.forward_like && (f.name.starts_with("forward") || f.layer_loops > 0);
        let mut scan = LoopScan {
            file: cx.file,
            reads: Vec::new(),
            flows: Vec::new(),
            sinks: Vec::new(),
            targets: Vec::new(),
        };
        match body {
            LoopBody::Block(b) => scan.visit_block(b),
            LoopBody::Closure(e) => scan.visit_expr(e),
        }
        if scan.reads.is_empty() {
            return;
        }
        // Names that carry host data: seeded by the reads, spread through lets, pushes, assignments.
        let mut tainted: HashSet<String> = scan.reads.iter().flat_map(|r| r.into.iter().cloned()).collect();
        loop {
            let before = tainted.len();
            for (targets, sources) in &scan.flows {
                if sources.iter().any(|s| tainted.contains(s)) {
                    tainted.extend(targets.iter().cloned());
                }
            }
            if tainted.len() == before {
                break;
            }
        }
        let sink = scan.sinks.iter().find(|(names, _)| names.iter().any(|n| tainted.contains(n)));
        if !per_layer && sink.is_none() {
            return;
        }
        for read in &scan.reads {
            if !self.reported.insert(read.range.start) {
                continue;
            }
            let (message, help) = match sink {
                Some(_) => (
                    format!(
                        "`{}` in a loop reads device data on the host every iteration, and the value goes back to the device",
                        read.what
                    ),
                    "keep the value on the device (use tensor ops such as `argmax`, `gather`, `where_cond` instead of reading it), or read once after the loop",
                ),
                None => (
                    format!(
                        "`{}` in a loop in `{}` waits for the device at every iteration",
                        read.what, f.name
                    ),
                    "keep the computation on the device, or collect what you need and read it once after the loop",
                ),
            };
            let mut finding = Finding::new(&D005HostRoundTripInLoop::META, read.range.clone(), message)
                .label("host read")
                .help(help);
            if let Some((_, at)) = sink {
                finding = finding.related(at.clone(), "back to the device here");
            }
            out.push(finding);
        }
    }
}

struct Read {
    range: Range<usize>,
    what: String,
    /// The names that receive the value.
    into: Vec<String>,
}

/// Reads the body of one loop: host reads, how values flow between names, and where names reach
/// the device again.
struct LoopScan<'a, 'f> {
    file: &'a FileCx<'f>,
    reads: Vec<Read>,
    /// (targets, sources): data flows from sources to targets.
    flows: Vec<(Vec<String>, Vec<String>)>,
    /// Names that reach the device, with where.
    sinks: Vec<(Vec<String>, Range<usize>)>,
    /// The names the value being visited is stored in.
    targets: Vec<Vec<String>>,
}

impl LoopScan<'_, '_> {
    fn read_name(&self, m: &ExprMethodCall) -> Option<String> {
        let name = m.method.to_string();
        if is_host_read(self.file.apis, &name, m.turbofish.is_some()) {
            return Some(format!(".{name}()"));
        }
        if is_transfer_method(self.file.apis, &name) {
            if name == "cpu" {
                return Some(".cpu()".to_string());
            }
            let target = m.args.first()?;
            let src = classify_options(self.file, target, &Default::default(), &|_| None)?;
            if matches!(src, DevSrc::Fixed { kind: FixedKind::Cpu, .. }) {
                return Some(format!(".{name}({})", self.file.short(&self.file.range(target.span()))));
            }
        }
        None
    }

    fn idents(e: &Expr) -> Vec<String> {
        let mut v = Vec::new();
        for_each_ident(e, |i| v.push(i.to_string()));
        v
    }

    /// Visits `value` as data stored into `targets`.
    fn flow_into(&mut self, targets: Vec<String>, value: &Expr) {
        let sources = Self::idents(value);
        if !targets.is_empty() && !sources.is_empty() {
            self.flows.push((targets.clone(), sources));
        }
        self.targets.push(targets);
        self.visit_expr(value);
        self.targets.pop();
    }
}

impl<'ast> Visit<'ast> for LoopScan<'_, '_> {
    fn visit_local(&mut self, local: &'ast syn::Local) {
        let mut names = Vec::new();
        pat_idents(&local.pat, &mut names);
        if let Some(init) = &local.init {
            self.flow_into(names, &init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::Assign(a) => {
                self.visit_expr(&a.left);
                self.flow_into(chain_target(&a.left), &a.right);
            }
            Expr::Binary(b) if is_compound_assign(&b.op) => {
                self.visit_expr(&b.left);
                self.flow_into(chain_target(&b.left), &b.right);
            }
            Expr::If(i) => {
                self.visit_expr(&i.cond);
                if !cond_flags(&i.cond).gated {
                    self.visit_block(&i.then_branch);
                }
                if let Some((_, els)) = &i.else_branch {
                    self.visit_expr(els);
                }
            }
            Expr::Call(c) => {
                if Ctor::of(self.file.apis, e).is_some() {
                    let names: Vec<String> = c.args.iter().flat_map(Self::idents).collect();
                    if !names.is_empty() {
                        self.sinks.push((names, self.file.range(c.func.span())));
                    }
                }
                visit::visit_expr(self, e);
            }
            Expr::MethodCall(m) => {
                let method = m.method.to_string();
                let read = self.read_name(m);
                if let Some(what) = &read {
                    let into = self.targets.last().cloned().unwrap_or_default();
                    self.reads.push(Read {
                        range: self.file.range(m.method.span()),
                        what: what.clone(),
                        into,
                    });
                } else if is_transfer_method(self.file.apis, &method)
                    && let Some(id) = as_ident(chain_root(&m.receiver))
                {
                    self.sinks.push((vec![id.to_string()], self.file.range(m.method.span())));
                }
                if matches!(
                    method.as_str(),
                    "push" | "extend" | "insert" | "push_back" | "extend_from_slice" | "append"
                ) {
                    self.visit_expr(&m.receiver);
                    let targets = chain_target(&m.receiver);
                    for arg in &m.args {
                        self.flow_into(targets.clone(), arg);
                    }
                } else {
                    visit::visit_expr(self, e);
                }
            }
            _ => visit::visit_expr(self, e),
        }
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

fn chain_target(e: &Expr) -> Vec<String> {
    let mut e = e;
    loop {
        e = match e {
            Expr::Index(i) => &i.expr,
            Expr::Field(f) => &f.base,
            Expr::Paren(p) => &p.expr,
            Expr::Unary(u) => &u.expr,
            Expr::MethodCall(m) => &m.receiver,
            _ => break,
        }
    }
    as_ident(e).map(|i| vec![i.to_string()]).unwrap_or_default()
}

fn is_compound_assign(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}
