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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{SkippedField, Tensor, TensorRole};

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

// ---------------------------------------------------------------------------------------------
// Param

/// A trainable tensor: moved and saved with the model, with a gradient slot and optimizer state.
///
/// # Handles, clones and moves
///
/// A `Param` is a handle, like an `Rc`: cloning it is cheap and the clone is the same parameter
/// (same [`ParamId`], same value and gradient): an optimizer step, `set_tensor` or a load through
/// one handle is seen through every other. That is how tied weights work (`lm_head: wte.clone()`),
/// and cloning a model (`#[derive(Clone)]`) gives a model that shares its parameters' values and
/// its buffers' data with the original, the way cloning any struct of `Rc`s does.
///
/// A move or dtype conversion ([`Module::to`], [`Module::to_dtype`], [`Param::to`], a load onto
/// another device) changes only the model (or handle) it is called on, never another one: the
/// parameters, gradients, optimizer state and buffers it reaches move together, so a model is
/// never left half on one device. A parameter that no other model or handle shares is moved in
/// place; one that a clone of the model shares is copied for the moved model, which from then on
/// has its own parameter (a new [`ParamId`]), and the clone keeps the original where it was.
///
/// Handles obtained from the model ([`Module::parameters`], [`Module::named_parameters`],
/// [`Param::share`]) follow the model's moves: an optimizer built from `model.parameters()` before
/// `model.to(&device)` keeps working after it. A handle made with `clone()` is a separate handle
/// on the same parameter, which a move of the model does not re-point.
pub struct Param(Arc<Binding>);

/// The identity of a parameter, stable across moves and loads, unique within the process. A
/// parameter shared with a clone of its model gets a new id in the model that moves away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamId(u64);

/// One handle's view of a parameter: the cell it currently points at. Moves re-point bindings.
struct Binding {
    cell: RwLock<Arc<ParamCell>>,
}

struct ParamCell {
    id: ParamId,
    /// How many bindings point here: more than one model (or handle made with `clone`) shares it.
    bindings: AtomicUsize,
    slot: RwLock<ParamSlot>,
}

/// The gradient and the requires-grad flag live on the tensor itself (a leaf of the autograd
/// graph), so `backward` fills what [`Param::grad`] reads.
struct ParamSlot {
    tensor: Tensor,
    state: BTreeMap<String, Tensor>,
}

static NEXT_PARAM_ID: AtomicU64 = AtomicU64::new(0);

