//! Tensors: a cheap handle over shared storage that knows its device and where it was made.
//!
//! The op front end lives in this folder: every op checks its operands in `check.rs` (the one place
//! for device, dtype and shape rules) before any backend runs, then attaches the result's origin.

mod check;
mod create;
#[cfg(feature = "ndarray")]
mod interop;
mod label;
mod moves;
pub(crate) mod observe;
mod ops;
mod origin;
mod sugar;
mod views;

use std::fmt;
use std::panic::Location;
use std::sync::{Arc, RwLock, RwLockReadGuard};

pub use crate::backend::op::{BinaryOp, CmpOp, LogicalOp, UnaryOp};
pub use label::{SkippedField, TensorRole};
pub use origin::Origin;

pub(crate) use check::on_one_device;
pub(crate) use label::Label;

use crate::autograd::GradMeta;
use crate::backend::CpuStorage;
use crate::backend::cuda::{CudaError, CudaResult, CudaStorage, PinnedBuffer};
use crate::backend::fake;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Operand, Result};
use crate::shape::Layout;

/// Where a tensor's elements are.
#[derive(Debug)]
pub(crate) enum Storage {
    Cpu(CpuStorage),
    /// Page-locked host memory ([`Tensor::pin_memory`]): a CPU tensor whose copy to a GPU can be
    /// asynchronous. Host ops read it through a temporary copy; it is meant as a staging buffer.
    Pinned {
        buffer: Arc<PinnedBuffer>,
        dtype: DType,
    },
    /// Elements in a CUDA device's memory.
    Cuda(CudaStorage),
    /// No data: a dry-run tensor (see [`crate::fake`]).
    Fake,
}

impl Drop for Storage {
    fn drop(&mut self) {
        // Large host buffers go back to the CPU backend's pool for the next result of their size.
        if let Storage::Cpu(s) = self {
            s.recycle();
        }
    }
}

impl Storage {
    /// Host elements of a pinned buffer as ordinary CPU storage.
    fn pinned_to_cpu(buffer: &PinnedBuffer, dtype: DType) -> CudaResult<CpuStorage> {
        Ok(CpuStorage::from_le_bytes(&buffer.to_vec()?, dtype))
    }
}

/// The dtype and device a new tensor is made with: pass a `&Device` (f32), or `(DType, &Device)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorOptions {
    pub dtype: DType,
    pub device: Device,
}

impl From<&Device> for TensorOptions {
    fn from(device: &Device) -> Self {
        TensorOptions { dtype: DType::F32, device: *device }
    }
}

impl From<(DType, &Device)> for TensorOptions {
    fn from((dtype, device): (DType, &Device)) -> Self {
        TensorOptions { dtype, device: *device }
    }
}

/// An n-dimensional array on a [`Device`]. Cloning is cheap (a reference count); views share
/// storage. Every tensor records its [`Origin`], and may carry a name (its module path) and a
/// [`TensorRole`] that errors and reports show; views keep their source's origin, name and role.
#[derive(Clone)]
#[must_use = "tensor ops and moves return a new tensor and leave `self` unchanged (`.to()` is not in place): bind the result, e.g. `let x = x.to(&device)?;`"]
pub struct Tensor(Arc<Inner>);

struct Inner {
    storage: Arc<RwLock<Storage>>,
    layout: Layout,
    dtype: DType,
    device: Device,
    origin: Origin,
    /// Name and role (see [`label`]); shared with the views and moved copies made from it.
    label: RwLock<Option<Arc<Label>>>,
    /// A view of another tensor's data (`transpose`, `narrow`, ...), reported as such.
    is_view: bool,
    /// How gradients reach this tensor (see [`crate::autograd`]); empty unless tracked.
    autograd: GradMeta,
}

impl Tensor {
    pub(crate) fn from_parts(
        storage: Storage,
        layout: Layout,
        dtype: DType,
        device: Device,
        origin: Origin,
    ) -> Self {
        Self::from_shared(Arc::new(RwLock::new(storage)), layout, dtype, device, origin)
    }

