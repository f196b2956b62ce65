//! The classes a field can fall in, and the errors the classification reports.

use std::fmt;

use proc_macro2::{Punct, Spacing, Span, TokenStream, TokenTree};
use quote::ToTokens;

/// The first and last token spans of `tokens` (`call_site` for none).
pub(crate) fn span_range(tokens: &dyn ToTokens) -> (Span, Span) {
    let mut iter = tokens.to_token_stream().into_iter();
    let first = iter.next().map(|t| t.span()).unwrap_or_else(Span::call_site);
    let last = iter.last().map(|t| t.span()).unwrap_or(first);
    (first, last)
}

/// What a field is to `#[derive(Module)]`. See the crate docs for the rules.
#[derive(Clone, Debug)]
pub enum FieldClass {
    /// A `Param`: trainable, moved with its gradient, saved.
    Param,
    /// A plain `Tensor`: moved and saved, no gradient.
    Buffer,
    /// A `Tensor` marked `#[module(non_persistent)]`: moved, not saved.
    NonPersistentBuffer,
    /// A field marked `#[module(skip)]`: left where it is, remembered so the checker can report it.
    Skipped {
        /// The field's type as written, tidied (`Rc<RefCell<Tensor>>`).
        type_name: String,
        /// What the field would have been without `skip`. May be [`FieldClass::Rejected`]: skipping
        /// is the way to keep a shape the derive cannot move.
        underlying: Box<FieldClass>,
    },
    /// Another module: the derive recurses into it, and the type must implement `Module`.
    Submodule,
    /// A container whose elements all have the class `element` (never [`FieldClass::Plain`] nor
    /// [`FieldClass::Rejected`]: such containers are plain or rejected themselves).
    Container { kind: ContainerKind, element: Box<FieldClass> },
    /// Data that holds no tensor (numbers, strings, configs marked by their type): left alone.
    Plain,
    /// A shape that holds tensors where no move can reach them: a compile error.
    Rejected(Rejection),
}

/// The containers the derive walks, and the path segment each adds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainerKind {
    /// `Option<T>`: no path segment; `None` holds nothing.
    Option,
    /// `Box<T>` (also `Box<dyn Trait>`): no path segment.
    Box,
    /// `Vec<T>`: the index (`layers.3`).
    Vec,
    /// `[T; N]`: the index. `len` is the length expression as written.
    Array { len: String },
    /// `BTreeMap<K, T>`: the key, formatted with `Display` (`heads.query`).
    BTreeMap { key: MapKey },
}

/// The key types a `BTreeMap` field may have: they print as path segments and sort stably.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKey {
    /// `String`, `&str`, `Box<str>`, `Cow<str>`.
    String,
    /// Any primitive integer type.
    Integer,
}

/// Why a field's type is rejected, what to do instead, and where.
#[derive(Clone, Debug)]
pub struct Rejection {
    /// Starts lowercase, no trailing period: "`HashMap<String, Tensor>` has no stable order...".
    pub reason: String,
    /// The fix.
    pub hint: String,
    /// The first token of the offending type (the outermost wrapper that hides the tensor).
    pub span: Span,
    /// Its last token.
    pub end: Span,
}

impl Rejection {
    pub fn to_error(&self) -> ClassifyError {
        ClassifyError {
            span: self.span,
            end: self.end,
            message: self.reason.clone(),
            help: self.hint.clone(),
        }
    }
}

/// One problem with a field or an attribute, spanned at the offending tokens.
#[derive(Clone, Debug)]
pub struct ClassifyError {
    /// The first offending token. With proc-macro2's `span-locations` feature, `span.start()` is
    /// its line and column.
    pub span: Span,
    /// The last offending token (the same as `span` for a single token): `end.end()` is where the
    /// offending text ends.
    pub end: Span,
    /// Starts lowercase, no trailing period.
    pub message: String,
    /// How to fix it.
    pub help: String,
}

impl ClassifyError {
    /// An error at one token.
    pub fn new(span: Span, message: impl Into<String>, help: impl Into<String>) -> ClassifyError {
        ClassifyError { span, end: span, message: message.into(), help: help.into() }
    }

