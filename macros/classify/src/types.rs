//! Classifying a type, by its syntax.

use quote::ToTokens;
use syn::{GenericArgument, PathArguments, Type, TypePath, TypeTraitObject};

use crate::class::{ContainerKind, FieldClass, MapKey, Rejection};

/// Classifies a type as if its field had no `#[module(...)]` attribute. See the crate docs.
pub fn classify_type(ty: &Type) -> FieldClass {
    match ty {
        Type::Group(group) => classify_type(&group.elem),
        Type::Paren(paren) => classify_type(&paren.elem),
        Type::Path(path) => classify_path(ty, path),
        Type::Array(array) => container(
            ContainerKind::Array { len: array.len.to_token_stream().to_string() },
            classify_type(&array.elem),
        ),
        Type::TraitObject(object) => classify_trait_object(object),
        Type::Tuple(tuple) => {
            let classes: Vec<FieldClass> = tuple.elems.iter().map(classify_type).collect();
            if let Some(inner) = classes.iter().find(|c| c.rejection().is_some()) {
                return inner.clone();
            }
            if classes.iter().all(|c| matches!(c, FieldClass::Plain)) {
                return FieldClass::Plain;
            }
            reject(
                ty,
                format!(
                    "the tuple `{}` holds tensors or modules the derive does not walk",
                    type_to_string(ty)
                ),
                "give each element its own field, or use a struct that derives `Module`",
            )
        }
        Type::Reference(reference) => hides(
            ty,
            classify_type(&reference.elem),
            "a borrowed tensor or module cannot be moved in place: `to()` needs to own it",
            "store the value itself (`Tensor` and `Param` are cheap shared handles; clone them)",
        ),
        Type::Ptr(pointer) => hides(
            ty,
            classify_type(&pointer.elem),
            "a raw pointer hides its target from the derive: `to()` cannot reach it",
            "store the value itself (`Tensor` and `Param` are cheap shared handles; clone them)",
        ),
        Type::Slice(slice) => hides(
            ty,
            classify_type(&slice.elem),
            "an unsized slice field is not walked by the derive",
            "use `Vec<T>` or `[T; N]`",
        ),
        Type::Never(_) | Type::BareFn(_) | Type::ImplTrait(_) => FieldClass::Plain,
        // Macros, `_` and anything newer than this crate: unknown, so a submodule (see crate docs).
        _ => FieldClass::Submodule,
    }
}

/// The type as a person writes it: `Rc<RefCell<Tensor>>`, `[Tensor; 4]`, `&'static str`.
pub fn type_to_string(ty: &Type) -> String {
    let raw = ty.to_token_stream().to_string();
    let mut out = String::with_capacity(raw.len());
    let tokens: Vec<&str> = raw.split(' ').collect();
    for (i, token) in tokens.iter().enumerate() {
        let prev = if i > 0 { tokens[i - 1] } else { "" };
        let glue = i == 0
            || matches!(*token, "<" | ">" | "," | "::" | ";" | "]" | ")" | ">>")
            || ["<", "::", "&", "[", "(", "*", "#"].iter().any(|end| prev.ends_with(end))
            || prev == "&mut"
            || (token.starts_with('(') && prev.chars().next_back().is_some_and(|c| c.is_alphanumeric()));
        if !glue {
            out.push(' ');
        }
        out.push_str(token);
    }
    out
}

const PLAIN_NAMES: &[&str] = &[
    "bool",
    "char",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "f32",
    "f64",
    "f16",
    "bf16",
    "str",
    "String",
    "Path",
    "PathBuf",
    "OsStr",
    "OsString",
    "Duration",
    "Instant",
    "SystemTime",
    "Device",
    "DType",
    "Shape",
    "PhantomData",
    "PhantomPinned",
    "AtomicBool",
    "AtomicU8",
    "AtomicU16",
    "AtomicU32",
    "AtomicU64",
    "AtomicUsize",
    "AtomicI8",
    "AtomicI16",
    "AtomicI32",
    "AtomicI64",
    "AtomicIsize",
    "NonZero",
    "NonZeroU8",
    "NonZeroU16",
    "NonZeroU32",
    "NonZeroU64",
    "NonZeroUsize",
    "NonZeroI8",
    "NonZeroI16",
    "NonZeroI32",
    "NonZeroI64",
    "NonZeroIsize",
    "Range",
    "RangeInclusive",
];

