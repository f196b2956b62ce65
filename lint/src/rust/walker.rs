//! The one pass over a file: a syn visitor that keeps track of where it is (test code, which
//! function, loops, debug-gated or device-specific branches, logging macros) and hands each node
//! to every rule ([`Rule`]).

use std::collections::HashSet;
use std::ops::Range;

use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Block, Expr, ExprMethodCall, Token};

use super::api::is_host_read;
use super::crates::{Call, Callee, FileSummary, FnId, FnInfo, ModDecl, StructInfo};
use super::device::{DevEnv, DevSrc, classify_options, is_host_tensor};
use super::facts::Facts;
use super::syntax::{
    ParamKind, as_ident, chain_calls, chain_root, classify_type, is_assert_macro, is_cfg_accelerator_feature,
    is_cfg_test, is_formatting_macro, is_test_fn, pat_ident, pat_idents, returns_self, self_field, type_name,
};
use crate::diagnostic::Finding;
use crate::rust::FileCx;

/// The function being read.
#[derive(Debug)]
pub(crate) struct FnCx {
    pub name: String,
    pub params: Vec<(String, ParamKind)>,
    pub is_main: bool,
    /// A forward pass: `forward*`, or a function with tensor inputs that is not a constructor.
    pub forward_like: bool,
    /// The type of the enclosing `impl`.
    pub self_ty: Option<String>,
    /// Loop nesting inside this function (iterator closures count).
    pub loops: u32,
    /// Loops over the module's own fields (`for layer in &self.layers`).
    pub layer_loops: u32,
    /// Loops that run once per layer ([`Walker::loop_kind`]).
    pub per_layer_loops: u32,
    /// Loops over a model's parameters.
    pub param_loops: u32,
    /// Loops whose own body takes a training step (`loss.backward()`, `optim.step(..)`).
    pub step_loops: u32,
    /// The function takes one training step itself, outside any loop of its own (a burn
    /// `TrainStep::step`, an agent's `train_step`): it runs at every step.
    pub step_fn: bool,
    /// Names bound by the patterns of the loops around the node (`y` in `for y in 0..h`).
    pub loop_vars: Vec<LoopVar>,
    /// For each loop around the node, innermost last: does it go over batch items, images or
    /// incoming messages (rather than steps, layers or elements)?
    pub batch_loops: Vec<bool>,
    /// The body, braces included.
    pub body_range: Range<usize>,
    /// The function's index in the file's summary.
    pub id: FnId,
    /// Where the device values named so far come from (parameters, `let`s).
    pub env: DevEnv,
    /// Locals holding tensors that live on the host by construction ([`is_host_tensor`]).
    pub host: HashSet<String>,
    /// Every name bound so far (parameters, `let`s): a call through one is a closure's.
    pub locals: HashSet<String>,
    /// The loops around the node, outermost first, by their number in the file.
    pub loop_ids: Vec<u32>,
    /// Names bound to a gate: a test that holds every N steps (`let save_now = step % every == 0;`),
    /// or a debug or environment switch.
    pub gate_names: HashSet<String>,
    /// Names a `match` arm binds to an enum variant's value (`Self::Conv(c) => c.forward(x)`):
    /// the name, the enum and the variant, innermost last.
    pub variant_vars: Vec<(String, String, String)>,
}

impl FnCx {
    /// The first tensor parameter, borrowed ones first: what a fix points a device at.
    pub fn input_tensor(&self) -> Option<(&str, bool)> {
        let tensors = || {
            self.params.iter().filter_map(|(n, k)| match k {
                ParamKind::Tensor { by_ref } => Some((n.as_str(), *by_ref)),
                _ => None,
            })
        };
        tensors().find(|(_, by_ref)| *by_ref).or_else(|| tensors().next())
    }
}

/// A name bound by a loop's pattern.
#[derive(Debug, Clone)]
pub(crate) struct LoopVar {
    pub name: String,
    /// The field of `self` the loop iterates (`layers` in `for layer in &self.layers`).
    pub field: Option<String>,
    /// The loop iterates a tensor's slices (`for row in t.iter_dim(0)`): the name holds one.
    pub slice: bool,
    /// The loop goes over batch items or images (`for i in 0..batch_size`, `for img in images`).
    pub batch: bool,
}

/// Where the visitor is.
#[derive(Debug, Default)]
pub(crate) struct Scope {
    /// Inside `#[cfg(test)]` or a `#[test]` function.
    pub test: u32,
    pub fns: Vec<FnCx>,
    /// In a branch taken only when debugging, logging, an environment variable or every N steps.
    pub gated: u32,
    /// Inside the arguments of a printing or logging macro.
    pub log_macro: u32,
    /// Inside the arguments of a macro that does nothing in a release build or at the default
    /// log level (`debug!`, `trace!`, `debug_assert!`).
    pub debug_macro: u32,
    /// In a branch chosen by the device (`if xs.device().is_cpu()`, `match dev { Device::Cpu => .. }`).
    pub device_branch: u32,
    /// In an error or out-of-memory branch.
    pub error_branch: u32,
    /// An operand of a comparison (`dev == Device::Cuda(0)`).
    pub compare: u32,
    /// Inside an `impl FromStr/From/TryFrom/Deserialize` or a `parse*`/`from_str*` function.
    pub conversion: u32,
    /// Inside code that defines device values: a function returning a device
    /// (`fn device(cpu: bool) -> Result<Device>`), or a `(Kind, Device)` constant.
    pub device_def: u32,
    /// Inside a closure (whose parameters may shadow the function's).
    pub closures: u32,
    /// In a backend or kernel module (`mod cpu_backend`, a file under `backends/`): code that
    /// places tensors by design.
    pub backend: u32,
    /// In a branch chosen by probing the machine (`if has_mps() { .. } else { .. }`).
    pub probe: u32,
    /// In the condition of an `if` or a `while`, or what a `match` looks at: the host needs the
    /// value to know which way to go.
    pub deciding: u32,
    /// Loops of the file numbered so far.
    pub loops_seen: u32,
    /// Inside an inline module (`mod inner { .. }`).
    pub inline_mods: u32,
    /// Inside the impl of a configuration type (`DeviceSetup`, `RunConfig`, `ModelBuilder`) or a
    /// struct literal of one.
    pub config: u32,
}

/// What a rule sees at each node.
pub(crate) struct Checker<'a, 'f> {
    pub file: &'a FileCx<'f>,
    pub facts: &'a Facts,
    pub scope: &'a Scope,
}

impl Checker<'_, '_> {
    /// In test code: a test/bench file, `#[cfg(test)]`, or a `#[test]` function.
    pub fn in_test(&self) -> bool {
        self.scope.test > 0 || self.file.kind.is_test_like()
    }

    pub fn fun(&self) -> Option<&FnCx> {
        self.scope.fns.last()
    }

