//! Facts about a file's structs gathered before the rules run: declared fields, and what each
//! constructor stores in them (a device value, or a tensor made on a fixed device).

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Expr, Item};

use super::api::{CtorDevice, is_transfer_method};
use super::device::{DevEnv, DevSrc, classify, classify_options};
use super::syntax::{
    Ctor, ParamKind, as_ident, call_path, chain_calls, chain_root, classify_type, is_cfg_test, last_two,
    mentions_tensor, pat_ident, peel, type_name,
};
use crate::rust::FileCx;

/// A tensor a constructor made on a fixed device and stored in a field.
#[derive(Clone, Debug)]
pub(crate) struct FixedTensor {
    /// The constructor call (`Tensor::ones(.., &Device::Cpu)?`).
    pub ctor_range: Range<usize>,
    /// The fixed device as written.
    pub device_range: Range<usize>,
    /// The function that built it (`new`).
    pub in_fn: String,
}

/// What constructors put in one field.
#[derive(Clone, Debug, Default)]
pub(crate) struct FieldInit {
    /// The device the field holds, when it holds one and every constructor agrees it is fixed;
    /// `Follows` as soon as one constructor takes it from its inputs or its loader.
    pub device: Option<DevSrc>,
    pub fixed_tensors: Vec<FixedTensor>,
    /// tch: made by the VarStore (`vs.var(..)`, `vs.zeros(..)`, `vs.entry(..).or_zeros(..)`).
    pub varstore: bool,
    /// Every constructor sets it to `None` (a cache filled later); `None` until one is seen.
    pub always_none: Option<bool>,
}

/// A declared field.
#[derive(Clone, Debug)]
pub(crate) struct FieldDecl {
    pub name: String,
    pub kind: ParamKind,
    /// Plain host data by its type (`Vec<f64>`, `usize`): no tensor can live in it.
    pub host_data: bool,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct StructFacts {
    pub fields: Vec<FieldDecl>,
    pub inits: HashMap<String, FieldInit>,
}

impl StructFacts {
    pub fn field_device(&self, name: &str) -> Option<DevSrc> {
        self.inits.get(name).and_then(|i| i.device.clone())
    }
}

#[derive(Debug, Default)]
pub(crate) struct Facts {
    pub structs: HashMap<String, StructFacts>,
    /// Functions of the file that return a tensor made on a fixed device, by name.
    pub fixed_helpers: HashMap<String, FixedTensor>,
}

impl Facts {
    pub fn gather(file: &FileCx<'_>, items: &[Item]) -> Facts {
        let mut facts = Facts::default();
        declare(items, &mut facts);
        if facts.structs.is_empty() {
            return facts;
        }
        let names: HashSet<String> = facts.structs.keys().cloned().collect();
        helpers(file, items, &mut facts);
        scan_items(file, items, None, &names, &mut facts);
        facts
    }

