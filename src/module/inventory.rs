//! The inventory of a model: every parameter, buffer and skipped field as an [`Entry`] with its
//! path and kind, what the checker reports.

use std::fmt;

use super::{Module, ModulePath, Param, Persistence, Skipped, Visitor, buffer_role};
use crate::error::Result;
use crate::tensor::{SkippedField, Tensor, TensorRole};

/// One parameter, buffer or skipped field of a model: what the checker reports.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The dotted path (`blocks.0.attn.mask`).
    pub path: String,
    pub kind: EntryKind,
    /// The tensor, for parameters and buffers always, for a skipped `Tensor` field too.
    pub tensor: Option<Tensor>,
    /// The parameter, for [`EntryKind::Parameter`] (its [`ParamId`](super::ParamId) shows tied weights).
    pub param: Option<Param>,
    /// For [`EntryKind::Skipped`]: the field's Rust type as written.
    pub type_name: Option<&'static str>,
    /// For [`EntryKind::Skipped`]: false when the type is plain data.
    pub may_hold_tensors: bool,
    /// For [`EntryKind::Skipped`]: the field marked `#[module(skip)]` it is, or is inside (a
    /// skipped submodule's tensors are listed at their paths, `encoder.weight`).
    pub skipped_field: Option<SkippedField>,
}

/// What an [`Entry`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A `Param`: moved, saved, has a gradient.
    Parameter,
    /// A plain `Tensor` field: moved, saved.
    Buffer,
    /// `#[module(non_persistent)]`: moved, not saved.
    NonPersistentBuffer,
    /// `#[module(skip)]`: not moved, not saved.
    Skipped,
}

impl EntryKind {
    /// `parameter`, `buffer`, `non-persistent buffer`, `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Parameter => "parameter",
            EntryKind::Buffer => "buffer",
            EntryKind::NonPersistentBuffer => "non-persistent buffer",
            EntryKind::Skipped => "skipped",
        }
    }
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Default)]
pub(super) struct EntryCollector {
    pub(super) entries: Vec<Entry>,
}

/// Lists every entry and labels every tensor it meets with its path and role, so that errors
/// about them name them (see [`TensorRole`]).
impl Visitor for EntryCollector {
    fn visit_param(&mut self, path: &ModulePath, param: &Param) -> Result<()> {
        let tensor = param.tensor();
        tensor.set_label(path.as_str(), TensorRole::Parameter);
        self.entries.push(Entry {
            path: path.to_string(),
            kind: EntryKind::Parameter,
            tensor: Some(tensor),
            param: Some(param.share()),
            type_name: None,
            may_hold_tensors: true,
            skipped_field: None,
        });
        Ok(())
    }

    fn visit_buffer(&mut self, path: &ModulePath, tensor: &Tensor, persistence: Persistence) -> Result<()> {
        let kind = match persistence {
            Persistence::Persistent => EntryKind::Buffer,
            Persistence::NonPersistent => EntryKind::NonPersistentBuffer,
        };
        tensor.set_label(path.as_str(), buffer_role(persistence));
        self.entries.push(Entry {
            path: path.to_string(),
            kind,
            tensor: Some(tensor.clone()),
            param: None,
            type_name: None,
            may_hold_tensors: true,
            skipped_field: None,
        });
        Ok(())
    }

    fn visit_skipped(&mut self, path: &ModulePath, skipped: Skipped<'_>) -> Result<()> {
        let field = SkippedField { path: path.to_string(), declared_at: skipped.declared_at };
        if let Some(tensor) = skipped.tensor {
            tensor.set_label(path.as_str(), TensorRole::Skipped(field.clone()));
        }
        let inside = skipped.module.map(|module| skipped_module_entries(path, module, &skipped));
        self.entries.push(Entry {
            path: path.to_string(),
            kind: EntryKind::Skipped,
            tensor: skipped.tensor.cloned(),
            param: None,
            type_name: Some(skipped.type_name),
            // A skipped submodule is looked into: its tensors are listed after it.
            may_hold_tensors: skipped.may_hold_tensors && inside.as_ref().is_none_or(|i| !i.is_empty()),
            skipped_field: Some(field),
        });
        self.entries.extend(inside.into_iter().flatten());
        Ok(())
    }
}

/// The parameters and buffers of a skipped submodule, as skipped entries at their full paths
/// (`encoder.weight` for `weight` of the skipped field `encoder`), with the kind of tensor each
/// would have been (`Param` or `Tensor`) as its type; each tensor is labelled so.
pub(super) fn skipped_module_entries(
    path: &ModulePath,
    module: &dyn Module,
    skipped: &Skipped<'_>,
) -> Vec<Entry> {
    let field = SkippedField { path: path.to_string(), declared_at: skipped.declared_at };
    let prefix = |inner: &str| if inner.is_empty() { path.to_string() } else { format!("{path}.{inner}") };
    let entries: Vec<Entry> = module
        .entries()
        .into_iter()
        .map(|inner| Entry {
            path: prefix(&inner.path),
            kind: EntryKind::Skipped,
            type_name: Some(match inner.kind {
                EntryKind::Parameter => "Param",
                EntryKind::Skipped => inner.type_name.unwrap_or("?"),
                _ => "Tensor",
            }),
            may_hold_tensors: inner.may_hold_tensors,
            param: inner.param,
            tensor: inner.tensor,
            skipped_field: Some(field.clone()),
        })
        .collect();
    for entry in &entries {
        if let Some(tensor) = &entry.tensor {
            tensor.set_label(&entry.path, TensorRole::Skipped(field.clone()));
        }
    }
    entries
}