    /// The names of the current function's tensor parameters (none outside a function).
    pub fn tensor_params(&self) -> HashSet<String> {
        self.fun()
            .map(|f| {
                f.params
                    .iter()
                    .filter(|(_, k)| matches!(k, ParamKind::Tensor { .. }))
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn in_loop(&self) -> bool {
        self.fun().is_some_and(|f| f.loops > 0)
    }

    /// Inside a loop that runs once per layer.
    pub fn in_per_layer_loop(&self) -> bool {
        self.fun().is_some_and(|f| f.per_layer_loops > 0)
    }

    /// Inside a loop over a model's parameters.
    pub fn in_param_loop(&self) -> bool {
        self.fun().is_some_and(|f| f.param_loops > 0)
    }

    /// Inside a loop whose own body takes a training step.
    pub fn in_step_loop(&self) -> bool {
        self.fun().is_some_and(|f| f.step_loops > 0)
    }

    /// The function only ever names the CPU as its device (`Device::Cpu`, `NdArray`, and nothing
    /// of an accelerator): a read there does not wait for one.
    pub fn cpu_only(&self) -> bool {
        let Some(f) = self.fun() else { return false };
        let body = self.file.snippet(&f.body_range);
        (body.contains("Device::Cpu") || body.contains("NdArray"))
            && !["cuda", "Cuda", "metal", "Metal", "gpu", "Gpu", "Wgpu", "best_available", "device("]
                .iter()
                .any(|w| body.contains(w))
    }

    /// The loops around the node, outermost first, by their number in the file.
    pub fn loop_ids(&self) -> &[u32] {
        self.fun().map(|f| f.loop_ids.as_slice()).unwrap_or(&[])
    }

    /// Application code: a binary, an example, a build script, or a `main` function.
    pub fn in_app(&self) -> bool {
        !self.file.kind.is_library() || self.scope.fns.iter().any(|f| f.is_main)
    }

    /// In a forward pass that is not test code, nor a branch chosen by the device.
    pub fn in_forward(&self) -> bool {
        !self.in_test() && self.scope.device_branch == 0 && self.fun().is_some_and(|f| f.forward_like)
    }

    /// Debug-, environment- or step-gated, or inside a logging macro.
    pub fn quiet(&self) -> bool {
        self.scope.gated > 0 || self.scope.log_macro > 0
    }

    /// Field facts for `self.<name>` in the current impl.
    pub fn self_ty(&self) -> Option<&str> {
        self.fun().and_then(|f| f.self_ty.as_deref())
    }

    /// Where a device expression comes from, with what the function and its struct say.
    pub fn device_of(&self, e: &Expr) -> Option<DevSrc> {
        let empty = DevEnv::default();
        let env = self.fun().map(|f| &f.env).unwrap_or(&empty);
        classify_options(self.file, e, env, &|f| self.facts.field_device(self.self_ty(), f))
    }

    /// Does `e` denote a tensor that lives on the host by construction?
    pub fn is_host(&self, e: &Expr) -> bool {
        let Some(f) = self.fun() else { return false };
        is_host_tensor(self.file, e, &f.env, &|n| f.host.contains(n))
    }
}

/// A loop body as handed to [`Rule::enter_loop`].
#[derive(Clone, Copy)]
pub(crate) enum LoopBody<'a> {
    Block(&'a Block),
    Closure(&'a Expr),
}

/// A rule's per-file state. Every hook has an empty default.
pub(crate) trait Rule {
    fn enter_fn(&mut self, _cx: &Checker<'_, '_>, _sig: &syn::Signature) {}
    fn exit_fn(&mut self, _cx: &Checker<'_, '_>, _out: &mut Vec<Finding>) {}
    /// Every expression, outer before inner.
    fn expr(&mut self, _cx: &Checker<'_, '_>, _e: &Expr, _out: &mut Vec<Finding>) {}
    fn stmt(&mut self, _cx: &Checker<'_, '_>, _s: &syn::Stmt, _out: &mut Vec<Finding>) {}
    fn block(&mut self, _cx: &Checker<'_, '_>, _b: &Block, _out: &mut Vec<Finding>) {}
    /// A loop body, before it is visited (the scope already counts the loop).
    fn enter_loop(&mut self, _cx: &Checker<'_, '_>, _body: LoopBody<'_>, _out: &mut Vec<Finding>) {}
    fn item_struct(&mut self, _cx: &Checker<'_, '_>, _s: &syn::ItemStruct, _out: &mut Vec<Finding>) {}
    /// A `static` (also one of `lazy_static!`): its name and initialiser.
    fn item_static(
        &mut self,
        _cx: &Checker<'_, '_>,
        _name: &syn::Ident,
        _init: &Expr,
        _out: &mut Vec<Finding>,
    ) {
    }
    fn finish(&mut self, _cx: &Checker<'_, '_>, _out: &mut Vec<Finding>) {}
}

pub(crate) struct Walker<'a, 'f> {
    pub file: &'a FileCx<'f>,
    pub facts: &'a Facts,
    pub scope: Scope,
    pub checks: Vec<Box<dyn Rule + 'a>>,
    pub out: Vec<Finding>,
    impls: Vec<(Option<String>, Option<String>)>,
    /// What the crate-wide pass needs from this file.
    summary: FileSummary,
}

macro_rules! hook {
    ($w:expr, $method:ident $(, $arg:expr)*) => {{
        let cx = Checker { file: $w.file, facts: $w.facts, scope: &$w.scope };
        for check in $w.checks.iter_mut() {
            check.$method(&cx $(, $arg)*, &mut $w.out);
        }
    }};
}

impl<'a, 'f> Walker<'a, 'f> {
    pub fn new(file: &'a FileCx<'f>, facts: &'a Facts, checks: Vec<Box<dyn Rule + 'a>>) -> Self {
        let summary = FileSummary { apis: file.apis, ..FileSummary::default() };
        let scope = Scope { backend: file.backend as u32, ..Scope::default() };
        Walker { file, facts, scope, checks, out: Vec::new(), impls: Vec::new(), summary }
    }

    /// The findings, and the file's part of the crate-wide pass.
    pub fn run(mut self, ast: &syn::File) -> (Vec<Finding>, FileSummary) {
        self.visit_file(ast);
        hook!(self, finish);
        (self.out, self.summary)
    }

    fn with_fn(&mut self, attrs: &[syn::Attribute], sig: &syn::Signature, body: &Block, has_self_impl: bool) {
        let built_for = is_cfg_accelerator_feature(attrs);
        self.scope.probe += built_for as u32;
        self.with_fn_inner(attrs, sig, body, has_self_impl);
        self.scope.probe -= built_for as u32;
    }

    fn with_fn_inner(
        &mut self,
        attrs: &[syn::Attribute],
        sig: &syn::Signature,
        body: &Block,
        has_self_impl: bool,
    ) {
        let test = is_test_fn(attrs) || is_cfg_test(attrs);
        if test {
            self.scope.test += 1;
        }
        let (self_ty, trait_name) =
            if has_self_impl { self.impls.last().cloned().unwrap_or((None, None)) } else { (None, None) };
        // An optimizer's own `step`/`backward_step` (in `impl Optimizer for Lbfgs`) is a step.
        let optimizer_step = trait_name.as_deref().is_some_and(|t| t.contains("Optim"))
            && (sig.ident == "step" || sig.ident.to_string().starts_with("backward_step"));
        let mut fcx = self.fn_cx(sig, self_ty, trait_name);
        fcx.body_range = self.file.range(body.brace_token.span.join());
        fcx.step_fn =
            !fcx.is_main && (optimizer_step || (takes_a_step(&body.stmts) && !has_step_loop(&body.stmts)));
        fcx.id = self.register_fn(sig, &fcx);
        for (name, kind) in &fcx.params {
            if *kind == ParamKind::Device {
                fcx.env.bind(name.clone(), Some(DevSrc::Follows));
            }
        }
        let conversion = fcx.name.starts_with("parse") || fcx.name.starts_with("from_str");
        let device_def = returns_device(&sig.output);
        self.scope.device_def += device_def as u32;
        if conversion {
            self.scope.conversion += 1;
        }
        self.scope.fns.push(fcx);
        {
            let cx = Checker { file: self.file, facts: self.facts, scope: &self.scope };
            for check in self.checks.iter_mut() {
                check.enter_fn(&cx, sig);
            }
        }
        let first = self.out.len();
        let start = self.file.range(sig.fn_token.span).start;
        self.visit_block(body);
        hook!(self, exit_fn);
        // The findings of the body are in this function (those of nested functions already say
        // which): repeats of one are reported once.
        for f in &mut self.out[first..] {
            f.scope.get_or_insert(start);
        }
        self.scope.fns.pop();
        self.scope.device_def -= device_def as u32;
        if conversion {
            self.scope.conversion -= 1;
        }
        if test {
            self.scope.test -= 1;
        }
    }

    fn fn_cx(&self, sig: &syn::Signature, self_ty: Option<String>, trait_name: Option<String>) -> FnCx {
        let name = sig.ident.to_string();
        let mut is_method = false;
        let mut params = Vec::new();
        for input in &sig.inputs {
            match input {
                syn::FnArg::Receiver(_) => is_method = true,
                syn::FnArg::Typed(t) => {
                    let pname = pat_ident(&t.pat).map(|i| i.to_string()).unwrap_or_default();
                    params.push((pname, classify_type(&t.ty)));
                }
            }
        }
        let params_names: HashSet<String> = params.iter().map(|(n, _)| n.clone()).collect();
        let returns_self = returns_self(&sig.output, self_ty.as_deref());
        let is_main = name == "main" && self.scope.fns.is_empty() && self_ty.is_none();
        let has_tensor_input =
            params.iter().any(|(_, k)| matches!(k, ParamKind::Tensor { .. } | ParamKind::TensorLike));
        let in_impl = self_ty.is_some() || trait_name.is_some();
        let _ = trait_name;
        // Preview: a free function of an example or a binary that takes and returns tensors is a
        // piece of a model too (not seen on the ecosystem check yet).
        let returns_tensor = self.file.preview
            && matches!(&sig.output, syn::ReturnType::Type(_, ty) if super::syntax::mentions_tensor(ty));
        let forward_like = !returns_self
            && !is_main
            && (name.starts_with("forward")
                || (has_tensor_input
                    && (self.file.kind.is_library() || (is_method && in_impl) || returns_tensor)));
        FnCx {
            name,
            params,
            is_main,
            forward_like,
            self_ty,
            loops: 0,
            layer_loops: 0,
            per_layer_loops: 0,
            param_loops: 0,
            step_loops: 0,
            step_fn: false,
            loop_vars: Vec::new(),
            batch_loops: Vec::new(),
            body_range: 0..0,
            id: 0,
            env: DevEnv::default(),
            host: HashSet::new(),
            locals: params_names,
            gate_names: HashSet::new(),
            loop_ids: Vec::new(),
            variant_vars: Vec::new(),
        }
    }

    /// Records a function in the summary (and what its signature says about the crate).
    fn register_fn(&mut self, sig: &syn::Signature, fcx: &FnCx) -> FnId {
        let id = self.summary.fns.len() as FnId;
        let receiver = sig.receiver();
        let in_test = self.scope.test > 0 || self.file.kind.is_test_like();
        if !in_test && fcx.params.iter().any(|(_, k)| *k == ParamKind::Device) {
            self.summary.uses_devices = true;
        }
        // `fn to_device(&mut self, ..)` that returns nothing (or `Result<()>`) moves in place.
        let returns_nothing = match &sig.output {
            syn::ReturnType::Default => true,
            syn::ReturnType::Type(_, ty) => {
                let unit = |t: &syn::Type| matches!(t, syn::Type::Tuple(t) if t.elems.is_empty());
                unit(ty)
                    || matches!(&**ty, syn::Type::Path(p) if p.path.segments.last().is_some_and(|s| {
                        s.ident == "Result"
                            && matches!(&s.arguments, syn::PathArguments::AngleBracketed(a)
                                if a.args.first().is_some_and(|g| matches!(g, syn::GenericArgument::Type(t) if unit(t))))
                    }))
            }
        };
        if receiver.is_some_and(|r| r.mutability.is_some() && r.reference.is_some())
            && returns_nothing
            && super::api::is_transfer_name(&fcx.name)
        {
            self.summary.in_place.push(fcx.name.clone());
        }
        self.summary.fns.push(FnInfo {
            test: in_test,
            self_ty: fcx.self_ty.clone(),
            name: fcx.name.clone(),
            method: receiver.is_some(),
            arity: fcx.params.len(),
            main: fcx.is_main,
            reads_params: Vec::new(),
            takes_step: fcx.step_fn,
            reads_host: false,
        });
        id
    }

    /// What a loop over `iterated` (or an iterator adapter on it) is: per layer in a forward
    /// pass (any loop of a `forward*` function, or a loop over the module's own fields), over a
    /// model's parameters (`vs.variables()`, `model.parameters()`), over a tensor's slices, over
    /// batch items or images.
    fn loop_kind(&self, iterated: &Expr) -> LoopKind {
        let over_self = mentions_self_field(iterated);
        // Slices along the first dimension are batch items (`t.iter_dim(0)`, `t.chunk(n, 0)?`).
        let first_dim = chain_calls(iterated).iter().any(|c| {
            is_slice_iterator(&c.method.to_string())
                && c.args.last().and_then(super::syntax::int_lit) == Some(0)
        });
        let batch = first_dim || iterates_batch(iterated);
        // Items the caller hands over (`for input in inputs` with `inputs: &[DecodeInput]`): the
        // requests or inputs of one call, not the model's layers (a body that runs the item as a
        // module says otherwise: [`Walker::visit_loop_body`]).
        let caller_items =
            as_ident(super::syntax::chain_root(super::syntax::peel(iterated))).is_some_and(|id| {
                self.scope.fns.last().is_some_and(|f| {
                    f.params.iter().any(|(n, k)| id == n && matches!(k, super::syntax::ParamKind::Other))
                })
            });
        let per_layer = !batch
            && self
                .scope
                .fns
                .last()
                .is_some_and(|f| f.forward_like && (f.name.starts_with("forward") || over_self));
        LoopKind {
            over_self,
            per_layer,
            params: iterates_parameters(iterated),
            slices: chain_calls(iterated).iter().any(|c| is_slice_iterator(&c.method.to_string())),
            batch,
            field: over_self.then(|| first_self_field(iterated)).flatten(),
            caller_items,
            // Set from the body when it is visited.
            step: false,
        }
    }

    fn enter_loop(&mut self, kind: &LoopKind, bound: &[String]) {
        let id = self.scope.loops_seen;
        self.scope.loops_seen = id.saturating_add(1);
        if let Some(f) = self.scope.fns.last_mut() {
            f.loop_ids.push(id);
            f.loops += 1;
            f.layer_loops += kind.over_self as u32;
            f.per_layer_loops += kind.per_layer as u32;
            f.param_loops += kind.params as u32;
            f.step_loops += kind.step as u32;
            f.batch_loops.push(kind.batch);
            f.loop_vars.extend(bound.iter().map(|b| LoopVar {
                name: b.clone(),
                field: kind.field.clone(),
                slice: kind.slices,
                batch: kind.batch,
            }));
        }
    }

    fn exit_loop(&mut self, kind: &LoopKind, bound: &[String]) {
        if let Some(f) = self.scope.fns.last_mut() {
            f.loop_ids.pop();
            f.loops = f.loops.saturating_sub(1);
            f.layer_loops = f.layer_loops.saturating_sub(kind.over_self as u32);
            f.per_layer_loops = f.per_layer_loops.saturating_sub(kind.per_layer as u32);
            f.param_loops = f.param_loops.saturating_sub(kind.params as u32);
            f.step_loops = f.step_loops.saturating_sub(kind.step as u32);
            f.batch_loops.pop();
            let keep = f.loop_vars.len().saturating_sub(bound.len());
            f.loop_vars.truncate(keep);
        }
    }

    fn visit_loop_body(&mut self, body: &Block, mut kind: LoopKind, bound: &[String]) {
        kind.step = takes_a_step(&body.stmts);
        if kind.per_layer && kind.caller_items && !runs_as_module(body, bound) {
            kind.per_layer = false;
        }
        self.enter_loop(&kind, bound);
        hook!(self, enter_loop, LoopBody::Block(body));
        self.visit_block(body);
        self.exit_loop(&kind, bound);
    }

    /// What a `let` says about its name: the device it holds, whether it is a host tensor, whether
    /// it holds a test that holds every N steps.
    fn bind_local(&mut self, l: &syn::Local) {
        // Only a test is a gate (`let due = step % every == 0;`, `.map_or(false, |n| ..)`); a block,
        // a branch or a loop as the value is not looked into (each `let` inside is its own).
        let gate = l.init.as_ref().is_some_and(|i| {
            !matches!(
                super::syntax::peel(&i.expr),
                Expr::Block(_)
                    | Expr::If(_)
                    | Expr::Match(_)
                    | Expr::Loop(_)
                    | Expr::ForLoop(_)
                    | Expr::While(_)
                    | Expr::Unsafe(_)
                    | Expr::Async(_)
            ) && self.is_gate(&i.expr)
        });
        if let Some(f) = self.scope.fns.last_mut() {
            let mut names = Vec::new();
            pat_idents(&l.pat, &mut names);
            for n in &names {
                if gate {
                    f.gate_names.insert(n.clone());
                } else {
                    f.gate_names.remove(n);
                }
            }
            f.locals.extend(names);
        }
        let Some(name) = pat_ident(&l.pat) else {
            // A destructuring `let` shadows every name it binds with something unknown.
            let mut names = Vec::new();
            pat_idents(&l.pat, &mut names);
            if let Some(f) = self.scope.fns.last_mut() {
                for n in names {
                    f.host.remove(&n);
                    f.env.bind(n, None);
                }
            }
            return;
        };
        let name = name.to_string();
        let (dev, host) = match (&l.init, self.scope.fns.last()) {
            (Some(init), Some(f)) => {
                let fields = |field: &str| self.facts.field_device(f.self_ty.as_deref(), field);
                (
                    classify_options(self.file, &init.expr, &f.env, &fields),
                    is_host_tensor(self.file, &init.expr, &f.env, &|n| f.host.contains(n)),
                )
            }
            _ => (None, false),
        };
        if let Some(f) = self.scope.fns.last_mut() {
            f.env.bind(name.clone(), dev);
            if host {
                f.host.insert(name);
            } else {
                f.host.remove(&name);
            }
        }
    }

    /// `x = ..` re-binds a host tensor's name.
    fn assign(&mut self, a: &syn::ExprAssign) {
        let Some(name) = as_ident(&a.left) else { return };
        let Some(f) = self.scope.fns.last() else { return };
        let host = is_host_tensor(self.file, &a.right, &f.env, &|n| f.host.contains(n));
        let name = name.to_string();
        if let Some(f) = self.scope.fns.last_mut() {
            if host {
                f.host.insert(name);
            } else {
                f.host.remove(&name);
            }
        }
    }

    /// Records a call of the current function, if its target can be named.
    fn record_call(&mut self, callee: Callee, args: usize, at: usize) {
        if self.scope.test > 0 || self.file.kind.is_test_like() {
            return;
        }
        let Some(f) = self.scope.fns.last() else { return };
        // A step function's calls run at every step only once the crate-wide pass knows that
        // function runs again and again; a step loop's run at every iteration.
        let per_step = f.step_loops > 0 && self.scope.gated == 0;
        let gated = self.scope.gated > 0;
        self.summary.calls.push(Call {
            caller: f.id,
            at,
            callee,
            args,
            per_layer: f.per_layer_loops > 0,
            per_step,
            gated,
            in_loop: f.loops > 0,
            loops: f.loop_ids.clone(),
        });
    }

    /// Where `recv.name(..)` goes, as far as the receiver tells.
    fn method_callee(&self, recv: &Expr, name: String) -> Callee {
        let recv = super::syntax::peel(recv);
        if matches!(recv, Expr::Path(p) if p.path.is_ident("self")) {
            return Callee::SelfMethod(name);
        }
        if let Some(field) = self_field(recv) {
            return Callee::FieldMethod { field: field.to_string(), name };
        }
        if let Some(id) = as_ident(recv)
            && let Some(f) = self.scope.fns.last()
        {
            // A match arm's binding of the name (`Self::Conv(c) => c.forward(x)`), else a loop's
            // over a field (`for block in &self.blocks`).
            if let Some((_, ty, variant)) = f.variant_vars.iter().rev().find(|(n, _, _)| id == n) {
                return Callee::VariantMethod { ty: ty.clone(), variant: variant.clone(), name };
            }
            if let Some(LoopVar { field: Some(field), .. }) = f.loop_vars.iter().rev().find(|v| id == &v.name)
            {
                return Callee::FieldMethod { field: field.clone(), name };
            }
        }
        // `CtcLoss::new(0).forward(..)`: a method of the value a constructor of the type made.
        if let Expr::Call(c) = recv
            && let Some(Callee::TypeFn { ty, name: ctor }) =
                call_callee(c, self.scope.fns.last().and_then(|f| f.self_ty.as_deref()))
            && (ctor == "new" || ctor == "default" || ctor.starts_with("from") || ctor.starts_with("with"))
        {
            return Callee::TypeFn { ty, name };
        }
        Callee::Method(name)
    }

    /// Binds the name a `match` arm's pattern gives an enum variant's value
    /// (`Self::Conv(c)`, `Block::Attn(a, _)`, `Self::Mlp { inner }`); whether it bound one.
    fn bind_variant(&mut self, pat: &syn::Pat) -> bool {
        let (path, first) = match pat {
            syn::Pat::TupleStruct(t) => (&t.path, t.elems.first()),
            syn::Pat::Struct(st) => (&st.path, st.fields.first().map(|f| &*f.pat)),
            _ => return false,
        };
        let Some(syn::Pat::Ident(id)) = first else { return false };
        let n = path.segments.len();
        if n < 2 {
            return false;
        }
        let Some(f) = self.scope.fns.last_mut() else { return false };
        let owner = path.segments[n - 2].ident.to_string();
        let ty = if owner == "Self" {
            match &f.self_ty {
                Some(ty) => ty.clone(),
                None => return false,
            }
        } else {
            owner
        };
        f.variant_vars.push((id.ident.to_string(), ty, path.segments[n - 1].ident.to_string()));
        true
    }

    /// A host read in the function (it waits for the device), and whether it reads one of the
    /// function's own parameters (`t.to_data()` in `fn get(t: &Tensor)`).
    fn note_param_read(&mut self, m: &ExprMethodCall) {
        if self.scope.test > 0 {
            return;
        }
        let Some(f) = self.scope.fns.last() else { return };
        let name = m.method.to_string();
        // A copy to the CPU (`pred.to_device(&Device::Cpu)?`) waits for the device as a read does.
        let to_cpu = || {
            super::api::is_transfer_method(self.file.apis, &name)
                && (name == "cpu"
                    || m.args.first().is_some_and(|a| {
                        matches!(
                            classify_options(self.file, a, &f.env, &|_| None),
                            Some(DevSrc::Fixed { kind: super::device::FixedKind::Cpu, .. })
                        )
                    }))
        };
        let read = is_host_read(self.file.apis, &name, m.turbofish.is_some());
        if (read || to_cpu())
            && !is_host_tensor(self.file, &m.receiver, &f.env, &|n| f.host.contains(n))
            && let Some(info) = self.summary.fns.get_mut(f.id as usize)
        {
            info.reads_host = true;
        }
        if !read {
            return;
        }
        let Some(root) = as_ident(chain_root(&m.receiver)) else { return };
        let Some(pos) = f.params.iter().position(|(n, _)| root == n) else { return };
        if f.loop_vars.iter().any(|v| root == &v.name) {
            return;
        }
        if let Some(info) = self.summary.fns.get_mut(f.id as usize)
            && !info.reads_params.contains(&(pos as u32))
        {
            info.reads_params.push(pos as u32);
        }
    }

    /// Is the condition a gate ([`cond_flags`]: every N steps, debugging, an environment switch), or
    /// does it use a name bound to one?
    fn is_gate(&self, cond: &Expr) -> bool {
        if cond_flags(cond).gated {
            return true;
        }
        let Some(f) = self.scope.fns.last() else { return false };
        if f.gate_names.is_empty() {
            return false;
        }
        let mut hit = false;
        super::syntax::for_each_ident(cond, |i| hit |= f.gate_names.contains(&i.to_string()));
        hit
    }

    fn visit_branch(&mut self, flags: CondFlags, then: impl FnOnce(&mut Self)) {
        let CondFlags { gated, device, error, probe } = flags;
        self.scope.gated += gated as u32;
        self.scope.device_branch += device as u32;
        self.scope.error_branch += error as u32;
        self.scope.probe += probe as u32;
        then(self);
        self.scope.gated -= gated as u32;
        self.scope.device_branch -= device as u32;
        self.scope.error_branch -= error as u32;
        self.scope.probe -= probe as u32;
    }

    fn visit_method_call(&mut self, m: &ExprMethodCall) {
        let name = m.method.to_string();
        if name == "device" && m.args.is_empty() && self.scope.test == 0 && !self.file.kind.is_test_like() {
            self.summary.uses_devices = true;
        }
        self.note_param_read(m);
        let at = self.file.range(m.method.span()).start;
        // `xs.apply(&self.conv)` is `self.conv.forward(&xs)` (candle's and tch's `Module`), and
        // `xs.apply_t(&self.block, train)` is its `forward_t`.
        if (name == "apply" || name == "apply_t")
            && let Some(module) = m.args.first()
        {
            let forward = if name == "apply_t" { "forward_t" } else { "forward" };
            let callee = self.method_callee(applied_module(module), forward.to_string());
            if matches!(callee, Callee::FieldMethod { .. } | Callee::VariantMethod { .. }) {
                self.record_call(callee, 1, at);
            }
        }
        let callee = self.method_callee(&m.receiver, name);
        self.record_call(callee, m.args.len(), at);
        self.visit_expr(&m.receiver);
        let adapter = is_iter_adapter(m);
        for arg in &m.args {
            match arg {
                Expr::Closure(c) if adapter => {
                    let kind = self.loop_kind(&m.receiver);
                    let mut bound = Vec::new();
                    for p in &c.inputs {
                        pat_idents(p, &mut bound);
                    }
                    self.enter_loop(&kind, &bound);
                    hook!(self, enter_loop, LoopBody::Closure(&c.body));
                    self.visit_expr(arg);
                    self.exit_loop(&kind, &bound);
                }
                _ => self.visit_expr(arg),
            }
        }
    }

    fn visit_known_macro(&mut self, mac: &syn::Macro) {
        let Some(last) = mac.path.segments.last() else { return };
        let name = last.ident.to_string();
        let logging = is_formatting_macro(&name)
            || matches!(
                name.as_str(),
                "debug"
                    | "trace"
                    | "info"
                    | "warn"
                    | "error"
                    | "log"
                    | "event"
                    | "bail"
                    | "anyhow"
                    | "ensure"
            );
        let plain = is_assert_macro(&name) || matches!(name.as_str(), "vec" | "try_join" | "join");
        if !logging && !plain {
            return;
        }
        let parsed = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated);
        let Ok(args) = parsed else {
            if name == "vec"
                && let Ok(arr) = mac.parse_body_with(parse_repeat)
            {
                self.visit_expr(&arr.0);
                self.visit_expr(&arr.1);
            }
            return;
        };
        let quiet = logging || name.starts_with("debug_assert") || name.starts_with("assert");
        let debug_only = matches!(name.as_str(), "debug" | "trace") || name.starts_with("debug_assert");
        // An assertion's condition decides whether the program stops: the host needs it.
        let deciding = is_assert_macro(&name) || name == "ensure";
        self.scope.log_macro += quiet as u32;
        self.scope.debug_macro += debug_only as u32;
        self.scope.deciding += deciding as u32;
        for e in &args {
            self.visit_expr(e);
        }
        self.scope.deciding -= deciding as u32;
        self.scope.debug_macro -= debug_only as u32;
        self.scope.log_macro -= quiet as u32;
    }
}

/// The body of `lazy_static! { [pub] static ref NAME: Type = init; .. }`.
fn parse_lazy_statics(input: syn::parse::ParseStream<'_>) -> syn::Result<Vec<(syn::Ident, Expr)>> {
    let mut out = Vec::new();
    while !input.is_empty() {
        input.call(syn::Attribute::parse_outer)?;
        input.parse::<syn::Visibility>()?;
        input.parse::<Token![static]>()?;
        input.parse::<Token![ref]>()?;
        let name: syn::Ident = input.parse()?;
        input.parse::<Token![:]>()?;
        input.parse::<syn::Type>()?;
        input.parse::<Token![=]>()?;
        let init: Expr = input.parse()?;
        input.parse::<Token![;]>()?;
        out.push((name, init));
    }
    Ok(out)
}

fn parse_repeat(input: syn::parse::ParseStream<'_>) -> syn::Result<(Expr, Expr)> {
    let a: Expr = input.parse()?;
    input.parse::<Token![;]>()?;
    let b: Expr = input.parse()?;
    Ok((a, b))
}

impl<'ast> Visit<'ast> for Walker<'_, '_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // Imports of an inline module (`mod tests { use super::*; }`) are that module's.
        if self.scope.inline_mods == 0 {
            let at = self.summary.uses.len();
            flatten_use(&u.tree, &mut Vec::new(), &mut self.summary.uses);
            // `pub use` (any visibility but private) re-exports what it names.
            if !matches!(u.vis, syn::Visibility::Inherited) {
                self.summary.reexported.extend(at..self.summary.uses.len());
            }
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_none() {
            // `mod name;`: a file this one compiles. Inside an inline module, or named through
            // `cfg_attr`, its file is not worked out.
            let cfg_attr_path = m.attrs.iter().any(|a| {
                a.path().is_ident("cfg_attr")
                    && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string().split_whitespace().any(|t| t == "path"))
            });
            if self.scope.inline_mods > 0 || cfg_attr_path {
                self.summary.mods_unknown = true;
            } else {
                let path_attr = m.attrs.iter().find(|a| a.path().is_ident("path"));
                let path = path_attr.and_then(|a| match &a.meta {
                    syn::Meta::NameValue(nv) => match &nv.value {
                        Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                        _ => None,
                    },
                    _ => None,
                });
                // A `#[path]` that is not a plain string: where it points is not known.
                if path_attr.is_some() && path.is_none() {
                    self.summary.mods_unknown = true;
                }
                // `mod r#type;` is the file `type.rs`.
                let name = syn::ext::IdentExt::unraw(&m.ident).to_string();
                self.summary.mods.push(ModDecl { name, path });
            }
        }
        let test = is_cfg_test(&m.attrs);
        let backend = is_backend_name(&m.ident.to_string());
        let built_for = is_cfg_accelerator_feature(&m.attrs);
        self.scope.test += test as u32;
        self.scope.backend += backend as u32;
        self.scope.probe += built_for as u32;
        self.scope.inline_mods += 1;
        visit::visit_item_mod(self, m);
        self.scope.inline_mods -= 1;
        self.scope.probe -= built_for as u32;
        self.scope.backend -= backend as u32;
        self.scope.test -= test as u32;
    }

    fn visit_item_impl(&mut self, imp: &'ast syn::ItemImpl) {
        let test = is_cfg_test(&imp.attrs);
        let built_for = is_cfg_accelerator_feature(&imp.attrs);
        self.scope.test += test as u32;
        self.scope.probe += built_for as u32;
        let trait_name =
            imp.trait_.as_ref().and_then(|(_, p, _)| p.segments.last()).map(|s| s.ident.to_string());
        let conversion = trait_name.as_deref().is_some_and(|t| {
            matches!(t, "FromStr" | "From" | "TryFrom" | "Deserialize" | "Default" | "Display" | "Debug")
        });
        let config = type_name(&imp.self_ty).is_some_and(|t| is_config_type(&t));
        self.scope.conversion += conversion as u32;
        self.scope.config += config as u32;
        self.impls.push((type_name(&imp.self_ty), trait_name));
        visit::visit_item_impl(self, imp);
        self.impls.pop();
        self.scope.config -= config as u32;
        self.scope.conversion -= conversion as u32;
        self.scope.probe -= built_for as u32;
        self.scope.test -= test as u32;
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.impls.push((None, Some(t.ident.to_string())));
        visit::visit_item_trait(self, t);
        self.impls.pop();
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        // A function nested in a method does not belong to the impl.
        self.impls.push((None, None));
        self.with_fn(&f.attrs, &f.sig, &f.block, false);
        self.impls.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.with_fn(&f.attrs, &f.sig, &f.block, true);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.with_fn(&f.attrs, &f.sig, body, true);
        }
    }

    fn visit_item_const(&mut self, c: &'ast syn::ItemConst) {
        let def = defines_device(&c.ty);
        self.scope.device_def += def as u32;
        visit::visit_item_const(self, c);
        self.scope.device_def -= def as u32;
    }

    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        let built_for = is_cfg_accelerator_feature(&s.attrs);
        self.scope.probe += built_for as u32;
        if self.scope.test == 0 && !self.file.kind.is_test_like() {
            hook!(self, item_static, &s.ident, &s.expr);
        }
        let def = defines_device(&s.ty);
        self.scope.device_def += def as u32;
        visit::visit_item_static(self, s);
        self.scope.device_def -= def as u32;
        self.scope.probe -= built_for as u32;
    }

    fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
        // `cfg_if! { .. mod cuda; .. }`, `include!(..)`, `automod::dir!(..)`: any macro at item
        // level may declare modules the walk cannot see, but those known not to.
        let name = m.mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        if !matches!(
            name.as_str(),
            "macro_rules"
                | "lazy_static"
                | "thread_local"
                | "bitflags"
                | "const_assert"
                | "const_assert_eq"
                | "criterion_group"
                | "criterion_main"
                | "proptest"
        ) {
            self.summary.mods_unknown = true;
        }
        if m.mac.path.segments.last().is_some_and(|s| s.ident == "lazy_static")
            && self.scope.test == 0
            && !self.file.kind.is_test_like()
            && let Ok(statics) = m.mac.parse_body_with(parse_lazy_statics)
        {
            for (name, init) in &statics {
                hook!(self, item_static, name, init);
            }
        }
        visit::visit_item_macro(self, m);
    }

    fn visit_item_enum(&mut self, e: &'ast syn::ItemEnum) {
        // Each variant's value, as a field named for the variant, for calls through a `match`.
        if !is_cfg_test(&e.attrs) && self.scope.test == 0 && !self.file.kind.is_test_like() {
            let fields = e
                .variants
                .iter()
                .filter(|v| !v.fields.is_empty())
                .map(|v| (v.ident.to_string(), v.fields.iter().flat_map(|f| type_names(&f.ty)).collect()))
                .collect();
            self.summary.structs.push(StructInfo { name: e.ident.to_string(), fields });
        }
        visit::visit_item_enum(self, e);
    }

    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        let test = is_cfg_test(&s.attrs);
        self.scope.test += test as u32;
        if !test && !self.file.kind.is_test_like() {
            let fields = s
                .fields
                .iter()
                .filter_map(|f| {
                    if classify_type(&f.ty) == ParamKind::Device {
                        self.summary.uses_devices = true;
                    }
                    Some((f.ident.as_ref()?.to_string(), type_names(&f.ty)))
                })
                .collect();
            self.summary.structs.push(StructInfo { name: s.ident.to_string(), fields });
        }
        hook!(self, item_struct, s);
        visit::visit_item_struct(self, s);
        self.scope.test -= test as u32;
    }

    fn visit_block(&mut self, b: &'ast Block) {
        hook!(self, block, b);
        // After a guard that returns unless the data is on one device
        // (`let Storage::Cpu(s) = .. else { return }`, `if !xs.device().is_cpu() { bail!(..) }`),
        // the rest of the block is specific to that device.
        // After a guard that leaves unless it is time (`if !(step % every == 0) { return; }`),
        // the rest runs every N steps.
        let mut guarded = 0;
        let mut gated_rest = 0;
        for stmt in &b.stmts {
            self.visit_stmt(stmt);
            if is_device_guard(stmt) {
                guarded += 1;
                self.scope.device_branch += 1;
            }
            // Not a check that fails (`if args.log_every == 0 { bail!(..) }`): the rest is the
            // normal path then.
            if let syn::Stmt::Expr(Expr::If(i), _) = stmt
                && i.else_branch.is_none()
                && diverges(&i.then_branch)
                && !fails(&i.then_branch)
                && self.is_gate(&i.cond)
            {
                gated_rest += 1;
                self.scope.gated += 1;
            }
        }
        self.scope.device_branch -= guarded;
        self.scope.gated -= gated_rest;
    }

    fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
        hook!(self, stmt, s);
        match s {
            syn::Stmt::Macro(m) => {
                let test = is_cfg_test(&m.attrs);
                self.scope.test += test as u32;
                self.visit_known_macro(&m.mac);
                self.scope.test -= test as u32;
            }
            syn::Stmt::Local(l) if is_cfg_test(&l.attrs) => {}
            syn::Stmt::Expr(e, _) if expr_attrs(e).is_some_and(is_cfg_test) => {}
            syn::Stmt::Local(l) if is_cfg_accelerator_feature(&l.attrs) => {
                self.scope.probe += 1;
                visit::visit_stmt(self, s);
                self.bind_local(l);
                self.scope.probe -= 1;
            }
            syn::Stmt::Expr(e, _) if expr_attrs(e).is_some_and(is_cfg_accelerator_feature) => {
                self.scope.probe += 1;
                visit::visit_stmt(self, s);
                self.scope.probe -= 1;
            }
            syn::Stmt::Local(l) => {
                visit::visit_stmt(self, s);
                self.bind_local(l);
            }
            _ => visit::visit_stmt(self, s),
        }
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        hook!(self, expr, e);
        match e {
            Expr::ForLoop(f) => {
                self.visit_pat(&f.pat);
                self.visit_expr(&f.expr);
                let kind = self.loop_kind(&f.expr);
                let mut bound = Vec::new();
                pat_idents(&f.pat, &mut bound);
                self.visit_loop_body(&f.body, kind, &bound);
            }
            Expr::While(w) => {
                let kind = self.loop_kind(&w.cond);
                self.enter_loop(&kind, &[]);
                self.scope.deciding += 1;
                self.visit_expr(&w.cond);
                self.scope.deciding -= 1;
                self.exit_loop(&kind, &[]);
                // `while let Some(x) = queue.pop()` binds `x` anew at every iteration.
                let mut bound = Vec::new();
                let_bindings(&w.cond, &mut bound);
                self.visit_loop_body(&w.body, kind, &bound);
            }
            Expr::Loop(l) => self.visit_loop_body(&l.body, LoopKind::default(), &[]),
            Expr::Call(c) => {
                let local = as_ident(&c.func).is_some_and(|f| {
                    self.scope.fns.last().is_some_and(|cx| cx.locals.contains(&f.to_string()))
                });
                if !local
                    && let Some(callee) =
                        call_callee(c, self.scope.fns.last().and_then(|f| f.self_ty.as_deref()))
                {
                    let at = self.file.range(c.func.span()).start;
                    self.record_call(callee, c.args.len(), at);
                }
                visit::visit_expr(self, e);
            }
            Expr::Assign(a) => {
                visit::visit_expr(self, e);
                self.assign(a);
            }
            Expr::Struct(st)
                if st.path.segments.last().is_some_and(|s| is_config_type(&s.ident.to_string())) =>
            {
                self.scope.config += 1;
                visit::visit_expr(self, e);
                self.scope.config -= 1;
            }
            Expr::MethodCall(m) => self.visit_method_call(m),
            Expr::If(i) => {
                let mut flags = cond_flags(&i.cond);
                flags.gated |= self.is_gate(&i.cond);
                self.scope.deciding += 1;
                self.visit_expr(&i.cond);
                self.scope.deciding -= 1;
                self.visit_branch(flags, |w| w.visit_block(&i.then_branch));
                if let Some((_, els)) = &i.else_branch {
                    // The else branch is the opposite of a debug gate, but still device-specific,
                    // and still the fallback of a probe.
                    let els_flags =
                        CondFlags { gated: false, device: flags.device, error: false, probe: flags.probe };
                    self.visit_branch(els_flags, |w| w.visit_expr(els));
                }
            }
            Expr::Match(m) => {
                self.scope.deciding += 1;
                self.visit_expr(&m.expr);
                self.scope.deciding -= 1;
                let device = m.arms.iter().any(|a| pat_names_device(&a.pat));
                for arm in &m.arms {
                    let error = pat_is_err(&arm.pat);
                    let flags = CondFlags { gated: false, device, error, probe: false };
                    let bound = self.bind_variant(&arm.pat);
                    self.visit_branch(flags, |w| {
                        w.visit_pat(&arm.pat);
                        if let Some((_, g)) = &arm.guard {
                            w.visit_expr(g);
                        }
                        w.visit_expr(&arm.body);
                    });
                    if bound && let Some(f) = self.scope.fns.last_mut() {
                        f.variant_vars.pop();
                    }
                }
            }
            Expr::Binary(b) if is_comparison(&b.op) => {
                self.scope.compare += 1;
                visit::visit_expr_binary(self, b);
                self.scope.compare -= 1;
            }
            Expr::Macro(m) => self.visit_known_macro(&m.mac),
            Expr::Closure(_) => {
                self.scope.closures += 1;
                visit::visit_expr(self, e);
                self.scope.closures -= 1;
            }
            _ => visit::visit_expr(self, e),
        }
    }
}

