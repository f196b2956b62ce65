//! The expansion: a `ModuleLayout` from `devcheck-classify` turned into `visit` and `visit_mut`.

use devcheck_classify::{
    ContainerKind, FieldClass, FieldEntry, FieldsStyle, LayoutBody, ModuleLayout, classify_derive_input,
};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{DeriveInput, Generics, Ident, Type, parse_quote};

/// Parses, classifies and expands; every problem becomes a compile error at its token.
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.into_compile_error(),
    };
    let layout = classify_derive_input(&input);
    if let Some(error) = layout.to_syn_error() {
        return error.into_compile_error();
    }
    expand(&input, &layout)
}

fn expand(input: &DeriveInput, layout: &ModuleLayout) -> TokenStream {
    let krate = match &layout.attrs.krate {
        Some(path) => quote!(#path),
        None => quote!(::devcheck),
    };
    let generics = add_bounds(&input.generics, layout, &krate);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let ident = &input.ident;
    let read = Walk { krate: &krate, mutable: false };
    let write = Walk { krate: &krate, mutable: true };
    let read_body = read.body(layout);
    let write_body = write.body(layout);
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::Module for #ident #ty_generics #where_clause {
            #[allow(unused_variables)]
            fn visit(
                &self,
                visitor: &mut dyn #krate::module::Visitor,
                path: &mut #krate::module::ModulePath,
            ) -> #krate::Result<()> {
                #read_body
                ::core::result::Result::Ok(())
            }

            #[allow(unused_variables)]
            fn visit_mut(
                &mut self,
                visitor: &mut dyn #krate::module::VisitorMut,
                path: &mut #krate::module::ModulePath,
            ) -> #krate::Result<()> {
                #write_body
                ::core::result::Result::Ok(())
            }
        }
    }
}

/// Code generation for one of the two walks.
struct Walk<'a> {
    krate: &'a TokenStream,
    mutable: bool,
}

/// How generated code reaches a value: a field of `self`, or a binding that is already a
/// reference (an enum field, a container element).
enum Access {
    Field(syn::Member),
    Binding(Ident),
}