    fn from_shared(
        storage: Arc<RwLock<Storage>>,
        layout: Layout,
        dtype: DType,
        device: Device,
        origin: Origin,
    ) -> Self {
        Tensor(Arc::new(Inner {
            storage,
            layout,
            dtype,
            device,
            origin,
            label: RwLock::new(None),
            is_view: false,
            autograd: GradMeta::default(),
        }))
    }

    pub(crate) fn grad_meta(&self) -> &GradMeta {
        &self.0.autograd
    }

    /// This freshly made tensor as the output of a recorded op.
    pub(crate) fn with_grad_fn(mut self, node: Arc<crate::autograd::Node>) -> Tensor {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.autograd = GradMeta::with_grad_fn(node);
            return self;
        }
        // Shared already (it cannot be for a new result, but stay correct): a new handle.
        let inner = &self.0;
        Tensor(Arc::new(Inner {
            storage: inner.storage.clone(),
            layout: inner.layout.clone(),
            dtype: inner.dtype,
            device: inner.device,
            origin: inner.origin,
            label: RwLock::new(self.label()),
            is_view: inner.is_view,
            autograd: GradMeta::with_grad_fn(node),
        }))
    }

    /// A new handle on the same storage with `origin`, unlabelled.
    pub(crate) fn view(&self, layout: Layout, origin: Origin) -> Tensor {
        Self::from_shared(self.0.storage.clone(), layout, self.0.dtype, self.0.device, origin)
    }

    /// A view of this tensor's data (`transpose`, `narrow`, ...): the same tensor to reports, so it
    /// keeps this tensor's origin, name and role, and says it is a view.
    pub(crate) fn shape_view(&self, layout: Layout) -> Tensor {
        Tensor(Arc::new(Inner {
            storage: self.0.storage.clone(),
            layout,
            dtype: self.0.dtype,
            device: self.0.device,
            origin: self.0.origin,
            label: RwLock::new(self.label()),
            is_view: true,
            autograd: GradMeta::default(),
        }))
    }

    /// The device this tensor lives on (for a fake tensor: the device it stands for).
    pub fn device(&self) -> Device {
        self.0.device
    }

    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.0.layout.shape
    }

    /// Strides in elements.
    pub fn stride(&self) -> &[usize] {
        &self.0.layout.strides
    }

    /// The size of one dim (negative dims count from the end).
    #[track_caller]
    pub fn size(&self, dim: isize) -> Result<usize> {
        let d = check::shape_dim("size", self, dim, Location::caller())?;
        Ok(self.shape()[d])
    }

    /// Number of dims.
    pub fn rank(&self) -> usize {
        self.0.layout.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }

    /// Bytes the elements take (`numel * dtype size`), whether or not they exist (fake).
    pub fn nbytes(&self) -> usize {
        // A valid layout's byte size fits (see `shape::checked_nbytes`); saturate regardless.
        self.numel().saturating_mul(self.dtype().size_in_bytes())
    }

    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }

    /// Where this tensor was made: file:line:column and the op.
    pub fn origin(&self) -> Origin {
        self.0.origin
    }

    /// The name given with [`Tensor::set_name`], or the module path a module walk found it at
    /// (`model.to(..)`, `model.parameters()`, `inspect`, a dry run, a load). A view has its
    /// source's name.
    pub fn name(&self) -> Option<String> {
        self.label().and_then(|label| label.name.as_deref().map(str::to_string))
    }

    /// Names this tensor (and every clone of this handle) for errors and reports, e.g. its path
    /// `encoder.layers.0.mask`. Its role is kept.
    pub fn set_name(&self, name: impl Into<Arc<str>>) {
        let role = self.role();
        self.set_label_parts(Some(name.into()), role);
    }

    /// What this tensor is to a model (a parameter, a buffer, a skipped field, a dry run's input),
    /// as the last module walk that reached it found it; `None` for tensors no model holds.
    pub fn role(&self) -> Option<TensorRole> {
        self.label().and_then(|label| label.role.clone())
    }

    /// Is this a view of another tensor's data (`transpose`, `narrow`, `reshape` of contiguous
    /// data, ...)? Reports say so next to the source's name.
    pub fn is_view(&self) -> bool {
        self.0.is_view
    }

    pub(crate) fn label(&self) -> Option<Arc<Label>> {
        self.0.label.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Labels this tensor `name` with `role` (a module walk found it there); cheap when it already
    /// is.
    /// A walk from a submodule (`model.attn.parameters()`) sees paths relative to it: a name that
    /// already ends with that path is the same tensor's path from the root, and is kept.
    pub(crate) fn set_label(&self, name: &str, role: TensorRole) {
        let current = self.label();
        if let Some(label) = current.as_deref()
            && label.role.as_ref() == Some(&role)
            && let Some(current) = label.name.as_deref()
            && (current == name || current.strip_suffix(name).is_some_and(|root| root.ends_with('.')))
        {
            return;
        }
        self.set_label_parts(Some(name.into()), Some(role));
    }

    /// Only the role (a `Param` labels its tensor before any walk names it).
    pub(crate) fn set_role(&self, role: TensorRole) {
        let name = self.label().and_then(|l| l.name.clone());
        self.set_label_parts(name, Some(role));
    }

    /// Gives this (new) tensor `source`'s label: a moved copy, a pinned copy, a detached handle,
    /// an optimizer's updated value is the same tensor to reports.
    pub(crate) fn copy_label_from(&self, source: &Tensor) {
        let label = source.label();
        *self.0.label.write().unwrap_or_else(|e| e.into_inner()) = label;
    }

    fn set_label_parts(&self, name: Option<Arc<str>>, role: Option<TensorRole>) {
        *self.0.label.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(Label { name, role }));
    }

    /// A data-less copy on `device` with this tensor's origin, label and requires-grad flag: what a
    /// dry run computes with in place of an operand it found on the wrong device.
    pub(crate) fn stand_in_on(&self, device: Device) -> Tensor {
        let stand_in =
            Tensor::from_parts(Storage::Fake, self.layout().clone(), self.dtype(), device, self.origin());
        stand_in.copy_label_from(self);
        // A fake leaf of a floating dtype can require grad.
        let _ = stand_in.set_requires_grad(self.requires_grad());
        stand_in
    }

    /// True for a dry-run tensor with no element data.
    pub fn is_fake(&self) -> bool {
        matches!(*self.storage(), Storage::Fake)
    }

    /// Are these the same handle (clones of one `Tensor`)?
    pub(crate) fn same_handle(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Do two handles share storage (views of each other, or clones)?
    pub fn same_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.0.layout
    }

    pub(crate) fn storage(&self) -> RwLockReadGuard<'_, Storage> {
        // A poisoned lock means a panic elsewhere mid-write; the data is still the best we have.
        self.0.storage.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn storage_mut(&self) -> std::sync::RwLockWriteGuard<'_, Storage> {
        self.0.storage.write().unwrap_or_else(|e| e.into_inner())
    }

    /// This tensor's host elements, moved out of it, where nothing else can reach them: this is
    /// the only handle on the tensor, no view or other tensor shares its storage, nothing holds a
    /// weak handle on either (the transfer ledger), and the storage holds exactly this tensor's
    /// elements in order. The tensor is left with no elements: only for a caller that owns it and
    /// drops it next (the autograd engine's gradient, handed to one node's backward).
    pub(crate) fn take_sole_host_elements(&self) -> Option<CpuStorage> {
        let sole = Arc::strong_count(&self.0) == 1
            && Arc::weak_count(&self.0) == 0
            && Arc::strong_count(&self.0.storage) == 1
            && Arc::weak_count(&self.0.storage) == 0;
        if !sole || !self.is_contiguous() || self.layout().offset != 0 {
            return None;
        }
        let mut guard = self.storage_mut();
        let Storage::Cpu(s) = &mut *guard else { return None };
        if s.len() != self.numel() {
            return None;
        }
        Some(std::mem::replace(s, CpuStorage::full(0.0, 0, self.dtype())))
    }

    /// This tensor as it appears in an error: role, name, device, dtype, shape, origin.
    pub(crate) fn operand(&self, role: impl Into<String>) -> Operand {
        Operand {
            role: role.into(),
            name: self.name(),
            kind: self.role(),
            view: self.is_view(),
            device: self.device(),
            dtype: self.dtype(),
            shape: self.shape().to_vec(),
            origin: self.origin(),
        }
    }

    /// The elements on the host with the layout to read them by: the storage itself on the CPU, a
    /// contiguous download from a GPU (a synchronisation point), or the error for a tensor that
    /// has no data (fake). Host memory for a download is checked here; what `f` allocates is the
    /// caller's to check.
    pub(crate) fn with_host<R>(
        &self,
        op: &'static str,
        location: &'static Location<'static>,
        f: impl FnOnce(&CpuStorage, &Layout) -> R,
    ) -> Result<R> {
        let guard = self.storage();
        match &*guard {
            Storage::Cpu(s) => Ok(f(s, self.layout())),
            Storage::Pinned { buffer, dtype } => {
                // The bytes, and the storage made of them.
                ensure_host_room(op, location, buffer.len().saturating_mul(2))?;
                let host = Storage::pinned_to_cpu(buffer, *dtype).map_err(|e| cuda_error(e, location))?;
                Ok(f(&host, self.layout()))
            }
            Storage::Cuda(s) => {
                // The download, and the storage made of it.
                ensure_host_room(op, location, self.nbytes().saturating_mul(2))?;
                let bytes = s.to_host_bytes(self.layout()).map_err(|e| cuda_error(e, location))?;
                let host = CpuStorage::from_le_bytes(&bytes, self.dtype());
                Ok(f(&host, &Layout::contiguous(self.shape())))
            }
            Storage::Fake => Err(Error::NoData { op, operand: Box::new(self.operand("input")), location }),
        }
    }
}

