//! [`Param`], the handle of a trainable tensor: its cell shared by clones, its gradient and
//! optimizer state moving with it, and the two-phase install that moves a model all or nothing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{Module, ModulePath, Visitor};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{Tensor, TensorRole};

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
    pub(super) fn transformed(&self, f: &dyn Fn(&Tensor) -> Result<Tensor>) -> Result<ParamValues> {
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
