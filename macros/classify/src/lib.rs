//! The one field classification of devcheck.
//!
//! `#[derive(Module)]` and the static linter (`devcheck inspect`) must agree on what a struct field
//! is: a trainable parameter, a buffer, a submodule, a container of those, plain data, or a shape
//! a device move cannot reach. This crate is that single decision. It works on `syn` syntax trees
//! only, so it runs the same inside the proc macro and in a normal program that parses source files.
//!
//! # Entry points
//!
//! * [`classify_derive_input`]: a whole `struct`/`enum` (a [`syn::DeriveInput`]; a
//!   [`syn::ItemStruct`] or [`syn::ItemEnum`] converts with `.into()`), giving a [`ModuleLayout`]
//!   with every field's path segment, [`FieldClass`] and all errors.
//! * [`classify_field`]: one [`syn::Field`], its type and its `#[module(...)]` attributes.
//! * [`classify_type`]: a bare type, as if the field had no attributes.
//! * [`has_module_derive`]: does an item carry `#[derive(Module)]`?
//!
//! # The rules
//!
//! The type is read syntactically, by the last segment of its path (`devcheck::Tensor`, `Tensor`
//! and `crate::Tensor` are all `Tensor`):
//!
//! | field type | class | what `model.to(&device)` does |
//! |---|---|---|
//! | `Param` | [`FieldClass::Param`] | moves it (with its gradient and optimizer state); saved |
//! | `Tensor` | [`FieldClass::Buffer`] | moves it; saved |
//! | `Tensor` + `#[module(non_persistent)]` | [`FieldClass::NonPersistentBuffer`] | moves it; not saved |
//! | anything + `#[module(skip)]` | [`FieldClass::Skipped`] | leaves it; the field is remembered and reported |
//! | any other named type, type parameter, `dyn Trait` | [`FieldClass::Submodule`] | recurses into it (it must implement `Module`) |
//! | `Option<T>`, `Vec<T>`, `[T; N]`, `Box<T>`, `BTreeMap<K, T>` | [`FieldClass::Container`] | applies the element's class to every element |
//! | numbers, `bool`, `char`, `String`, `str`, `PathBuf`, `Duration`, `Device`, `DType`, `PhantomData<_>`, `fn` pointers, `dyn Fn..`, and any wrapper of those only | [`FieldClass::Plain`] | leaves it alone, silently |
//! | `HashMap<_, Tensor>`, `Rc<..>`/`Arc<..>`/`Weak<..>`, `RefCell`/`Cell`/`Mutex`/`RwLock`/`OnceCell`/`OnceLock`, references, raw pointers, tuples, `VecDeque`/`LinkedList`/sets of anything that is not plain data | [`FieldClass::Rejected`] | compile error at the field, with a hint |
//!
//! ## Unknown types are submodules
//!
//! A type this crate does not know (`Encoder`, `M`, `Box<dyn Layer>`, a type alias) is taken to
//! be a submodule: the derive calls `Module` on it, so a type that does not implement `Module` is a
//! compile error at that field. The other choice, leaving unknown types alone, would silently leave
//! a forgotten submodule on the CPU: exactly the bug devcheck exists to catch. The price is that a
//! config struct or a tokenizer kept in a module needs `#[module(skip)]`; the compile error says so.
//! A type alias of `Tensor` or `Param` is not seen through either: write `Tensor`/`Param` in the
//! field's type.
//!
//! The same holds inside wrappers: `Arc<Tokenizer>` or `HashMap<String, Config>` are rejected
//! because the element might be a module the move cannot reach; `#[module(skip)]` accepts them.
//!
//! ## Containers
//!
//! A container of plain data is plain data (`Vec<f32>`, `Option<String>`). A container of a
//! rejected shape is that rejection. Otherwise the path segments are:
//! `Option` and `Box` add none (`head.weight`), `Vec` and arrays add the index (`layers.3.weight`),
//! `BTreeMap` adds the key (`heads.query.weight`, keys `String`, `&str` or an integer type).
//! Containers nest (`Vec<Option<Tensor>>`).
//!
//! ## Attributes
//!
//! On a field: `#[module(skip)]`, `#[module(non_persistent)]`. On the struct or enum:
//! `#[module(crate = path)]` (where devcheck lives when it is re-exported, default `::devcheck`).
//! Every problem is collected, so a user sees all of them in one build:
//!
//! * an unknown name: "unknown module attribute `x`", at that token;
//! * `skip` on a field whose type holds a `Param` is an error: a parameter left out of the model
//!   is invisible to the optimizer and to `to()`. A frozen tensor is a plain `Tensor` (a buffer:
//!   moved, saved, no gradient);
//! * `skip` on anything else is allowed, including rejected shapes (that is the way out) and
//!   plain data (harmless; the field is reported as skipped holding no tensors);
//! * `non_persistent` is only for `Tensor` fields and containers of them (there is nothing to
//!   leave out of a checkpoint otherwise; a `Param` is always saved);
//! * `skip` with `non_persistent`, a repeated attribute, `crate` on a field, field attributes on
//!   the struct, and attributes on enum variants are errors.
//!
//! # Errors and spans
//!
//! A [`ClassifyError`] has a message (lowercase, no trailing period), a help line and the
//! [`proc_macro2::Span`] of the offending token. The proc macro turns them into one compile error
//! per problem ([`ModuleLayout::to_syn_error`]). A program that parses files with
//! `syn::parse_file` gets real positions from the spans when it enables proc-macro2's
//! `span-locations` feature (`span.start().line`, `span.byte_range()`).
//!
//! # Example (what `devcheck inspect` does)
//!
//! ```
//! let item: syn::ItemStruct = syn::parse_quote! {
//!     #[derive(Module)]
//!     struct Model {
//!         embed: Param,
//!         mask: Tensor,
//!         blocks: Vec<Block>,
//!         head: Option<Linear>,
//!         #[module(skip)]
//!         pos_enc: Tensor,
//!         dropout: f32,
//!     }
//! };
//! assert!(devcheck_classify::has_module_derive(&item.attrs));
//! let layout = devcheck_classify::classify_derive_input(&item.into());
//! assert!(layout.errors.is_empty());
//! let lines: Vec<String> =
//!     layout.fields().map(|f| format!("{}: {}", f.name, f.class.describe())).collect();
//! assert_eq!(
//!     lines,
//!     [
//!         "embed: parameter",
//!         "mask: buffer",
//!         "blocks: vec of submodules",
//!         "head: optional submodule",
//!         "pos_enc: skipped `Tensor` (not moved, not saved)",
//!         "dropout: plain data",
//!     ]
//! );
//! ```

