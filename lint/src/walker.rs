//! The one pass over a file: a syn visitor that keeps track of where it is (test code, which
//! function, loops, debug-gated or device-specific branches, logging macros) and hands each node
//! to every rule's [`Check`].

use std::ops::Range;

use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Block, Expr, ExprMethodCall, Token};

use super::diagnostic::Finding;
use super::facts::Facts;
use super::source::FileCx;
use super::syntax::{
    ParamKind, chain_calls, chain_root, classify_type, is_cfg_test, is_test_fn, pat_ident, returns_self,
    type_name,
};

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
    /// The body, braces included.
    pub body_range: Range<usize>,
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
}

/// What a rule sees at each node.
pub(crate) struct Cx<'a, 'f> {
    pub file: &'a FileCx<'f>,
    pub facts: &'a Facts,
    pub scope: &'a Scope,
}

impl Cx<'_, '_> {
    /// In test code: a test/bench file, `#[cfg(test)]`, or a `#[test]` function.
    pub fn in_test(&self) -> bool {
        self.scope.test > 0 || self.file.kind.is_test_like()
    }

    pub fn fun(&self) -> Option<&FnCx> {
        self.scope.fns.last()
    }

    pub fn in_loop(&self) -> bool {
        self.fun().is_some_and(|f| f.loops > 0)
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
}

/// A loop body as handed to [`Check::enter_loop`].
#[derive(Clone, Copy)]
pub(crate) enum LoopBody<'a> {
    Block(&'a Block),
    Closure(&'a Expr),
}

/// A rule's per-file state. Every hook has an empty default.
pub(crate) trait Check {
    fn enter_fn(&mut self, _cx: &Cx<'_, '_>, _sig: &syn::Signature) {}
    fn exit_fn(&mut self, _cx: &Cx<'_, '_>, _out: &mut Vec<Finding>) {}
    /// Every expression, outer before inner.
    fn expr(&mut self, _cx: &Cx<'_, '_>, _e: &Expr, _out: &mut Vec<Finding>) {}
    fn stmt(&mut self, _cx: &Cx<'_, '_>, _s: &syn::Stmt, _out: &mut Vec<Finding>) {}
    fn block(&mut self, _cx: &Cx<'_, '_>, _b: &Block, _out: &mut Vec<Finding>) {}
    /// A loop body, before it is visited (the scope already counts the loop).
    fn enter_loop(&mut self, _cx: &Cx<'_, '_>, _body: LoopBody<'_>, _out: &mut Vec<Finding>) {}
    fn item_struct(&mut self, _cx: &Cx<'_, '_>, _s: &syn::ItemStruct, _out: &mut Vec<Finding>) {}
    fn finish(&mut self, _cx: &Cx<'_, '_>, _out: &mut Vec<Finding>) {}
}

pub(crate) struct Walker<'a, 'f> {
    pub file: &'a FileCx<'f>,
    pub facts: &'a Facts,
    pub scope: Scope,
    pub checks: Vec<Box<dyn Check + 'a>>,
    pub out: Vec<Finding>,
    impls: Vec<(Option<String>, Option<String>)>,
}

macro_rules! hook {
    ($w:expr, $method:ident $(, $arg:expr)*) => {{
        let cx = Cx { file: $w.file, facts: $w.facts, scope: &$w.scope };
        for check in $w.checks.iter_mut() {
            check.$method(&cx $(, $arg)*, &mut $w.out);
        }
    }};
}

impl<'a, 'f> Walker<'a, 'f> {
    pub fn new(file: &'a FileCx<'f>, facts: &'a Facts, checks: Vec<Box<dyn Check + 'a>>) -> Self {
        Walker { file, facts, scope: Scope::default(), checks, out: Vec::new(), impls: Vec::new() }
    }

    pub fn run(mut self, ast: &syn::File) -> Vec<Finding> {
        self.visit_file(ast);
        hook!(self, finish);
        self.out
    }

    fn with_fn(&mut self, attrs: &[syn::Attribute], sig: &syn::Signature, body: &Block, has_self_impl: bool) {
        let test = is_test_fn(attrs) || is_cfg_test(attrs);
        if test {
            self.scope.test += 1;
        }
        let (self_ty, trait_name) =
            if has_self_impl { self.impls.last().cloned().unwrap_or((None, None)) } else { (None, None) };
        let mut fcx = self.fn_cx(sig, self_ty, trait_name);
        fcx.body_range = self.file.range(body.brace_token.span.join());
        let conversion = fcx.name.starts_with("parse") || fcx.name.starts_with("from_str");
        let device_def = returns_device(&sig.output);
        self.scope.device_def += device_def as u32;
        if conversion {
            self.scope.conversion += 1;
        }
        self.scope.fns.push(fcx);
        {
            let cx = Cx { file: self.file, facts: self.facts, scope: &self.scope };
            for check in self.checks.iter_mut() {
                check.enter_fn(&cx, sig);
            }
        }
        self.visit_block(body);
        hook!(self, exit_fn);
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
        let returns_self = returns_self(&sig.output, self_ty.as_deref());
        let is_main = name == "main" && self.scope.fns.is_empty() && self_ty.is_none();
        let has_tensor_input =
            params.iter().any(|(_, k)| matches!(k, ParamKind::Tensor { .. } | ParamKind::TensorLike));
        let in_impl = self_ty.is_some() || trait_name.is_some();
        let _ = trait_name;
        let forward_like = !returns_self
            && !is_main
            && (name.starts_with("forward")
                || (has_tensor_input && (self.file.kind.is_library() || (is_method && in_impl))));
        FnCx { name, params, is_main, forward_like, self_ty, loops: 0, layer_loops: 0, body_range: 0..0 }
    }

    fn enter_loop(&mut self, over_self: bool) {
        if let Some(f) = self.scope.fns.last_mut() {
            f.loops += 1;
            if over_self {
                f.layer_loops += 1;
            }
        }
    }

    fn exit_loop(&mut self, over_self: bool) {
        if let Some(f) = self.scope.fns.last_mut() {
            f.loops = f.loops.saturating_sub(1);
            if over_self {
                f.layer_loops = f.layer_loops.saturating_sub(1);
            }
        }
    }

    fn visit_loop_body(&mut self, body: &Block, over_self: bool) {
        self.enter_loop(over_self);
        hook!(self, enter_loop, LoopBody::Block(body));
        self.visit_block(body);
        self.exit_loop(over_self);
    }

    fn visit_branch(&mut self, flags: CondFlags, then: impl FnOnce(&mut Self)) {
        let CondFlags { gated, device, error } = flags;
        self.scope.gated += gated as u32;
        self.scope.device_branch += device as u32;
        self.scope.error_branch += error as u32;
        then(self);
        self.scope.gated -= gated as u32;
        self.scope.device_branch -= device as u32;
        self.scope.error_branch -= error as u32;
    }

    fn visit_method_call(&mut self, m: &ExprMethodCall) {
        self.visit_expr(&m.receiver);
        let adapter = is_iter_adapter(m);
        let over_self = adapter && mentions_self_field(&m.receiver);
        for arg in &m.args {
            match arg {
                Expr::Closure(c) if adapter => {
                    self.enter_loop(over_self);
                    hook!(self, enter_loop, LoopBody::Closure(&c.body));
                    self.visit_expr(arg);
                    self.exit_loop(over_self);
                }
                _ => self.visit_expr(arg),
            }
        }
    }

    fn visit_known_macro(&mut self, mac: &syn::Macro) {
        let Some(last) = mac.path.segments.last() else { return };
        let name = last.ident.to_string();
        let logging = matches!(
            name.as_str(),
            "println"
                | "print"
                | "eprintln"
                | "eprint"
                | "format"
                | "format_args"
                | "write"
                | "writeln"
                | "panic"
                | "debug"
                | "trace"
                | "info"
                | "warn"
                | "error"
                | "log"
                | "dbg"
                | "event"
                | "bail"
                | "anyhow"
                | "ensure"
        );
        let plain = matches!(
            name.as_str(),
            "vec"
                | "assert"
                | "assert_eq"
                | "assert_ne"
                | "debug_assert"
                | "debug_assert_eq"
                | "debug_assert_ne"
                | "try_join"
                | "join"
        );
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
        if quiet {
            self.scope.log_macro += 1;
        }
        for e in &args {
            self.visit_expr(e);
        }
        if quiet {
            self.scope.log_macro -= 1;
        }
    }
}

fn parse_repeat(input: syn::parse::ParseStream<'_>) -> syn::Result<(Expr, Expr)> {
    let a: Expr = input.parse()?;
    input.parse::<Token![;]>()?;
    let b: Expr = input.parse()?;
    Ok((a, b))
}

impl<'ast> Visit<'ast> for Walker<'_, '_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let test = is_cfg_test(&m.attrs);
        self.scope.test += test as u32;
        visit::visit_item_mod(self, m);
        self.scope.test -= test as u32;
    }

    fn visit_item_impl(&mut self, imp: &'ast syn::ItemImpl) {
        let test = is_cfg_test(&imp.attrs);
        self.scope.test += test as u32;
        let trait_name =
            imp.trait_.as_ref().and_then(|(_, p, _)| p.segments.last()).map(|s| s.ident.to_string());
        let conversion = trait_name.as_deref().is_some_and(|t| {
            matches!(t, "FromStr" | "From" | "TryFrom" | "Deserialize" | "Default" | "Display" | "Debug")
        });
        self.scope.conversion += conversion as u32;
        self.impls.push((type_name(&imp.self_ty), trait_name));
        visit::visit_item_impl(self, imp);
        self.impls.pop();
        self.scope.conversion -= conversion as u32;
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
        let def = defines_device(&s.ty);
        self.scope.device_def += def as u32;
        visit::visit_item_static(self, s);
        self.scope.device_def -= def as u32;
    }

    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        let test = is_cfg_test(&s.attrs);
        self.scope.test += test as u32;
        hook!(self, item_struct, s);
        visit::visit_item_struct(self, s);
        self.scope.test -= test as u32;
    }

