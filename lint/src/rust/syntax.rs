//! Small questions about syn trees that several rules ask.

use proc_macro2::TokenTree;
use syn::visit::Visit;
use syn::{Attribute, Expr, ExprCall, ExprMethodCall, Type};

use super::api::{ApiSet, CtorDevice, tensor_ctor};

/// Strips what does not change which value an expression denotes: parentheses, `&`, `?`,
/// `.unwrap()`, `.expect(..)`, `.clone()`, `.as_ref()`.
pub(crate) fn peel(e: &Expr) -> &Expr {
    strip(e, true)
}

/// Like [`peel`], but keeps `&` (and strips `.await`): for the value a statement produces.
pub(crate) fn peel_result(e: &Expr) -> &Expr {
    strip(e, false)
}

fn strip(e: &Expr, references: bool) -> &Expr {
    let mut e = e;
    loop {
        e = match e {
            Expr::Paren(p) => &p.expr,
            Expr::Group(g) => &g.expr,
            Expr::Try(t) => &t.expr,
            Expr::Reference(r) if references => &r.expr,
            Expr::Await(a) if !references => &a.base,
            Expr::MethodCall(m) if is_passthrough(m) => &m.receiver,
            _ => return e,
        }
    }
}

fn is_passthrough(m: &ExprMethodCall) -> bool {
    match m.args.len() {
        0 => m.method == "unwrap" || m.method == "clone" || m.method == "as_ref" || m.method == "borrow",
        1 => m.method == "expect",
        _ => false,
    }
}

/// The start of a method chain: `a` in `a.b()?.c(x).d()?`.
pub(crate) fn chain_root(e: &Expr) -> &Expr {
    walk_chain(e).0
}

/// The method calls of a chain from the outermost in: `d, c, b` for `a.b()?.c(x).d()?`.
pub(crate) fn chain_calls(e: &Expr) -> Vec<&ExprMethodCall> {
    walk_chain(e).1
}

/// A chain's root and its method calls (outermost first), past parentheses, `&`, `?`, `.await`.
fn walk_chain(e: &Expr) -> (&Expr, Vec<&ExprMethodCall>) {
    let mut calls = Vec::new();
    let mut e = e;
    loop {
        e = match e {
            Expr::Paren(p) => &p.expr,
            Expr::Group(g) => &g.expr,
            Expr::Try(t) => &t.expr,
            Expr::Reference(r) => &r.expr,
            Expr::Await(a) => &a.base,
            Expr::MethodCall(m) => {
                calls.push(m);
                &m.receiver
            }
            _ => return (e, calls),
        }
    }
}

/// A local variable name: `x` for the path expression `x`.
pub(crate) fn as_ident(e: &Expr) -> Option<&syn::Ident> {
    match e {
        Expr::Path(p)
            if p.qself.is_none() && p.path.segments.len() == 1 && p.path.leading_colon.is_none() =>
        {
            let seg = &p.path.segments[0];
            seg.arguments.is_none().then_some(&seg.ident)
        }
        _ => None,
    }
}

/// `self.name` → `name`.
pub(crate) fn self_field(e: &Expr) -> Option<&syn::Ident> {
    let Expr::Field(f) = e else { return None };
    let syn::Member::Named(name) = &f.member else { return None };
    match &*f.base {
        Expr::Path(p) if p.path.is_ident("self") => Some(name),
        _ => None,
    }
}

/// Does the path end with these identifiers (`["Device", "Cpu"]` matches `candle_core::Device::Cpu`)?
pub(crate) fn path_ends_with(path: &syn::Path, tail: &[&str]) -> bool {
    let n = path.segments.len();
    n >= tail.len() && path.segments.iter().skip(n - tail.len()).zip(tail).all(|(s, t)| s.ident == t)
}

/// The last two identifiers of a path (`Device`, `Cpu`), if it has two.
pub(crate) fn last_two(path: &syn::Path) -> Option<(&syn::Ident, &syn::Ident)> {
    let n = path.segments.len();
    (n >= 2).then(|| (&path.segments[n - 2].ident, &path.segments[n - 1].ident))
}