/// `-> Device`, `-> Result<Device>`, `-> Option<B::Device>`.
fn returns_device(output: &syn::ReturnType) -> bool {
    let syn::ReturnType::Type(_, ty) = output else { return false };
    let mut ty: &syn::Type = ty;
    for _ in 0..3 {
        if classify_type(ty) == ParamKind::Device {
            return true;
        }
        let syn::Type::Path(p) = ty else { return false };
        let Some(last) = p.path.segments.last() else { return false };
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else { return false };
        let Some(syn::GenericArgument::Type(inner)) = args.args.first() else { return false };
        ty = inner;
    }
    false
}

/// A tuple type with a device in it: tch's `(Kind, Device)` option constants.
fn defines_device(ty: &syn::Type) -> bool {
    matches!(ty, syn::Type::Tuple(t) if t.elems.iter().any(|e| classify_type(e) == ParamKind::Device))
}

fn expr_attrs(e: &Expr) -> Option<&[syn::Attribute]> {
    match e {
        Expr::Block(b) => Some(&b.attrs),
        Expr::If(i) => Some(&i.attrs),
        Expr::Call(c) => Some(&c.attrs),
        Expr::MethodCall(m) => Some(&m.attrs),
        _ => None,
    }
}

fn is_comparison(op: &syn::BinOp) -> bool {
    matches!(
        op,
        syn::BinOp::Eq(_)
            | syn::BinOp::Ne(_)
            | syn::BinOp::Lt(_)
            | syn::BinOp::Le(_)
            | syn::BinOp::Gt(_)
            | syn::BinOp::Ge(_)
    )
}

