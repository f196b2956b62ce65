//! Moves between devices and dtypes, and reads back to the host.
//!
//! A move keeps the tensor's origin: the data is the same data, made where it was made; the move
//! itself is what the transfer ledger records. Moves are `#[must_use]`: `x.to(&dev)?;` on its own
//! line moves nothing (the classic `.to()`-is-not-in-place bug) and is a compiler warning.

use std::panic::Location;

use super::create::upload;
use super::{Storage, Tensor, check, compute, cuda_error};
use crate::autograd::{GradFn, record};
use crate::backend::CpuStorage;
use crate::backend::cuda::{CudaStorage, PinnedBuffer};
use crate::backend::fake;
use crate::device::Device;
use crate::dtype::{DType, WithDType};
use crate::error::Result;
use crate::shape::Layout;

type Loc = &'static Location<'static>;

impl Tensor {
    /// This tensor on `device`: a cheap clone when it is already there.
    #[track_caller]
    #[must_use = "`to` returns the moved tensor and leaves `self` where it was; write `let x = x.to(&device)?;`"]
    pub fn to(&self, device: &Device) -> Result<Tensor> {
        self.move_to(device, Location::caller())
    }

    /// `to(&Device::Cpu)`.
    #[track_caller]
    #[must_use = "`cpu` returns the moved tensor and leaves `self` where it was"]
    pub fn cpu(&self) -> Result<Tensor> {
        self.move_to(&Device::Cpu, Location::caller())
    }

    /// `to(&Device::Cuda(index))`.
    #[track_caller]
    #[must_use = "`cuda` returns the moved tensor and leaves `self` where it was"]
    pub fn cuda(&self, index: usize) -> Result<Tensor> {
        self.move_to(&Device::Cuda(index), Location::caller())
    }

    /// `to` on behalf of a caller whose location errors and the ledger should name (a module
    /// moving its parameters reports the user's `model.to(..)` line).
    pub(crate) fn move_to(&self, device: &Device, location: &'static Location<'static>) -> Result<Tensor> {
        self.transfer(device, false, location)
    }

    /// This tensor on `device`, copied without waiting when that is possible (PyTorch's
    /// `to(device, non_blocking=True)`): from pinned host memory ([`Tensor::pin_memory`]) to a
    /// GPU the copy is queued on the device's stream and the call returns at once; from a GPU to
    /// the host the result is a pinned CPU tensor filled in the background, and reading it waits
    /// for the copy. From ordinary (pageable) memory it is the same as [`Tensor::to`].
    #[track_caller]
    #[must_use = "`to_non_blocking` returns the moved tensor and leaves `self` where it was"]
    pub fn to_non_blocking(&self, device: &Device) -> Result<Tensor> {
        self.transfer(device, true, Location::caller())
    }

    /// A copy of this CPU tensor in page-locked host memory (PyTorch's `pin_memory()`), so that
    /// `to_non_blocking` to a GPU is asynchronous. Needs a CUDA driver, as in PyTorch.
    #[track_caller]
    #[must_use = "`pin_memory` returns the pinned copy and leaves `self` unchanged"]
    pub fn pin_memory(&self) -> Result<Tensor> {
        let location = Location::caller();
        if !self.device().is_cpu() {
            return Err(check::invalid(
                "pin_memory",
                format!("only CPU tensors can be pinned, this one is on {}", self.device()),
                "pin host tensors before moving them: `x.pin_memory()?.to_non_blocking(&device)?`",
                location,
            ));
        }
        if self.is_pinned() {
            return Ok(self.clone());
        }
        let storage = if fake::is_active() || self.is_fake() {
            Storage::Fake
        } else {
            super::ensure_host_room("pin_memory", location, self.nbytes())?;
            let bytes = self.with_host("pin_memory", location, |s, l| s.to_le_bytes(l))?;
            let device =
                crate::cuda::cuda_device_for(&Device::Cuda(0)).map_err(|e| cuda_error(e, location))?;
            let buffer =
                PinnedBuffer::new(&device, bytes.len(), Some(&bytes)).map_err(|e| cuda_error(e, location))?;
            Storage::Pinned { buffer, dtype: self.dtype() }
        };
        let pinned = Tensor::from_parts(
            storage,
            Layout::contiguous(self.shape()),
            self.dtype(),
            Device::Cpu,
            self.origin(),
        );
        pinned.copy_label_from(self);
        Ok(record(pinned, &[self], |_| GradFn::Identity))
    }

    /// Is this tensor's data in page-locked host memory?
    pub fn is_pinned(&self) -> bool {
        matches!(*self.storage(), Storage::Pinned { .. })
    }

    fn transfer(
        &self,
        device: &Device,
        non_blocking: bool,
        location: &'static Location<'static>,
    ) -> Result<Tensor> {
        if *device == self.device() {
            return Ok(self.clone());
        }
        let storage = if fake::is_active() || self.is_fake() {
            Storage::Fake
        } else {
            self.copy_storage_to(device, non_blocking, location)?
        };
        let moved = Tensor::from_parts(
            storage,
            Layout::contiguous(self.shape()),
            self.dtype(),
            *device,
            self.origin(),
        );
        moved.copy_label_from(self);
        super::observe::moved(self, &moved, location);
        Ok(record(moved, &[self], |_| GradFn::ToDevice { device: self.device() }))
    }

