//! Backends compute; they never see names, origins or mismatched devices. The op front end in
//! `src/tensor/` checks everything first and attaches origins to the results.
//!
//! This file is the CPU backend's one entry point. `cpu/` is a private module, so the layers
//! above (the op front end, autograd, the optimizers, the checkpoint reader) can use of it only
//! what is re-exported here: [`CpuStorage`], whose methods are the CPU kernel of every op, the
//! types and functions of the window ops and the optimizer updates, and the host-memory checks.
//! Why one door: this list is everything the runtime depends on in the CPU backend, the compiler
//! keeps it that way, and a kernel can change how it runs (threads, SIMD dispatch, its buffer
//! pool, strided walks) without any caller changing. The CUDA backend (`cuda/`) has its own
//! surface, [`crate::cuda`]; both run the ops declared in `op.rs`.

mod cpu;
pub(crate) mod cuda;
pub(crate) mod fake;
pub(crate) mod op;

pub(crate) use cpu::{
    AdamStep, ConvShape, CpuStorage, SgdStep, WindowGeometry, begin_kernel, conv2d, conv2d_input_grad,
    conv2d_output_grad, conv2d_weight_grad, ensure_room, reduction_layout, try_vec,
};