/// The callee path of `f(..)`.
pub(crate) fn call_path(call: &ExprCall) -> Option<&syn::Path> {
    match &*call.func {
        Expr::Path(p) => Some(&p.path),
        _ => None,
    }
}

/// A tensor constructor call (`Tensor::zeros(..)`, `Tensor::<B, 2>::ones(..)`) for these APIs.
pub(crate) struct Ctor<'a> {
    pub call: &'a ExprCall,
    pub name: &'a syn::Ident,
    pub device: CtorDevice,
}

impl<'a> Ctor<'a> {
    pub fn of(apis: ApiSet, e: &'a Expr) -> Option<Ctor<'a>> {
        let Expr::Call(call) = e else { return None };
        let path = call_path(call)?;
        let (ty, name) = last_two(path)?;
        if ty != "Tensor" {
            return None;
        }
        let device = tensor_ctor(apis, &name.to_string(), call.args.len())?;
        Some(Ctor { call, name, device })
    }

    /// The device (or options) argument.
    pub fn device_arg(&self) -> Option<&'a Expr> {
        match self.device {
            CtorDevice::LastArg => self.call.args.last(),
            CtorDevice::ImplicitCpu => None,
        }
    }
}

/// What a parameter's type says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParamKind {
    /// A tensor, borrowed (`&Tensor`) or owned (`Tensor<B, 3>`).
    Tensor {
        by_ref: bool,
    },
    /// Something holding tensors (`Option<&Tensor>`, `&[Tensor]`, `Vec<Tensor>`).
    TensorLike,
    Device,
    Other,
}

pub(crate) fn classify_type(ty: &Type) -> ParamKind {
    match ty {
        Type::Reference(r) => match classify_type(&r.elem) {
            ParamKind::Tensor { .. } => ParamKind::Tensor { by_ref: true },
            other => other,
        },
        Type::Paren(p) => classify_type(&p.elem),
        Type::Group(g) => classify_type(&g.elem),
        Type::Path(p) => {
            let Some(last) = p.path.segments.last() else { return ParamKind::Other };
            if last.ident == "Tensor" {
                return ParamKind::Tensor { by_ref: false };
            }
            let name = last.ident.to_string();
            if name.ends_with("Device") {
                return ParamKind::Device;
            }
            if mentions_tensor(ty) { ParamKind::TensorLike } else { ParamKind::Other }
        }
        Type::Slice(_) | Type::Array(_) | Type::Tuple(_) => {
            if mentions_tensor(ty) {
                ParamKind::TensorLike
            } else {
                ParamKind::Other
            }
        }
        _ => ParamKind::Other,
    }
}

/// Does the type name `Tensor` anywhere (`Option<Vec<Tensor<B, 2>>>`)?
pub(crate) fn mentions_tensor(ty: &Type) -> bool {
    struct Finder(bool);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_path_segment(&mut self, seg: &'ast syn::PathSegment) {
            if seg.ident == "Tensor" {
                self.0 = true;
            }
            syn::visit::visit_path_segment(self, seg);
        }
    }
    let mut f = Finder(false);
    f.visit_type(ty);
    f.0
}

/// Is the type `Self`, the impl's own type, or one of those wrapped in `Result`/`Option`/`Box`
/// (a constructor's return type)?
pub(crate) fn returns_self(output: &syn::ReturnType, self_ty: Option<&str>) -> bool {
    let syn::ReturnType::Type(_, ty) = output else { return false };
    fn is_self(ty: &Type, self_ty: Option<&str>, depth: usize) -> bool {
        let Type::Path(p) = ty else { return false };
        let Some(last) = p.path.segments.last() else { return false };
        if last.ident == "Self" || self_ty.is_some_and(|s| last.ident == s) {
            return true;
        }
        if depth < 2
            && matches!(last.ident.to_string().as_str(), "Result" | "Option" | "Box" | "Arc" | "Rc")
            && let syn::PathArguments::AngleBracketed(args) = &last.arguments
            && let Some(syn::GenericArgument::Type(inner)) = args.args.first()
        {
            return is_self(inner, self_ty, depth + 1);
        }
        false
    }
    is_self(ty, self_ty, 0)
}