const INTEGER_NAMES: &[&str] =
    &["i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize"];

/// Traits whose objects are behaviour or metadata, never modules: `Box<dyn Fn(&Tensor) -> Tensor>`
/// is an activation function, plain data to the derive.
const PLAIN_TRAITS: &[&str] = &[
    "Fn",
    "FnMut",
    "FnOnce",
    "Any",
    "Error",
    "Debug",
    "Display",
    "Send",
    "Sync",
    "Unpin",
    "UnwindSafe",
    "RefUnwindSafe",
];

fn classify_path(ty: &Type, path: &TypePath) -> FieldClass {
    if path.qself.is_some() {
        // `<B as Backend>::FloatElem`: unknown, so a submodule.
        return FieldClass::Submodule;
    }
    let Some(last) = path.path.segments.last() else {
        return FieldClass::Submodule;
    };
    let name = last.ident.to_string();
    let args = type_args(&last.arguments);
    let arg = |i: usize| args.get(i).map(|t| classify_type(t));

    match name.as_str() {
        "Tensor" => FieldClass::Buffer,
        "Param" => FieldClass::Param,
        "PhantomData" | "PhantomPinned" => FieldClass::Plain,
        _ if PLAIN_NAMES.contains(&name.as_str()) => {
            // `Range<usize>` is plain; `Range<Tensor>` is not what anyone means, but it is rejected
            // rather than walked.
            let classes: Vec<FieldClass> = args.iter().map(|t| classify_type(t)).collect();
            if classes.iter().all(|c| matches!(c, FieldClass::Plain)) {
                FieldClass::Plain
            } else {
                reject(
                    ty,
                    format!("`{}` holds tensors or modules the derive does not walk", type_to_string(ty)),
                    "store the tensors in a field of their own",
                )
            }
        }
        "Option" if args.len() == 1 => container(ContainerKind::Option, arg(0).unwrap_or(FieldClass::Plain)),
        "Box" if !args.is_empty() => container(ContainerKind::Box, arg(0).unwrap_or(FieldClass::Plain)),
        "Vec" if !args.is_empty() => container(ContainerKind::Vec, arg(0).unwrap_or(FieldClass::Plain)),
        "BTreeMap" if args.len() >= 2 => classify_btree_map(ty, args[0], args[1]),
        "HashMap" if args.len() >= 2 => hides(
            ty,
            classify_type(args[1]),
            format!(
                "`{}` has no stable order, so its tensors would get unstable paths and checkpoint keys",
                type_to_string(ty)
            ),
            format!(
                "use `BTreeMap<String, {}>` (walked in key order, paths like `heads.query`), or mark the \
                 field `#[module(skip)]` and move it yourself",
                type_to_string(args[1])
            ),
        ),
        "HashSet" | "BTreeSet" | "BinaryHeap" | "VecDeque" | "LinkedList" if !args.is_empty() => hides(
            ty,
            classify_type(args[0]),
            format!("`{}` is not a container the derive walks", type_to_string(ty)),
            "use `Vec<T>` (paths `field.0`, `field.1`, ...), or mark the field `#[module(skip)]` and \
             move it yourself",
        ),
        "Rc" | "Arc" | "Weak" if !args.is_empty() => {
            let inner = classify_type(args[0]);
            let hint = if names_tensor(args[0]) {
                "`Tensor` and `Param` are already cheap shared handles: store them directly (a `Param` \
                 clone is the same parameter, so tied weights stay tied)"
            } else {
                "own the submodule (directly or in a `Box`); to share weights between modules, share \
                 the `Param` (its clones are the same parameter). If the type holds no tensors, mark the \
                 field `#[module(skip)]`"
            };
            hides(
                ty,
                inner,
                format!(
                    "`{}` is shared ownership: `to()` needs `&mut` access to move what it holds",
                    type_to_string(ty)
                ),
                hint,
            )
        }
        "RefCell" | "Cell" | "Mutex" | "RwLock" | "OnceCell" | "OnceLock" | "LazyCell" | "LazyLock"
        | "UnsafeCell"
            if !args.is_empty() =>
        {
            hides(
                ty,
                classify_type(args[0]),
                format!(
                    "`{}` hides what it holds behind interior mutability: `to()` cannot reach it",
                    type_to_string(ty)
                ),
                "store the tensor or module directly (a move reaches it through `&mut self`); a cache \
                 rebuilt on demand can be marked `#[module(skip)]`",
            )
        }
        "Cow" if args.len() == 1 => hides(
            ty,
            classify_type(args[0]),
            format!("`{}` may borrow: `to()` needs to own what it moves", type_to_string(ty)),
            "store the value itself",
        ),
        _ => FieldClass::Submodule,
    }
}