/// Adapters whose closure runs once per item, on a receiver that looks like an iterator.
fn is_iter_adapter(m: &ExprMethodCall) -> bool {
    let adapter = matches!(
        m.method.to_string().as_str(),
        "map"
            | "for_each"
            | "try_for_each"
            | "filter_map"
            | "flat_map"
            | "fold"
            | "try_fold"
            | "filter"
            | "scan"
            | "take_while"
            | "map_while"
            | "any"
            | "all"
            | "find_map"
            | "inspect"
    );
    if !adapter {
        return false;
    }
    let iterish = chain_calls(&m.receiver).iter().any(|c| {
        matches!(
            c.method.to_string().as_str(),
            "iter"
                | "into_iter"
                | "iter_mut"
                | "par_iter"
                | "into_par_iter"
                | "enumerate"
                | "zip"
                | "chunks"
                | "windows"
                | "rev"
                | "step_by"
                | "skip"
                | "take"
                | "drain"
                | "keys"
                | "values"
        )
    });
    let range = matches!(chain_root(&m.receiver), Expr::Range(_));
    iterish || range
}

/// A word of a condition that asks what the machine has.
fn is_probe_word(lower: &str) -> bool {
    // A name holding what a probe found (`let metal_available = metal_is_available();`).
    lower.ends_with("_available")
        || matches!(
            lower,
            "has_mps"
                | "has_cuda"
                | "has_metal"
                | "has_vulkan"
                | "is_available"
                | "cuda_is_available"
                | "is_cuda_available"
                | "cudnn_is_available"
                | "metal_is_available"
                | "mps_is_available"
                | "device_count"
                | "cuda_device_count"
        )
}

