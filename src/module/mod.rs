//! Modules: the [`Module`] trait, [`Param`], and the path-aware visitors `#[derive(Module)]`
//! generates.
//!
//! PyTorch's `model.to(cuda)` moves parameters and *registered* buffers; a plain tensor attribute
//! (a causal mask, a positional encoding) silently stays behind. Here the derive registers every
//! tensor field, so `model.to(&device)` moves all of them, and a field left out on purpose
//! (`#[module(skip)]`) is remembered so the checker can report it.
//!
//! ```
//! use devcheck::{Device, Module, Param, Tensor};
//!
//! #[derive(Module)]
//! struct Block {
//!     weight: Param,
//!     /// Moved and saved, no gradient.
//!     scale: Tensor,
//! }
//!
//! #[derive(Module)]
//! struct Model {
//!     blocks: Vec<Block>,
//!     /// Moved, not saved.
//!     #[module(non_persistent)]
//!     causal_mask: Tensor,
//!     head: Option<Block>,
//!     /// Left where it is; reported.
//!     #[module(skip)]
//!     pos_enc: Tensor,
//!     dropout: f32,
//! }
//!
//! # fn main() -> devcheck::Result<()> {
//! let cpu = Device::Cpu;
//! let block = || -> devcheck::Result<Block> {
//!     Ok(Block { weight: Param::new(Tensor::randn([4, 4], &cpu)?), scale: Tensor::ones([4], &cpu)? })
//! };
//! let mut model = Model {
//!     blocks: vec![block()?, block()?],
//!     causal_mask: Tensor::ones([4, 4], &cpu)?,
//!     head: Some(block()?),
//!     pos_enc: Tensor::zeros([4], &cpu)?,
//!     dropout: 0.1,
//! };
//! let paths: Vec<String> = model.named_tensors().into_iter().map(|(path, _)| path).collect();
//! assert_eq!(
//!     paths,
//!     ["blocks.0.weight", "blocks.0.scale", "blocks.1.weight", "blocks.1.scale", "causal_mask",
//!      "head.weight", "head.scale"]
//! );
//! assert_eq!(model.num_parameters(), 3 * 16);
//!
//! // Dry run: inside a fake scope a move to any device works without a GPU.
//! let _fake = devcheck::fake::enter();
//! model.to(&Device::Cuda(1))?;
//! assert_eq!(model.device()?, Device::Cuda(1));
//! assert_eq!(model.pos_enc.device(), Device::Cpu); // skipped: not moved
//! # Ok(())
//! # }
//! ```
//!
//! # What the derive accepts
//!
//! The field classification is shared with `devcheck inspect` (crate `devcheck-classify`, whose
//! docs hold the full table). In short: `Param` is a parameter, a plain `Tensor` a buffer, any
//! other named type a submodule (it must implement [`Module`]), numbers/strings/`Device`/... are
//! plain data, and `Option`, `Vec`, `[T; N]`, `Box` and `BTreeMap<String, T>` of those are walked
//! (paths `layers.3.weight`, `heads.query.weight`; `Option` and `Box` add no segment). A tensor
//! hidden where no move can reach it (`HashMap<_, Tensor>`, `Rc<RefCell<Tensor>>`,
//! `Mutex<Tensor>`, raw pointers) is a compile error at the field, with a hint. A config struct
//! kept in a module needs `#[module(skip)]`: unknown types are taken to be submodules, so a
//! forgotten submodule is a compile error rather than a tensor left on the CPU.
//!
//! An enum derives `Module` too: each variant's fields are walked; the single field of a tuple
//! variant adds no path segment (`head.weight` for `Head::Linear(Linear)`), so the enum and that
//! module share a path in [`Module::named_modules`].
//!
//! Generated code names `::devcheck`; `#[module(crate = path)]` on the item changes that for a
//! re-export. To see what the derive writes, read the snapshot in
//! `macros/src/snapshots/devcheck_macros__expand__tests__expansion_of_a_small_model.snap`.
//!
//! # Parameters, gradients and optimizer state
//!
//! A [`Param`] is a handle, like an `Rc`: its clones are the same parameter, with one value and
//! one gradient. `model.to(&device)` moves the parameter in place, so an optimizer built from
//! `model.parameters()` sees the moved tensors without being rebuilt. The gradient and every
//! optimizer state tensor stored on the parameter ([`Param::set_state`], e.g. Adam's `exp_avg`)
//! move with it, in the same step. Each parameter also has a stable [`ParamId`] for optimizers that
//! keep their own tables; such tables must move their tensors themselves (the id says which
//! parameter, [`Param::device`] says where).
//!
//! # Cloning a model
//!
//! `#[derive(Clone)]` on a model (every `nn` layer is `Clone`) gives a model that shares its
//! parameters' values and its buffers' data with the original, as cloning any struct of `Rc`s does:
//! cheap, tied weights stay tied, and a training step or a load through one is seen by the other.
//! Moves are per model: [`Module::to`], [`Module::to_dtype`] and a load onto another device change
//! the model they are called on, all of its parameters, gradients, optimizer state and buffers,
//! and never another model, so a clone and its original are each always on one device. A
//! parameter the moved model shares with a clone is copied for the moved model (which from then
//! on has its own, with a new [`ParamId`]); the clone keeps the original where it was.
//!
//! ```
//! use devcheck::nn::Linear;
//! use devcheck::{Device, Module};
//!
//! # fn main() -> devcheck::Result<()> {
//! let _fake = devcheck::fake::enter(); // cuda:1 without a GPU
//! let model = Linear::new(4, 2, &Device::Cpu)?;
//! let mut on_gpu = model.clone();
//! on_gpu.to(&Device::Cuda(1))?;
//! assert_eq!((model.device()?, on_gpu.device()?), (Device::Cpu, Device::Cuda(1)));
//! # Ok(())
//! # }
//! ```
//!
//! # Hand-written modules
//!
//! A leaf module implements [`Module::visit`] and [`Module::visit_mut`] itself, calling the
//! visitor once per tensor with the path pushed (see [`ModulePath`]). A module whose behaviour
//! depends on the training mode (dropout, batch norm) keeps a flag and overrides
//! [`Module::own_training`] / [`Module::set_own_training`]:
//!
//! ```
//! use devcheck::module::{ModulePath, Visitor, VisitorMut};
//! use devcheck::{Module, Result};
//!
//! struct Dropout { p: f32, training: bool }
//!
//! impl Module for Dropout {
//!     fn visit(&self, _: &mut dyn Visitor, _: &mut ModulePath) -> Result<()> { Ok(()) }
//!     fn visit_mut(&mut self, _: &mut dyn VisitorMut, _: &mut ModulePath) -> Result<()> { Ok(()) }
//!     fn own_training(&self) -> Option<bool> { Some(self.training) }
//!     fn set_own_training(&mut self, training: bool) { self.training = training }
//! }
//!
//! #[derive(Module)]
//! struct Net { drop: Dropout }
//!
//! let mut net = Net { drop: Dropout { p: 0.1, training: true } };
//! net.eval();
//! assert!(!net.drop.training && !net.is_training());
//! ```

