//! What a tensor is to the user: its name (a module path such as `encoder.layers.0.mask`, or a
//! name given with [`Tensor::set_name`]) and its role in a model. Errors and reports name the
//! tensor by it and pick their help from the role: a parameter is fixed by moving the model, an
//! input by moving the batch, a helper tensor by creating it on an input's device.
//!
//! Module walks label what they reach (`model.to(..)`, `model.parameters()`, `inspect`, a dry
//! run, a load); a [`Param`](crate::Param) labels its tensor a parameter from the start. Views
//! (`transpose`, `narrow`, `reshape`, ...) and moved copies keep their source's label, so
//! `fc.weight.t()` is still `fc.weight`.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;

/// A tensor's role in a model, as the last module walk that reached it found it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TensorRole {
    /// A `Param` field: trainable, moved and saved with the model.
    Parameter,
    /// A `Tensor` field: moved and saved with the model.
    Buffer,
    /// A `Tensor` field marked `#[module(non_persistent)]`: moved, not saved.
    NonPersistentBuffer,
    /// A field marked `#[module(skip)]`, or a tensor inside one (a skipped submodule's
    /// parameters): `model.to(..)` does not move it.
    Skipped(SkippedField),
    /// An input given to a dry run ([`crate::check::Input`]).
    Input,
}

/// A field marked `#[module(skip)]`, as reports name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedField {
    /// The field's path in the model (`pos_enc`, `blocks.0.cache`).
    pub path: String,
    /// Where the field is declared, when the derive recorded it.
    pub declared_at: Option<&'static Location<'static>>,
}

impl fmt::Display for TensorRole {
    /// `a parameter`, `a buffer`, `skipped field \`pos_enc\``, `an input`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TensorRole::Parameter => f.write_str("a parameter"),
            TensorRole::Buffer => f.write_str("a buffer"),
            TensorRole::NonPersistentBuffer => f.write_str("a non-persistent buffer"),
            TensorRole::Skipped(field) => write!(f, "in `#[module(skip)]` field `{}`", field.path),
            TensorRole::Input => f.write_str("an input"),
        }
    }
}

/// A tensor's name and role, shared (one `Arc`) by the tensor, its views and its moved copies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Label {
    pub name: Option<Arc<str>>,
    pub role: Option<TensorRole>,
}
