//! The compute ops' front end, one file per kind of op: each checks its operands in `check.rs`
//! first (devices, dtypes, shapes), then runs the CPU kernel (a method of `CpuStorage`, in
//! `src/backend/cpu/`) or the CUDA launcher (a method of `CudaStorage`) through `compute`, or only
//! computes the result's shape for fake tensors, and records the op for autograd.

mod binary;
mod compare;
mod matmul;
mod reduce;
mod scalar;
mod select;
mod softmax;
mod unary;

use std::panic::Location;

use crate::backend::cuda::CudaError;
use crate::backend::op::BinaryOp;
use crate::dtype::DType;

type Loc = &'static Location<'static>;

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