mod containers;
mod error;
mod inventory;
mod moves;
mod param;
mod visit;

pub use error::ModuleError;
pub use inventory::{Entry, EntryKind};
use inventory::{EntryCollector, skipped_module_entries};
use moves::transform;
pub(crate) use moves::{buffer_role, label_skipped};
pub use param::{Param, ParamId};
pub(crate) use param::{ParamInstaller, ParamValues};
pub use visit::{
    ModuleInfo, ModuleMut, ModulePath, Persistence, ProbeModule, ProbeOther, Skipped, SkippedMut,
    SkippedProbe, SkippedValue, Visitor, VisitorMut, short_type_name, walk,
};

use std::collections::{BTreeMap, HashSet};
use std::panic::Location;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// `#[derive(Module)]`: see the [module docs](crate::module).
pub use devcheck_macros::Module;

/// A model or a part of one: something whose parameters, buffers and submodules can be walked
/// with their dotted paths, moved, saved and loaded.
///
/// Implement it with `#[derive(Module)]`; write [`visit`](Module::visit) and
/// [`visit_mut`](Module::visit_mut) by hand only for leaf modules. Everything else is provided.
///
/// The trait is dyn-compatible (`Box<dyn Layer>` with `trait Layer: Module` is a submodule);
/// the methods taking a file path need `Self: Sized`, and [`crate::checkpoint`] has the same
/// operations as functions for trait objects.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `Module`, so `#[derive(Module)]` cannot walk this field",
    label = "a field of this type is taken to be a submodule",
    note = "derive `Module` for `{Self}`; if it holds no tensors (a config, a tokenizer), mark the field \
            `#[module(skip)]`; a type alias of `Tensor` or `Param` is not seen through: write the type itself"
)]
pub trait Module {
    /// Calls `visitor` for every parameter, buffer, skipped field and submodule, depth first in
    /// field order, with `path` holding the current dotted path. Returns an error only when the
    /// visitor does.
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()>;

    /// [`visit`](Module::visit) with mutable access, for moves and loads. Must visit the same
    /// entries in the same order.
    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()>;