/// A type that holds configuration: what it names is a default or a choice, not a placement.
pub(crate) fn is_config_type(name: &str) -> bool {
    ["Config", "Configuration", "Options", "Opts", "Args", "Settings", "Params", "Builder", "Setup", "Cli"]
        .iter()
        .any(|s| name.ends_with(s))
}

/// A module or directory of backend code: `cpu_backend`, `backends`, `cuda_kernels`, `cpu`.
pub(crate) fn is_backend_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("backend") || name.contains("kernel") || name == "cpu"
}

/// What a loop iterates, as far as the rules care.
#[derive(Clone, Debug, Default)]
struct LoopKind {
    /// Over a field of `self`.
    over_self: bool,
    /// Once per layer.
    per_layer: bool,
    /// Over a model's parameters.
    params: bool,
    /// Over a tensor's slices.
    slices: bool,
    /// Over batch items or images.
    batch: bool,
    /// The field of `self` it iterates, if one.
    field: Option<String>,
    /// Over a parameter that holds neither tensors nor a device: items the caller hands over.
    caller_items: bool,
    /// Its own body takes a training step.
    step: bool,
}

/// Does the loop body run one of the loop's variables as a module (`layer.forward(&xs)`,
/// `xs.apply(&block)`)?
fn runs_as_module(body: &Block, bound: &[String]) -> bool {
    struct Finder<'b>(&'b [String], bool);
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            let name = m.method.to_string();
            let bound = |e: &Expr| {
                as_ident(super::syntax::chain_root(super::syntax::peel(e)))
                    .is_some_and(|id| self.0.iter().any(|b| id == b))
            };
            // `layer.forward(&xs)`, `layer.mlp.forward(..)`, `layer.attn_forward(..)`, `xs.apply(&layer)`.
            if (name.contains("forward") && bound(&m.receiver))
                || (name.starts_with("apply") && m.args.first().is_some_and(bound))
            {
                self.1 = true;
            }
            visit::visit_expr_method_call(self, m);
        }
        /// `Module::forward(layer, &xs)`.
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            let forward = super::syntax::call_path(c)
                .and_then(|p| p.segments.last())
                .is_some_and(|s| s.ident.to_string().contains("forward"));
            let bound =
                |e: &Expr| as_ident(super::syntax::peel(e)).is_some_and(|id| self.0.iter().any(|b| id == b));
            if forward && c.args.iter().any(bound) {
                self.1 = true;
            }
            visit::visit_expr_call(self, c);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut f = Finder(bound, false);
    f.visit_block(body);
    f.1
}

