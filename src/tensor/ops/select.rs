//! Selection by a mask or a position: `where_cond`, `masked_fill`, `triu`, `tril`.

use std::panic::Location;

use super::Loc;
use crate::autograd::{GradFn, record};
use crate::backend::CpuStorage;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::fmt_shape;
use crate::tensor::{Tensor, check, compute};

impl Tensor {
    /// `on_true` where `self` (a bool mask) is true, `on_false` elsewhere, with broadcasting
    /// (`torch.where(cond, a, b)`).
    #[track_caller]
    pub fn where_cond(&self, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        let location = Location::caller();
        let op = "where";
        let operands = [("condition", self), ("on_true", on_true), ("on_false", on_false)];
        check::same_device(op, &operands, location)?;
        check::dtype_is(op, "condition", self, DType::Bool, location)?;
        let dtype = check::same_dtype(op, &operands[1..], location)?;
        let shape = check::broadcast(op, on_true, on_false, location).and_then(|s| {
            crate::shape::broadcast_shapes(self.shape(), &s).ok_or_else(|| {
                check::shape_error(
                    op,
                    format!(
                        "condition {} does not broadcast with {}",
                        fmt_shape(self.shape()),
                        fmt_shape(&s)
                    ),
                    "the mask must broadcast with both values",
                    &operands,
                    location,
                )
            })
        })?;
        check::valid_shape(op, &shape, dtype, location)?;
        let cpu = |s: &[&CpuStorage]| {
            s[1].where_cond(on_true.layout(), s[0], self.layout(), s[2], on_false.layout(), &shape)
        };
        let storage = compute(op, location, &[self, on_true, on_false], (&shape, dtype), cpu, |s| {
            s[1].where_cond(on_true.layout(), s[0], self.layout(), s[2], on_false.layout(), &shape)
        })?;
        let out = on_true.derived(storage, &shape, dtype, op, location);
        Ok(record(out, &[on_true, on_false], |_| GradFn::Where {
            condition: self.clone(),
            true_shape: on_true.shape().to_vec(),
            false_shape: on_false.shape().to_vec(),
        }))
    }

    /// `value` where `mask` (bool, broadcastable to this shape) is true.
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Tensor> {
        let location = Location::caller();
        let op = "masked_fill";
        let operands = [("input", self), ("mask", mask)];
        check::same_device(op, &operands, location)?;
        check::dtype_is(op, "mask", mask, DType::Bool, location)?;
        let fits =
            crate::shape::broadcast_shapes(self.shape(), mask.shape()).is_some_and(|s| s == self.shape());
        if !fits {
            return Err(check::shape_error(
                op,
                format!(
                    "mask {} does not broadcast to the input's {}",
                    fmt_shape(mask.shape()),
                    fmt_shape(self.shape())
                ),
                "the mask may have fewer dims or dims of 1, never more or larger ones",
                &operands,
                location,
            ));
        }
        let cpu = |s: &[&CpuStorage]| s[0].masked_fill(self.layout(), s[1], mask.layout(), value);
        let storage = compute(op, location, &[self, mask], (self.shape(), self.dtype()), cpu, |s| {
            s[0].masked_fill(self.layout(), s[1], mask.layout(), value)
        })?;
        let out = self.derived(storage, self.shape(), self.dtype(), op, location);
        Ok(record(out, &[self], |_| GradFn::MaskedFill { mask: mask.clone() }))
    }

    /// Keeps elements on and above the `diagonal`-th diagonal of the last two dims, zeroes the rest.
    #[track_caller]
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle(diagonal, true, Location::caller())
    }

    /// Keeps elements on and below the `diagonal`-th diagonal of the last two dims.
    #[track_caller]
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        self.triangle(diagonal, false, Location::caller())
    }

    fn triangle(&self, diagonal: i64, upper: bool, location: Loc) -> Result<Tensor> {
        let op = if upper { "triu" } else { "tril" };
        if self.rank() < 2 {
            return Err(check::shape_error(
                op,
                format!("it needs at least 2 dims, got shape {}", fmt_shape(self.shape())),
                "reshape to a matrix first",
                &[("input", self)],
                location,
            ));
        }
        let cpu = |s: &[&CpuStorage]| s[0].triangle(self.layout(), diagonal, upper);
        let result = (self.shape(), self.dtype());
        let storage =
            compute(op, location, &[self], result, cpu, |s| s[0].triangle(self.layout(), diagonal, upper))?;
        let out = self.derived(storage, self.shape(), self.dtype(), op, location);
        Ok(record(out, &[self], |_| GradFn::Triangle { diagonal, upper }))
    }
}