    /// The device in `self.<field>` of struct `ty`, when its constructors fix it.
    pub fn field_device(&self, ty: Option<&str>, field: &str) -> Option<DevSrc> {
        self.structs.get(ty?)?.field_device(field).or(Some(DevSrc::Follows))
    }
}

fn declare(items: &[Item], facts: &mut Facts) {
    for item in items {
        match item {
            Item::Struct(s) if !is_cfg_test(&s.attrs) => {
                let fields = s
                    .fields
                    .iter()
                    .filter_map(|f| {
                        Some(FieldDecl {
                            name: f.ident.as_ref()?.to_string(),
                            kind: classify_type(&f.ty),
                            host_data: is_host_data(&f.ty),
                        })
                    })
                    .collect();
                facts.structs.insert(s.ident.to_string(), StructFacts { fields, inits: HashMap::new() });
            }
            Item::Mod(m) if !is_cfg_test(&m.attrs) => {
                if let Some((_, items)) = &m.content {
                    declare(items, facts);
                }
            }
            _ => {}
        }
    }
}

/// Finds the file's functions that hand back a tensor made on a fixed device (a helper that
/// builds a table on the CPU), so a constructor storing their result is known to store one.
fn helpers(file: &FileCx<'_>, items: &[Item], facts: &mut Facts) {
    for item in items {
        match item {
            Item::Impl(imp) if !is_cfg_test(&imp.attrs) => {
                for it in &imp.items {
                    if let syn::ImplItem::Fn(f) = it {
                        helper(file, &f.sig, &f.block, facts);
                    }
                }
            }
            Item::Fn(f) if !is_cfg_test(&f.attrs) => helper(file, &f.sig, &f.block, facts),
            Item::Mod(m) if !is_cfg_test(&m.attrs) => {
                if let Some((_, items)) = &m.content {
                    helpers(file, items, facts);
                }
            }
            _ => {}
        }
    }
}

fn helper(file: &FileCx<'_>, sig: &syn::Signature, body: &syn::Block, facts: &mut Facts) {
    // Only functions that return a plain tensor, and take no device (which they would follow).
    let syn::ReturnType::Type(_, ty) = &sig.output else { return };
    let returns_tensor = matches!(classify_type(ty), ParamKind::Tensor { .. })
        || matches!(&**ty, syn::Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Result")
            && mentions_tensor(ty));
    let takes_device = sig
        .inputs
        .iter()
        .any(|i| matches!(i, syn::FnArg::Typed(t) if classify_type(&t.ty) == ParamKind::Device));
    if !returns_tensor || takes_device {
        return;
    }
    let mut scan = CtorScan {
        file,
        self_ty: None,
        fn_name: sig.ident.to_string(),
        env: DevEnv::default(),
        tensors: HashMap::new(),
        varstore: HashSet::new(),
        facts,
    };
    scan.visit_block(body);
    let tail = match body.stmts.last() {
        Some(syn::Stmt::Expr(e, None)) => e,
        _ => return,
    };
    let tail = match peel(tail) {
        Expr::Call(c) if c.args.len() == 1 && matches!(&*c.func, Expr::Path(p) if p.path.is_ident("Ok")) => {
            &c.args[0]
        }
        other => other,
    };
    if let Some(fixed) = scan.fixed_tensor(tail) {
        let name = sig.ident.to_string();
        scan.facts.fixed_helpers.insert(name, fixed);
    }
}

/// Types that hold host values only: numbers, strings, and standard containers of them.
fn is_host_data(ty: &syn::Type) -> bool {
    if mentions_tensor(ty) {
        return false;
    }
    match ty {
        syn::Type::Array(_) | syn::Type::Slice(_) | syn::Type::Tuple(_) => true,
        syn::Type::Reference(r) => is_host_data(&r.elem),
        _ => type_name(ty).is_some_and(|n| {
            matches!(
                n.as_str(),
                "Vec"
                    | "VecDeque"
                    | "HashMap"
                    | "BTreeMap"
                    | "HashSet"
                    | "String"
                    | "f32"
                    | "f64"
                    | "i32"
                    | "i64"
                    | "u8"
                    | "u32"
                    | "u64"
                    | "usize"
                    | "isize"
                    | "bool"
            )
        }),
    }
}

fn scan_items(
    file: &FileCx<'_>,
    items: &[Item],
    _outer: Option<&str>,
    names: &HashSet<String>,
    facts: &mut Facts,
) {
    for item in items {
        match item {
            Item::Impl(imp) if !is_cfg_test(&imp.attrs) => {
                let self_ty = type_name(&imp.self_ty);
                for it in &imp.items {
                    if let syn::ImplItem::Fn(f) = it
                        && builds_struct(&f.sig.output, self_ty.as_deref(), names)
                    {
                        scan_fn(file, &f.sig, &f.block, self_ty.as_deref(), facts);
                    }
                }
            }
            Item::Fn(f) if !is_cfg_test(&f.attrs) && builds_struct(&f.sig.output, None, names) => {
                scan_fn(file, &f.sig, &f.block, None, facts);
            }
            Item::Mod(m) if !is_cfg_test(&m.attrs) => {
                if let Some((_, items)) = &m.content {
                    scan_items(file, items, None, names, facts);
                }
            }
            _ => {}
        }
    }
}

/// Does the return type name `Self` or a struct of this file (possibly inside `Result<..>`)?
fn builds_struct(output: &syn::ReturnType, self_ty: Option<&str>, names: &HashSet<String>) -> bool {
    let syn::ReturnType::Type(_, ty) = output else { return false };
    struct Names<'a> {
        self_ty: Option<&'a str>,
        names: &'a HashSet<String>,
        hit: bool,
    }
    impl<'ast> Visit<'ast> for Names<'_> {
        fn visit_path_segment(&mut self, seg: &'ast syn::PathSegment) {
            let s = seg.ident.to_string();
            if (s == "Self" && self.self_ty.is_some()) || self.names.contains(&s) {
                self.hit = true;
            }
            syn::visit::visit_path_segment(self, seg);
        }
    }
    let mut v = Names { self_ty, names, hit: false };
    v.visit_type(ty);
    v.hit
}

fn scan_fn(
    file: &FileCx<'_>,
    sig: &syn::Signature,
    body: &syn::Block,
    self_ty: Option<&str>,
    facts: &mut Facts,
) {
    let mut scan = CtorScan {
        file,
        self_ty,
        fn_name: sig.ident.to_string(),
        env: DevEnv::default(),
        tensors: HashMap::new(),
        varstore: HashSet::new(),
        facts,
    };
    for input in &sig.inputs {
        if let syn::FnArg::Typed(t) = input
            && let Some(name) = pat_ident(&t.pat)
            && classify_type(&t.ty) == ParamKind::Device
        {
            scan.env.bind(name.to_string(), Some(DevSrc::Follows));
        }
    }
    scan.visit_block(body);
}