/// Does the expression iterate a model's parameters (`vs.variables()`, `opt.trainable_variables()`,
/// `model.parameters()`, `grads.iter()`)?
fn iterates_parameters(e: &Expr) -> bool {
    let mut e = e;
    loop {
        e = match e {
            Expr::Reference(r) => &r.expr,
            Expr::Paren(p) => &p.expr,
            Expr::MethodCall(m) => {
                if m.args.is_empty()
                    && matches!(
                        m.method.to_string().as_str(),
                        "variables"
                            | "trainable_variables"
                            | "parameters"
                            | "named_parameters"
                            | "all_vars"
                            | "params"
                            | "named_params"
                    )
                {
                    return true;
                }
                &m.receiver
            }
            _ => return false,
        }
    }
}

/// Methods that iterate a tensor's slices (`t.iter_dim(0)`, `t.chunk(4, 0)?`, `t.unbind(0)`).
pub(crate) fn is_slice_iterator(name: &str) -> bool {
    matches!(name, "iter_dim" | "chunk" | "unbind")
}

/// Does a loop go over batch items, images or incoming messages: a range or a collection whose
/// names say so (`0..batch_size`, `0..b_size`, `images.iter()`, `samples.into_iter()`,
/// `while let Ok(msg) = receiver.recv()`)?
fn iterates_batch(e: &Expr) -> bool {
    let mut hit = false;
    let mut words = |name: &str| {
        let n = name.to_ascii_lowercase();
        hit |= [
            "batch",
            "sample",
            "image",
            "img",
            "example",
            "item",
            "request",
            "recv",
            "read_line",
            "incoming",
            "stdin",
        ]
        .iter()
        .any(|w| n.contains(w))
            || matches!(n.as_str(), "b" | "bs" | "bsz" | "b_size" | "n_images" | "num_images");
    };
    struct Names<'w>(&'w mut dyn FnMut(&str));
    impl<'ast> Visit<'ast> for Names<'_> {
        fn visit_ident(&mut self, i: &'ast proc_macro2::Ident) {
            (self.0)(&i.to_string());
        }
    }
    Names(&mut words).visit_expr(e);
    hit
}

/// The first `self.<field>` read in the expression.
fn first_self_field(e: &Expr) -> Option<String> {
    struct Finder(Option<String>);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_expr_field(&mut self, f: &'ast syn::ExprField) {
            if self.0.is_none()
                && let (Expr::Path(p), syn::Member::Named(name)) = (&*f.base, &f.member)
                && p.path.is_ident("self")
            {
                self.0 = Some(name.to_string());
            }
            visit::visit_expr_field(self, f);
        }
    }
    let mut f = Finder(None);
    f.visit_expr(e);
    f.0
}

/// Every type name a field's type mentions (`Vec<Arc<Block>>` → `Vec`, `Arc`, `Block`).
fn type_names(ty: &syn::Type) -> Vec<String> {
    struct Names(Vec<String>);
    impl<'ast> Visit<'ast> for Names {
        fn visit_path_segment(&mut self, seg: &'ast syn::PathSegment) {
            self.0.push(seg.ident.to_string());
            visit::visit_path_segment(self, seg);
        }
    }
    let mut n = Names(Vec::new());
    n.visit_type(ty);
    n.0
}

/// The module a tensor is applied to (`xs.apply(&self.blocks[i])`): the expression whose method
/// `forward` is, without the borrow or the index.
fn applied_module(arg: &Expr) -> &Expr {
    let module = super::syntax::peel(arg);
    match module {
        Expr::Index(i) => super::syntax::peel(&i.expr),
        m => m,
    }
}

/// Where `f(..)`, `Type::f(..)`, `Self::f(..)` or `module::f(..)` goes.
fn call_callee(c: &syn::ExprCall, self_ty: Option<&str>) -> Option<Callee> {
    let Expr::Path(p) = &*c.func else { return None };
    if p.qself.is_some() {
        return None;
    }
    let segs = &p.path.segments;
    let name = segs.last()?.ident.to_string();
    if segs.len() == 1 {
        return Some(Callee::Free { name, qualified: false });
    }
    let owner = segs[segs.len() - 2].ident.to_string();
    if owner == "Self" {
        return self_ty.map(|ty| Callee::TypeFn { ty: ty.to_string(), name });
    }
    // `crate::m::f`, `super::f`, `module::f`: a path of modules ends in a free function.
    if owner.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Some(Callee::Free { name, qualified: true });
    }
    Some(Callee::TypeFn { ty: owner, name })
}

/// Does the expression read a field of `self` (`self.layers.iter()`)?
fn mentions_self_field(e: &Expr) -> bool {
    struct Finder(bool);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_expr_field(&mut self, f: &'ast syn::ExprField) {
            if matches!(&*f.base, Expr::Path(p) if p.path.is_ident("self")) {
                self.0 = true;
            }
            visit::visit_expr_field(self, f);
        }
    }
    let mut f = Finder(false);
    f.visit_expr(e);
    f.0
}

#[derive(Clone, Copy, Default)]
pub(crate) struct CondFlags {
    pub gated: bool,
    pub device: bool,
    pub error: bool,
    /// The condition probes what the machine has (`tch::utils::has_mps()`, `Cuda::is_available()`).
    pub probe: bool,
}