impl ParamCell {
    fn new(slot: ParamSlot) -> Arc<ParamCell> {
        Arc::new(ParamCell {
            id: ParamId(NEXT_PARAM_ID.fetch_add(1, Ordering::Relaxed)),
            bindings: AtomicUsize::new(0),
            slot: RwLock::new(slot),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, ParamSlot> {
        // A poisoned lock means a panic elsewhere mid-write of whole handles: still consistent.
        self.slot.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, ParamSlot> {
        self.slot.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the values (a move, a conversion, a load), naming the tensor `name`.
    fn install(&self, values: ParamValues, name: Option<&str>) {
        let mut slot = self.write();
        let tensor = trainable(values.tensor, values.requires_grad);
        match name {
            Some(name) => tensor.set_label(name, TensorRole::Parameter),
            None => tensor.copy_label_from(&slot.tensor),
        }
        // The gradient was transformed alongside the tensor: same shape, dtype and device.
        let _ = tensor.set_grad(values.grad);
        slot.tensor = tensor;
        slot.state = values.state;
    }
}

impl Binding {
    fn new(cell: Arc<ParamCell>) -> Arc<Binding> {
        cell.bindings.fetch_add(1, Ordering::AcqRel);
        Arc::new(Binding { cell: RwLock::new(cell) })
    }

    fn cell(&self) -> Arc<ParamCell> {
        self.cell.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Points this binding at `cell` (a moved copy of the parameter it pointed at).
    fn rebind(&self, cell: &Arc<ParamCell>) {
        let mut current = self.cell.write().unwrap_or_else(|e| e.into_inner());
        if Arc::ptr_eq(&current, cell) {
            return;
        }
        cell.bindings.fetch_add(1, Ordering::AcqRel);
        current.bindings.fetch_sub(1, Ordering::AcqRel);
        *current = cell.clone();
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.cell.get_mut().unwrap_or_else(|e| e.into_inner()).bindings.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Clone for Param {
    /// Another handle on the same parameter (see [the type docs](Param#handles-clones-and-moves)):
    /// same value, gradient and state; a move of the model does not re-point it.
    fn clone(&self) -> Param {
        Param(Binding::new(self.0.cell()))
    }
}

impl Param {
    /// A trainable parameter holding `tensor` (requires grad).
    pub fn new(tensor: Tensor) -> Param {
        let cell = ParamCell::new(ParamSlot { tensor: trainable(tensor, true), state: BTreeMap::new() });
        cell.read().tensor.set_role(TensorRole::Parameter);
        Param(Binding::new(cell))
    }

    /// The same handle: a move through either one is seen by both (what [`Module::parameters`]
    /// returns, and what an optimizer holds).
    pub fn share(&self) -> Param {
        Param(self.0.clone())
    }

    /// This parameter's identity: equal for clones, stable across moves.
    pub fn id(&self) -> ParamId {
        self.cell().id
    }

    fn cell(&self) -> Arc<ParamCell> {
        self.0.cell()
    }

    /// The current tensor (a cheap handle).
    pub fn tensor(&self) -> Tensor {
        self.cell().read().tensor.clone()
    }

    /// Replaces the value (an optimizer step, a manual initialisation). The new tensor must have
    /// the same shape and device; use [`Module::to`] or [`Param::to`] to move.
    #[track_caller]
    pub fn set_tensor(&self, tensor: Tensor) -> Result<()> {
        let location = Location::caller();
        let cell = self.cell();
        let mut slot = cell.write();
        if tensor.shape() != slot.tensor.shape() || tensor.device() != slot.tensor.device() {
            return Err(Error::InvalidArgument {
                op: "Param::set_tensor",
                detail: format!(
                    "the parameter is {} {} but the new value is {} {}",
                    slot.tensor.device(),
                    crate::shape::fmt_shape(slot.tensor.shape()),
                    tensor.device(),
                    crate::shape::fmt_shape(tensor.shape())
                ),
                help: "keep a parameter's shape; move parameters with `model.to(&device)` (it moves the \
                       gradient and optimizer state too)"
                    .to_string(),
                location,
            });
        }
        let tensor = trainable(tensor, slot.tensor.requires_grad());
        tensor.copy_label_from(&slot.tensor);
        slot.tensor = tensor;
        Ok(())
    }

    pub fn device(&self) -> Device {
        self.cell().read().tensor.device()
    }

    pub fn dtype(&self) -> DType {
        self.cell().read().tensor.dtype()
    }

    pub fn shape(&self) -> Vec<usize> {
        self.cell().read().tensor.shape().to_vec()
    }

    pub fn numel(&self) -> usize {
        self.cell().read().tensor.numel()
    }

    /// The accumulated gradient, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.cell().read().tensor.grad()
    }

    /// Sets (or clears) the gradient. It must match the parameter's shape and device.
    #[track_caller]
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        let location = Location::caller();
        let cell = self.cell();
        let slot = cell.read();
        if let Some(g) = &grad {
            check_companion("Param::set_grad", "gradient", &slot.tensor, g, location)?;
        }
        slot.tensor.set_grad(grad)
    }

    /// Clears the gradient.
    pub fn zero_grad(&self) {
        // Clearing a leaf's gradient cannot fail.
        let _ = self.cell().read().tensor.set_grad(None);
    }

    pub fn requires_grad(&self) -> bool {
        self.cell().read().tensor.requires_grad()
    }

    /// Freezes (`false`) or unfreezes the parameter. A frozen parameter is still moved and saved.
    pub fn set_requires_grad(&self, requires_grad: bool) {
        let cell = self.cell();
        let slot = cell.read();
        // Only floating tensors can require grad; an integer parameter stays frozen.
        let _ = slot.tensor.set_requires_grad(requires_grad && slot.tensor.dtype().is_float());
    }

    /// An optimizer state tensor stored on this parameter (`exp_avg`, `momentum_buffer`, ...).
    pub fn state(&self, key: &str) -> Option<Tensor> {
        self.cell().read().state.get(key).cloned()
    }

    /// Stores an optimizer state tensor on this parameter. It must be on the parameter's device;
    /// from then on it moves with the parameter (and converts with it when floating).
    #[track_caller]
    pub fn set_state(&self, key: impl Into<String>, tensor: Tensor) -> Result<()> {
        let location = Location::caller();
        let cell = self.cell();
        let mut slot = cell.write();
        if tensor.device() != slot.tensor.device() {
            return Err(Error::InvalidArgument {
                op: "Param::set_state",
                detail: format!(
                    "the parameter is on {} but the state tensor is on {}",
                    slot.tensor.device(),
                    tensor.device()
                ),
                help: "create optimizer state from the parameter (`p.tensor().new_zeros(..)`, \
                       `Tensor::zeros_like(&p.tensor())`) so it lives where the parameter does"
                    .to_string(),
                location,
            });
        }
        slot.state.insert(key.into(), tensor);
        Ok(())
    }

    /// Removes and returns an optimizer state tensor.
    pub fn remove_state(&self, key: &str) -> Option<Tensor> {
        self.cell().write().state.remove(key)
    }

    /// The keys of the stored optimizer state.
    pub fn state_keys(&self) -> Vec<String> {
        self.cell().read().state.keys().cloned().collect()
    }

    /// Moves the tensor, gradient and optimizer state to `device`, all or nothing, for this handle
    /// and the handles [`shared`](Param::share) with it. To move a model, use [`Module::to`]: it
    /// keeps tied parameters tied.
    #[track_caller]
    pub fn to(&self, device: &Device) -> Result<()> {
        let location = Location::caller();
        let moved = self.transformed(&|t: &Tensor| t.move_to(device, location))?;
        ParamInstaller::default().install(self, moved, None);
        Ok(())
    }

    /// Converts the tensor, gradient and floating optimizer state to `dtype`, all or nothing.
    /// Integer state (step counters) keeps its dtype.
    pub fn to_dtype(&self, dtype: DType) -> Result<()> {
        let converted = self.transformed(&|t: &Tensor| {
            if t.dtype().is_float() { t.to_dtype(dtype) } else { Ok(t.clone()) }
        })?;
        ParamInstaller::default().install(self, converted, None);
        Ok(())
    }

    /// Is `other` the same parameter (a clone or a share of this handle)?
    pub fn same_param(&self, other: &Param) -> bool {
        Arc::ptr_eq(&self.cell(), &other.cell())
    }

    /// Tensor, gradient and state with `f` applied, without touching the parameter.
    fn transformed(&self, f: &dyn Fn(&Tensor) -> Result<Tensor>) -> Result<ParamValues> {
        // A move or conversion of a parameter is not part of any computation to differentiate.
        let _recording_off = crate::autograd::no_grad();
        let cell = self.cell();
        let slot = cell.read();
        Ok(ParamValues {
            requires_grad: slot.tensor.requires_grad(),
            tensor: f(&slot.tensor)?,
            grad: slot.tensor.grad().as_ref().map(f).transpose()?,
            state: slot.state.iter().map(|(k, t)| Ok((k.clone(), f(t)?))).collect::<Result<_>>()?,
        })
    }

    /// Load support: the values to install for a checkpoint's `tensor` (possibly on another
    /// device): no gradient (it belonged to the old value), `state` already moved.
    pub(crate) fn loaded_values(&self, tensor: Tensor, state: BTreeMap<String, Tensor>) -> ParamValues {
        ParamValues { tensor, grad: None, requires_grad: self.requires_grad(), state }
    }

    /// The optimizer state moved to `device` (for loads onto another device).
    pub(crate) fn state_on(&self, device: &Device) -> Result<BTreeMap<String, Tensor>> {
        let cell = self.cell();
        let slot = cell.read();
        slot.state.iter().map(|(k, t)| Ok((k.clone(), t.to(device)?))).collect()
    }

    /// The binding's address: handles made with [`Param::share`] have the same one.
    fn binding_address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

/// A parameter's tensors after a move, conversion or load, before they are installed.
pub(crate) struct ParamValues {
    tensor: Tensor,
    grad: Option<Tensor>,
    requires_grad: bool,
    state: BTreeMap<String, Tensor>,
}

impl ParamValues {
    /// Would installing these values change the parameter's device or dtype?
    fn changes_placement(&self, cell: &ParamCell) -> bool {
        let slot = cell.read();
        (self.tensor.device(), self.tensor.dtype()) != (slot.tensor.device(), slot.tensor.dtype())
    }

    /// Nothing would change: every tensor is the handle the parameter already holds (a move to
    /// the device it is on).
    fn unchanged(&self, cell: &ParamCell) -> bool {
        let slot = cell.read();
        let same = |a: &Tensor, b: &Tensor| a.same_handle(b);
        same(&self.tensor, &slot.tensor)
            && match (&self.grad, slot.tensor.grad()) {
                (None, None) => true,
                (Some(a), Some(b)) => same(a, &b),
                _ => false,
            }
            && self.state.len() == slot.state.len()
            && self.state.iter().all(|(k, t)| slot.state.get(k).is_some_and(|s| same(t, s)))
    }
}

/// Installs new values (a move, a conversion, a load) into the parameters of one model without
/// moving any other model: a parameter whose cell only this model's handles point at is changed
/// in place; a move or conversion of one shared with a clone of the model gives this model a new
/// cell (its tied paths re-pointed to the same new cell), and the clone keeps the old one.
#[derive(Default)]
pub(crate) struct ParamInstaller {
    /// Per parameter: the distinct bindings of the model being changed that point at it.
    own: HashMap<ParamId, HashSet<usize>>,
    /// Per parameter installed so far: the cell its handles in this model now point at.
    done: HashMap<ParamId, Arc<ParamCell>>,
}

impl ParamInstaller {
    /// An installer for `module`'s parameters.
    pub(crate) fn for_module<M: Module + ?Sized>(module: &M) -> ParamInstaller {
        struct Bindings(HashMap<ParamId, HashSet<usize>>);
        impl Visitor for Bindings {
            fn visit_param(&mut self, _: &ModulePath, param: &Param) -> Result<()> {
                self.0.entry(param.id()).or_default().insert(param.binding_address());
                Ok(())
            }
        }
        let mut bindings = Bindings(HashMap::new());
        let _ = module.walk(&mut bindings);
        ParamInstaller { own: bindings.0, done: HashMap::new() }
    }

    /// A later path of a parameter installed already: points it where the first path went.
    pub(crate) fn follow(&mut self, param: &Param) {
        if let Some(installed) = self.done.get(&param.id()) {
            param.0.rebind(installed);
        }
    }

    /// Installs `values` for `param` (named `name` when given). A tied parameter's later paths
    /// pass the values again: they are re-pointed to the cell the first path installed into.
    pub(crate) fn install(&mut self, param: &Param, values: ParamValues, name: Option<&str>) {
        let cell = param.cell();
        if let Some(installed) = self.done.get(&cell.id) {
            param.0.rebind(installed);
            return;
        }
        if values.unchanged(&cell) {
            if let Some(name) = name {
                cell.read().tensor.set_label(name, TensorRole::Parameter);
            }
            self.done.insert(cell.id, cell);
            return;
        }
        // Bindings pointing here from outside this model: a clone of it, or a handle made with
        // `clone()`. A new value on the same device is theirs too (as an optimizer step is); a
        // move or conversion in place would move the parameter under them, so this model gets its
        // own copy instead.
        let old_id = cell.id;
        let own = self.own.get(&old_id).map_or(1, HashSet::len);
        let shared = cell.bindings.load(Ordering::Acquire) > own;
        let target = if shared && values.changes_placement(&cell) {
            let fresh = ParamCell::new(ParamSlot { tensor: values.tensor.clone(), state: BTreeMap::new() });
            fresh.install(values, name);
            param.0.rebind(&fresh);
            fresh
        } else {
            cell.install(values, name);
            cell
        };
        // Later paths of a tied parameter still point at the old cell (or, shared, at the new one).
        self.done.insert(old_id, target.clone());
        self.done.insert(target.id, target);
    }
}

impl fmt::Debug for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cell = self.cell();
        let slot = cell.read();
        f.debug_struct("Param")
            .field("id", &cell.id.0)
            .field("tensor", &slot.tensor)
            .field("requires_grad", &slot.tensor.requires_grad())
            .field("has_grad", &slot.tensor.grad().is_some())
            .field("state", &slot.state.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl From<Tensor> for Param {
    fn from(tensor: Tensor) -> Param {
        Param::new(tensor)
    }
}

/// A new leaf handle on `tensor`'s data (sharing its storage, like `nn.Parameter(t)`), requiring
/// grad when asked and when floating.
fn trainable(tensor: Tensor, requires_grad: bool) -> Tensor {
    let leaf = tensor.detach();
    // Integer tensors cannot require grad; they stay frozen.
    let _ = leaf.set_requires_grad(requires_grad && leaf.dtype().is_float());
    leaf
}

fn check_companion(
    op: &'static str,
    what: &str,
    param: &Tensor,
    other: &Tensor,
    location: &'static Location<'static>,
) -> Result<()> {
    if param.shape() == other.shape() && param.device() == other.device() {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        op,
        detail: format!(
            "the parameter is {} {} but the {what} is {} {}",
            param.device(),
            crate::shape::fmt_shape(param.shape()),
            other.device(),
            crate::shape::fmt_shape(other.shape())
        ),
        help: format!("a {what} has its parameter's shape and lives on its device"),
        location,
    })
}

// ---------------------------------------------------------------------------------------------
// Visitors

/// Read-only walk over a module tree (see [`Module::visit`]). Every method has an empty default.
pub trait Visitor {
    /// A module begins at `path` (`""` for the root). Its entries follow, then `exit_module`.
    fn enter_module(&mut self, path: &ModulePath, module: ModuleInfo) -> Result<()> {
        let _ = (path, module);
        Ok(())
    }

    fn exit_module(&mut self, path: &ModulePath) -> Result<()> {
        let _ = path;
        Ok(())
    }

    fn visit_param(&mut self, path: &ModulePath, param: &Param) -> Result<()> {
        let _ = (path, param);
        Ok(())
    }

    fn visit_buffer(&mut self, path: &ModulePath, tensor: &Tensor, persistence: Persistence) -> Result<()> {
        let _ = (path, tensor, persistence);
        Ok(())
    }

    /// A field marked `#[module(skip)]`.
    fn visit_skipped(&mut self, path: &ModulePath, skipped: Skipped<'_>) -> Result<()> {
        let _ = (path, skipped);
        Ok(())
    }
}

/// Mutable walk over a module tree (see [`Module::visit_mut`]). Every method has an empty default.
pub trait VisitorMut {
    /// A module begins at `path`; `module` can set its training flag.
    fn enter_module(&mut self, path: &ModulePath, module: ModuleMut<'_>) -> Result<()> {
        let _ = (path, module);
        Ok(())
    }

    fn exit_module(&mut self, path: &ModulePath) -> Result<()> {
        let _ = path;
        Ok(())
    }

    /// A parameter. Its tensor is replaced through the handle (`Param::set_tensor`, `to`), or the
    /// handle itself is replaced.
    fn visit_param(&mut self, path: &ModulePath, param: &mut Param) -> Result<()> {
        let _ = (path, param);
        Ok(())
    }

    fn visit_buffer(
        &mut self,
        path: &ModulePath,
        tensor: &mut Tensor,
        persistence: Persistence,
    ) -> Result<()> {
        let _ = (path, tensor, persistence);
        Ok(())
    }

    /// A field marked `#[module(skip)]`. Nothing in devcheck moves or saves it; a dry run puts
    /// back what forward wrote into a skipped `Tensor` / `Option<Tensor>` field.
    fn visit_skipped(&mut self, path: &ModulePath, skipped: SkippedMut<'_>) -> Result<()> {
        let _ = (path, skipped);
        Ok(())
    }
}

/// Is a buffer saved in checkpoints?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// A plain `Tensor` field: moved and saved.
    Persistent,
    /// `#[module(non_persistent)]`: moved, not saved.
    NonPersistent,
}

/// A field marked `#[module(skip)]`, as the derive records it.
#[derive(Clone, Copy)]
pub struct Skipped<'a> {
    /// The field's type as written (`Tensor`, `Rc<RefCell<Tensor>>`, `Config`).
    pub type_name: &'static str,
    /// The tensor, when the field is a `Tensor` (or a `Some` of `Option<Tensor>`): still readable,
    /// so the checker can say where it is.
    pub tensor: Option<&'a Tensor>,
    /// False when the type is plain data (numbers, strings): nothing there could be left behind.
    pub may_hold_tensors: bool,
    /// Where the field is declared (`#[derive(Module)]` records it).
    pub declared_at: Option<&'static Location<'static>>,
    /// The field as a module, when its type is one (a submodule marked `skip`): its parameters
    /// and buffers are neither moved, saved nor optimized, and reports list them.
    pub module: Option<&'a dyn Module>,
}

impl fmt::Debug for Skipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Skipped")
            .field("type_name", &self.type_name)
            .field("tensor", &self.tensor)
            .field("may_hold_tensors", &self.may_hold_tensors)
            .field("declared_at", &self.declared_at)
            .field("module", &self.module.map(|m| m.module_name()))
            .finish()
    }
}

/// A field marked `#[module(skip)]` in a mutable walk. Nothing in devcheck moves it; a dry run
/// reads its tensor and puts back what forward wrote there.
pub struct SkippedMut<'a> {
    pub type_name: &'static str,
    pub may_hold_tensors: bool,
    pub declared_at: Option<&'static Location<'static>>,
    pub value: SkippedValue<'a>,
}

/// What a skipped field holds, for a mutable walk.
pub enum SkippedValue<'a> {
    /// A `Tensor` field.
    TensorField(&'a mut Tensor),
    /// An `Option<Tensor>` field (a cache forward may fill).
    OptionalTensorField(&'a mut Option<Tensor>),
    /// A submodule.
    Module(&'a dyn Module),
    /// Anything else.
    Other,
}

impl SkippedMut<'_> {
    /// The read-only view a [`Visitor`] gets.
    pub fn as_skipped(&self) -> Skipped<'_> {
        let (tensor, module) = match &self.value {
            SkippedValue::TensorField(t) => (Some(&**t), None),
            SkippedValue::OptionalTensorField(t) => (t.as_ref(), None),
            SkippedValue::Module(m) => (None, Some(*m)),
            SkippedValue::Other => (None, None),
        };
        Skipped {
            type_name: self.type_name,
            tensor,
            may_hold_tensors: self.may_hold_tensors,
            declared_at: self.declared_at,
            module,
        }
    }
}

impl fmt::Debug for SkippedMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.as_skipped(), f)
    }
}

