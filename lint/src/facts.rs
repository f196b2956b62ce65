//! Facts about a file's structs gathered before the rules run: declared fields, and what each
//! constructor stores in them (a device value, or a tensor made on a fixed device).

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Expr, Item};

use super::device::{DevEnv, DevSrc, classify, classify_options};
use super::profile::{CtorDevice, is_transfer_method};
use super::source::FileCx;
use super::syntax::{
    Ctor, ParamKind, as_ident, chain_calls, chain_root, classify_type, is_cfg_test, pat_ident, type_name,
};

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
}

/// A declared field.
#[derive(Clone, Debug)]
pub(crate) struct FieldDecl {
    pub name: String,
    pub kind: ParamKind,
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
}

impl Facts {
    pub fn gather(file: &FileCx<'_>, items: &[Item]) -> Facts {
        let mut facts = Facts::default();
        declare(items, &mut facts);
        if facts.structs.is_empty() {
            return facts;
        }
        let names: HashSet<String> = facts.structs.keys().cloned().collect();
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
                        Some(FieldDecl { name: f.ident.as_ref()?.to_string(), kind: classify_type(&f.ty) })
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
) -> Option<FixedTensor> {
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
    as_ident(root).and_then(|id| local(&id.to_string()))
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
            updates.push((field.to_string(), device, tensor, varstore));
        }
        let Some(facts) = self.facts.structs.get_mut(&ty) else { return };
        for (field, device, tensor, varstore) in updates {
            let init = facts.inits.entry(field).or_default();
            init.device = match (init.device.take(), device) {
                (Some(DevSrc::Follows), _) | (_, Some(DevSrc::Follows)) => Some(DevSrc::Follows),
                (Some(old @ DevSrc::Fixed { .. }), _) => Some(old),
                (None, new) => new,
            };
            init.fixed_tensors.extend(tensor);
            init.varstore |= varstore;
        }
    }

    fn visit_item(&mut self, _: &'ast Item) {}
}
