//! Arithmetic with a Rust scalar (`add_scalar`, `rsub_scalar`, `pow_scalar`, `clamp`, ...): the
//! scalar takes the tensor's dtype and never makes a device copy.

use std::panic::Location;

use super::{Loc, gpu_has_kernel};
use crate::autograd::{GradFn, record};
use crate::backend::CpuStorage;
use crate::backend::op::BinaryOp;
use crate::error::Result;
use crate::tensor::{Tensor, check, compute};

impl Tensor {
    /// `self + value` (the scalar takes this tensor's dtype).
    #[track_caller]
    pub fn add_scalar(&self, value: f64) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Add, value, false, Location::caller())
    }

    #[track_caller]
    pub fn sub_scalar(&self, value: f64) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Sub, value, false, Location::caller())
    }

    /// `value - self`.
    #[track_caller]
    pub fn rsub_scalar(&self, value: f64) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Sub, value, true, Location::caller())
    }

    #[track_caller]
    pub fn mul_scalar(&self, value: f64) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Mul, value, false, Location::caller())
    }

    #[track_caller]
    pub fn div_scalar(&self, value: f64) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Div, value, false, Location::caller())
    }

    /// `self ** value`.
    #[track_caller]
    pub fn pow_scalar(&self, value: f64) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Pow, value, false, Location::caller())
    }

    /// `max(self, value)` element-wise (`clamp_min`).
    #[track_caller]
    pub fn maximum_scalar(&self, value: f64) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Maximum, value, false, Location::caller())
    }

    #[track_caller]
    pub fn minimum_scalar(&self, value: f64) -> Result<Tensor> {
        self.scalar_op(BinaryOp::Minimum, value, false, Location::caller())
    }

    /// Limits every element to `[min, max]`.
    #[track_caller]
    pub fn clamp(&self, min: f64, max: f64) -> Result<Tensor> {
        let location = Location::caller();
        self.scalar_op(BinaryOp::Maximum, min, false, location)?.scalar_op(
            BinaryOp::Minimum,
            max,
            false,
            location,
        )
    }

    fn scalar_op(&self, op: BinaryOp, value: f64, reversed: bool, location: Loc) -> Result<Tensor> {
        let name = op.name();
        if op == BinaryOp::Div {
            check::float(name, self, location)?;
        } else {
            check::numeric(name, self, location)?;
        }
        // Commutative ops have no reversed kernel on the GPU; they need none.
        let cuda_reversed = reversed && matches!(op, BinaryOp::Sub | BinaryOp::Div | BinaryOp::Pow);
        let cpu = |s: &[&CpuStorage]| s[0].binary_scalar(op, self.layout(), value, reversed);
        let storage = compute(name, location, &[self], (self.shape(), self.dtype()), cpu, |s| {
            gpu_has_kernel(op, self.dtype(), self.device(), location)?;
            s[0].binary_scalar(op, self.layout(), value, cuda_reversed)
        })?;
        let out = self.derived(storage, self.shape(), self.dtype(), name, location);
        Ok(record(out, &[self], |_| GradFn::Scalar { op, value, reversed, input: self.clone() }))
    }
}