/// Generated code's probe for a skipped field: the field as a `&dyn Module` when its type is a
/// module, `None` otherwise (a config, a tokenizer). Resolved at compile time by method lookup:
/// `(&SkippedProbe(&field)).skipped_module()` picks [`ProbeModule`] when the type implements
/// `Module`, [`ProbeOther`] when it does not.
#[doc(hidden)]
pub struct SkippedProbe<'a, T: ?Sized>(pub &'a T);

#[doc(hidden)]
pub trait ProbeModule<'a> {
    fn skipped_module(&self) -> Option<&'a dyn Module>;
}

impl<'a, T: Module> ProbeModule<'a> for SkippedProbe<'a, T> {
    fn skipped_module(&self) -> Option<&'a dyn Module> {
        Some(self.0)
    }
}

#[doc(hidden)]
pub trait ProbeOther<'a> {
    fn skipped_module(&self) -> Option<&'a dyn Module>;
}

impl<'a, T: ?Sized> ProbeOther<'a> for &SkippedProbe<'a, T> {
    fn skipped_module(&self) -> Option<&'a dyn Module> {
        None
    }
}

/// A module as visitors see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Its Rust type name ([`Module::module_name`]).
    pub type_name: &'static str,
    /// Its own training flag ([`Module::own_training`]).
    pub training: Option<bool>,
}

