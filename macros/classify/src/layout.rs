//! A whole struct or enum, classified field by field.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, Fields, Member};

use crate::attrs::{ContainerAttrs, check_variant_attrs, parse_container_attrs};
use crate::class::{ClassifyError, FieldClass};
use crate::{ClassifiedField, classify_field};

/// What `#[derive(Module)]` makes of a struct or enum.
#[derive(Clone, Debug)]
pub struct ModuleLayout {
    pub ident: syn::Ident,
    pub attrs: ContainerAttrs,
    pub body: LayoutBody,
    /// Every error in the item, in source order. The derive accepts the item when it is empty.
    pub errors: Vec<ClassifyError>,
}

/// The fields of a struct, or the variants of an enum.
#[derive(Clone, Debug)]
pub enum LayoutBody {
    Struct { style: FieldsStyle, fields: Vec<FieldEntry> },
    Enum(Vec<VariantLayout>),
}

/// How the fields are written, which decides how generated code names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldsStyle {
    /// `{ a: A, b: B }`
    Named,
    /// `(A, B)`
    Tuple,
    /// no fields
    Unit,
}

/// One enum variant.
#[derive(Clone, Debug)]
pub struct VariantLayout {
    pub ident: syn::Ident,
    pub style: FieldsStyle,
    pub fields: Vec<FieldEntry>,
}

/// One field and what it is.
#[derive(Clone, Debug)]
pub struct FieldEntry {
    /// `self.<member>`: the field's name, or its index in a tuple struct.
    pub member: Member,
    /// The path segment this field adds (`mask`, `0`), or `None` for the single field of a tuple
    /// variant, which is transparent: `head.weight` for `head: Head::Linear(Linear)`.
    pub segment: Option<String>,
    /// The field's name for reports: the segment, or the variant's name for a transparent field.
    pub name: String,
    pub ty: syn::Type,
    pub class: FieldClass,
    pub span: Span,
}

impl ModuleLayout {
    /// Every field of the struct, or of every variant of the enum, in source order.
    pub fn fields(&self) -> impl Iterator<Item = &FieldEntry> {
        let (struct_fields, variants): (&[FieldEntry], &[VariantLayout]) = match &self.body {
            LayoutBody::Struct { fields, .. } => (fields, &[]),
            LayoutBody::Enum(variants) => (&[], variants),
        };
        struct_fields.iter().chain(variants.iter().flat_map(|v| v.fields.iter()))
    }

    /// All errors as one `syn::Error` (each at its own span), or `None` when the item is accepted.
    pub fn to_syn_error(&self) -> Option<syn::Error> {
        ClassifyError::combine(&self.errors)
    }
}

/// Classifies every field of a struct or enum, with the item's own `#[module(...)]` attributes.
/// Unions are reported as an error.
pub fn classify_derive_input(input: &DeriveInput) -> ModuleLayout {
    let (attrs, mut errors) = parse_container_attrs(&input.attrs);
    let body = match &input.data {
        Data::Struct(data) => {
            let (style, fields) = classify_fields(&data.fields, &mut errors);
            LayoutBody::Struct { style, fields }
        }
        Data::Enum(data) => LayoutBody::Enum(
            data.variants
                .iter()
                .map(|variant| {
                    check_variant_attrs(&variant.attrs, &mut errors);
                    let (style, mut fields) = classify_fields(&variant.fields, &mut errors);
                    if style == FieldsStyle::Tuple && fields.len() == 1 {
                        fields[0].segment = None;
                        fields[0].name = variant.ident.to_string();
                    }
                    VariantLayout { ident: variant.ident.clone(), style, fields }
                })
                .collect(),
        ),
        Data::Union(data) => {
            errors.push(ClassifyError::new(
                data.union_token.span(),
                "`#[derive(Module)]` does not support unions",
                "use a struct, or an enum whose variants hold the modules",
            ));
            LayoutBody::Struct { style: FieldsStyle::Unit, fields: Vec::new() }
        }
    };
    ModuleLayout { ident: input.ident.clone(), attrs, body, errors }
}

/// Is `Module` among the item's `#[derive(...)]`s (`Module`, `devcheck::Module`, ...)?
pub fn has_module_derive(attrs: &[Attribute]) -> bool {
    attrs.iter().filter(|a| a.path().is_ident("derive")).any(|attr| {
        let mut found = false;
        // A derive list that does not parse is not ours to report.
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.segments.last().is_some_and(|s| s.ident == "Module") {
                found = true;
            }
            Ok(())
        });
        found
    })
}

fn classify_fields(fields: &Fields, errors: &mut Vec<ClassifyError>) -> (FieldsStyle, Vec<FieldEntry>) {
    let style = match fields {
        Fields::Named(_) => FieldsStyle::Named,
        Fields::Unnamed(_) => FieldsStyle::Tuple,
        Fields::Unit => FieldsStyle::Unit,
    };
    let entries = fields
        .iter()
        .enumerate()
        .map(|(index, field)| {
            let ClassifiedField { class, errors: field_errors, .. } = classify_field(field);
            errors.extend(field_errors);
            let member = match &field.ident {
                Some(ident) => Member::Named(ident.clone()),
                None => Member::Unnamed(syn::Index { index: index as u32, span: field.ty.span() }),
            };
            let name = match &field.ident {
                // `r#type` is the path segment `type`.
                Some(ident) => ident.to_string().trim_start_matches("r#").to_string(),
                None => index.to_string(),
            };
            FieldEntry {
                member,
                segment: Some(name.clone()),
                name,
                ty: field.ty.clone(),
                class,
                span: field.span(),
            }
        })
        .collect();
    (style, entries)
}