    fn visit_block(&mut self, b: &'ast Block) {
        hook!(self, block, b);
        // After a guard that returns unless the data is on one device
        // (`let Storage::Cpu(s) = .. else { return }`, `if !xs.device().is_cpu() { bail!(..) }`),
        // the rest of the block is specific to that device.
        let mut guarded = 0;
        for stmt in &b.stmts {
            self.visit_stmt(stmt);
            if is_device_guard(stmt) {
                guarded += 1;
                self.scope.device_branch += 1;
            }
        }
        self.scope.device_branch -= guarded;
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
            _ => visit::visit_stmt(self, s),
        }
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        hook!(self, expr, e);
        match e {
            Expr::ForLoop(f) => {
                self.visit_pat(&f.pat);
                self.visit_expr(&f.expr);
                let over_self = mentions_self_field(&f.expr);
                self.visit_loop_body(&f.body, over_self);
            }
            Expr::While(w) => {
                self.enter_loop(false);
                self.visit_expr(&w.cond);
                self.exit_loop(false);
                self.visit_loop_body(&w.body, false);
            }
            Expr::Loop(l) => self.visit_loop_body(&l.body, false),
            Expr::MethodCall(m) => self.visit_method_call(m),
            Expr::If(i) => {
                let flags = cond_flags(&i.cond);
                self.visit_expr(&i.cond);
                self.visit_branch(flags, |w| w.visit_block(&i.then_branch));
                if let Some((_, els)) = &i.else_branch {
                    // The else branch is the opposite of a debug gate, but still device-specific.
                    let els_flags = CondFlags { gated: false, device: flags.device, error: false };
                    self.visit_branch(els_flags, |w| w.visit_expr(els));
                }
            }
            Expr::Match(m) => {
                self.visit_expr(&m.expr);
                let device = m.arms.iter().any(|a| pat_names_device(&a.pat));
                for arm in &m.arms {
                    let error = pat_is_err(&arm.pat);
                    let flags = CondFlags { gated: false, device, error };
                    self.visit_branch(flags, |w| {
                        w.visit_pat(&arm.pat);
                        if let Some((_, g)) = &arm.guard {
                            w.visit_expr(g);
                        }
                        w.visit_expr(&arm.body);
                    });
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
            {
                self.0.gated = true;
            }
            if matches!(
                lower.as_str(),
                "is_cpu" | "is_cuda" | "is_metal" | "is_mps" | "is_gpu" | "is_accelerator"
            ) {
                self.0.device = true;
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