/// A module in a mutable walk: its info, and its training flag to set.
pub struct ModuleMut<'a> {
    info: ModuleInfo,
    set_training: &'a mut dyn FnMut(bool),
}

impl ModuleMut<'_> {
    pub fn info(&self) -> ModuleInfo {
        self.info
    }

    /// Sets the module's own training flag (a no-op for modules without one).
    pub fn set_training(&mut self, training: bool) {
        (self.set_training)(training);
    }
}

impl fmt::Debug for ModuleMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModuleMut").field("info", &self.info).finish_non_exhaustive()
    }
}

/// The dotted path of the entry being visited: `encoder.layers.0.attn.mask`. Walks push a segment
/// before visiting a field and pop it after.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModulePath {
    text: String,
    marks: Vec<usize>,
}

impl ModulePath {
    /// The root: the empty path.
    pub fn root() -> ModulePath {
        ModulePath::default()
    }

    /// Enters a field: `blocks`.
    pub fn push(&mut self, segment: &str) {
        self.marks.push(self.text.len());
        if !self.text.is_empty() {
            self.text.push('.');
        }
        self.text.push_str(segment);
    }

    /// Enters an element of a `Vec` or array: `blocks.3`.
    pub fn push_index(&mut self, index: usize) {
        self.push_key(&index);
    }

