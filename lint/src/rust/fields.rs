//! What each framework's device move does to a struct's fields. D004 and `devcheck inspect` both
//! ask this, so they always agree. For devcheck it is the derive's own classification
//! (`devcheck-classify`); for burn, tch and candle it is what the linter knows of those APIs.

use std::ops::Range;

use devcheck_classify::{FieldClass, classify_field, type_to_string};
use syn::spanned::Spanned;

use super::api::Api;
use super::facts::StructFacts;
use super::syntax::{ParamKind, classify_type, mentions_tensor, module_attr_word};
pub(crate) use crate::fields::Fate;
use crate::rust::FileCx;

/// One field and its fate.
#[derive(Clone, Debug)]
pub(crate) struct FieldFate {
    pub name: String,
    pub ty: String,
    /// What the field is (`parameter`, `buffer`, `vec of submodules`, `skipped \`Tensor\``...).
    pub class: String,
    pub fate: Fate,
    /// Saved in checkpoints, when the framework says.
    pub saved: Option<bool>,
    /// The field's name through its type.
    pub range: Range<usize>,
    /// The `skip` of `#[module(skip)]`, if any.
    pub skip: Option<Range<usize>>,
    /// devcheck: `#[module(skip)]` may become `#[module(non_persistent)]` (the derive accepts it).
    pub can_be_non_persistent: bool,
    pub note: Option<String>,
    /// Problems the derive reports for this field.
    pub errors: Vec<String>,
}

fn field_range(file: &FileCx<'_>, field: &syn::Field) -> Range<usize> {
    let start = field
        .ident
        .as_ref()
        .map(|i| file.range(i.span()).start)
        .unwrap_or_else(|| file.range(field.ty.span()).start);
    start..file.range(field.ty.span()).end
}

fn field_name(field: &syn::Field, index: usize) -> String {
    field.ident.as_ref().map(|i| i.to_string()).unwrap_or_else(|| index.to_string())
}

/// devcheck's `#[derive(Module)]`, through the derive's own classification.
pub(crate) fn devcheck_fields(file: &FileCx<'_>, s: &syn::ItemStruct) -> Vec<FieldFate> {
    s.fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let classified = classify_field(field);
            let class = &classified.class;
            let (fate, saved) = match class {
                FieldClass::Skipped { underlying, .. } => {
                    let tensors = matches!(
                        underlying.leaf(),
                        FieldClass::Buffer | FieldClass::NonPersistentBuffer | FieldClass::Param
                    ) || (underlying.rejection().is_some() && mentions_tensor(&field.ty));
                    (if tensors { Fate::LeftBehind } else { Fate::Plain }, Some(false))
                }
                FieldClass::Plain => (Fate::Plain, None),
                FieldClass::Rejected(_) => (Fate::Rejected, None),
                other => {
                    let saved = match other.leaf() {
                        FieldClass::Param | FieldClass::Buffer => Some(true),
                        FieldClass::NonPersistentBuffer => Some(false),
                        _ => None,
                    };
                    (Fate::Moves, saved)
                }
            };
            let can_be_non_persistent = matches!(class, FieldClass::Skipped { underlying, .. }
                if matches!(underlying.leaf(), FieldClass::Buffer | FieldClass::NonPersistentBuffer));
            let described =
                if fate == Fate::Rejected { "rejected by the derive".to_string() } else { class.describe() };
            FieldFate {
                name: field_name(field, i),
                ty: type_to_string(&field.ty),
                class: described,
                fate,
                saved,
                range: field_range(file, field),
                skip: classified.attrs.skip.map(|s| file.range(s)),
                can_be_non_persistent,
                note: None,
                errors: classified
                    .errors
                    .iter()
                    .map(|e| format!("{} (help: {})", e.message, e.help))
                    .collect(),
            }
        })
        .collect()
}