    /// The elements as contiguous storage on `device`.
    fn copy_storage_to(&self, device: &Device, non_blocking: bool, location: Loc) -> Result<Storage> {
        let on_cuda = |d: &Device| crate::cuda::cuda_device_for(d).map_err(|e| cuda_error(e, location));
        match (&*self.storage(), device) {
            (Storage::Cuda(s), Device::Cuda(_)) => {
                let target = on_cuda(device)?;
                return s
                    .to_device(self.layout(), &target)
                    .map(Storage::Cuda)
                    .map_err(|e| cuda_error(e, location));
            }
            (Storage::Cuda(s), Device::Cpu) if non_blocking => {
                let pinned = PinnedBuffer::new(s.device(), self.nbytes(), None)
                    .and_then(|buffer| s.copy_to_pinned(self.layout(), &buffer).map(|()| buffer))
                    .map_err(|e| cuda_error(e, location))?;
                return Ok(Storage::Pinned { buffer: pinned, dtype: self.dtype() });
            }
            (Storage::Pinned { buffer, dtype }, Device::Cuda(_))
                if self.is_contiguous() && self.layout().offset == 0 =>
            {
                device.ensure_available().map_err(|e| e.located(location))?;
                let target = on_cuda(device)?;
                return CudaStorage::from_pinned(&target, *dtype, buffer, non_blocking)
                    .map(Storage::Cuda)
                    .map_err(|e| cuda_error(e, location));
            }
            _ => {}
        }
        // A contiguous copy, and its bytes on the way to a device.
        let copies = if device.is_cpu() { 1 } else { 2 };
        super::ensure_host_room("to", location, self.nbytes().saturating_mul(copies))?;
        let host = self.with_host("to", location, |s, l| s.gather(l))?;
        upload(host, device, "to", location)
    }

    /// This tensor converted to `dtype` (a cheap clone when it already is).
    #[track_caller]
    #[must_use = "`to_dtype` returns the converted tensor and leaves `self` unchanged"]
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let location = Location::caller();
        let storage = compute(
            "to_dtype",
            location,
            &[self],
            (self.shape(), dtype),
            |s| s[0].cast(self.layout(), dtype),
            |s| s[0].cast(self.layout(), dtype),
        )?;
        let out = self.derived(storage, self.shape(), dtype, "to_dtype", location);
        Ok(record(out, &[self], |_| GradFn::ToDType { dtype: self.dtype() }))
    }

    /// The elements in row-major order, copied to the host. A synchronisation point on an
    /// accelerator: read once per epoch or per logging interval, not per step.
    #[track_caller]
    pub fn to_vec<T: WithDType>(&self) -> Result<Vec<T>> {
        let location = Location::caller();
        // The vector, and the converted copy it is taken from when the dtype differs.
        let converted = if T::DTYPE == self.dtype() { 0 } else { self.numel() };
        let bytes = self.numel().saturating_add(converted).saturating_mul(T::DTYPE.size_in_bytes());
        super::ensure_host_room("to_vec", location, bytes)?;
        if super::observe::host_read(self, "to_vec", location) {
            return Ok(vec![T::from_f64(0.0); self.numel()]);
        }
        self.with_host("to_vec", location, |s, l| s.to_vec::<T>(l))
    }

    /// The one value of a one-element tensor (PyTorch's `.item()`), converted to `T`. A
    /// synchronisation point, like [`Tensor::to_vec`].
    #[track_caller]
    pub fn to_scalar<T: WithDType>(&self) -> Result<T> {
        let location = Location::caller();
        if self.numel() != 1 {
            return Err(check::invalid(
                "to_scalar",
                format!(
                    "a tensor of shape {} has {} elements, not 1",
                    crate::shape::fmt_shape(self.shape()),
                    self.numel()
                ),
                "reduce it first (`x.sum_all()`, `x.mean_all()`), or read all values with `to_vec`",
                location,
            ));
        }
        if super::observe::host_read(self, "to_scalar", location) {
            return Ok(T::from_f64(0.0));
        }
        let host = self.host_data("to_scalar", location)?;
        Ok(host.first::<T>())
    }

    /// Little-endian element bytes in row-major order (the safetensors layout).
    #[track_caller]
    pub fn to_raw_bytes(&self) -> Result<Vec<u8>> {
        self.raw_bytes_at("to_raw_bytes", Location::caller())
    }

    /// [`Tensor::to_raw_bytes`] on behalf of `op` (a checkpoint save names the user's line).
    pub(crate) fn raw_bytes_at(&self, op: &'static str, location: Loc) -> Result<Vec<u8>> {
        super::ensure_host_room(op, location, self.nbytes())?;
        if super::observe::host_read(self, op, location) {
            return Ok(vec![0; self.nbytes()]);
        }
        self.with_host(op, location, |s, l| s.to_le_bytes(l))
    }

    /// Contiguous host copy of the elements.
    fn host_data(&self, op: &'static str, location: &'static Location<'static>) -> Result<CpuStorage> {
        self.with_host(op, location, |s, l| s.gather(l))
    }

    /// A new tensor computed from this one (origin at `location`, named `op`).
    pub(crate) fn derived(
        &self,
        storage: Storage,
        shape: &[usize],
        dtype: DType,
        op: &'static str,
        location: &'static Location<'static>,
    ) -> Tensor {
        let derived = Tensor::from_parts(
            storage,
            Layout::contiguous(shape),
            dtype,
            self.device(),
            super::Origin::new(op, location),
        );
        super::observe::computed(self, &derived);
        derived
    }

    /// The transfer ledger's handle on this tensor's storage: it identifies the data across views
    /// and moves, and keeps the address from being reused while held, without keeping the
    /// elements alive.
    pub(crate) fn storage_handle(&self) -> std::sync::Weak<dyn std::any::Any + Send + Sync> {
        let storage: std::sync::Arc<dyn std::any::Any + Send + Sync> = self.0.storage.clone();
        std::sync::Arc::downgrade(&storage)
    }
}
