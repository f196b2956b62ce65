//! Softmax and log-softmax along one dim, computed stably.

use std::panic::Location;

use super::Loc;
use crate::autograd::{GradFn, record};
use crate::error::Result;
use crate::tensor::{Tensor, check, compute};

impl Tensor {
    /// Softmax along `dim`, computed stably (max-subtracted).
    #[track_caller]
    pub fn softmax(&self, dim: isize) -> Result<Tensor> {
        self.softmax_impl(dim, false, Location::caller())
    }

    /// Log-softmax along `dim` (log-sum-exp, stable).
    #[track_caller]
    pub fn log_softmax(&self, dim: isize) -> Result<Tensor> {
        self.softmax_impl(dim, true, Location::caller())
    }

    fn softmax_impl(&self, dim: isize, log: bool, location: Loc) -> Result<Tensor> {
        let op = if log { "log_softmax" } else { "softmax" };
        check::float(op, self, location)?;
        let d = check::dim(op, self, dim, location)?;
        if self.rank() == 0 {
            return self.reshape([1])?.softmax_impl(0, log, location)?.reshape_at([], location);
        }
        let last = self.rank() - 1;
        // Rows along `dim`: move it last, compute on contiguous rows, move it back.
        let moved = if d == last { self.clone() } else { self.transpose_at(d, last)? };
        let storage = compute(
            op,
            location,
            &[&moved],
            (moved.shape(), self.dtype()),
            |s| s[0].softmax(moved.layout(), log),
            |s| s[0].softmax(moved.layout(), log),
        )?;
        let out = moved.derived(storage, moved.shape(), self.dtype(), op, location);
        let out = record(out, &[&moved], |out| GradFn::Softmax { out: out.detach(), dim: last, log });
        if d == last { Ok(out) } else { out.transpose_at(d, last) }
    }
}
