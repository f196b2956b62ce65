use std::collections::HashSet;
use std::ops::Range;

use proc_macro2::TokenTree;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Expr, Stmt};

use crate::diagnostic::Finding;
use crate::profile::{is_host_read, is_sync_method};
use crate::registry::declare_rule;
use crate::source::FileCx;
use crate::syntax::{Ctor, call_path, pat_ident, pat_idents, path_ends_with, peel};
use crate::walker::{Check, Cx};

declare_rule! {
    /// ### What it does
    /// Flags wall-clock timing (`let start = Instant::now(); ..; start.elapsed()`) around device
    /// work (a `forward`, a matmul, a convolution, a backward pass, a tensor constructor) with
    /// nothing in between that waits for the device: no `synchronize()`/`sync()`, no host read
    /// (`to_vec*`, `to_scalar`, `item`, a move to the CPU), no printing, and no call that hands
    /// the results to other code (which may read them). Applies to devcheck, candle and tch.
    ///
    /// ### Why is this bad?
    /// Accelerator kernels run asynchronously: the calls return once the work is queued. The
    /// timer then measures how long it took to launch the kernels, not to run them, and the
    /// cost shows up later, wherever the next synchronisation happens.
    ///
    /// ### Example
    /// ```ignore
    /// let start = Instant::now();
    /// let logits = model.forward(&xs)?;
    /// println!("forward took {:?}", start.elapsed());
    /// ```
    ///
    /// ### Use instead
    /// ```ignore
    /// device.synchronize()?;
    /// let start = Instant::now();
    /// let logits = model.forward(&xs)?;
    /// device.synchronize()?;
    /// println!("forward took {:?}", start.elapsed());
    /// ```
    ///
    /// ### Fix safety
    /// There is no automatic fix: which device to synchronise is not always clear from the code.
    pub struct D007UnsynchronizedTiming {
        code: "D007",
        name: "unsynchronized-timing",
        group: Suspicious,
        summary: "wall-clock timing around device work without a synchronize",
        fix: None,
    }
}

#[derive(Default)]
pub(crate) struct Check007;

fn is_instant_now(e: &Expr) -> bool {
    let Expr::Call(c) = peel(e) else { return false };
    call_path(c).is_some_and(|p| path_ends_with(p, &["Instant", "now"]))
}

impl Check for Check007 {
    fn block(&mut self, cx: &Cx<'_, '_>, b: &syn::Block, out: &mut Vec<Finding>) {
        if cx.file.apis.is_empty() || cx.file.apis.only_burn() || cx.in_test() {
            return;
        }
        for (i, stmt) in b.stmts.iter().enumerate() {
            let Stmt::Local(local) = stmt else { continue };
            let Some(init) = &local.init else { continue };
            if !is_instant_now(&init.expr) {
                continue;
            }
            let Some(timer) = pat_ident(&local.pat) else { continue };
            let timer = timer.to_string();
            let Some(end) = b.stmts.iter().skip(i + 1).position(|s| reads_timer(s, &timer)) else { continue };
            let region = &b.stmts[i + 1..i + 1 + end];
            let end_stmt = &b.stmts[i + 1 + end];
            let mut scan = Region { file: cx.file, work: None, sync: false, produced: HashSet::new() };
            for s in region {
                scan.stmt(s);
            }
            scan.partial_end(end_stmt);
            let Some(work) = scan.work else { continue };
            if scan.sync || cpu_only(cx) {
                continue;
            }
            out.push(
                Finding::new(
                    &D007UnsynchronizedTiming::META,
                    cx.file.range(end_stmt.span()),
                    format!("`{timer}` times device work without waiting for the device: it measures the launch, not the work"),
                )
                .label("read before the device has finished")
                .related(cx.file.range(stmt.span()), "timer started here")
                .related(work, "device work queued here")
                .help(sync_help(cx.file.apis)),
            );
        }
    }
}