    /// Enters an entry of a map, by its key's `Display` (`heads.query`). Keys should not contain
    /// `.`: paths are split on it.
    pub fn push_key<K: fmt::Display + ?Sized>(&mut self, key: &K) {
        self.marks.push(self.text.len());
        if !self.text.is_empty() {
            self.text.push('.');
        }
        use fmt::Write;
        // Writing into a String cannot fail.
        let _ = write!(self.text, "{key}");
    }

    /// Leaves the last entered segment (a no-op at the root).
    pub fn pop(&mut self) {
        if let Some(mark) = self.marks.pop() {
            self.text.truncate(mark);
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn is_root(&self) -> bool {
        self.marks.is_empty()
    }

    /// The number of segments.
    pub fn depth(&self) -> usize {
        self.marks.len()
    }

    /// The segments in order (`["encoder", "layers", "0", "mask"]`). A segment may itself contain
    /// `.` (a map key such as `"b.c"`), which the dotted text cannot show.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.marks.iter().enumerate().map(|(i, &start)| {
            let end = self.marks.get(i + 1).copied().unwrap_or(self.text.len());
            // A segment after a non-empty path starts with the `.` that joined it.
            if start > 0 { &self.text[start + 1..end] } else { &self.text[start..end] }
        })
    }
}

impl fmt::Display for ModulePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