struct CtorScan<'a, 'f> {
    file: &'a FileCx<'f>,
    self_ty: Option<&'a str>,
    fn_name: String,
    env: DevEnv,
    /// Locals holding a tensor made on a fixed device.
    tensors: HashMap<String, Option<FixedTensor>>,
    /// Locals holding a tensor made by a tch VarStore.
    varstore: HashSet<String>,
    facts: &'a mut Facts,
}

impl CtorScan<'_, '_> {
    fn no_fields(_: &str) -> Option<DevSrc> {
        None
    }

    /// Made by a tch VarStore path (`vs.var(..)`, `(vs / "w").zeros(..)`), or a local that was.
    fn made_by_varstore(&self, e: &Expr) -> bool {
        const METHODS: &[&str] = &[
            "var",
            "var_copy",
            "zeros",
            "ones",
            "zeros_no_train",
            "ones_no_train",
            "randn",
            "randn_standard",
            "uniform",
            "kaiming_uniform",
            "or_var",
            "or_zeros",
            "or_ones",
            "or_randn",
            "or_uniform",
            "or_var_copy",
        ];
        let root = chain_root(e);
        if let Some(id) = as_ident(root)
            && self.varstore.contains(&id.to_string())
        {
            return true;
        }
        Ctor::of(self.file.apis, root).is_none()
            && chain_calls(e).iter().any(|c| METHODS.contains(&c.method.to_string().as_str()))
    }

    /// The fixed-device tensor an expression evaluates to, if it is one that was not moved.
    fn fixed_tensor(&self, e: &Expr) -> Option<FixedTensor> {
        fixed_tensor_of(
            self.file,
            e,
            &self.env,
            &|name| self.tensors.get(name).cloned().flatten(),
            &self.fn_name,
            &self.facts.fixed_helpers,
        )
    }
}

/// The tensor made on a fixed device that `e` denotes: a constructor with a fixed device (possibly
/// followed by ops that keep the device), or a local holding one; `None` once a transfer to a
/// device that is not fixed appears in the chain.
pub(crate) fn fixed_tensor_of(
    file: &FileCx<'_>,
    e: &Expr,
    env: &DevEnv,
    local: &dyn Fn(&str) -> Option<FixedTensor>,
    in_fn: &str,
    helpers: &HashMap<String, FixedTensor>,
) -> Option<FixedTensor> {
    let again = |e: &Expr| fixed_tensor_of(file, e, env, local, in_fn, helpers);
    // A value chosen among branches may be the fixed one (`match`, `if`, a fallback).
    match peel(e) {
        Expr::Match(m) => return m.arms.iter().find_map(|a| again(&a.body)),
        Expr::If(i) => {
            let then = match i.then_branch.stmts.last() {
                Some(syn::Stmt::Expr(t, None)) => again(t),
                _ => None,
            };
            return then.or_else(|| i.else_branch.as_ref().and_then(|(_, e)| again(e)));
        }
        Expr::Block(b) => {
            return match b.block.stmts.last() {
                Some(syn::Stmt::Expr(t, None)) => again(t),
                _ => None,
            };
        }
        // Arithmetic happens on the device of its tensors (`&adj * &scale`).
        Expr::Binary(b) => return again(&b.left).or_else(|| again(&b.right)),
        _ => {}
    }
    for call in chain_calls(e) {
        if matches!(call.method.to_string().as_str(), "unwrap_or_else" | "unwrap_or" | "or_else" | "or")
            && let Some(arg) = call.args.first()
        {
            let fallback = match peel(arg) {
                Expr::Closure(c) => again(&c.body),
                other => again(other),
            };
            if fallback.is_some() {
                return fallback;
            }
        }
    }
    for call in chain_calls(e) {
        if is_transfer_method(file.apis, &call.method.to_string()) {
            let target = match call.method.to_string().as_str() {
                "cpu" | "cuda" => None,
                _ => call.args.first().and_then(|a| classify_options(file, a, env, &CtorScan::no_fields)),
            };
            let stays_fixed =
                call.method == "cpu" || call.method == "cuda" || matches!(target, Some(DevSrc::Fixed { .. }));
            if !stays_fixed {
                return None;
            }
        }
    }
    let root = chain_root(e);
    if let Some(ctor) = Ctor::of(file.apis, root) {
        let ctor_range = file.range(root.span());
        return match ctor.device {
            CtorDevice::ImplicitCpu => Some(FixedTensor {
                ctor_range: ctor_range.clone(),
                device_range: ctor_range,
                in_fn: in_fn.to_string(),
            }),
            CtorDevice::LastArg => {
                let arg = ctor.device_arg()?;
                match classify_options(file, arg, env, &CtorScan::no_fields)? {
                    DevSrc::Fixed { at, .. } => {
                        Some(FixedTensor { ctor_range, device_range: at, in_fn: in_fn.to_string() })
                    }
                    DevSrc::Follows => None,
                }
            }
        };
    }
    if let Some(id) = as_ident(root) {
        return local(&id.to_string());
    }
    let Expr::Call(c) = root else { return None };
    let path = call_path(c)?;
    let last = path.segments.last()?.ident.to_string();
    // A helper of the file that builds the tensor on a fixed device.
    if let Some(fixed) = helpers.get(&last) {
        return Some(fixed.clone());
    }
    // A wrapper built around one (`LayerNorm::new(weight, eps)`, `Linear::new(w, None)`).
    let (ty, _) = last_two(path)?;
    if ty != "Tensor" && ty.to_string().starts_with(|ch: char| ch.is_ascii_uppercase()) {
        return c.args.iter().find_map(again);
    }
    None
}

