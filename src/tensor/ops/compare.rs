//! Comparisons (`eq`, `lt`, ..., with a tensor or a scalar), whose results are bool, and the logic
//! of bool tensors (`logical_and`, `logical_or`, `logical_not`).

use std::panic::Location;

use super::Loc;
use crate::backend::CpuStorage;
use crate::backend::op::{CmpOp, LogicalOp};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::{Tensor, check, compute};

impl Tensor {
    #[track_caller]
    pub fn eq(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(CmpOp::Eq, rhs, Location::caller())
    }

    #[track_caller]
    pub fn ne(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(CmpOp::Ne, rhs, Location::caller())
    }

    #[track_caller]
    pub fn lt(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(CmpOp::Lt, rhs, Location::caller())
    }

    #[track_caller]
    pub fn le(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(CmpOp::Le, rhs, Location::caller())
    }

    #[track_caller]
    pub fn gt(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(CmpOp::Gt, rhs, Location::caller())
    }

    #[track_caller]
    pub fn ge(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(CmpOp::Ge, rhs, Location::caller())
    }

    /// Any [`CmpOp`] with broadcasting; the result is bool.
    #[track_caller]
    pub fn cmp_op(&self, op: CmpOp, rhs: &Tensor) -> Result<Tensor> {
        self.compare(op, rhs, Location::caller())
    }

    /// Compares every element with a Rust scalar; the result is bool.
    #[track_caller]
    pub fn cmp_scalar(&self, op: CmpOp, value: f64) -> Result<Tensor> {
        let location = Location::caller();
        let storage = compute(
            op.name(),
            location,
            &[self],
            (self.shape(), DType::Bool),
            |s| s[0].compare_scalar(op, self.layout(), value),
            |s| s[0].compare_scalar(op, self.layout(), value),
        )?;
        Ok(self.derived(storage, self.shape(), DType::Bool, op.name(), location))
    }

    fn compare(&self, op: CmpOp, rhs: &Tensor, location: Loc) -> Result<Tensor> {
        let name = op.name();
        let operands = [("lhs", self), ("rhs", rhs)];
        check::same_device(name, &operands, location)?;
        check::same_dtype(name, &operands, location)?;
        let shape = check::broadcast(name, self, rhs, location)?;
        let cpu = |s: &[&CpuStorage]| s[0].compare(op, self.layout(), s[1], rhs.layout(), &shape);
        let storage = compute(name, location, &[self, rhs], (&shape, DType::Bool), cpu, |s| {
            s[0].compare(op, self.layout(), s[1], rhs.layout(), &shape)
        })?;
        Ok(self.derived(storage, &shape, DType::Bool, name, location))
    }

    /// Logical and of two bool tensors.
    #[track_caller]
    pub fn logical_and(&self, rhs: &Tensor) -> Result<Tensor> {
        self.logical(rhs, LogicalOp::And, Location::caller())
    }

    /// Logical or of two bool tensors.
    #[track_caller]
    pub fn logical_or(&self, rhs: &Tensor) -> Result<Tensor> {
        self.logical(rhs, LogicalOp::Or, Location::caller())
    }

    /// Logical not of a bool tensor.
    #[track_caller]
    pub fn logical_not(&self) -> Result<Tensor> {
        let location = Location::caller();
        check::dtype_is("logical_not", "input", self, DType::Bool, location)?;
        let storage = compute(
            "logical_not",
            location,
            &[self],
            (self.shape(), DType::Bool),
            |s| s[0].logical_not(self.layout()),
            // not x == (x == false)
            |s| s[0].compare_scalar(CmpOp::Eq, self.layout(), 0.0),
        )?;
        Ok(self.derived(storage, self.shape(), DType::Bool, "logical_not", location))
    }

    fn logical(&self, rhs: &Tensor, op: LogicalOp, location: Loc) -> Result<Tensor> {
        let name = op.name();
        check::same_device(name, &[("lhs", self), ("rhs", rhs)], location)?;
        check::dtype_is(name, "lhs", self, DType::Bool, location)?;
        check::dtype_is(name, "rhs", rhs, DType::Bool, location)?;
        let shape = check::broadcast(name, self, rhs, location)?;
        let storage = compute(
            name,
            location,
            &[self, rhs],
            (&shape, DType::Bool),
            |s| s[0].logical(op, self.layout(), s[1], rhs.layout(), &shape),
            |s| s[0].logical(op, self.layout(), s[1], rhs.layout(), &shape),
        )?;
        Ok(self.derived(storage, &shape, DType::Bool, name, location))
    }
}
