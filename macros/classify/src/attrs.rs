//! `#[module(...)]` attributes on fields and on the struct or enum.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Meta};

use crate::class::ClassifyError;

/// The `#[module(...)]` attributes of one field. Each is the span of its token when present.
#[derive(Clone, Debug, Default)]
pub struct FieldAttrs {
    /// `#[module(skip)]`: not moved, not saved, remembered.
    pub skip: Option<Span>,
    /// `#[module(non_persistent)]`: moved, not saved.
    pub non_persistent: Option<Span>,
}

/// The `#[module(...)]` attributes of the struct or enum.
#[derive(Clone, Debug, Default)]
pub struct ContainerAttrs {
    /// `#[module(crate = path)]`: where devcheck is, when it is re-exported. `None` means
    /// `::devcheck`.
    pub krate: Option<syn::Path>,
}

const FIELD_HELP: &str = "field attributes are `#[module(skip)]` and `#[module(non_persistent)]`";
const CONTAINER_HELP: &str = "on a struct or enum the only module attribute is `#[module(crate = path)]`";

/// Parses the `#[module(...)]` attributes of a field. Other attributes are ignored.
pub fn parse_field_attrs(attrs: &[Attribute]) -> (FieldAttrs, Vec<ClassifyError>) {
    let mut out = FieldAttrs::default();
    let mut errors = Vec::new();
    for_each_item(attrs, FIELD_HELP, &mut errors, |meta, errors| {
        let span = meta.path.span();
        let name = path_name(&meta.path);
        let slot = match name.as_str() {
            "skip" => &mut out.skip,
            "non_persistent" => &mut out.non_persistent,
            "crate" => {
                errors.push(ClassifyError::new(
                    span,
                    "`crate` goes on the struct or enum, not on a field",
                    "move `#[module(crate = path)]` above the `struct` or `enum`",
                ));
                skip_value(&meta)?;
                return Ok(());
            }
            _ => {
                errors.push(unknown(span, &name, FIELD_HELP));
                skip_value(&meta)?;
                return Ok(());
            }
        };
        if meta.input.peek(syn::Token![=]) || meta.input.peek(syn::token::Paren) {
            errors.push(ClassifyError::new(
                span,
                format!("`{name}` takes no value"),
                format!("write `#[module({name})]`"),
            ));
            skip_value(&meta)?;
        }
        if slot.is_some() {
            errors.push(ClassifyError::new(
                span,
                format!("duplicate module attribute `{name}`"),
                "remove the repeated attribute",
            ));
        } else {
            *slot = Some(span);
        }
        Ok(())
    });
    if let (Some(_), Some(non_persistent)) = (out.skip, out.non_persistent) {
        errors.push(ClassifyError::new(
            non_persistent,
            "`skip` and `non_persistent` contradict each other",
            "`skip` leaves the field out of moves and checkpoints; `non_persistent` moves it but does \
             not save it: keep one",
        ));
    }
    (out, errors)
}

/// Parses the `#[module(...)]` attributes of the struct or enum itself.
pub fn parse_container_attrs(attrs: &[Attribute]) -> (ContainerAttrs, Vec<ClassifyError>) {
    let mut out = ContainerAttrs::default();
    let mut errors = Vec::new();
    for_each_item(attrs, CONTAINER_HELP, &mut errors, |meta, errors| {
        let span = meta.path.span();
        let name = path_name(&meta.path);
        match name.as_str() {
            "crate" => {
                // `crate = devcheck` and serde's spelling `crate = "devcheck"` both work.
                let value = meta.value()?;
                let path: syn::Path = if value.peek(syn::LitStr) {
                    value.parse::<syn::LitStr>()?.parse()?
                } else {
                    syn::Path::parse_mod_style(value)?
                };
                if out.krate.is_some() {
                    errors.push(ClassifyError::new(
                        span,
                        "duplicate module attribute `crate`",
                        "remove the repeated attribute",
                    ));
                } else {
                    out.krate = Some(path);
                }
            }
            "skip" | "non_persistent" => {
                errors.push(ClassifyError::new(
                    span,
                    format!("`{name}` goes on a field, not on the struct or enum"),
                    format!("put `#[module({name})]` above the field it is about"),
                ));
                skip_value(&meta)?;
            }
            _ => {
                errors.push(unknown(span, &name, CONTAINER_HELP));
                skip_value(&meta)?;
            }
        }
        Ok(())
    });
    (out, errors)
}

/// Every `#[module(...)]` attribute on a variant is an error: attributes go on fields.
pub(crate) fn check_variant_attrs(attrs: &[Attribute], errors: &mut Vec<ClassifyError>) {
    for attr in attrs.iter().filter(|a| a.path().is_ident("module")) {
        errors.push(ClassifyError::spanning(
            attr,
            "module attributes go on fields, not on enum variants",
            "put `#[module(skip)]` or `#[module(non_persistent)]` above the variant's fields",
        ));
    }
}

/// Calls `item` for every entry of every `#[module(...)]` attribute, in source order, with the
/// error list; `#[module]`, `#[module = ..]` and entries that do not parse are errors with `help`.
fn for_each_item(
    attrs: &[Attribute],
    help: &str,
    errors: &mut Vec<ClassifyError>,
    mut item: impl FnMut(ParseNestedMeta<'_>, &mut Vec<ClassifyError>) -> syn::Result<()>,
) {
    for attr in attrs.iter().filter(|a| a.path().is_ident("module")) {
        if !matches!(attr.meta, Meta::List(_)) {
            errors.push(ClassifyError::spanning(
                attr,
                "expected `#[module(...)]`",
                "write e.g. `#[module(skip)]` or `#[module(non_persistent)]`",
            ));
            continue;
        }
        if let Err(error) = attr.parse_nested_meta(|meta| item(meta, errors)) {
            errors.push(ClassifyError::new(error.span(), error.to_string(), help));
        }
    }
}

fn unknown(span: Span, name: &str, help: &str) -> ClassifyError {
    ClassifyError::new(span, format!("unknown module attribute `{name}`"), help)
}

fn path_name(path: &syn::Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segments.join("::")
}

/// Consumes `= value` or `(...)` after an attribute name that was already reported, so parsing
/// goes on to the next attribute and every problem is reported in one build.
fn skip_value(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        let _: syn::Expr = meta.value()?.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in meta.input);
        let _: proc_macro2::TokenStream = content.parse()?;
    }
    Ok(())
}
