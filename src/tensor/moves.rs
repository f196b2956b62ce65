//! Moves between devices and dtypes, and reads back to the host.
//!
//! A move keeps the tensor's origin: the data is the same data, made where it was made; the move
//! itself is what the transfer ledger records. Moves are `#[must_use]`: `x.to(&dev)?;` on its own
//! line moves nothing (the classic `.to()`-is-not-in-place bug) and is a compiler warning.

use std::panic::Location;

use super::create::upload;
use super::{Storage, Tensor, check, compute};
use crate::autograd::{GradFn, record};
use crate::backend::cpu::{CpuStorage, contiguous, with_storage};
use crate::backend::fake;
use crate::device::Device;
use crate::dtype::{DType, WithDType};
use crate::error::Result;
use crate::shape::Layout;

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

    fn move_to(&self, device: &Device, location: &'static Location<'static>) -> Result<Tensor> {
        if *device == self.device() {
            return Ok(self.clone());
        }
        let storage = if fake::is_active() || self.is_fake() {
            Storage::Fake
        } else {
            let host = self.with_cpu("to", location, |s| s.gather(self.layout()))?;
            upload(host, device, "to", location)?
        };
        let moved = Tensor::from_parts(
            storage,
            Layout::contiguous(self.shape()),
            self.dtype(),
            *device,
            self.origin(),
        );
        if let Some(name) = self.name() {
            moved.set_name(name);
        }
        crate::check::recorder::moved(self, &moved, location);
        Ok(record(moved, &[self], |_| GradFn::ToDevice { device: self.device() }))
    }

    /// This tensor converted to `dtype` (a cheap clone when it already is).
    #[track_caller]
    #[must_use = "`to_dtype` returns the converted tensor and leaves `self` unchanged"]
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let storage = compute(&[self], |s| s[0].cast(self.layout(), dtype));
        let out = self.derived(storage, self.shape(), dtype, "to_dtype", Location::caller());
        Ok(record(out, &[self], |_| GradFn::ToDType { dtype: self.dtype() }))
    }

    /// The elements in row-major order, copied to the host. A synchronisation point on an
    /// accelerator: read once per epoch or per logging interval, not per step.
    #[track_caller]
    pub fn to_vec<T: WithDType>(&self) -> Result<Vec<T>> {
        let location = Location::caller();
        if crate::check::recorder::host_read(self, "to_vec", location) {
            return Ok(vec![T::from_f64(0.0); self.numel()]);
        }
        self.with_cpu("to_vec", location, |s| match s.as_slice::<T>() {
            // One copy when the dtype already matches.
            Some(v) => contiguous(v, self.layout()).into_owned(),
            None => s.cast(self.layout(), T::DTYPE).as_slice::<T>().map(<[T]>::to_vec).unwrap_or_default(),
        })
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
        if crate::check::recorder::host_read(self, "to_scalar", location) {
            return Ok(T::from_f64(0.0));
        }
        let host = self.host_data("to_scalar", location)?;
        Ok(with_storage!(&host, v => T::from_f64(v[0].to_f64())))
    }

    /// Little-endian element bytes in row-major order (the safetensors layout).
    #[track_caller]
    pub fn to_raw_bytes(&self) -> Result<Vec<u8>> {
        let location = Location::caller();
        if crate::check::recorder::host_read(self, "to_raw_bytes", location) {
            return Ok(vec![0; self.nbytes()]);
        }
        self.with_cpu("to_raw_bytes", location, |s| s.to_le_bytes(self.layout()))
    }

    /// Contiguous host copy of the elements.
    fn host_data(&self, op: &'static str, location: &'static Location<'static>) -> Result<CpuStorage> {
        self.with_cpu(op, location, |s| s.gather(self.layout()))
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
        crate::check::recorder::computed(self, &derived);
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