/// An op's kernels, one per place data can be: `cpu` runs over host storages (pinned inputs are
/// read through a copy), `cuda` launches on the inputs' device. Fake inputs, or fake mode, give
/// fake storage and run nothing. The op front end has checked devices, dtypes and shapes; the
/// CUDA backend's own argument errors are reported at the op's call site.
///
/// `result` is the shape and dtype the op makes. Before a CPU kernel runs, host memory for it is
/// checked (see [`ensure_host_room`]): CPU kernels allocate infallibly, and an allocation that
/// fails there would abort the process.
pub(crate) fn compute(
    op: &'static str,
    location: &'static Location<'static>,
    inputs: &[&Tensor],
    result: (&[usize], DType),
    cpu: impl FnOnce(&[&CpuStorage]) -> CpuStorage,
    cuda: impl FnOnce(&[&CudaStorage]) -> CudaResult<CudaStorage>,
) -> Result<Storage> {
    if fake::is_active() {
        return Ok(Storage::Fake);
    }
    let guards: Vec<_> = inputs.iter().map(|t| t.storage()).collect();
    if guards.iter().any(|g| matches!(**g, Storage::Fake)) {
        return Ok(Storage::Fake);
    }
    if guards.iter().all(|g| matches!(**g, Storage::Cuda(_))) && !guards.is_empty() {
        let on_device: Vec<&CudaStorage> =
            guards.iter().filter_map(|g| if let Storage::Cuda(s) = &**g { Some(s) } else { None }).collect();
        return cuda(&on_device).map(Storage::Cuda).map_err(|e| cuda_error(e, location));
    }
    let mut copies = Vec::new();
    for g in &guards {
        match &**g {
            Storage::Pinned { buffer, dtype } => {
                copies.push(Storage::pinned_to_cpu(buffer, *dtype).map_err(|e| cuda_error(e, location))?)
            }
            Storage::Cuda(_) => {
                let devices: Vec<String> = inputs.iter().map(|t| t.device().to_string()).collect();
                return Err(Error::Unsupported {
                    op,
                    device: inputs.iter().map(|t| t.device()).find(|d| d.is_cuda()).unwrap_or(Device::Cpu),
                    help: format!(
                        "the operands' data is in different places ({}); move them to one device first",
                        devices.join(", ")
                    ),
                    location,
                });
            }
            _ => {}
        }
    }
    // Kernels gather a strided input (a transposed or expanded view) into a contiguous copy
    // first: an expanded view can be far larger than the storage behind it.
    let gathered = inputs.iter().filter(|t| !t.is_contiguous()).map(|t| t.nbytes());
    let (shape, dtype) = result;
    let result_bytes = crate::shape::checked_nbytes(shape, dtype.size_in_bytes()).unwrap_or(usize::MAX);
    ensure_host_room(op, location, gathered.fold(result_bytes, usize::saturating_add))?;
    let mut copies = copies.iter();
    let mut cpu_inputs = Vec::with_capacity(guards.len());
    for g in &guards {
        match &**g {
            Storage::Cpu(s) => cpu_inputs.push(s),
            _ => cpu_inputs.extend(copies.next()),
        }
    }
    let elements = inputs.iter().map(|t| t.numel()).fold(shape.iter().product::<usize>(), usize::max);
    let _kernel = crate::backend::begin_kernel(elements);
    Ok(Storage::Cpu(cpu(&cpu_inputs)))
}