    /// An error covering all of `tokens` (a type, an attribute).
    pub fn spanning(
        tokens: &dyn ToTokens,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> ClassifyError {
        let (span, end) = span_range(tokens);
        ClassifyError { span, end, message: message.into(), help: help.into() }
    }

    /// A `syn::Error` whose message is the problem followed by a `help:` line, as the proc macro
    /// reports it (`into_compile_error()`), underlining every offending token.
    pub fn to_syn_error(&self) -> syn::Error {
        let mut first = Punct::new('<', Spacing::Alone);
        first.set_span(self.span);
        let mut last = Punct::new('>', Spacing::Alone);
        last.set_span(self.end);
        let range: TokenStream = [TokenTree::Punct(first), TokenTree::Punct(last)].into_iter().collect();
        syn::Error::new_spanned(range, self.to_string())
    }

    /// All errors combined into one `syn::Error` (each keeps its own span), or `None` when empty.
    pub fn combine(errors: &[ClassifyError]) -> Option<syn::Error> {
        let mut iter = errors.iter();
        let mut combined = iter.next()?.to_syn_error();
        for error in iter {
            combined.combine(error.to_syn_error());
        }
        Some(combined)
    }
}

impl fmt::Display for ClassifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n= help: {}", self.message, self.help)
    }
}

impl FieldClass {
    /// A short phrase for reports: `parameter`, `buffer`, `vec of submodules`,
    /// `optional buffer`, `skipped \`Tensor\` (not moved, not saved)`, `plain data`,
    /// `rejected: ` followed by the reason.
    pub fn describe(&self) -> String {
        match self {
            FieldClass::Param => "parameter".into(),
            FieldClass::Buffer => "buffer".into(),
            FieldClass::NonPersistentBuffer => "non-persistent buffer".into(),
            FieldClass::Skipped { type_name, .. } => format!("skipped `{type_name}` (not moved, not saved)"),
            FieldClass::Submodule => "submodule".into(),
            FieldClass::Plain => "plain data".into(),
            FieldClass::Rejected(r) => format!("rejected: {}", r.reason),
            FieldClass::Container { kind, element } => {
                let inner = element.describe_plural();
                match kind {
                    ContainerKind::Option => format!("optional {}", element.describe()),
                    ContainerKind::Box => format!("boxed {}", element.describe()),
                    ContainerKind::Vec => format!("vec of {inner}"),
                    ContainerKind::Array { len } => format!("array of {len} {inner}"),
                    ContainerKind::BTreeMap { .. } => format!("map of {inner}"),
                }
            }
        }
    }

    fn describe_plural(&self) -> String {
        match self {
            FieldClass::Param => "parameters".into(),
            FieldClass::Buffer => "buffers".into(),
            FieldClass::NonPersistentBuffer => "non-persistent buffers".into(),
            FieldClass::Submodule => "submodules".into(),
            other => other.describe(),
        }
    }

    /// Does `model.to(&device)` reach tensors through this field (directly or in submodules)?
    /// False for skipped, plain and rejected fields.
    pub fn is_moved(&self) -> bool {
        match self {
            FieldClass::Param
            | FieldClass::Buffer
            | FieldClass::NonPersistentBuffer
            | FieldClass::Submodule => true,
            FieldClass::Container { element, .. } => element.is_moved(),
            FieldClass::Skipped { .. } | FieldClass::Plain | FieldClass::Rejected(_) => false,
        }
    }

    /// Is there a `Param` in this class, directly or in a container (not inside submodules, which
    /// are opaque here)?
    pub fn contains_param(&self) -> bool {
        match self {
            FieldClass::Param => true,
            FieldClass::Container { element, .. } => element.contains_param(),
            _ => false,
        }
    }

    /// The innermost element class, through every container (`Vec<Option<Tensor>>` → `Buffer`).
    pub fn leaf(&self) -> &FieldClass {
        match self {
            FieldClass::Container { element, .. } => element.leaf(),
            other => other,
        }
    }

    /// The rejection, when this field is rejected.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            FieldClass::Rejected(r) => Some(r),
            _ => None,
        }
    }

    /// Buffers (also inside containers) become non-persistent; anything else is returned as `Err`.
    pub(crate) fn into_non_persistent(self) -> Result<FieldClass, FieldClass> {
        match self {
            FieldClass::Buffer | FieldClass::NonPersistentBuffer => Ok(FieldClass::NonPersistentBuffer),
            FieldClass::Container { kind, element } => match element.into_non_persistent() {
                Ok(element) => Ok(FieldClass::Container { kind, element: Box::new(element) }),
                Err(element) => Err(FieldClass::Container { kind, element: Box::new(element) }),
            },
            other => Err(other),
        }
    }
}
