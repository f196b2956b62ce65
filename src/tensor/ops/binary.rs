//! Element-wise binary arithmetic with broadcasting (`add`, `sub`, `mul`, `div`, `pow`,
//! `maximum`, `minimum`), and the same written into an existing tensor (`add_into`, ...).

use std::panic::Location;

use super::{Loc, gpu_has_kernel};
use crate::autograd::{GradFn, record};
use crate::backend::op::BinaryOp;
use crate::error::Result;
use crate::shape::fmt_shape;
use crate::tensor::{Storage, Tensor, check, compute, cuda_error};

impl Tensor {
    #[track_caller]
    pub fn add(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Add, rhs, Location::caller())
    }

    #[track_caller]
    pub fn sub(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Sub, rhs, Location::caller())
    }

    #[track_caller]
    pub fn mul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Mul, rhs, Location::caller())
    }

    /// True division; floating dtypes only.
    #[track_caller]
    pub fn div(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Div, rhs, Location::caller())
    }

    #[track_caller]
    pub fn pow(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Pow, rhs, Location::caller())
    }

    /// Element-wise maximum (NaN-propagating).
    #[track_caller]
    pub fn maximum(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Maximum, rhs, Location::caller())
    }

    /// Element-wise minimum (NaN-propagating).
    #[track_caller]
    pub fn minimum(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(BinaryOp::Minimum, rhs, Location::caller())
    }

    /// Any [`BinaryOp`] with broadcasting.
    #[track_caller]
    pub fn binary_op(&self, op: BinaryOp, rhs: &Tensor) -> Result<Tensor> {
        self.binary(op, rhs, Location::caller())
    }

    fn binary(&self, op: BinaryOp, rhs: &Tensor, location: Loc) -> Result<Tensor> {
        let name = op.name();
        let operands = [("lhs", self), ("rhs", rhs)];
        check::same_device(name, &operands, location)?;
        let dtype = check::same_dtype(name, &operands, location)?;
        if op == BinaryOp::Div {
            check::float(name, self, location)?;
        } else {
            check::numeric(name, self, location)?;
        }
        let shape = check::broadcast(name, self, rhs, location)?;
        let storage = compute(
            name,
            location,
            &[self, rhs],
            (&shape, dtype),
            |s| s[0].binary(op, self.layout(), s[1], rhs.layout(), &shape),
            |s| {
                gpu_has_kernel(op, dtype, self.device(), location)?;
                s[0].binary(op, self.layout(), s[1], rhs.layout(), &shape)
            },
        )?;
        let out = self.derived(storage, &shape, dtype, name, location);
        Ok(record(out, &[self, rhs], |_| match op {
            BinaryOp::Add | BinaryOp::Sub => GradFn::AddSub {
                sub: op == BinaryOp::Sub,
                lhs_shape: (self.shape() != shape).then(|| self.shape().to_vec()),
                rhs_shape: (rhs.shape() != shape).then(|| rhs.shape().to_vec()),
            },
            _ => GradFn::Binary { op, lhs: self.clone(), rhs: rhs.clone() },
        }))
    }

    /// Writes `self + rhs` into `out` (PyTorch's `torch.add(a, b, out=c)`), reusing its memory.
    #[track_caller]
    pub fn add_into(&self, rhs: &Tensor, out: &Tensor) -> Result<()> {
        self.binary_into(BinaryOp::Add, rhs, out, Location::caller())
    }

    #[track_caller]
    pub fn sub_into(&self, rhs: &Tensor, out: &Tensor) -> Result<()> {
        self.binary_into(BinaryOp::Sub, rhs, out, Location::caller())
    }

    #[track_caller]
    pub fn mul_into(&self, rhs: &Tensor, out: &Tensor) -> Result<()> {
        self.binary_into(BinaryOp::Mul, rhs, out, Location::caller())
    }

    #[track_caller]
    pub fn div_into(&self, rhs: &Tensor, out: &Tensor) -> Result<()> {
        self.binary_into(BinaryOp::Div, rhs, out, Location::caller())
    }

    /// Any [`BinaryOp`] written into `out`: a contiguous tensor on the same device with the
    /// result's dtype and shape. `out` may be one of the inputs (an in-place update).
    #[track_caller]
    pub fn binary_op_into(&self, op: BinaryOp, rhs: &Tensor, out: &Tensor) -> Result<()> {
        self.binary_into(op, rhs, out, Location::caller())
    }

    fn binary_into(&self, op: BinaryOp, rhs: &Tensor, out: &Tensor, location: Loc) -> Result<()> {
        let name = op.name();
        let operands = [("lhs", self), ("rhs", rhs), ("out", out)];
        crate::autograd::check_untracked_write(name, &operands, location)?;
        check::same_device(name, &operands, location)?;
        check::same_dtype(name, &operands, location)?;
        if op == BinaryOp::Div {
            check::float(name, self, location)?;
        } else {
            check::numeric(name, self, location)?;
        }
        let shape = check::broadcast(name, self, rhs, location)?;
        if out.shape() != shape.as_slice() || !out.is_contiguous() {
            return Err(check::shape_error(
                name,
                format!(
                    "`out` must be contiguous with the result's shape {}, got {}",
                    fmt_shape(&shape),
                    fmt_shape(out.shape())
                ),
                "allocate it once with `Tensor::zeros(shape, x.options())` and reuse it",
                &operands,
                location,
            ));
        }
        if out.is_fake() || self.is_fake() || rhs.is_fake() || crate::backend::fake::is_active() {
            return Ok(());
        }
        let host = [self, rhs, out].iter().all(|t| matches!(*t.storage(), Storage::Cpu(_)));
        if out.same_storage(self) || out.same_storage(rhs) || !host {
            // Reading and writing one storage under two locks would deadlock, and on a GPU the
            // kernels write fresh buffers: compute aside, then copy into `out`.
            let result = self.binary(op, rhs, location)?;
            return out.overwrite_with(name, &result, location);
        }
        let (a, b) = (self.storage(), rhs.storage());
        let mut o = out.storage_mut();
        if let (Storage::Cpu(a), Storage::Cpu(b), Storage::Cpu(o)) = (&*a, &*b, &mut *o) {
            o.binary_into(out.layout().offset, op, (a, self.layout()), (b, rhs.layout()), &shape);
        }
        Ok(())
    }

    /// Copies `src` (same shape and dtype, checked by the caller) into this contiguous tensor's
    /// elements.
    fn overwrite_with(&self, op: &'static str, src: &Tensor, location: Loc) -> Result<()> {
        let from = src.storage();
        let mut to = self.storage_mut();
        match (&*from, &mut *to) {
            (Storage::Cpu(from), Storage::Cpu(to)) => {
                to.overwrite(self.layout().offset, from, src.layout());
                Ok(())
            }
            (Storage::Cuda(from), Storage::Cuda(to)) => {
                to.copy_from(from, src.layout(), self.layout()).map_err(|e| cuda_error(e, location))
            }
            (Storage::Fake, _) | (_, Storage::Fake) => Ok(()),
            _ => Err(crate::error::Error::Unsupported {
                op,
                device: self.device(),
                help: "`out` must be an ordinary tensor on the operands' device (not pinned memory); \
                       allocate it with `Tensor::zeros(shape, x.options())`"
                    .to_string(),
                location,
            }),
        }
    }
}
