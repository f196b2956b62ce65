//! Matrix products with PyTorch's `matmul` rules: 1-D operands promoted, batch dims broadcast.

use std::panic::Location;

use crate::autograd::{GradFn, record};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::{Layout, fmt_shape};
use crate::tensor::{Tensor, check, compute};

impl Tensor {
    /// Matrix product with PyTorch's `matmul` rules: 1-D operands are promoted (and the added dim
    /// removed again), leading batch dims broadcast.
    #[track_caller]
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        let location = Location::caller();
        let op = "matmul";
        let operands = [("lhs", self), ("rhs", rhs)];
        check::same_device(op, &operands, location)?;
        let dtype = check::same_dtype(op, &operands, location)?;
        check::numeric(op, self, location)?;
        if self.rank() == 0 || rhs.rank() == 0 {
            return Err(check::shape_error(
                op,
                "both operands need at least one dim".to_string(),
                "multiply by a scalar with `mul`/`mul_scalar` instead",
                &operands,
                location,
            ));
        }
        // Promote 1-D operands to matrices.
        let a = if self.rank() == 1 { vec![1, self.shape()[0]] } else { self.shape().to_vec() };
        let b = if rhs.rank() == 1 { vec![rhs.shape()[0], 1] } else { rhs.shape().to_vec() };
        let (m, k) = (a[a.len() - 2], a[a.len() - 1]);
        let (k2, n) = (b[b.len() - 2], b[b.len() - 1]);
        if k != k2 {
            return Err(check::shape_error(
                op,
                format!(
                    "{} @ {}: the inner dims differ ({k} vs {k2})",
                    fmt_shape(self.shape()),
                    fmt_shape(rhs.shape())
                ),
                "lhs's last dim must equal rhs's second-to-last; transpose one side (`.t()`) if you meant the other orientation",
                &operands,
                location,
            ));
        }
        let batch =
            crate::shape::broadcast_shapes(&a[..a.len() - 2], &b[..b.len() - 2]).ok_or_else(|| {
                check::shape_error(
                    op,
                    format!(
                        "batch dims {} and {} cannot be broadcast together",
                        fmt_shape(&a[..a.len() - 2]),
                        fmt_shape(&b[..b.len() - 2])
                    ),
                    "the leading dims must be equal or 1",
                    &operands,
                    location,
                )
            })?;
        let mut full_a = batch.clone();
        full_a.extend([m, k]);
        let mut full_b = batch.clone();
        full_b.extend([k, n]);
        let mut out_shape = batch.clone();
        if self.rank() > 1 {
            out_shape.push(m);
        }
        if rhs.rank() > 1 {
            out_shape.push(n);
        }
        // Broadcast batch dims can multiply into a result (or operand view) no machine can hold.
        for shape in [&out_shape, &full_a, &full_b] {
            check::valid_shape(op, shape, dtype, location)?;
        }
        let la =
            Layout { shape: a.clone(), strides: promoted_strides(self, 1), offset: self.layout().offset };
        let lb = Layout { shape: b.clone(), strides: promoted_strides(rhs, 2), offset: rhs.layout().offset };
        let (la, lb) = (la.broadcast_to(&full_a), lb.broadcast_to(&full_b));
        if dtype == DType::BF16 {
            // gemm has no bf16 kernel: the CPU one computes on f32 copies of both operand views.
            let f32_copies = la.numel().saturating_add(lb.numel()).saturating_mul(4);
            crate::tensor::ensure_host_scratch(op, location, &[self, rhs], f32_copies)?;
        }
        let storage = compute(
            op,
            location,
            &[self, rhs],
            (&out_shape, dtype),
            |s| s[0].matmul(&la, s[1], &lb),
            |s| s[0].matmul(&la, s[1], &lb, (batch.iter().product(), m, n, k)),
        )?;
        let out = self.derived(storage, &out_shape, dtype, op, location);
        Ok(record(out, &[self, rhs], |_| GradFn::Matmul { lhs: self.clone(), rhs: rhs.clone() }))
    }

    /// Alias of [`Tensor::matmul`].
    #[track_caller]
    pub fn mm(&self, rhs: &Tensor) -> Result<Tensor> {
        self.matmul(rhs)
    }
}

/// Strides of an operand promoted to a matrix by matmul: a 1-D lhs is a row (`dim` = 1 adds a
/// leading dim), a 1-D rhs a column (`dim` = 2 adds a trailing dim).
fn promoted_strides(t: &Tensor, dim: usize) -> Vec<usize> {
    if t.rank() != 1 {
        return t.stride().to_vec();
    }
    if dim == 1 { vec![0, t.stride()[0]] } else { vec![t.stride()[0], 0] }
}
