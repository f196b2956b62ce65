//! Reductions over some dims or all of them (`sum`, `mean`, `max`, `argmax`, `var`, ...), one
//! [`ReduceOp`] each, and [`Dims`], what says which dims.

use std::panic::Location;

use super::Loc;
use crate::autograd::{GradFn, record};
use crate::backend::op::ReduceOp;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::fmt_shape;
use crate::tensor::{Tensor, check, compute};

/// Which dims a reduction covers.
pub trait Dims {
    fn to_dims(&self) -> Vec<isize>;
}

impl Dims for isize {
    fn to_dims(&self) -> Vec<isize> {
        vec![*self]
    }
}

impl<const N: usize> Dims for [isize; N] {
    fn to_dims(&self) -> Vec<isize> {
        self.to_vec()
    }
}

impl Dims for &[isize] {
    fn to_dims(&self) -> Vec<isize> {
        self.to_vec()
    }
}

impl Dims for Vec<isize> {
    fn to_dims(&self) -> Vec<isize> {
        self.clone()
    }
}

impl Tensor {
    /// Sum over `dims` (integers and bools sum to i64, as in PyTorch).
    #[track_caller]
    pub fn sum(&self, dims: impl Dims, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, &dims.to_dims(), keepdim, Location::caller())
    }

    /// Mean over `dims`; floating dtypes only.
    #[track_caller]
    pub fn mean(&self, dims: impl Dims, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, &dims.to_dims(), keepdim, Location::caller())
    }

    /// Maximum values over `dims` (NaN-propagating).
    #[track_caller]
    pub fn max(&self, dims: impl Dims, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, &dims.to_dims(), keepdim, Location::caller())
    }

    #[track_caller]
    pub fn min(&self, dims: impl Dims, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Min, &dims.to_dims(), keepdim, Location::caller())
    }

    /// Index (i64) of the first maximum along `dim`.
    #[track_caller]
    pub fn argmax(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::ArgMax, &[dim], keepdim, Location::caller())
    }

    #[track_caller]
    pub fn argmin(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::ArgMin, &[dim], keepdim, Location::caller())
    }

    /// Unbiased variance over `dims` (PyTorch's default `correction=1`).
    #[track_caller]
    pub fn var(&self, dims: impl Dims, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Var(1), &dims.to_dims(), keepdim, Location::caller())
    }

    /// Variance with an explicit correction (0 = population variance).
    #[track_caller]
    pub fn var_with_correction(&self, dims: impl Dims, correction: usize, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Var(correction), &dims.to_dims(), keepdim, Location::caller())
    }

    /// Sum of every element, as a 0-dim tensor.
    #[track_caller]
    pub fn sum_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, &all_dims(self), false, Location::caller())
    }

    #[track_caller]
    pub fn mean_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, &all_dims(self), false, Location::caller())
    }

    #[track_caller]
    pub fn max_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, &all_dims(self), false, Location::caller())
    }

    #[track_caller]
    pub fn min_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Min, &all_dims(self), false, Location::caller())
    }

    fn reduce(&self, kind: ReduceOp, dims: &[isize], keepdim: bool, location: Loc) -> Result<Tensor> {
        let op = kind.name();
        let mut dims = check::dims(op, self, dims, location)?;
        if self.rank() == 0 {
            // PyTorch: dim 0 (or -1) of a scalar is a reduction over no dim, which leaves the value.
            dims.clear();
        }
        let out_dtype = match kind {
            ReduceOp::Sum if !self.dtype().is_float() => DType::I64,
            ReduceOp::Mean | ReduceOp::Var(_) => check::float(op, self, location)?,
            ReduceOp::ArgMax | ReduceOp::ArgMin => DType::I64,
            ReduceOp::Max | ReduceOp::Min => {
                check::numeric(op, self, location)?;
                self.dtype()
            }
            ReduceOp::Sum => self.dtype(),
        };
        let group: usize = dims.iter().map(|&d| self.shape()[d]).product();
        let needs_elements = !matches!(kind, ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Var(_));
        if group == 0 && needs_elements {
            return Err(check::invalid(
                op,
                format!("cannot take `{op}` over an empty dim of shape {}", fmt_shape(self.shape())),
                "`max`/`min`/`argmax`/`argmin` need at least one element per group",
                location,
            ));
        }
        if self.is_contiguous() && !crate::backend::reduction_layout(self.layout(), &dims).is_contiguous() {
            // The CPU kernel moves the reduced dims last, copying the input (a strided input is
            // a copy `compute` checks already).
            crate::tensor::ensure_host_scratch(op, location, &[self], self.nbytes())?;
        }
        let mut shape = Vec::with_capacity(self.rank());
        for (d, &n) in self.shape().iter().enumerate() {
            if !dims.contains(&d) {
                shape.push(n);
            } else if keepdim {
                shape.push(1);
            }
        }
        let storage = compute(
            op,
            location,
            &[self],
            (&shape, out_dtype),
            |s| s[0].reduce(kind, self.layout(), &dims),
            |s| s[0].reduce_dims(kind, self.layout(), &dims),
        )?;
        let out = self.derived(storage, &shape, out_dtype, op, location);
        Ok(record(out, &[self], |out| match kind {
            ReduceOp::Max | ReduceOp::Min => {
                GradFn::MaxMin { input: self.clone(), out: out.detach(), dims: dims.clone(), keepdim }
            }
            ReduceOp::Var(correction) => {
                GradFn::Var { input: self.clone(), dims: dims.clone(), keepdim, correction }
            }
            _ => GradFn::SumMean {
                shape: self.shape().to_vec(),
                scale: (kind == ReduceOp::Mean).then(|| 1.0 / group as f64),
                dims: dims.clone(),
                keepdim,
            },
        }))
    }
}

fn all_dims(t: &Tensor) -> Vec<isize> {
    (0..t.rank() as isize).collect()
}
