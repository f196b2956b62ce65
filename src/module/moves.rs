//! Moves and conversions of a whole model, all or nothing: every new tensor is computed first,
//! then all are installed, so a failure changes nothing.

use std::collections::HashMap;

use super::{
    Module, ModulePath, Param, ParamId, ParamInstaller, ParamValues, Persistence, Skipped, SkippedMut,
    Visitor, VisitorMut, skipped_module_entries,
};
use crate::error::Result;
use crate::tensor::{SkippedField, Tensor, TensorRole};

/// Applies `f` to every parameter (with gradient and state, each parameter once) and buffer:
/// first computes every new tensor, then installs them all, so a failure changes nothing.
/// Parameters shared with another model are re-pointed rather than changed (see [`Param`]).
pub(super) fn transform<M: Module + ?Sized>(
    module: &mut M,
    f: &dyn Fn(&Tensor) -> Result<Tensor>,
) -> Result<()> {
    struct Compute<'f> {
        f: &'f dyn Fn(&Tensor) -> Result<Tensor>,
        params: HashMap<ParamId, ParamValues>,
        buffers: HashMap<String, Tensor>,
    }
    impl Visitor for Compute<'_> {
        fn visit_param(&mut self, _: &ModulePath, param: &Param) -> Result<()> {
            if !self.params.contains_key(&param.id()) {
                self.params.insert(param.id(), param.transformed(self.f)?);
            }
            Ok(())
        }
        fn visit_buffer(&mut self, path: &ModulePath, tensor: &Tensor, _: Persistence) -> Result<()> {
            self.buffers.insert(path.to_string(), (self.f)(tensor)?);
            Ok(())
        }
    }

    struct Install {
        params: HashMap<ParamId, ParamValues>,
        installer: ParamInstaller,
        buffers: HashMap<String, Tensor>,
    }
    impl VisitorMut for Install {
        fn visit_param(&mut self, path: &ModulePath, param: &mut Param) -> Result<()> {
            // A tied parameter's values are installed at its first path and named by it; its
            // later paths are re-pointed to the same cell.
            let id = param.id();
            match self.params.remove(&id) {
                Some(values) => self.installer.install(param, values, Some(path.as_str())),
                None => self.installer.follow(param),
            }
            Ok(())
        }
        fn visit_buffer(
            &mut self,
            path: &ModulePath,
            tensor: &mut Tensor,
            persistence: Persistence,
        ) -> Result<()> {
            if let Some(new) = self.buffers.remove(path.as_str()) {
                new.set_label(path.as_str(), buffer_role(persistence));
                *tensor = new;
            }
            Ok(())
        }
        fn visit_skipped(&mut self, path: &ModulePath, skipped: SkippedMut<'_>) -> Result<()> {
            // Not moved, but labelled: a mismatch it causes later then says which field it is.
            label_skipped(path, &skipped.as_skipped());
            Ok(())
        }
    }

    let mut compute = Compute { f, params: HashMap::new(), buffers: HashMap::new() };
    module.walk(&mut compute)?;
    let installer = ParamInstaller::for_module(module);
    let mut install = Install { params: compute.params, installer, buffers: compute.buffers };
    module.walk_mut(&mut install)
}

/// The role of a buffer with this persistence.
pub(crate) fn buffer_role(persistence: Persistence) -> TensorRole {
    match persistence {
        Persistence::Persistent => TensorRole::Buffer,
        Persistence::NonPersistent => TensorRole::NonPersistentBuffer,
    }
}

/// Labels a skipped field's tensor, and the tensors of a skipped submodule, with their paths and
/// the field they are in.
pub(crate) fn label_skipped(path: &ModulePath, skipped: &Skipped<'_>) {
    let role = TensorRole::Skipped(SkippedField { path: path.to_string(), declared_at: skipped.declared_at });
    if let Some(tensor) = skipped.tensor {
        tensor.set_label(path.as_str(), role.clone());
    }
    if let Some(module) = skipped.module {
        skipped_module_entries(path, module, skipped);
    }
}