/// Checks host memory for what a CPU kernel needs besides its result and its gathered inputs
/// (which [`compute`] checks): a copy it makes of a contiguous input. Nothing for data elsewhere
/// (a GPU, fake tensors) or in a dry run.
pub(crate) fn ensure_host_scratch(
    op: &'static str,
    location: &'static Location<'static>,
    inputs: &[&Tensor],
    bytes: usize,
) -> Result<()> {
    if fake::is_active() || !inputs.iter().all(|t| matches!(*t.storage(), Storage::Cpu(_))) {
        return Ok(());
    }
    ensure_host_room(op, location, bytes)
}

/// Checks that `bytes` of host memory can be allocated before code that allocates them
/// infallibly runs; the error names the op and the user's line.
pub(crate) fn ensure_host_room(
    op: &'static str,
    location: &'static Location<'static>,
    bytes: usize,
) -> Result<()> {
    crate::backend::ensure_room(bytes).map_err(|e| e.into_error(op, location))
}

/// The `cuda` kernel of an op that has none on the GPU (callers only reach it for host data).
pub(crate) fn host_only(op: &'static str) -> impl FnOnce(&[&CudaStorage]) -> CudaResult<CudaStorage> {
    move |inputs| {
        let device = inputs.first().map_or(Device::Cuda(0), |s| s.device().device());
        Err(CudaError::Core(Box::new(Error::Unsupported {
            op,
            device,
            help: "this kernel runs on the host only; move the operands to `cpu` for it".to_string(),
            location: Location::caller(),
        })))
    }
}