impl Access {
    /// For method calls: `self.layers` or `item`.
    fn place(&self) -> TokenStream {
        match self {
            Access::Field(member) => quote!(self.#member),
            Access::Binding(ident) => quote!(#ident),
        }
    }

    /// A `&T` or `&mut T`.
    fn reference(&self, mutable: bool) -> TokenStream {
        match (self, mutable) {
            (Access::Field(member), false) => quote!(&self.#member),
            (Access::Field(member), true) => quote!(&mut self.#member),
            (Access::Binding(ident), _) => quote!(#ident),
        }
    }

    /// A `&T`, also in the mutable walk.
    fn shared(&self) -> TokenStream {
        match self {
            Access::Field(member) => quote!(&self.#member),
            Access::Binding(ident) => quote!(&*#ident),
        }
    }
}

impl Walk<'_> {
    fn body(&self, layout: &ModuleLayout) -> TokenStream {
        match &layout.body {
            LayoutBody::Struct { fields, .. } => {
                fields.iter().map(|field| self.field(field, Access::Field(field.member.clone()))).collect()
            }
            LayoutBody::Enum(variants) if variants.is_empty() => quote!(match *self {}),
            LayoutBody::Enum(variants) => {
                let ident = &layout.ident;
                let arms = variants.iter().map(|variant| {
                    let name = &variant.ident;
                    let bindings: Vec<Ident> = variant.fields.iter().map(binding_name).collect();
                    let pattern = match variant.style {
                        FieldsStyle::Unit => quote!(#ident::#name),
                        FieldsStyle::Tuple => quote!(#ident::#name(#(#bindings),*)),
                        FieldsStyle::Named => {
                            let members = variant.fields.iter().map(|f| &f.member);
                            quote!(#ident::#name { #(#members: #bindings),* })
                        }
                    };
                    let body: TokenStream = variant
                        .fields
                        .iter()
                        .zip(bindings)
                        .map(|(field, binding)| self.field(field, Access::Binding(binding)))
                        .collect();
                    quote!(#pattern => { #body })
                });
                quote! {
                    match self {
                        #(#arms)*
                    }
                }
            }
        }
    }

    fn field(&self, field: &FieldEntry, access: Access) -> TokenStream {
        let body = match &field.class {
            FieldClass::Plain => return quote!(),
            FieldClass::Skipped { type_name, underlying } => {
                self.skipped(type_name, underlying, &access, field_span(field))
            }
            class => self.node(class, &access, &field.ty),
        };
        match &field.segment {
            Some(segment) => quote! {
                path.push(#segment);
                #body
                path.pop();
            },
            None => body,
        }
    }

    /// A skipped field: reported to the visitor with its type, where it is declared, its tensor
    /// (read walk) or a handle to put a tensor back (mutable walk), and itself as a module when
    /// its type is one (a skipped submodule, whose parameters reports must list).
    fn skipped(&self, type_name: &str, underlying: &FieldClass, access: &Access, span: Span) -> TokenStream {
        let krate = self.krate;
        let may_hold_tensors = !matches!(underlying, FieldClass::Plain);
        // `Location::caller()` outside a `#[track_caller]` function is the location of the call
        // itself: spanned at the field, it is where the field is declared.
        let declared_at = respan(quote!(::core::panic::Location::caller()), span);
        let is_optional_tensor = matches!(
            underlying,
            FieldClass::Container { kind: ContainerKind::Option, element } if matches!(**element, FieldClass::Buffer)
        );
        let module = matches!(underlying.leaf(), FieldClass::Submodule).then(|| {
            let shared = access.shared();
            quote! {
                {
                    #[allow(unused_imports)]
                    use #krate::module::{ProbeModule as _, ProbeOther as _};
                    (&#krate::module::SkippedProbe(#shared)).skipped_module()
                }
            }
        });
        if self.mutable {
            let reference = access.reference(true);
            let value = if matches!(underlying, FieldClass::Buffer) {
                quote!(#krate::module::SkippedValue::TensorField(#reference))
            } else if is_optional_tensor {
                quote!(#krate::module::SkippedValue::OptionalTensorField(#reference))
            } else if let Some(module) = module {
                quote! {
                    match #module {
                        ::core::option::Option::Some(module) => #krate::module::SkippedValue::Module(module),
                        ::core::option::Option::None => #krate::module::SkippedValue::Other,
                    }
                }
            } else {
                quote!(#krate::module::SkippedValue::Other)
            };
            return quote! {
                visitor.visit_skipped(
                    path,
                    #krate::module::SkippedMut {
                        type_name: #type_name,
                        may_hold_tensors: #may_hold_tensors,
                        declared_at: ::core::option::Option::Some(#declared_at),
                        value: #value,
                    },
                )?;
            };
        }
        let tensor = if matches!(underlying, FieldClass::Buffer) {
            let shared = access.shared();
            quote!(::core::option::Option::Some(#shared))
        } else if is_optional_tensor {
            let place = access.place();
            quote!(#place.as_ref())
        } else {
            quote!(::core::option::Option::None)
        };
        let module = module.unwrap_or_else(|| quote!(::core::option::Option::None));
        quote! {
            visitor.visit_skipped(
                path,
                #krate::module::Skipped {
                    type_name: #type_name,
                    tensor: #tensor,
                    may_hold_tensors: #may_hold_tensors,
                    declared_at: ::core::option::Option::Some(#declared_at),
                    module: #module,
                },
            )?;
        }
    }

    /// A moved value: a leaf, or a container around one. `ty` is its type, for error spans.
    fn node(&self, class: &FieldClass, access: &Access, ty: &Type) -> TokenStream {
        let krate = self.krate;
        let reference = access.reference(self.mutable);
        let place = access.place();
        let item = Ident::new("item", Span::call_site());
        let element_ty = element_type(ty);
        match class {
            FieldClass::Param => quote!(visitor.visit_param(path, #reference)?;),
            FieldClass::Buffer => {
                quote!(visitor.visit_buffer(path, #reference, #krate::module::Persistence::Persistent)?;)
            }
            FieldClass::NonPersistentBuffer => {
                quote!(visitor.visit_buffer(path, #reference, #krate::module::Persistence::NonPersistent)?;)
            }
            FieldClass::Submodule => {
                let walk = if self.mutable { quote!(submodule_mut) } else { quote!(submodule) };
                // Every token at the field's type, so "`X` is not a `Module`" points at the field.
                respan(quote!(#krate::module::walk::#walk(visitor, path, #reference)?;), type_span(ty))
            }
            FieldClass::Container { kind, element } => {
                let inner = self.node(element, &Access::Binding(item.clone()), element_ty.unwrap_or(ty));
                let iter = if self.mutable { quote!(iter_mut) } else { quote!(iter) };
                match kind {
                    ContainerKind::Option => quote! {
                        if let ::core::option::Option::Some(#item) = #reference {
                            #inner
                        }
                    },
                    ContainerKind::Box => {
                        let deref = if self.mutable {
                            quote!(::core::ops::DerefMut::deref_mut)
                        } else {
                            quote!(::core::ops::Deref::deref)
                        };
                        quote! {
                            {
                                let #item = #deref(#reference);
                                #inner
                            }
                        }
                    }
                    ContainerKind::Vec | ContainerKind::Array { .. } => quote! {
                        for (index, #item) in #place.#iter().enumerate() {
                            path.push_index(index);
                            #inner
                            path.pop();
                        }
                    },
                    ContainerKind::BTreeMap { .. } => quote! {
                        for (key, #item) in #place.#iter() {
                            path.push_key(key);
                            #inner
                            path.pop();
                        }
                    },
                }
            }
            // Classification never yields these inside a moved node (they are handled by `field`,
            // or the derive stopped with their errors); generating nothing keeps the macro total.
            FieldClass::Plain | FieldClass::Skipped { .. } | FieldClass::Rejected(_) => quote!(),
        }
    }
}

/// `f_name` for a named enum field, `f0` for a positional one: never the same as `visitor`,
/// `path`, `item`, `index` or `key`.
fn binding_name(field: &FieldEntry) -> Ident {
    match &field.member {
        syn::Member::Named(ident) => format_ident!("f_{}", ident.to_string().trim_start_matches("r#")),
        syn::Member::Unnamed(index) => format_ident!("f{}", index.index),
    }
}

/// `tokens` with every span set to `span` (also inside groups).
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let proc_macro2::TokenTree::Group(group) = &tree {
                let mut inner = proc_macro2::Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(span);
                tree = proc_macro2::TokenTree::Group(inner);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}

/// The field's name (or index), where reports say it is declared.
fn field_span(field: &FieldEntry) -> Span {
    syn::spanned::Spanned::span(&field.member)
}

fn type_span(ty: &Type) -> Span {
    syn::spanned::Spanned::span(ty)
}

/// The element type of a container type (`Vec<T>` → `T`, `[T; N]` → `T`, `BTreeMap<K, T>` → `T`),
/// or `None` for a leaf.
fn element_type(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Group(group) => element_type(&group.elem),
        Type::Paren(paren) => element_type(&paren.elem),
        Type::Array(array) => Some(&array.elem),
        Type::Path(path) => {
            let last = path.path.segments.last()?;
            let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
                return None;
            };
            let types: Vec<&Type> = args
                .args
                .iter()
                .filter_map(|arg| match arg {
                    syn::GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .collect();
            if last.ident == "BTreeMap" { types.get(1).copied() } else { types.first().copied() }
        }
        _ => None,
    }
}

/// Adds `Leaf: Module` for every submodule type that mentions a type parameter
/// (`struct Block<M> { inner: Vec<M> }` gets `M: Module`), as serde bounds its parameters.
fn add_bounds(generics: &Generics, layout: &ModuleLayout, krate: &TokenStream) -> Generics {
    let params: Vec<&Ident> = generics.type_params().map(|p| &p.ident).collect();
    let mut generics = generics.clone();
    if params.is_empty() {
        return generics;
    }
    let mut bounded: Vec<String> = Vec::new();
    for field in layout.fields() {
        let mut leaves = Vec::new();
        submodule_types(&field.class, &field.ty, &mut leaves);
        for leaf in leaves {
            let key = quote!(#leaf).to_string();
            if mentions_any(leaf, &params) && !bounded.contains(&key) {
                bounded.push(key);
                generics.make_where_clause().predicates.push(parse_quote!(#leaf: #krate::Module));
            }
        }
    }
    generics
}

fn submodule_types<'t>(class: &FieldClass, ty: &'t Type, out: &mut Vec<&'t Type>) {
    match class {
        FieldClass::Submodule => out.push(ty),
        FieldClass::Container { element, .. } => {
            if let Some(inner) = element_type(ty) {
                submodule_types(element, inner, out);
            }
        }
        _ => {}
    }
}

fn mentions_any(ty: &Type, params: &[&Ident]) -> bool {
    fn walk(tokens: TokenStream, params: &[&Ident]) -> bool {
        tokens.into_iter().any(|tree| match tree {
            proc_macro2::TokenTree::Ident(ident) => params.iter().any(|p| **p == ident),
            proc_macro2::TokenTree::Group(group) => walk(group.stream(), params),
            _ => false,
        })
    }
    walk(quote!(#ty), params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pretty(tokens: TokenStream) -> String {
        let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
        prettyplease::unparse(&file)
    }

    /// The input, a note, and what the derive makes of it, as one readable Rust file.
    fn show(input: TokenStream, note: &str) -> String {
        let source = pretty(input.clone());
        let expansion = pretty(derive_module(input));
        format!("#[derive(Module)]\n{source}\n// {note}\n// The derive generates:\n\n{expansion}")
    }

    /// What the derive writes for a small model: read this to learn what `#[derive(Module)]` does.
    #[test]
    fn expansion_of_a_small_model() {
        let input = quote! {
            struct Model<M: Module> {
                embed: Param,
                #[module(non_persistent)]
                causal_mask: Tensor,
                blocks: Vec<M>,
                head: Option<Linear>,
                heads: BTreeMap<String, Tensor>,
                #[module(skip)]
                pos_enc: Tensor,
                dropout: f32,
            }
        };
        let expansion = show(
            input,
            "`dropout: f32` is plain data: no code. `blocks` gets the bound `M: Module` because the derive \
             recurses into it.",
        );
        insta::assert_snapshot!(expansion);
    }

    #[test]
    fn expansion_of_an_enum() {
        let input = quote! {
            #[module(crate = crate)]
            enum Head {
                Linear(Linear),
                Mlp { up: Linear, down: Box<Linear>, #[module(skip)] act: Activation },
                Identity,
            }
        };
        let expansion = show(
            input,
            "A single-field tuple variant adds no path segment: `head.weight`, not `head.0.weight`.",
        );
        insta::assert_snapshot!(expansion);
    }

    #[test]
    fn errors_are_compile_errors() {
        let input = quote! {
            struct Bad {
                #[module(frobnicate)]
                a: Tensor,
                b: HashMap<String, Tensor>,
            }
        };
        let out = derive_module(input).to_string();
        assert!(out.contains("unknown module attribute `frobnicate`"), "{out}");
        assert!(out.contains("has no stable order"), "{out}");
        assert!(!out.contains("impl"), "no impl is generated for a rejected item: {out}");
    }
}