/// True when the function only ever names the CPU as its device: timing is then exact.
fn cpu_only(cx: &Cx<'_, '_>) -> bool {
    let Some(f) = cx.fun() else { return false };
    let body = cx.file.snippet(&f.body_range);
    body.contains("Device::Cpu")
        && !["cuda", "Cuda", "metal", "Metal", "gpu", "Gpu", "best_available", "device("]
            .iter()
            .any(|w| body.contains(w))
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

/// What happens between starting and reading a timer.
struct Region<'a, 'f> {
    file: &'a FileCx<'f>,
    /// The first device work seen.
    work: Option<Range<usize>>,
    sync: bool,
    /// Names bound to the results of device work.
    produced: HashSet<String>,
}

const DEVICE_WORK: &[&str] = &[
    "forward",
    "forward_t",
    "forward_train",
    "matmul",
    "broadcast_matmul",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "backward",
    "backward_step",
    "softmax",
    "log_softmax",
    "softmax_last_dim",
];

impl Region<'_, '_> {
    fn stmt(&mut self, s: &Stmt) {
        let work_before = self.work.is_some();
        let mut v = RegionVisit { region: self, made_work: false };
        v.visit_stmt(s);
        let made_work = v.made_work;
        if let Stmt::Local(l) = s
            && (made_work || (work_before && l.init.as_ref().is_some_and(|i| self.uses_produced(&i.expr))))
        {
            let mut names = Vec::new();
            pat_idents(&l.pat, &mut names);
            self.produced.extend(names);
        }
    }

    /// The statement that reads the clock may wait first (`let v = out.to_vec1()?; ..`) — only
    /// what comes before the read counts, which for one statement is all of it but the read.
    fn partial_end(&mut self, s: &Stmt) {
        if let Stmt::Macro(_) = s {
            // Printing a tensor reads it; printing a duration does not. Be generous: any printed
            // result of device work counts as a wait.
            let mut v = RegionVisit { region: self, made_work: false };
            v.visit_stmt(s);
        }
    }

    fn uses_produced(&self, e: &Expr) -> bool {
        let mut hit = false;
        crate::syntax::for_each_ident(e, |i| hit |= self.produced.contains(&i.to_string()));
        hit
    }
}

struct RegionVisit<'r, 'a, 'f> {
    region: &'r mut Region<'a, 'f>,
    made_work: bool,
}

impl<'ast> Visit<'ast> for RegionVisit<'_, '_, '_> {
    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::MethodCall(m) => {
                let name = m.method.to_string();
                if is_sync_method(&name)
                    || is_host_read(self.region.file.apis, &name, m.turbofish.is_some())
                    || name == "cpu"
                    || name == "print"
                {
                    self.region.sync = true;
                } else if DEVICE_WORK.contains(&name.as_str()) {
                    self.made_work = true;
                    if self.region.work.is_none() {
                        self.region.work = Some(self.region.file.range(m.method.span()));
                    }
                } else if self.region.work.is_some() && m.args.iter().any(|a| self.region.uses_produced(a)) {
                    // Results handed to other code (a sampler, a metric) may be read there.
                    self.region.sync = true;
                }
            }
            Expr::Call(c) => {
                if call_path(c)
                    .and_then(|p| p.segments.last())
                    .is_some_and(|s| is_sync_method(&s.ident.to_string()))
                {
                    self.region.sync = true;
                } else if Ctor::of(self.region.file.apis, e).is_some() {
                    self.made_work = true;
                    if self.region.work.is_none() {
                        self.region.work = Some(self.region.file.range(c.func.span()));
                    }
                } else if self.region.work.is_some() && c.args.iter().any(|a| self.region.uses_produced(a)) {
                    self.region.sync = true;
                }
            }
            _ => {}
        }
        visit::visit_expr(self, e);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Printing device results reads them.
        let name = m.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        if matches!(
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
        ) && self.region.work.is_some()
        {
            let mut stack = vec![m.tokens.clone()];
            while let Some(ts) = stack.pop() {
                for tt in ts {
                    match tt {
                        TokenTree::Ident(i) if self.region.produced.contains(&i.to_string()) => {
                            self.region.sync = true
                        }
                        TokenTree::Group(g) => stack.push(g.stream()),
                        TokenTree::Literal(l) => {
                            let text = l.to_string();
                            if self.region.produced.iter().any(|p| text.contains(&format!("{{{p}"))) {
                                self.region.sync = true;
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
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