mod attrs;
mod class;
mod layout;
mod types;

pub use attrs::{ContainerAttrs, FieldAttrs, parse_container_attrs, parse_field_attrs};
pub use class::{ClassifyError, ContainerKind, FieldClass, MapKey, Rejection};
pub use layout::{
    FieldEntry, FieldsStyle, LayoutBody, ModuleLayout, VariantLayout, classify_derive_input,
    has_module_derive,
};
pub use types::{classify_type, type_to_string};

/// "a parameter", "an optional submodule", "plain data".
fn with_article(phrase: &str) -> String {
    if phrase == "plain data" || phrase.starts_with("skipped") {
        phrase.to_string()
    } else if phrase.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {phrase}")
    } else {
        format!("a {phrase}")
    }
}

/// One field, classified: its class, its parsed attributes, and every error found in either.
#[derive(Clone, Debug)]
pub struct ClassifiedField {
    pub class: FieldClass,
    pub attrs: FieldAttrs,
    /// Attribute errors and the rejection (if any), in source order. Empty when the derive accepts
    /// the field.
    pub errors: Vec<ClassifyError>,
}

/// Classifies one field from its type and its `#[module(...)]` attributes.
///
/// Never fails: problems are returned in [`ClassifiedField::errors`] and, for a type no move can
/// reach, as [`FieldClass::Rejected`] (so a linter can still say what the field is).
pub fn classify_field(field: &syn::Field) -> ClassifiedField {
    let (attrs, mut errors) = parse_field_attrs(&field.attrs);
    let underlying = classify_type(&field.ty);
    let class = if attrs.skip.is_some() {
        if underlying.contains_param() {
            errors.push(ClassifyError::new(
                attrs.skip.unwrap_or_else(proc_macro2::Span::call_site),
                "a `Param` field cannot be skipped: the optimizer and `to()` would never see it",
                "a frozen tensor is a plain `Tensor` field (a buffer: moved and saved, no gradient); \
                 add `#[module(non_persistent)]` to also keep it out of checkpoints",
            ));
        }
        FieldClass::Skipped { type_name: type_to_string(&field.ty), underlying: Box::new(underlying) }
    } else if let Some(span) = attrs.non_persistent {
        match underlying.into_non_persistent() {
            Ok(class) => class,
            Err(underlying) => {
                errors.push(ClassifyError::new(
                    span,
                    format!(
                        "`non_persistent` applies to `Tensor` fields (or containers of them), not to {}",
                        with_article(&underlying.describe())
                    ),
                    if underlying.contains_param() {
                        "a `Param` is always saved; a tensor that moves but is not saved is a plain `Tensor` \
                         field with `#[module(non_persistent)]`"
                    } else {
                        "remove `#[module(non_persistent)]`; it only keeps buffers out of checkpoints"
                    },
                ));
                underlying
            }
        }
    } else {
        underlying
    };
    if let Some(rejection) = class.rejection() {
        errors.push(rejection.to_error());
    }
    ClassifiedField { class, attrs, errors }
}