// ---------------------------------------------------------------------------------------------
// Containers of modules are modules

/// A boxed module is the module (`Box<dyn Layer>`).
impl<M: Module + ?Sized> Module for Box<M> {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        (**self).visit(visitor, path)
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        (**self).visit_mut(visitor, path)
    }

    fn module_name(&self) -> &'static str {
        (**self).module_name()
    }

    fn own_training(&self) -> Option<bool> {
        (**self).own_training()
    }

    fn set_own_training(&mut self, training: bool) {
        (**self).set_own_training(training);
    }
}

/// `None` holds nothing; `Some(m)` is `m` at the same path.
impl<M: Module> Module for Option<M> {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        match self {
            Some(module) => walk::submodule(visitor, path, module),
            None => Ok(()),
        }
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        match self {
            Some(module) => walk::submodule_mut(visitor, path, module),
            None => Ok(()),
        }
    }
}

/// Elements at paths `0`, `1`, ... (as a `Vec` field of a derived module).
impl<M: Module> Module for Vec<M> {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        walk::items(visitor, path, self)
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        walk::items_mut(visitor, path, self)
    }
}

/// Elements at paths `0`, `1`, ...
impl<M: Module, const N: usize> Module for [M; N] {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        walk::items(visitor, path, self)
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        walk::items_mut(visitor, path, self)
    }
}

