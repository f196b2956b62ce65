//! Compute ops: element-wise, matmul, reductions, softmax, selection. Each checks its operands in
//! `check` first, then runs the backend (or only computes the shape, for fake tensors).

use std::panic::Location;

use super::{Storage, Tensor, check, compute, cuda_error};
use crate::autograd::{GradFn, record};
use crate::backend::CpuStorage;
use crate::backend::cuda::CudaError;
use crate::backend::op::{BinaryOp, CmpOp, LogicalOp, ReduceOp, UnaryOp};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::{Layout, fmt_shape};

type Loc = &'static Location<'static>;

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
    // ---- element-wise binary -------------------------------------------------------------

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

    // ---- with a Rust scalar ----------------------------------------------------------------

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

    // ---- comparisons --------------------------------------------------------------------

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

    // ---- unary ----------------------------------------------------------------------------

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

    // ---- matmul ---------------------------------------------------------------------------

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
            super::ensure_host_scratch(op, location, &[self, rhs], f32_copies)?;
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

    // ---- reductions -----------------------------------------------------------------------

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
            super::ensure_host_scratch(op, location, &[self], self.nbytes())?;
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

    // ---- softmax --------------------------------------------------------------------------

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

    // ---- selection ------------------------------------------------------------------------

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

/// Integer `pow` has no GPU kernel (the kernels compute powers in floating point).
fn gpu_has_kernel(
    op: BinaryOp,
    dtype: DType,
    device: crate::Device,
    location: Loc,
) -> std::result::Result<(), CudaError> {
    if op == BinaryOp::Pow && !dtype.is_float() {
        return Err(gpu_unsupported(
            "pow",
            "integer powers run on the CPU only; cast to a float dtype first (`x.to_dtype(DType::F32)`)",
            device,
            location,
        ));
    }
    Ok(())
}

fn gpu_unsupported(op: &'static str, help: &str, device: crate::Device, location: Loc) -> CudaError {
    crate::error::Error::Unsupported { op, device, help: help.to_string(), location }.into()
}

fn all_dims(t: &Tensor) -> Vec<isize> {
    (0..t.rank() as isize).collect()
}

/// Strides of an operand promoted to a matrix by matmul: a 1-D lhs is a row (`dim` = 1 adds a
/// leading dim), a 1-D rhs a column (`dim` = 2 adds a trailing dim).
fn promoted_strides(t: &Tensor, dim: usize) -> Vec<usize> {
    if t.rank() != 1 {
        return t.stride().to_vec();
    }
    if dim == 1 { vec![0, t.stride()[0]] } else { vec![t.stride()[0], 0] }
}