/// What an `if` condition says about its branch.
pub(crate) fn cond_flags(cond: &Expr) -> CondFlags {
    struct Scan(CondFlags);
    impl Scan {
        fn word(&mut self, w: &str) {
            let lower = w.to_ascii_lowercase();
            if lower.contains("debug")
                || lower.contains("verbose")
                || lower.contains("trace")
                || lower.contains("profil")
                || lower == "log"
                || lower.starts_with("log_")
                || lower.ends_with("_log")
                || lower.contains("logging")
                || lower == "env"
                || lower == "var"
                || lower == "var_os"
                // `step.is_multiple_of(100)`, `last_log.elapsed() >= every`: every N steps or seconds.
                || lower == "is_multiple_of"
                || lower == "elapsed"
            {
                self.0.gated = true;
            }
            if matches!(
                lower.as_str(),
                "is_cpu" | "is_cuda" | "is_metal" | "is_mps" | "is_gpu" | "is_accelerator"
            ) {
                self.0.device = true;
            }
            if is_probe_word(&lower) {
                self.0.probe = true;
            }
            if lower.contains("oom")
                || lower.contains("out_of_memory")
                || lower.contains("outofmemory")
                || lower == "is_err"
            {
                self.0.error = true;
            }
        }
    }
    impl<'ast> Visit<'ast> for Scan {
        fn visit_ident(&mut self, i: &'ast proc_macro2::Ident) {
            self.word(&i.to_string());
        }
        fn visit_bin_op(&mut self, op: &'ast syn::BinOp) {
            if matches!(op, syn::BinOp::Rem(_)) {
                self.0.gated = true;
            }
        }
        fn visit_path(&mut self, p: &'ast syn::Path) {
            if let Some((ty, _)) = super::syntax::last_two(p)
                && super::device::is_device_type(ty)
            {
                self.0.device = true;
            }
            visit::visit_path(self, p);
        }
        fn visit_pat(&mut self, p: &'ast syn::Pat) {
            if pat_is_err(p) {
                self.0.error = true;
            }
            if pat_names_device(p) {
                self.0.device = true;
            }
            visit::visit_pat(self, p);
        }
        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            if m.path.is_ident("cfg") {
                self.0.gated = true;
            }
            if m.path.is_ident("matches") {
                for tt in m.tokens.clone() {
                    if let proc_macro2::TokenTree::Ident(i) = tt
                        && (i == "Cpu" || i == "Cuda" || i == "Metal" || i == "Mps")
                    {
                        self.0.device = true;
                    }
                }
            }
        }
    }
    let mut s = Scan(CondFlags::default());
    s.visit_expr(cond);
    s.0
}

/// Does a pattern name a device or per-device storage (`Device::Cpu`, `Device::Cuda(_)`,
/// `Storage::Cpu(s)`)?
fn pat_names_device(p: &syn::Pat) -> bool {
    let path = match p {
        syn::Pat::Path(p) => &p.path,
        syn::Pat::TupleStruct(t) => &t.path,
        syn::Pat::Struct(s) => &s.path,
        syn::Pat::Or(o) => return o.cases.iter().any(pat_names_device),
        syn::Pat::Reference(r) => return pat_names_device(&r.pat),
        _ => return false,
    };
    super::syntax::last_two(path).is_some_and(|(ty, variant)| {
        super::device::is_device_type(ty)
            || matches!(variant.to_string().as_str(), "Cpu" | "Cuda" | "Metal" | "Mps" | "Wgpu" | "Vulkan")
    })
}

/// A statement that leaves the block unless the data lives on one kind of device.
fn is_device_guard(stmt: &syn::Stmt) -> bool {
    match stmt {
        syn::Stmt::Local(l) => {
            l.init.as_ref().is_some_and(|i| i.diverge.is_some()) && pat_names_device(&l.pat)
        }
        syn::Stmt::Expr(Expr::If(i), _) => {
            i.else_branch.is_none() && cond_flags(&i.cond).device && diverges(&i.then_branch)
        }
        _ => false,
    }
}

/// Does the block end by leaving (`return`, `bail!`, `panic!`, `continue`, `break`)?
fn diverges(b: &Block) -> bool {
    match b.stmts.last() {
        Some(syn::Stmt::Expr(e, _)) => match e {
            Expr::Return(_) | Expr::Continue(_) | Expr::Break(_) => true,
            Expr::Macro(m) => is_diverging_macro(&m.mac),
            _ => false,
        },
        Some(syn::Stmt::Macro(m)) => is_diverging_macro(&m.mac),
        _ => false,
    }
}

/// Does the block leave with an error (`bail!(..)`, `panic!(..)`, `return Err(..)`)?
fn fails(b: &Block) -> bool {
    match b.stmts.last() {
        // `return Err(..)`, `return std::result::Result::Err(..)`, `return Err(..)?`.
        Some(syn::Stmt::Expr(Expr::Return(r), _)) => r.expr.as_deref().is_some_and(|e| {
            let e = match e {
                Expr::Try(t) => &*t.expr,
                e => e,
            };
            matches!(e, Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Err")))
        }),
        Some(syn::Stmt::Expr(Expr::Macro(m), _)) => is_diverging_macro(&m.mac),
        Some(syn::Stmt::Macro(m)) => is_diverging_macro(&m.mac),
        _ => false,
    }
}

fn is_diverging_macro(m: &syn::Macro) -> bool {
    m.path.segments.last().is_some_and(|s| {
        matches!(s.ident.to_string().as_str(), "bail" | "panic" | "unreachable" | "unimplemented" | "todo")
    })
}

fn pat_is_err(p: &syn::Pat) -> bool {
    match p {
        syn::Pat::TupleStruct(t) => t.path.is_ident("Err"),
        syn::Pat::Or(o) => o.cases.iter().any(pat_is_err),
        _ => false,
    }
}

/// The names the `let`s of a condition bind (`let Some(x) = a && let Ok(y) = b`).
fn let_bindings(cond: &Expr, out: &mut Vec<String>) {
    match cond {
        Expr::Let(l) => pat_idents(&l.pat, out),
        Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
            let_bindings(&b.left, out);
            let_bindings(&b.right, out);
        }
        Expr::Paren(p) => let_bindings(&p.expr, out),
        _ => {}
    }
}

/// Do these statements take a training step themselves, outside any loop, closure or item of
/// their own: an optimizer's `step(..)` or `backward_step(..)`, burn's `TrainOutput::new(..)`
/// (the `Learner` steps with it), or `loss.backward()` with a hand-written update of the weights
/// (`var.set(..)`)? A gradient alone (`.backward()` in a sampler or a saliency map) is not one.
pub(crate) fn takes_a_step(stmts: &[syn::Stmt]) -> bool {
    #[derive(Default)]
    struct Steps {
        step: bool,
        backward: bool,
        update: bool,
    }
    impl<'ast> Visit<'ast> for Steps {
        fn visit_expr_method_call(&mut self, m: &'ast ExprMethodCall) {
            let name = m.method.to_string();
            let optimizer = || {
                let root = match super::syntax::peel(&m.receiver) {
                    Expr::Field(f) => match &f.member {
                        syn::Member::Named(n) => Some(n.to_string()),
                        syn::Member::Unnamed(_) => None,
                    },
                    e => as_ident(e).map(|i| i.to_string()),
                }
                .map(|n| n.to_ascii_lowercase());
                root.is_some_and(|r| {
                    r == "opt"
                        || r.starts_with("opt_")
                        || r.ends_with("_opt")
                        || r == "optim"
                        || r.starts_with("optim_")
                        || r.ends_with("_optim")
                        || r.contains("optimizer")
                        || r.contains("optimiser")
                        || r.contains("adam")
                        || r.contains("sgd")
                })
            };
            if name.starts_with("backward_step") || (name == "step" && optimizer()) {
                self.step = true;
            }
            self.backward |= name == "backward" && m.args.is_empty();
            self.update |= name == "set" && m.args.len() == 1;
            visit::visit_expr_method_call(self, m);
        }
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let Expr::Path(p) = &*c.func
                && super::syntax::path_ends_with(&p.path, &["TrainOutput", "new"])
            {
                self.step = true;
            }
            visit::visit_expr_call(self, c);
        }
        fn visit_expr_for_loop(&mut self, _: &'ast syn::ExprForLoop) {}
        fn visit_expr_while(&mut self, _: &'ast syn::ExprWhile) {}
        fn visit_expr_loop(&mut self, _: &'ast syn::ExprLoop) {}
        fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut steps = Steps::default();
    for stmt in stmts {
        steps.visit_stmt(stmt);
    }
    steps.step || (steps.backward && steps.update)
}

/// The names a `use` brings into scope, each with the path it names (`*` for a glob, with the
/// module's path).
fn flatten_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.clone()));
                }
            } else {
                let mut path = prefix.clone();
                path.push(name.clone());
                out.push((name, path));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((r.rename.to_string(), path));
        }
        syn::UseTree::Glob(_) => out.push(("*".to_string(), prefix.clone())),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| flatten_use(t, prefix, out)),
    }
}

/// Does a loop of these statements take a training step in its own body (a `fit` that warms up
/// with one step, then loops over batches, drives training rather than being one step)?
fn has_step_loop(stmts: &[syn::Stmt]) -> bool {
    struct Loops(bool);
    impl<'ast> Visit<'ast> for Loops {
        fn visit_expr_for_loop(&mut self, f: &'ast syn::ExprForLoop) {
            self.0 |= takes_a_step(&f.body.stmts);
            visit::visit_expr_for_loop(self, f);
        }
        fn visit_expr_while(&mut self, w: &'ast syn::ExprWhile) {
            self.0 |= takes_a_step(&w.body.stmts);
            visit::visit_expr_while(self, w);
        }
        fn visit_expr_loop(&mut self, l: &'ast syn::ExprLoop) {
            self.0 |= takes_a_step(&l.body.stmts);
            visit::visit_expr_loop(self, l);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut loops = Loops(false);
    stmts.iter().for_each(|s| loops.visit_stmt(s));
    loops.0
}