impl<'ast> Visit<'ast> for CtorScan<'_, '_> {
    fn visit_local(&mut self, local: &'ast syn::Local) {
        if let Some(init) = &local.init {
            self.visit_expr(&init.expr);
            if let Some(diverge) = &init.diverge {
                self.visit_expr(&diverge.1);
            }
        }
        if let Some(name) = pat_ident(&local.pat) {
            let name = name.to_string();
            let (dev, tensor) = match &local.init {
                Some(init) => (
                    classify_options(self.file, &init.expr, &self.env, &Self::no_fields),
                    self.fixed_tensor(&init.expr),
                ),
                None => (None, None),
            };
            self.env.bind(name.clone(), dev);
            if local.init.as_ref().is_some_and(|i| self.made_by_varstore(&i.expr)) {
                self.varstore.insert(name.clone());
            } else {
                self.varstore.remove(&name);
            }
            self.tensors.insert(name, tensor);
        }
    }

    fn visit_expr_struct(&mut self, s: &'ast syn::ExprStruct) {
        syn::visit::visit_expr_struct(self, s);
        let Some(last) = s.path.segments.last() else { return };
        let ty = if last.ident == "Self" {
            match self.self_ty {
                Some(t) => t.to_string(),
                None => return,
            }
        } else {
            last.ident.to_string()
        };
        if !self.facts.structs.contains_key(&ty) {
            return;
        }
        let mut updates = Vec::new();
        for fv in &s.fields {
            let syn::Member::Named(field) = &fv.member else { continue };
            let device = classify_options(self.file, &fv.expr, &self.env, &Self::no_fields)
                .or_else(|| classify(self.file, &fv.expr, &self.env, &Self::no_fields));
            let tensor = self.fixed_tensor(&fv.expr);
            let varstore = self.made_by_varstore(&fv.expr);
            let none = matches!(peel(&fv.expr), Expr::Path(p) if p.path.is_ident("None"));
            updates.push((field.to_string(), device, tensor, varstore, none));
        }
        let Some(facts) = self.facts.structs.get_mut(&ty) else { return };
        for (field, device, tensor, varstore, none) in updates {
            let init = facts.inits.entry(field).or_default();
            init.always_none = Some(init.always_none.unwrap_or(true) && none);
            init.device = match (init.device.take(), device) {
                (Some(DevSrc::Follows), _) | (_, Some(DevSrc::Follows)) => Some(DevSrc::Follows),
                (Some(old @ DevSrc::Fixed { .. }), _) => Some(old),
                (None, new) => new,
            };
            init.fixed_tensors.extend(tensor);
            init.varstore |= varstore;
        }
    }

    /// A setter of a builder (`fn device(mut self, device: Device) -> Self { self.device = device;
    /// self }`): the field then holds whatever device the caller gives.
    fn visit_expr_assign(&mut self, a: &'ast syn::ExprAssign) {
        syn::visit::visit_expr_assign(self, a);
        let Some(ty) = self.self_ty else { return };
        let Some(field) = crate::rust::syntax::self_field(&a.left) else { return };
        if !matches!(
            classify_options(self.file, &a.right, &self.env, &Self::no_fields),
            Some(DevSrc::Follows)
        ) {
            return;
        }
        if let Some(facts) = self.facts.structs.get_mut(ty) {
            facts.inits.entry(field.to_string()).or_default().device = Some(DevSrc::Follows);
        }
    }

    fn visit_item(&mut self, _: &'ast Item) {}
}
