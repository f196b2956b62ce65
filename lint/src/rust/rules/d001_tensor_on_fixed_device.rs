//! D001 for Rust code. What it finds, why, and its fixes: `d001_tensor_on_fixed_device.md` beside this file (what
//! `devcheck explain D001` prints); its row in the rule table is in [`crate::registry`].

use std::collections::{HashMap, HashSet};

use syn::Expr;
use syn::spanned::Spanned;

use crate::rust::crates::Condition;
use crate::rust::device::{DevSrc, FixedKind, device_part};
use crate::diagnostic::{Applicability, Edit, Finding, Fix};
use crate::rust::api::{Api, CtorDevice, is_transfer_method};
use crate::rust::FileCx;
use crate::rust::syntax::{
    Ctor, ParamKind, as_ident, chain_root, is_assert_macro, is_formatting_macro, pat_ident, pat_idents,
    peel_result,
};
use crate::rust::walker::{Rule, Checker, FnCx};
use crate::registry;


#[derive(Default)]
pub(crate) struct Check {
    stack: Vec<FnState>,
}

/// A node that may bind names.
#[derive(Clone, Copy)]
enum Binder<'a> {
    Stmt(&'a syn::Stmt),
    Expr(&'a Expr),
}

#[derive(Default)]
struct FnState {
    active: bool,
    /// Constructor calls moved at once to a device that is not fixed (by address in the tree).
    exempt: HashSet<usize>,
    /// Constructor calls that initialise a `let`, with the variable's name.
    bound: HashMap<usize, String>,
    /// Variables later moved to a device that is not fixed.
    moved: HashSet<String>,
    /// Constructor calls whose value is returned at once (`Ok(Tensor::new(..)?)`, a block's tail).
    returned: HashSet<usize>,
    /// How often each variable is read, and how often only to be returned (`Ok(x)`, tail `x`).
    uses: HashMap<String, usize>,
    returned_uses: HashMap<String, usize>,
    discount: HashMap<String, usize>,
    /// Helpers that are not `forward*` may build a result on the host for their caller.
    may_return_host: bool,
    /// A host tensor left the host side of the function: met a tensor from elsewhere, was
    /// returned, stored or handed to other code.
    host_escaped: bool,
    /// Variables computed only from host values of the function (`let t = match .. { .. => host,
    /// .. }`), which no tensor input reaches: a host tensor meeting one stays on the host side.
    host_derived: HashSet<String>,
    /// The last `let`'s name and whether it is host-derived, applied at the next statement.
    next_binding: Option<(String, bool)>,
    candidates: Vec<Candidate>,
    /// Every name bound in the function, with where: a fix may only name the input where
    /// nothing before has bound its name again.
    bindings: Vec<(String, usize)>,
}

struct Candidate {
    finding: Finding,
    binding: Option<String>,
    call: usize,
    kind: FixedKind,
    /// The walker knows the tensor for a host one (its device is written at the call, not taken
    /// from a field), so `host_escaped` follows where it goes.
    tracked: bool,
}

impl FnState {
    /// Notes the names a pattern binds.
    fn note_pattern(&mut self, file: &FileCx<'_>, pat: &syn::Pat) {
        let mut names = Vec::new();
        pat_idents(pat, &mut names);
        let at = file.range(pat.span()).start;
        self.bindings.extend(names.into_iter().map(|n| (n, at)));
    }

    /// Notes what a node may bind: patterns of `let`, `if let`, `for`, `match` and closures, items,
    /// and any name handed to a macro that is not known to only evaluate its arguments.
    fn note_bindings(&mut self, file: &FileCx<'_>, node: Binder<'_>) {
        match node {
            Binder::Stmt(syn::Stmt::Local(l)) => self.note_pattern(file, &l.pat),
            Binder::Stmt(syn::Stmt::Item(item)) => {
                let ident = match item {
                    syn::Item::Const(c) => Some(&c.ident),
                    syn::Item::Static(s) => Some(&s.ident),
                    syn::Item::Fn(f) => Some(&f.sig.ident),
                    _ => None,
                };
                if let Some(ident) = ident {
                    self.bindings.push((ident.to_string(), file.range(ident.span()).start));
                }
            }
            Binder::Stmt(syn::Stmt::Macro(m)) => self.note_macro(file, &m.mac),
            Binder::Stmt(_) => {}
            Binder::Expr(Expr::Let(l)) => self.note_pattern(file, &l.pat),
            Binder::Expr(Expr::ForLoop(f)) => self.note_pattern(file, &f.pat),
            Binder::Expr(Expr::Match(m)) => m.arms.iter().for_each(|a| self.note_pattern(file, &a.pat)),
            Binder::Expr(Expr::Closure(c)) => c.inputs.iter().for_each(|p| self.note_pattern(file, p)),
            Binder::Expr(Expr::Macro(m)) => self.note_macro(file, &m.mac),
            Binder::Expr(_) => {}
        }
    }

    fn note_macro(&mut self, file: &FileCx<'_>, mac: &syn::Macro) {
        let evaluates_only = mac.path.segments.last().is_some_and(|s| {
            let name = s.ident.to_string();
            is_formatting_macro(&name)
                || is_assert_macro(&name)
                || matches!(name.as_str(), "vec" | "todo" | "unimplemented" | "unreachable")
        });
        if evaluates_only {
            return;
        }
        let at = file.range(mac.path.span()).start;
        crate::rust::syntax::for_each_token_ident(mac.tokens.clone(), &mut |i| {
            self.bindings.push((i.to_string(), at))
        });
    }

    /// Is `name` bound again in the function before `offset`?
    fn rebound_before(&self, name: &str, offset: usize) -> bool {
        self.bindings.iter().any(|(n, at)| n == name && *at < offset)
    }

    /// A value leaving the function: remember it, whether a constructor or a variable.
    fn note_returned(&mut self, e: &Expr) {
        let e = peel_result(e);
        match as_ident(e) {
            Some(id) => *self.returned_uses.entry(id.to_string()).or_default() += 1,
            None => {
                self.returned.insert(addr(e));
            }
        }
    }

    /// Is the candidate only ever handed back to the caller?
    fn only_returned(&self, c: &Candidate) -> bool {
        if !self.may_return_host {
            return false;
        }
        match &c.binding {
            None => self.returned.contains(&c.call),
            Some(name) => {
                let count = |m: &HashMap<String, usize>| m.get(name).copied().unwrap_or(0);
                count(&self.uses).saturating_sub(count(&self.discount)) <= count(&self.returned_uses)
            }
        }
    }
}

fn addr(e: &Expr) -> usize {
    e as *const Expr as usize
}

impl Rule for Check {
    fn enter_fn(&mut self, cx: &Checker<'_, '_>, _sig: &syn::Signature) {
        let name = cx.fun().map(|f| f.name.to_ascii_lowercase()).unwrap_or_default();
        // A function about the host (`flash_attn_cpu`, `to_host`) makes host tensors on purpose.
        let host_fn = name.contains("cpu") || name.contains("host");
        let state = FnState {
            // Backends and CPU kernels make host tensors by design.
            active: cx.in_forward() && !host_fn && cx.scope.backend == 0,
            may_return_host: !name.starts_with("forward"),
            ..FnState::default()
        };
        self.stack.push(state);
    }

    fn exit_fn(&mut self, _cx: &Checker<'_, '_>, out: &mut Vec<Finding>) {
        let Some(mut state) = self.stack.pop() else { return };
        for c in std::mem::take(&mut state.candidates) {
            if c.binding.as_ref().is_some_and(|b| state.moved.contains(b)) || state.only_returned(&c) {
                continue;
            }
            // A host tensor that is only read back, or rebuilt on the input's device, never meets
            // the inputs: host bookkeeping on purpose.
            if c.kind == FixedKind::Cpu && c.tracked && c.binding.is_some() && !state.host_escaped {
                continue;
            }
            // On the default device, a tensor meets only tensors on that device when the crate
            // never names another (no device parameter anywhere, no `x.device()`).
            let finding = if c.kind == FixedKind::Default {
                c.finding.only_if(Condition::UsesDevices)
            } else {
                c.finding
            };
            out.push(finding);
        }
    }

    fn block(&mut self, cx: &Checker<'_, '_>, b: &syn::Block, _out: &mut Vec<Finding>) {
        let Some(state) = self.stack.last_mut() else { return };
        if let Some(syn::Stmt::Expr(tail, None)) = b.stmts.last()
            && state.active
        {
            state.note_returned(tail);
            let body = cx.fun().is_some_and(|f| f.body_range == cx.file.range(b.brace_token.span.join()));
            if body && cx.is_host(tail) {
                state.host_escaped = true;
            }
        }
    }

    fn stmt(&mut self, cx: &Checker<'_, '_>, s: &syn::Stmt, _out: &mut Vec<Finding>) {
        // Only an active function yields candidates, the one thing this bookkeeping is read for.
        let Some(state) = self.stack.last_mut().filter(|s| s.active) else { return };
        if let Some((name, host_only)) = state.next_binding.take() {
            if host_only {
                state.host_derived.insert(name);
            } else {
                state.host_derived.remove(&name);
            }
        }
        state.note_bindings(cx.file, Binder::Stmt(s));
        let syn::Stmt::Local(local) = s else { return };
        let Some(name) = pat_ident(&local.pat) else { return };
        let name = name.to_string();
        let Some(init) = &local.init else { return };
        // Reads of an older variable of the same name inside the initialiser are not uses of
        // this one.
        let mut shadowed = 0;
        crate::rust::syntax::for_each_ident(&init.expr, |i| shadowed += usize::from(*i == name));
        state.discount.insert(name.clone(), shadowed);
        state.uses.insert(name.clone(), 0);
        state.returned_uses.insert(name.clone(), 0);
        let root = chain_root(&init.expr);
        // The new binding takes effect after its initialiser, which may read the old one
        // (`let t = t.matmul(&flip)?`): noted now, applied at the next statement.
        let host_only = host_derived(cx, state, &init.expr);
        state.next_binding = Some((name.clone(), host_only));
        if Ctor::of(cx.file.apis, root).is_some() {
            state.bound.insert(addr(root), name);
        }
    }

    fn expr(&mut self, cx: &Checker<'_, '_>, e: &Expr, _out: &mut Vec<Finding>) {
        let Some(state) = self.stack.last_mut().filter(|s| s.active) else { return };
        state.note_bindings(cx.file, Binder::Expr(e));
        match e {
            Expr::Path(_) => {
                if let Some(id) = as_ident(e) {
                    *state.uses.entry(id.to_string()).or_default() += 1;
                }
            }
            Expr::Call(c)
                if c.args.len() == 1
                    && matches!(&*c.func, Expr::Path(p) if p.path.is_ident("Ok") || p.path.is_ident("Some")) =>
            {
                state.note_returned(&c.args[0]);
                state.host_escaped |= cx.is_host(&c.args[0]);
            }
            Expr::Return(r) => {
                if let Some(v) = &r.expr {
                    state.note_returned(v);
                    state.host_escaped |= cx.is_host(v);
                }
            }
            Expr::Struct(st) => state.host_escaped |= st.fields.iter().any(|f| cx.is_host(&f.expr)),
            Expr::Assign(a) => state.host_escaped |= as_ident(&a.left).is_none() && cx.is_host(&a.right),
            Expr::Binary(b) => {
                let (l, r) = (cx.is_host(&b.left), cx.is_host(&b.right));
                state.host_escaped |= (l && tensor_input(cx, &b.right)) || (r && tensor_input(cx, &b.left));
            }
            Expr::Call(c) if Ctor::of(cx.file.apis, e).is_none() && !cx.is_host(e) => {
                // Handed to other code (or mixed with other tensors in `Tensor::cat`).
                state.host_escaped |= c.args.iter().any(|a| holds_host(cx, a));
            }
            // A host buffer filled in place from device data (`buf.copy_(&xs)`) is meant to be there.
            Expr::MethodCall(m) if m.method == "copy_" || m.method == "f_copy_" => {
                if let Some(id) = as_ident(chain_root(&m.receiver)) {
                    state.moved.insert(id.to_string());
                }
            }
            // `Tensor::from_vec(..)` then `.and_then(|t| t.to_device(&self.device))`: moved at once.
            Expr::MethodCall(m)
                if matches!(m.method.to_string().as_str(), "and_then" | "map")
                    && m.args.first().is_some_and(|a| moves_its_argument(cx, a)) =>
            {
                state.exempt.insert(addr(chain_root(&m.receiver)));
            }
            Expr::MethodCall(m) if is_transfer_method(cx.file.apis, &m.method.to_string()) => {
                let to_fixed = match m.method.to_string().as_str() {
                    "cpu" | "cuda" => true,
                    _ => {
                        m.args.first().is_some_and(|a| matches!(cx.device_of(a), Some(DevSrc::Fixed { .. })))
                    }
                };
                if to_fixed {
                    return;
                }
                let root = chain_root(&m.receiver);
                if let Some(id) = as_ident(root) {
                    state.moved.insert(id.to_string());
                } else {
                    state.exempt.insert(addr(root));
                }
            }
            Expr::MethodCall(m) => {
                // A host tensor meets a tensor from elsewhere (`xs.add(&host)`, `host.add(xs)`),
                // or is stored (`v.push(host)`).
                // A receiver computed only from host values (a transform composed on the host)
                // keeps the host tensor on the host side.
                let recv_host = cx.is_host(&m.receiver)
                    || as_ident(chain_root(&m.receiver)).is_some_and(|id| state.host_derived.contains(&id.to_string()));
                state.host_escaped |= m.args.iter().any(|a| {
                    let host = holds_host(cx, a);
                    (host && !recv_host) || (recv_host && !host && tensor_input(cx, a))
                });
            }
            Expr::Call(_) if cx.in_forward() => {
                let Some(ctor) = Ctor::of(cx.file.apis, e) else { return };
                if state.exempt.contains(&addr(e)) {
                    return;
                }
                let Some(f) = cx.fun() else { return };
                let binding = state.bound.get(&addr(e)).cloned();
                let (mut finding, kind) = match ctor.device {
                    CtorDevice::ImplicitCpu => {
                        (implicit_cpu(cx.file, f, e, &ctor, cx.scope.closures > 0), FixedKind::Cpu)
                    }
                    CtorDevice::LastArg => {
                        let Some(arg) = ctor.device_arg() else { return };
                        let Some(DevSrc::Fixed { kind, at }) = cx.device_of(arg) else {
                            return;
                        };
                        (fixed_arg(cx, f, e, &ctor, arg, kind, at), kind)
                    }
                };
                // The fix names the input: safe only where that name surely still denotes it.
                if let (Some(fix), Some((input, _))) = (finding.fix.as_mut(), f.input_tensor())
                    && state.rebound_before(input, cx.file.range(e.span()).start)
                {
                    fix.applicability = fix.applicability.max(Applicability::Unsafe);
                }
                let tracked = cx.is_host(e);
                state.candidates.push(Candidate { finding, binding, call: addr(e), kind, tracked });
            }
            _ => {}
        }
    }
}

/// A tensor that comes from elsewhere: a tensor parameter or a field of `self`.
fn tensor_input(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    let e = crate::rust::syntax::peel(e);
    crate::rust::syntax::self_field(e).is_some()
        || as_ident(e).is_some_and(|id| {
            cx.fun().is_some_and(|f| {
                f.params.iter().any(|(n, k)| id == n && matches!(k, ParamKind::Tensor { .. }))
            })
        })
}

/// `|t| t.to_device(&self.device)`: a closure that moves its argument to a device that is not
/// fixed.
fn moves_its_argument(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    let Expr::Closure(c) = crate::rust::syntax::peel(e) else { return false };
    let [param] = c.inputs.iter().collect::<Vec<_>>()[..] else { return false };
    let Some(name) = pat_ident(param) else { return false };
    let Expr::MethodCall(m) = crate::rust::syntax::peel(&c.body) else { return false };
    let method = m.method.to_string();
    is_transfer_method(cx.file.apis, &method)
        && !matches!(method.as_str(), "cpu" | "cuda")
        && as_ident(&m.receiver).is_some_and(|r| *r == *name)
        && m.args.first().is_some_and(|a| !matches!(cx.device_of(a), Some(DevSrc::Fixed { .. })))
}

/// Is the initialiser computed only from host values of the function: it names a host tensor
/// (or a variable computed only from them) and neither a tensor parameter nor the module's
/// weights at work (a method called on a field of `self`)? `let t = match self.flip { true =>
/// t.matmul(&flip)?, false => t }` is; a meeting with anything else in the initialiser already
/// counted as the host tensor leaving the host side.
fn host_derived(cx: &Checker<'_, '_>, state: &FnState, e: &Expr) -> bool {
    use syn::visit::Visit;
    let Some(f) = cx.fun() else { return false };
    let (mut host, mut input) = (false, false);
    crate::rust::syntax::for_each_ident(e, |i| {
        let name = i.to_string();
        host |= f.host.contains(&name) || state.host_derived.contains(&name);
        input |= f
            .params
            .iter()
            .any(|(n, k)| *n == name && matches!(k, ParamKind::Tensor { .. } | ParamKind::TensorLike));
    });
    struct OnSelf(bool);
    impl<'a> Visit<'a> for OnSelf {
        fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
            self.0 |= crate::rust::syntax::self_field(chain_root(&m.receiver)).is_some();
            syn::visit::visit_expr_method_call(self, m);
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    if !host || input {
        return false;
    }
    let mut on_self = OnSelf(false);
    on_self.visit_expr(e);
    !on_self.0
}

/// Is `e` a host tensor, or an array or slice of values holding one (`&[a, host]`)?
fn holds_host(cx: &Checker<'_, '_>, e: &Expr) -> bool {
    match crate::rust::syntax::peel(e) {
        Expr::Array(a) => a.elems.iter().any(|x| holds_host(cx, x)),
        Expr::Tuple(t) => t.elems.iter().any(|x| holds_host(cx, x)),
        _ => cx.is_host(e),
    }
}

fn ctor_name(ctor: &Ctor<'_>) -> String {
    format!("Tensor::{}", ctor.name)
}

fn describe(kind: FixedKind) -> &'static str {
    match kind {
        FixedKind::Cpu => "the CPU",
        FixedKind::Accelerator => "a fixed accelerator",
        FixedKind::Default => "the default device",
    }
}

fn primary_api(file: &FileCx<'_>) -> Option<Api> {
    let mut apis = file.apis.iter();
    let first = apis.next()?;
    apis.next().is_none().then_some(first)
}

fn fixed_arg(
    cx: &Checker<'_, '_>,
    f: &FnCx,
    call: &Expr,
    ctor: &Ctor<'_>,
    arg: &Expr,
    kind: FixedKind,
    at: std::ops::Range<usize>,
) -> Finding {
    let file = cx.file;
    let in_closure = cx.scope.closures > 0;
    let dev_part = device_part(arg);
    let dev_range = file.range(dev_part.span());
    let written = file.short(&at);
    let through = file.short(&dev_range).trim_start_matches('&').to_string();
    let through_var = !dev_range.contains(&at.start);
    let message = if through_var {
        format!(
            "`{}` in `{}` makes a tensor on {} (`{}`, through `{}`), not on the device of its inputs",
            ctor_name(ctor),
            f.name,
            describe(kind),
            written,
            through
        )
    } else {
        format!(
            "`{}` in `{}` makes a tensor on {} (`{}`), not on the device of its inputs",
            ctor_name(ctor),
            f.name,
            describe(kind),
            written
        )
    };
    let input = f.input_tensor();
    let x = input.map(|(n, _)| n).unwrap_or("xs");
    let api = primary_api(file);
    let replacement = |text: &str| -> Option<String> {
        let dev = format!("{x}.device()");
        match api {
            Some(Api::Candle) => Some(dev),
            Some(Api::Tch) => {
                if text.ends_with("_CPU") || text.ends_with("_CUDA") {
                    let kind = tch_kind(text)?;
                    Some(format!("(tch::Kind::{kind}, {dev})"))
                } else {
                    Some(dev)
                }
            }
            Some(Api::Burn) | Some(Api::Devcheck) => Some(format!("&{dev}")),
            None => None,
        }
    };
    let help = match api {
        Some(Api::Candle) => format!(
            "take the device from an input: `{}(.., {x}.device())`, or derive the tensor from one (`{x}.zeros_like()`)",
            ctor_name(ctor)
        ),
        Some(Api::Tch) => format!(
            "take the device from an input: `(kind, {x}.device())` or `{x}.options()`, or derive the tensor from one (`{x}.zeros_like()`)"
        ),
        Some(Api::Burn) => format!(
            "take the device from an input: `&{x}.device()`, or derive the tensor from one (`{x}.zeros_like()`)"
        ),
        Some(Api::Devcheck) => format!(
            "take the device from an input: `&{x}.device()`, or derive the tensor from one (`Tensor::zeros_like(&{x})`, `{x}.new_zeros(..)`)"
        ),
        None => format!("take the device from an input (`{x}.device()`), or derive the tensor from one"),
    };
    let fix = input.and_then(|(name, by_ref)| {
        let text = file.snippet(&dev_range).to_string();
        let new = replacement(&text)?;
        let applicability = if by_ref && !in_closure { Applicability::Safe } else { Applicability::Unsafe };
        Some(Fix::new(
            applicability,
            format!("make it on the device of `{name}`"),
            vec![Edit { range: dev_range.clone(), replacement: new }],
        ))
    });
    let mut finding = Finding::new(&registry::D001, file.range(call.span()), message)
        .label(format!("made on {}", describe(kind)))
        .help(help)
        .fix(fix);
    if through_var {
        finding = finding.related(at, "the device is fixed here");
    }
    finding
}

fn implicit_cpu(file: &FileCx<'_>, f: &FnCx, call: &Expr, ctor: &Ctor<'_>, in_closure: bool) -> Finding {
    let input = f.input_tensor();
    let x = input.map(|(n, _)| n).unwrap_or("xs");
    let range = file.range(call.span());
    let fix = input.map(|(name, by_ref)| {
        Fix::new(
            if by_ref && !in_closure { Applicability::Safe } else { Applicability::Unsafe },
            format!("move it to the device of `{name}`"),
            vec![Edit { range: range.end..range.end, replacement: format!(".to_device({name}.device())") }],
        )
    });
    Finding::new(
        &registry::D001,
        range,
        format!(
            "`{}` in `{}` always makes a tensor on the CPU, not on the device of its inputs",
            ctor_name(ctor),
            f.name
        ),
    )
    .label("made on the CPU")
    .help(format!("move it where the input lives: `{}(..).to_device({x}.device())`", ctor_name(ctor)))
    .fix(fix)
}

fn tch_kind(constant: &str) -> Option<&'static str> {
    let prefix = constant.rsplit("::").next()?.split('_').next()?;
    Some(match prefix {
        "FLOAT" => "Float",
        "DOUBLE" => "Double",
        "INT64" => "Int64",
        "INT" => "Int",
        "HALF" => "Half",
        "BFLOAT16" => "BFloat16",
        "BOOL" => "Bool",
        "UINT8" => "Uint8",
        _ => return None,
    })
}