/// The name of a type path's last segment (`Foo` for `crate::m::Foo<B>`).
pub(crate) fn type_name(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        Type::Reference(r) => type_name(&r.elem),
        Type::Group(g) => type_name(&g.elem),
        Type::Paren(p) => type_name(&p.elem),
        _ => None,
    }
}

/// Every single-segment path (`x`) used in an expression, macros' insides excluded.
pub(crate) fn for_each_ident<'a>(e: &'a Expr, mut f: impl FnMut(&'a syn::Ident)) {
    struct Idents<'f, 'a>(&'f mut dyn FnMut(&'a syn::Ident));
    impl<'a> Visit<'a> for Idents<'_, 'a> {
        fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
            if p.qself.is_none() && p.path.segments.len() == 1 {
                (self.0)(&p.path.segments[0].ident);
            }
        }
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    Idents(&mut f).visit_expr(e);
}

/// The names a pattern binds.
pub(crate) fn pat_idents<E: Extend<String>>(pat: &syn::Pat, out: &mut E) {
    match pat {
        syn::Pat::Ident(p) => {
            out.extend([p.ident.to_string()]);
            if let Some((_, sub)) = &p.subpat {
                pat_idents(sub, out);
            }
        }
        syn::Pat::Type(t) => pat_idents(&t.pat, out),
        syn::Pat::Tuple(t) => t.elems.iter().for_each(|p| pat_idents(p, out)),
        syn::Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pat_idents(p, out)),
        syn::Pat::Struct(s) => s.fields.iter().for_each(|f| pat_idents(&f.pat, out)),
        syn::Pat::Slice(s) => s.elems.iter().for_each(|p| pat_idents(p, out)),
        syn::Pat::Reference(r) => pat_idents(&r.pat, out),
        syn::Pat::Paren(p) => pat_idents(&p.pat, out),
        syn::Pat::Or(o) => o.cases.iter().for_each(|p| pat_idents(p, out)),
        _ => {}
    }
}

/// The single name a simple pattern binds (`x`, `mut x`, `x: Tensor`).
pub(crate) fn pat_ident(pat: &syn::Pat) -> Option<&syn::Ident> {
    match pat {
        syn::Pat::Ident(p) if p.subpat.is_none() => Some(&p.ident),
        syn::Pat::Type(t) => pat_ident(&t.pat),
        _ => None,
    }
}

/// An integer literal's value.
pub(crate) fn int_lit(e: &Expr) -> Option<u128> {
    match e {
        Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.base10_parse().ok(),
        Expr::Paren(p) => int_lit(&p.expr),
        Expr::Group(g) => int_lit(&g.expr),
        _ => None,
    }
}

/// A string literal's value.
pub(crate) fn str_lit(e: &Expr) -> Option<String> {
    match e {
        Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
        Expr::Paren(p) => str_lit(&p.expr),
        Expr::Group(g) => str_lit(&g.expr),
        Expr::Reference(r) => str_lit(&r.expr),
        _ => None,
    }
}

/// `#[cfg(test)]`, `#[cfg(all(test, ..))]`; not `#[cfg(not(test))]`.
pub(crate) fn is_cfg_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let syn::Meta::List(list) = &a.meta else { return false };
        let mut has_test = false;
        let mut has_not = false;
        for_each_token_ident(list.tokens.clone(), &mut |i| {
            if i == "test" {
                has_test = true;
            } else if i == "not" || i == "any" {
                has_not = true;
            }
        });
        has_test && !has_not
    })
}