fn classify_btree_map(ty: &Type, key: &Type, value: &Type) -> FieldClass {
    let value_class = classify_type(value);
    match map_key(key) {
        Some(key) => container(ContainerKind::BTreeMap { key }, value_class),
        None => hides(
            ty,
            value_class,
            format!("the keys of `{}` cannot name paths", type_to_string(ty)),
            "use `String` (or an integer type) keys: each key becomes a path segment and a checkpoint key",
        ),
    }
}

fn map_key(key: &Type) -> Option<MapKey> {
    match key {
        Type::Group(group) => map_key(&group.elem),
        Type::Paren(paren) => map_key(&paren.elem),
        Type::Reference(reference) => match &*reference.elem {
            Type::Path(p) if p.path.is_ident("str") => Some(MapKey::String),
            _ => None,
        },
        Type::Path(path) if path.qself.is_none() => {
            let last = path.path.segments.last()?;
            let name = last.ident.to_string();
            let args = type_args(&last.arguments);
            let is_str = |t: &Type| matches!(t, Type::Path(p) if p.path.is_ident("str"));
            match name.as_str() {
                "String" => Some(MapKey::String),
                "Box" | "Rc" | "Arc" | "Cow" if args.first().is_some_and(|t| is_str(t)) => {
                    Some(MapKey::String)
                }
                _ if INTEGER_NAMES.contains(&name.as_str()) => Some(MapKey::Integer),
                _ => None,
            }
        }
        _ => None,
    }
}

fn classify_trait_object(object: &TypeTraitObject) -> FieldClass {
    let trait_names: Vec<String> = object
        .bounds
        .iter()
        .filter_map(|bound| match bound {
            syn::TypeParamBound::Trait(t) => t.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        })
        .collect();
    if trait_names.iter().all(|name| PLAIN_TRAITS.contains(&name.as_str())) {
        FieldClass::Plain
    } else {
        FieldClass::Submodule
    }
}

/// Does the type mention `Tensor` or `Param` anywhere (`RefCell<Vec<Tensor>>`)?
fn names_tensor(ty: &Type) -> bool {
    fn walk(tokens: proc_macro2::TokenStream) -> bool {
        tokens.into_iter().any(|tree| match tree {
            proc_macro2::TokenTree::Ident(ident) => ident == "Tensor" || ident == "Param",
            proc_macro2::TokenTree::Group(group) => walk(group.stream()),
            _ => false,
        })
    }
    walk(ty.to_token_stream())
}

fn type_args(arguments: &PathArguments) -> Vec<&Type> {
    match arguments {
        PathArguments::AngleBracketed(args) => args
            .args
            .iter()
            .filter_map(|arg| match arg {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A container of `element`: plain if the element is, the element's rejection if it is rejected.
fn container(kind: ContainerKind, element: FieldClass) -> FieldClass {
    match element {
        FieldClass::Plain => FieldClass::Plain,
        rejected @ FieldClass::Rejected(_) => rejected,
        element => FieldClass::Container { kind, element: Box::new(element) },
    }
}

/// A wrapper the derive cannot walk: fine around plain data, rejected around anything else. The
/// outermost such wrapper is the one reported (`Rc<RefCell<Tensor>>` is about the `Rc`).
fn hides(ty: &Type, inner: FieldClass, reason: impl Into<String>, hint: impl Into<String>) -> FieldClass {
    match inner {
        FieldClass::Plain => FieldClass::Plain,
        _ => reject(ty, reason, hint),
    }
}

fn reject(ty: &Type, reason: impl Into<String>, hint: impl Into<String>) -> FieldClass {
    let (span, end) = crate::class::span_range(ty);
    FieldClass::Rejected(Rejection { reason: reason.into(), hint: hint.into(), span, end })
}