/// A backend error as the op front end reports it: argument errors point at the op's call site
/// rather than into the backend.
pub(crate) fn cuda_error(e: CudaError, location: &'static Location<'static>) -> Error {
    match Error::from(e) {
        Error::InvalidArgument { op, detail, help, .. } => {
            Error::InvalidArgument { op, detail, help, location }
        }
        Error::Unsupported { op, device, help, .. } => Error::Unsupported { op, device, help, location },
        other => other.located(location),
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor[{}, {}, {}", crate::shape::fmt_shape(self.shape()), self.dtype(), self.device())?;
        if let Some(name) = self.name() {
            write!(f, ", name: {name}")?;
        }
        if let Some(role) = self.role() {
            write!(f, ", {role}")?;
        }
        if self.is_view() {
            f.write_str(", a view")?;
        }
        if self.is_fake() {
            f.write_str(", fake")?;
        }
        write!(f, ", made by {}]", self.origin())
    }
}

impl fmt::Display for Tensor {
    /// The values (up to 64 of them) followed by the metadata; fake tensors show metadata only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 64;
        // Values come from the host, downloaded from a GPU if need be; a tensor whose values
        // cannot be read (fake, or a failing device) shows its metadata only.
        let values =
            self.with_host("display", Location::caller(), |s, layout| s.element_strings(layout, SHOWN));
        if let Ok(values) = values {
            let more = if self.numel() > SHOWN { ", ..." } else { "" };
            write!(f, "[{}{}] ", values.join(", "), more)?;
        }
        fmt::Debug::fmt(self, f)
    }
}