    /// The name reports use for this module: its Rust type name.
    fn module_name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }

    /// This module's own training flag, for modules that behave differently in training (dropout,
    /// batch norm). `None` (the default) for modules without one; [`Module::train`] and
    /// [`Module::eval`] reach the flags of all submodules regardless.
    fn own_training(&self) -> Option<bool> {
        None
    }

    /// Sets this module's own training flag (see [`Module::own_training`]); ignored by default.
    fn set_own_training(&mut self, training: bool) {
        let _ = training;
    }

    /// Walks the whole model from its root (path `""`), including `enter_module` for the root.
    fn walk(&self, visitor: &mut dyn Visitor) -> Result<()> {
        walk::submodule(visitor, &mut ModulePath::root(), self)
    }

    /// [`walk`](Module::walk) with mutable access.
    fn walk_mut(&mut self, visitor: &mut dyn VisitorMut) -> Result<()> {
        walk::submodule_mut(visitor, &mut ModulePath::root(), self)
    }

    /// Every parameter, buffer and skipped field, in visit order, with its path, kind and tensor:
    /// the inventory the checker reports. Tied parameters appear under each of their paths.
    fn entries(&self) -> Vec<Entry> {
        let mut collector = EntryCollector::default();
        let _ = self.walk(&mut collector);
        collector.entries
    }

    /// The parameters with their paths (`blocks.0.attn.weight`). A parameter reachable under two
    /// paths (tied weights) is listed once, under the first.
    fn named_parameters(&self) -> Vec<(String, Param)> {
        let mut seen = HashSet::new();
        self.entries()
            .into_iter()
            .filter(|e| e.kind == EntryKind::Parameter)
            .filter_map(|e| e.param.filter(|p| seen.insert(p.id())).map(|p| (e.path, p)))
            .collect()
    }

    /// The parameters, each once, in visit order.
    fn parameters(&self) -> Vec<Param> {
        self.named_parameters().into_iter().map(|(_, p)| p).collect()
    }

    /// The number of trainable elements: the sum of the parameters' element counts, each
    /// parameter counted once.
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(Param::numel).sum()
    }

    /// The buffers (persistent and not) with their paths.
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        self.entries()
            .into_iter()
            .filter(|e| matches!(e.kind, EntryKind::Buffer | EntryKind::NonPersistentBuffer))
            .filter_map(|e| e.tensor.map(|t| (e.path, t)))
            .collect()
    }

    /// Every tensor `to()` moves (parameters and buffers; not skipped fields) with its path, in
    /// visit order. Tied parameters appear under each path.
    fn named_tensors(&self) -> Vec<(String, Tensor)> {
        self.entries()
            .into_iter()
            .filter(|e| e.kind != EntryKind::Skipped)
            .filter_map(|e| e.tensor.map(|t| (e.path, t)))
            .collect()
    }

    /// Every module with its path, the root first (path `""`).
    fn named_modules(&self) -> Vec<(String, ModuleInfo)> {
        struct Modules(Vec<(String, ModuleInfo)>);
        impl Visitor for Modules {
            fn enter_module(&mut self, path: &ModulePath, module: ModuleInfo) -> Result<()> {
                self.0.push((path.to_string(), module));
                Ok(())
            }
        }
        let mut modules = Modules(Vec::new());
        let _ = self.walk(&mut modules);
        modules.0
    }

    /// Moves every parameter (with its gradient and optimizer state) and every buffer to `device`,
    /// in place. All or nothing: every tensor is moved before any field is replaced, so a failed
    /// move (an unavailable device) leaves the model as it was. Skipped fields stay where they are.
    /// Each moved tensor is named with its path, so errors about it say which one it is.
    #[track_caller]
    fn to(&mut self, device: &Device) -> Result<()> {
        let location = Location::caller();
        transform(self, &|t: &Tensor| t.move_to(device, location))
    }

    /// Converts every floating parameter, gradient, optimizer state tensor and buffer to `dtype`
    /// (a floating dtype), in place and all or nothing. Integer and bool tensors (token ids,
    /// masks) keep their dtype.
    #[track_caller]
    fn to_dtype(&mut self, dtype: DType) -> Result<()> {
        let location = Location::caller();
        if !dtype.is_float() {
            return Err(Error::InvalidArgument {
                op: "Module::to_dtype",
                detail: format!("{dtype} is not a floating dtype"),
                help: "a model converts to f32, f64, f16 or bf16; integer and bool tensors keep their dtype"
                    .to_string(),
                location,
            });
        }
        transform(self, &|t: &Tensor| if t.dtype().is_float() { t.to_dtype(dtype) } else { Ok(t.clone()) })
    }

    /// The one device all parameters and buffers are on. When they are on several, the error
    /// lists which paths live where; when there are none, the error says so.
    #[track_caller]
    fn device(&self) -> Result<Device> {
        let location = Location::caller();
        let entries = self.entries();
        let mut groups: Vec<(Device, Vec<String>)> = Vec::new();
        let mut skipped = Vec::new();
        for entry in entries {
            let Some(tensor) = &entry.tensor else { continue };
            if entry.kind == EntryKind::Skipped {
                skipped.push((entry.path, tensor.device()));
                continue;
            }
            match groups.iter_mut().find(|(d, _)| *d == tensor.device()) {
                Some((_, paths)) => paths.push(entry.path),
                None => groups.push((tensor.device(), vec![entry.path])),
            }
        }
        match groups.len() {
            1 => Ok(groups[0].0),
            0 => Err(ModuleError::NoTensors { module: short_type_name(self.module_name()), location }.into()),
            _ => {
                // Most populated device first: the rest are the stragglers.
                groups.sort_by_key(|(_, paths)| std::cmp::Reverse(paths.len()));
                // Only the stragglers are listed; skipped tensors on the majority device are fine.
                let majority = groups[0].0;
                skipped.retain(|(_, device)| *device != majority);
                let module = short_type_name(self.module_name());
                Err(ModuleError::MixedDevices { module, groups, skipped, location }.into())
            }
        }
    }

    /// Every device in use, with the paths of the parameters and buffers on it.
    fn devices(&self) -> BTreeMap<Device, Vec<String>> {
        let mut out: BTreeMap<Device, Vec<String>> = BTreeMap::new();
        for (path, tensor) in self.named_tensors() {
            out.entry(tensor.device()).or_default().push(path);
        }
        out
    }

    /// Training mode for this module and every submodule (dropout active, ...).
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Evaluation mode for this module and every submodule.
    fn eval(&mut self) {
        self.set_training(false);
    }

    /// Sets the training flag of every module in the tree that has one.
    fn set_training(&mut self, training: bool) {
        struct Mode(bool);
        impl VisitorMut for Mode {
            fn enter_module(&mut self, _: &ModulePath, mut module: ModuleMut<'_>) -> Result<()> {
                module.set_training(self.0);
                Ok(())
            }
        }
        let _ = self.walk_mut(&mut Mode(training));
    }

    /// The mode of the first module in the tree that keeps a training flag; `true` (PyTorch's
    /// default) when none does: such a model computes the same in both modes.
    fn is_training(&self) -> bool {
        self.named_modules().iter().find_map(|(_, m)| m.training).unwrap_or(true)
    }

    /// Clears every parameter's gradient (PyTorch's `zero_grad(set_to_none=True)`).
    fn zero_grad(&self) {
        for param in self.parameters() {
            param.zero_grad();
        }
    }

    /// Names every parameter, buffer and skipped tensor with its path (`encoder.layers.0.mask`),
    /// so errors and reports about them say which one they are. `to` and `to_dtype` do this too,
    /// and loads name what they load.
    fn name_tensors(&self) {
        for entry in self.entries() {
            if let Some(tensor) = entry.tensor {
                tensor.set_name(entry.path);
            }
        }
    }

    /// The tensors a checkpoint holds: every parameter and persistent buffer by path.
    fn state_dict(&self) -> BTreeMap<String, Tensor> {
        crate::checkpoint::state_dict(self)
    }

    /// Saves [`Module::state_dict`] as a safetensors file, recording each tensor's device, and
    /// replacing the file atomically. See [`crate::checkpoint::save`].
    #[track_caller]
    fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()>
    where
        Self: Sized,
    {
        crate::checkpoint::save(self, path)
    }

    /// Loads a safetensors checkpoint onto `device` (PyTorch's `map_location`), strictly: every
    /// missing, unexpected, shape- or dtype-mismatched key is reported in one error and nothing is
    /// loaded. See [`crate::checkpoint::load_state_dict`].
    #[track_caller]
    fn load_state_dict(&mut self, path: impl AsRef<std::path::Path>, device: &Device) -> Result<()>
    where
        Self: Sized,
    {
        crate::checkpoint::load_state_dict(self, path, device)
    }

    /// Loads with options (non-strict loading returns the mismatches instead of failing). See
    /// [`crate::checkpoint::load_state_dict_with`].
    #[track_caller]
    fn load_state_dict_with(
        &mut self,
        path: impl AsRef<std::path::Path>,
        options: &crate::checkpoint::LoadOptions,
    ) -> Result<crate::checkpoint::LoadReport>
    where
        Self: Sized,
    {
        crate::checkpoint::load_state_dict_with(self, path, options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The derive inside devcheck itself (nn modules use it): `::devcheck` resolves through
    // `extern crate self as devcheck`.
    #[derive(Module)]
    struct Inner {
        weight: Param,
        #[module(non_persistent)]
        mask: Tensor,
    }

    #[test]
    fn the_derive_works_inside_the_crate() -> Result<()> {
        let inner = Inner {
            weight: Param::new(Tensor::zeros([2], &Device::Cpu)?),
            mask: Tensor::ones([2], &Device::Cpu)?,
        };
        let paths: Vec<String> = inner.named_tensors().into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, ["weight", "mask"]);
        assert_eq!(inner.state_dict().keys().collect::<Vec<_>>(), ["weight"]);
        Ok(())
    }
}