/// `#[cfg(feature = "cuda")]` (or `metal`, `wgpu`, `cuda_backend`, ...; also inside `all(..)` or
/// `any(..)`): code built only when the user asks for that accelerator, so the device it names is
/// the build's choice. A feature named only inside `not(..)` is not asked for.
pub(crate) fn is_cfg_accelerator_feature(attrs: &[Attribute]) -> bool {
    fn accelerator(name: &str) -> bool {
        name.split(['-', '_'])
            .any(|w| matches!(w, "cuda" | "metal" | "wgpu" | "vulkan" | "mps" | "cudnn" | "rocm" | "gpu"))
    }
    fn asks(tokens: proc_macro2::TokenStream) -> bool {
        let mut negate_next = false;
        for tt in tokens {
            match tt {
                TokenTree::Ident(i) => negate_next = i == "not",
                TokenTree::Group(g) => {
                    if !std::mem::take(&mut negate_next) && asks(g.stream()) {
                        return true;
                    }
                }
                TokenTree::Literal(l) => {
                    negate_next = false;
                    if accelerator(l.to_string().trim_matches('"')) {
                        return true;
                    }
                }
                TokenTree::Punct(_) => {}
            }
        }
        false
    }
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && matches!(&a.meta, syn::Meta::List(list) if asks(list.tokens.clone()))
    })
}

/// Every identifier in a token stream, inside groups too (a macro's arguments).
pub(crate) fn for_each_token_ident(tokens: proc_macro2::TokenStream, f: &mut dyn FnMut(&proc_macro2::Ident)) {
    for tt in tokens {
        match tt {
            TokenTree::Ident(i) => f(&i),
            TokenTree::Group(g) => for_each_token_ident(g.stream(), f),
            _ => {}
        }
    }
}

/// `#[test]`, `#[tokio::test]`, `#[bench]`, `#[rstest]`, `#[test_case(..)]`.
pub(crate) fn is_test_fn(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().segments.last().is_some_and(|s| {
            s.ident == "test" || s.ident == "bench" || s.ident == "rstest" || s.ident == "test_case"
        })
    })
}

/// Finds `#[module(<word>)]` among the attributes and returns the word's span if present.
pub(crate) fn module_attr_word(attrs: &[Attribute], word: &str) -> Option<proc_macro2::Span> {
    for a in attrs {
        if !a.path().is_ident("module") {
            continue;
        }
        let syn::Meta::List(list) = &a.meta else { continue };
        for tt in list.tokens.clone() {
            if let TokenTree::Ident(i) = tt
                && i == word
            {
                return Some(i.span());
            }
        }
    }
    None
}

/// The arguments of a function-like macro: `a, b, c`, or `value; count` as two.
pub(crate) fn macro_args(mac: &syn::Macro) -> Vec<Expr> {
    use syn::punctuated::Punctuated;
    if let Ok(args) = mac.parse_body_with(Punctuated::<Expr, syn::Token![,]>::parse_terminated) {
        return args.into_iter().collect();
    }
    let repeat = |input: syn::parse::ParseStream<'_>| -> syn::Result<(Expr, Expr)> {
        let a: Expr = input.parse()?;
        input.parse::<syn::Token![;]>()?;
        let b: Expr = input.parse()?;
        Ok((a, b))
    };
    mac.parse_body_with(repeat).map(|(a, b)| vec![a, b]).unwrap_or_default()
}

/// Methods that ask about a tensor (its shape, element type, device or size) and return that,
/// not a tensor, and run no kernel.
pub(crate) fn is_tensor_query(method: &str) -> bool {
    matches!(
        method,
        "dims"
            | "dims1"
            | "dims2"
            | "dims3"
            | "dims4"
            | "dims5"
            | "dim"
            | "shape"
            | "size"
            | "dtype"
            | "kind"
            | "device"
            | "elem_count"
            | "numel"
            | "rank"
            | "len"
            | "is_empty"
    )
}

/// std's formatting macros (`println!`, `format!`, `write!`, `panic!`, `dbg!`, ..): they only
/// evaluate their arguments and format them.
pub(crate) fn is_formatting_macro(name: &str) -> bool {
    matches!(
        name,
        "println"
            | "print"
            | "eprintln"
            | "eprint"
            | "format"
            | "format_args"
            | "write"
            | "writeln"
            | "panic"
            | "dbg"
    )
}

/// `assert!`, `assert_eq!`, `debug_assert_ne!` and the rest of std's assertions.
pub(crate) fn is_assert_macro(name: &str) -> bool {
    matches!(
        name,
        "assert" | "assert_eq" | "assert_ne" | "debug_assert" | "debug_assert_eq" | "debug_assert_ne"
    )
}