/// burn's `#[derive(Module)]`: `Param`s, tensors and submodules move with `to_device`;
/// `#[module(skip)]` fields and `Ignored<..>` do not.
pub(crate) fn burn_fields(file: &FileCx<'_>, s: &syn::ItemStruct) -> Vec<FieldFate> {
    s.fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let ty = type_to_string(&field.ty);
            let last = type_last(&field.ty);
            let skip = module_attr_word(&field.attrs, "skip").map(|s| file.range(s));
            let tensors = mentions_tensor(&field.ty);
            let (class, fate) = if skip.is_some() {
                (format!("skipped `{ty}`"), if tensors { Fate::LeftBehind } else { Fate::Plain })
            } else if last == "Ignored" {
                ("`Ignored` wrapper".to_string(), if tensors { Fate::LeftBehind } else { Fate::Plain })
            } else if last == "Param" {
                ("parameter".to_string(), Fate::Moves)
            } else if matches!(classify_type(&field.ty), ParamKind::Tensor { .. }) {
                ("tensor constant".to_string(), Fate::Moves)
            } else if is_plain_type(&last) {
                ("plain data".to_string(), Fate::Plain)
            } else {
                ("submodule".to_string(), Fate::Moves)
            };
            FieldFate {
                name: field_name(field, i),
                ty,
                class,
                fate,
                saved: None,
                range: field_range(file, field),
                skip,
                can_be_non_persistent: false,
                note: None,
                errors: Vec::new(),
            }
        })
        .collect()
}

/// candle and tch structs: tensors stay where their constructor put them (candle) or move with
/// the VarStore only when they were made by it (tch).
pub(crate) fn plain_struct_fields(
    file: &FileCx<'_>,
    s: &syn::ItemStruct,
    facts: Option<&StructFacts>,
    api: Api,
) -> Vec<FieldFate> {
    s.fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let name = field_name(field, i);
            let ty = type_to_string(&field.ty);
            let last = type_last(&field.ty);
            let init = facts.and_then(|f| f.inits.get(&name));
            let fixed = init.and_then(|i| i.fixed_tensors.first());
            let kind = classify_type(&field.ty);
            let (class, fate, note) = match kind {
                ParamKind::Tensor { .. } | ParamKind::TensorLike => {
                    let fixed_note = fixed.map(|f| {
                        let device = if f.device_range == f.ctor_range {
                            "the CPU".to_string()
                        } else {
                            format!("`{}`", file.short(&f.device_range))
                        };
                        format!("made on {device} in `{}`", f.in_fn)
                    });
                    match api {
                        Api::Tch if init.is_some_and(|i| i.varstore) => (
                            "VarStore variable".to_string(),
                            Fate::Moves,
                            Some("made by the VarStore: `set_device` moves it".to_string()),
                        ),
                        Api::Tch => (
                            "tensor outside the VarStore".to_string(),
                            if fixed.is_some() || init.is_some() { Fate::LeftBehind } else { Fate::Unknown },
                            Some(fixed_note.unwrap_or_else(|| "`set_device` does not move it".to_string())),
                        ),
                        _ => (
                            "tensor".to_string(),
                            Fate::Stays,
                            Some(
                                fixed_note
                                    .unwrap_or_else(|| "on the device its constructor used".to_string()),
                            ),
                        ),
                    }
                }
                ParamKind::Device => ("device".to_string(), Fate::Plain, None),
                ParamKind::Other if is_plain_type(&last) => ("plain data".to_string(), Fate::Plain, None),
                ParamKind::Other => match api {
                    Api::Tch => (
                        "submodule".to_string(),
                        Fate::Moves,
                        Some("VarStore variables move with it".to_string()),
                    ),
                    _ => ("submodule".to_string(), Fate::Stays, None),
                },
            };
            FieldFate {
                name,
                ty,
                class,
                fate,
                saved: None,
                range: field_range(file, field),
                skip: None,
                can_be_non_persistent: false,
                note,
                errors: Vec::new(),
            }
        })
        .collect()
}

fn type_last(ty: &syn::Type) -> String {
    super::syntax::type_name(ty).unwrap_or_default()
}

/// Types that hold no tensor whatever the framework.
fn is_plain_type(last: &str) -> bool {
    matches!(
        last,
        "bool"
            | "char"
            | "str"
            | "String"
            | "usize"
            | "isize"
            | "u8"
            | "u16"
            | "u32"
            | "u64"
            | "u128"
            | "i8"
            | "i16"
            | "i32"
            | "i64"
            | "i128"
            | "f32"
            | "f64"
            | "PathBuf"
            | "Duration"
            | "DType"
            | "Kind"
            | "PhantomData"
            | "Span"
            | "Dropout"
            | "Gelu"
            | "Relu"
            | "Activation"
    ) || last.ends_with("Config")
        || last.ends_with("Device")
}
