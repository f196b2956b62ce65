//! Element-wise unary functions (`neg`, `exp`, `gelu`, ...), one [`UnaryOp`] each.

use std::panic::Location;

use super::{Loc, gpu_unsupported};
use crate::autograd::{GradFn, record};
use crate::backend::CpuStorage;
use crate::backend::op::UnaryOp;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::{Tensor, check, compute};

impl Tensor {
    #[track_caller]
    pub fn neg(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Neg, Location::caller())
    }
    #[track_caller]
    pub fn abs(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Abs, Location::caller())
    }
    #[track_caller]
    pub fn relu(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Relu, Location::caller())
    }
    #[track_caller]
    pub fn exp(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Exp, Location::caller())
    }
    /// Natural logarithm.
    #[track_caller]
    pub fn log(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Log, Location::caller())
    }
    #[track_caller]
    pub fn sqrt(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Sqrt, Location::caller())
    }
    #[track_caller]
    pub fn rsqrt(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Rsqrt, Location::caller())
    }
    #[track_caller]
    pub fn tanh(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Tanh, Location::caller())
    }
    #[track_caller]
    pub fn sigmoid(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Sigmoid, Location::caller())
    }
    /// GELU with the exact erf form (PyTorch's default `approximate='none'`).
    #[track_caller]
    pub fn gelu(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Gelu, Location::caller())
    }
    /// GELU's tanh approximation, `x/2 (1 + tanh(√(2/π) (x + 0.044715 x³)))` (PyTorch's
    /// `gelu(x, approximate='tanh')`, GPT-2's activation).
    #[track_caller]
    pub fn gelu_tanh(&self) -> Result<Tensor> {
        self.unary(UnaryOp::GeluTanh, Location::caller())
    }
    #[track_caller]
    pub fn silu(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Silu, Location::caller())
    }
    #[track_caller]
    pub fn sin(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Sin, Location::caller())
    }
    #[track_caller]
    pub fn cos(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Cos, Location::caller())
    }

    /// Any [`UnaryOp`].
    #[track_caller]
    pub fn unary_op(&self, op: UnaryOp) -> Result<Tensor> {
        self.unary(op, Location::caller())
    }

    fn unary(&self, op: UnaryOp, location: Loc) -> Result<Tensor> {
        if op.takes_integers() {
            check::numeric(op.name(), self, location)?;
        } else {
            check::float(op.name(), self, location)?;
        }
        let cpu = |s: &[&CpuStorage]| s[0].unary(op, self.layout());
        let storage = compute(op.name(), location, &[self], (self.shape(), self.dtype()), cpu, |s| {
            match (op, self.dtype()) {
                // Every u8 value is its own absolute value and relu (a fresh copy, not an alias).
                (UnaryOp::Abs | UnaryOp::Relu, DType::U8) => s[0].cast(self.layout(), DType::U8),
                (UnaryOp::Neg, DType::U8) => Err(gpu_unsupported(
                    "neg",
                    "u8 has no negative values and its GPU kernels do not wrap around; cast to i32 or a float first",
                    self.device(),
                    location,
                )),
                _ => s[0].unary(op, self.layout()),
            }
        })?;
        let out = self.derived(storage, self.shape(), self.dtype(), op.name(), location);
        Ok(record(out, &[self], |out| GradFn::Unary {
            op,
            // ReLU's gradient needs only where the input is positive, which is exactly where its
            // result is (NaN and -0 are neither): keeping the result lets the input go, which
            // after a convolution is a buffer the size of the activation, while the next op
            // (a pooling) keeps the result anyway.
            input: if op == UnaryOp::Relu { out.detach() } else { self.clone() },
            out: crate::autograd::unary_keeps_output(op).then(|| out.detach()),
        }))
    }
}