/// Entries at their keys' paths (`heads.query`).
impl<K: fmt::Display + Ord, M: Module> Module for BTreeMap<K, M> {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        self.iter().try_for_each(|(key, module)| {
            path.push_key(key);
            walk::submodule(visitor, path, module)?;
            path.pop();
            Ok(())
        })
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        self.iter_mut().try_for_each(|(key, module)| {
            path.push_key(key);
            walk::submodule_mut(visitor, path, module)?;
            path.pop();
            Ok(())
        })
    }
}

/// Walking into a submodule: what generated code calls for every submodule field, and what
/// hand-written container modules call for their children. Each call brackets the child's own
/// walk with `enter_module` / `exit_module` at the current path.
pub mod walk {
    use super::{Module, ModuleInfo, ModuleMut, ModulePath, Visitor, VisitorMut};
    use crate::error::Result;

    pub fn submodule<M: Module + ?Sized>(
        visitor: &mut dyn Visitor,
        path: &mut ModulePath,
        module: &M,
    ) -> Result<()> {
        let info = ModuleInfo { type_name: module.module_name(), training: module.own_training() };
        visitor.enter_module(path, info)?;
        module.visit(visitor, path)?;
        visitor.exit_module(path)
    }

    pub fn submodule_mut<M: Module + ?Sized>(
        visitor: &mut dyn VisitorMut,
        path: &mut ModulePath,
        module: &mut M,
    ) -> Result<()> {
        let info = ModuleInfo { type_name: module.module_name(), training: module.own_training() };
        {
            let mut set_training = |training: bool| module.set_own_training(training);
            visitor.enter_module(path, ModuleMut { info, set_training: &mut set_training })?;
        }
        module.visit_mut(visitor, path)?;
        visitor.exit_module(path)
    }

    /// The elements of a sequence of submodules, at paths `0`, `1`, ...
    pub fn items<M: Module>(visitor: &mut dyn Visitor, path: &mut ModulePath, items: &[M]) -> Result<()> {
        items.iter().enumerate().try_for_each(|(index, module)| {
            path.push_index(index);
            submodule(visitor, path, module)?;
            path.pop();
            Ok(())
        })
    }

