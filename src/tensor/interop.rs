//! `ndarray` interop (feature `ndarray`): zero-copy views of CPU tensors, copies both ways.
//!
//! Only host memory can be viewed: an accelerator tensor is an error that says to call `.cpu()`
//! first, the guides' NumPy-conversion rule.

use std::panic::Location;

use ndarray::{ArrayD, ArrayViewD, IxDyn, ShapeBuilder};

use super::{Storage, Tensor, check};
use crate::device::Device;
use crate::dtype::WithDType;
use crate::error::{Error, Result};

impl Tensor {
    /// Runs `f` on an `ndarray` view of this CPU tensor's elements, without copying. The view
    /// borrows the storage for the duration of `f`.
    #[track_caller]
    pub fn with_ndarray<T: WithDType, R>(&self, f: impl FnOnce(ArrayViewD<'_, T>) -> R) -> Result<R> {
        let location = Location::caller();
        self.host_only("with_ndarray", location)?;
        let guard = self.storage();
        if let Storage::Pinned { .. } = &*guard {
            return Err(check::invalid(
                "with_ndarray",
                "the tensor is in pinned (page-locked) memory, which ndarray views do not borrow".to_string(),
                "view the tensor it was pinned from, or read the values with `to_vec`".to_string(),
                location,
            ));
        }
        let Storage::Cpu(storage) = &*guard else {
            return Err(Error::NoData {
                op: "with_ndarray",
                operand: Box::new(self.operand("input")),
                location,
            });
        };
        let Some(data) = storage.as_slice::<T>() else {
            return Err(check::invalid(
                "with_ndarray",
                format!("the tensor is {}, the view asks for {}", self.dtype(), T::DTYPE),
                format!("view it as its own dtype, or cast first: `x.to_dtype(DType::{:?})`", T::DTYPE),
                location,
            ));
        };
        let layout = self.layout();
        let shape = IxDyn(&layout.shape).strides(IxDyn(&layout.strides));
        let view = ArrayViewD::from_shape(shape, &data[layout.offset..]).map_err(|e| {
            check::invalid(
                "with_ndarray",
                format!("ndarray rejected the layout: {e}"),
                "call `.contiguous()` first",
                location,
            )
        })?;
        Ok(f(view))
    }

    /// An owned `ndarray` copy of this CPU tensor (converted to `T`).
    #[track_caller]
    pub fn to_ndarray<T: WithDType>(&self) -> Result<ArrayD<T>> {
        let location = Location::caller();
        self.host_only("to_ndarray", location)?;
        let data = self.to_vec::<T>()?;
        ArrayD::from_shape_vec(IxDyn(self.shape()), data).map_err(|e| {
            check::invalid(
                "to_ndarray",
                format!("ndarray rejected the shape: {e}"),
                "this is a bug in devcheck",
                location,
            )
        })
    }

    /// A tensor on `device` holding a copy of `array`'s elements (in logical order).
    #[track_caller]
    pub fn from_ndarray<T: WithDType>(array: ArrayViewD<'_, T>, device: &Device) -> Result<Tensor> {
        let shape = array.shape().to_vec();
        let data: Vec<T> = array.iter().copied().collect();
        Tensor::from_vec(data, shape, device)
    }

    fn host_only(&self, op: &'static str, location: &'static Location<'static>) -> Result<()> {
        if self.device() == Device::Cpu {
            return Ok(());
        }
        Err(Error::NotOnHost { op, operand: Box::new(self.operand("input")), location })
    }
}