    /// [`items`], for a visitor that may change them.
    pub fn items_mut<M: Module>(
        visitor: &mut dyn VisitorMut,
        path: &mut ModulePath,
        items: &mut [M],
    ) -> Result<()> {
        items.iter_mut().enumerate().try_for_each(|(index, module)| {
            path.push_index(index);
            submodule_mut(visitor, path, module)?;
            path.pop();
            Ok(())
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Inventory

/// One parameter, buffer or skipped field of a model: what the checker reports.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The dotted path (`blocks.0.attn.mask`).
    pub path: String,
    pub kind: EntryKind,
    /// The tensor, for parameters and buffers always, for a skipped `Tensor` field too.
    pub tensor: Option<Tensor>,
    /// The parameter, for [`EntryKind::Parameter`] (its [`ParamId`] shows tied weights).
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
struct EntryCollector {
    entries: Vec<Entry>,
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
fn skipped_module_entries(path: &ModulePath, module: &dyn Module, skipped: &Skipped<'_>) -> Vec<Entry> {
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

// ---------------------------------------------------------------------------------------------
// Moves and conversions, all or nothing

/// Applies `f` to every parameter (with gradient and state, each parameter once) and buffer:
/// first computes every new tensor, then installs them all, so a failure changes nothing.
/// Parameters shared with another model are re-pointed rather than changed (see [`Param`]).
fn transform<M: Module + ?Sized>(module: &mut M, f: &dyn Fn(&Tensor) -> Result<Tensor>) -> Result<()> {
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

// ---------------------------------------------------------------------------------------------
// Errors

/// Errors about a whole module (part of [`crate::Error`]).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum ModuleError {
    #[error("`{module}` has tensors on {} devices: {}{}{}\n  at {}", groups.len(), device_counts(groups), straggler_lines(groups), skipped_lines(skipped), location_string(location))]
    #[diagnostic(code(devcheck::mixed_devices), help("{}", mixed_help(groups)))]
    MixedDevices {
        module: String,
        /// Every device with the paths on it, the most populated first.
        groups: Vec<(Device, Vec<String>)>,
        /// Skipped tensor fields (not moved by `to`) that are not on the most populated device.
        skipped: Vec<(String, Device)>,
        /// The call that asked for the model's device.
        location: &'static Location<'static>,
    },

    #[error(
        "`{module}` has no parameters or buffers, so it has no device\n  at {}",
        location_string(location)
    )]
    #[diagnostic(
        code(devcheck::no_tensors),
        help(
            "a module's device is the device of its tensors; pass the device explicitly where this \
             module creates tensors (or take it from an input: `x.device()`)"
        )
    )]
    NoTensors { module: String, location: &'static Location<'static> },
}

impl ModuleError {
    /// The call that asked.
    pub fn location(&self) -> Option<&'static Location<'static>> {
        match self {
            ModuleError::MixedDevices { location, .. } | ModuleError::NoTensors { location, .. } => {
                Some(location)
            }
        }
    }
}

impl crate::error::LayerError for ModuleError {
    fn location(&self) -> Option<&'static Location<'static>> {
        ModuleError::location(self)
    }
}

impl From<ModuleError> for crate::Error {
    fn from(error: ModuleError) -> crate::Error {
        crate::Error::Module(crate::error::LayerDetail::new(error))
    }
}

fn location_string(location: &Location<'_>) -> String {
    format!("{}:{}:{}", location.file(), location.line(), location.column())
}

/// Stragglers listed one per line before the rest are counted.
const LISTED_PATHS: usize = 8;

fn device_counts(groups: &[(Device, Vec<String>)]) -> String {
    let parts: Vec<String> =
        groups.iter().map(|(device, paths)| format!("{} on {device}", paths.len())).collect();
    parts.join(", ")
}

/// Every path off the most populated device, one per line.
fn straggler_lines(groups: &[(Device, Vec<String>)]) -> String {
    let stragglers: Vec<(Device, &String)> =
        groups.iter().skip(1).flat_map(|(device, paths)| paths.iter().map(move |p| (*device, p))).collect();
    let mut out: String = stragglers
        .iter()
        .take(LISTED_PATHS)
        .map(|(device, path)| format!("\n  on {device}: {path}"))
        .collect();
    if stragglers.len() > LISTED_PATHS {
        out.push_str(&format!("\n  ... and {} more", stragglers.len() - LISTED_PATHS));
    }
    out
}

fn skipped_lines(skipped: &[(String, Device)]) -> String {
    skipped
        .iter()
        .map(|(path, device)| format!("\n  skipped, not moved by `to`: {path} on {device}"))
        .collect()
}

fn mixed_help(groups: &[(Device, Vec<String>)]) -> String {
    let target = groups.first().map(|(d, _)| *d).unwrap_or(Device::Cpu);
    format!(
        "call `model.to(&{})` once after building or loading the model: it moves every parameter and \
         buffer. Tensors elsewhere were probably assigned by hand after the last move \
         (`model.field = tensor` with a tensor made on another device)",
        crate::device::device_expr(&target),
    )
}

/// A Rust type name without module paths: `Wrapper<Linear>` for
/// `my_crate::model::Wrapper<my_crate::layers::Linear>`.
pub fn short_type_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut segment_start = 0;
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.truncate(segment_start);
            continue;
        }
        if !(c.is_alphanumeric() || c == '_') {
            out.push(c);
            segment_start = out.len();
            continue;
        }
        out.push(c);
    }
    out
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

    #[test]
    fn short_type_names() {
        assert_eq!(short_type_name("my_crate::model::Model"), "Model");
        assert_eq!(short_type_name("a::Wrapper<b::c::Linear, 4>"), "Wrapper<Linear, 4>");
        assert_eq!(short_type_name("alloc::boxed::Box<dyn a::Layer>"), "Box<dyn Layer>");
        assert_eq!(short_type_name("f32"), "f32");
    }

    #[test]
    fn paths_push_and_pop() {
        let mut path = ModulePath::root();
        assert!(path.is_root());
        path.push("blocks");
        path.push_index(3);
        path.push_key("query");
        assert_eq!((path.as_str(), path.depth()), ("blocks.3.query", 3));
        path.pop();
        path.pop();
        assert_eq!(path.to_string(), "blocks");
        path.pop();
        path.pop();
        assert!(path.is_root() && path.as_str().is_empty());
    }

    #[test]
    fn segments_keep_a_dotted_key_whole() {
        let mut path = ModulePath::root();
        path.push_key("");
        path.push("heads");
        path.push_key("b.c");
        path.push_index(0);
        assert_eq!(path.as_str(), "heads.b.c.0");
        assert_eq!(path.segments().collect::<Vec<_>>(), ["", "heads", "b.c", "0"]);
        path.pop();
        assert_eq!(path.segments().collect::<Vec<_>>(), ["", "heads", "b.c"]);
    }
}
