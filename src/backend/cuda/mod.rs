//! The CUDA backend, on cudarc with the driver, NVRTC and cuBLAS loaded at run time: a build of
//! devcheck runs everywhere, and on a machine without them every entry point returns an error
//! that says what is missing instead of panicking. The public surface is `devcheck::cuda`.
//!
//! - [`registry`]: the kernel registry, the `.cu` modules under `kernels/`, embedded, with the
//!   name of every kernel, and [`registry::check_all`], which compiles all of them for an
//!   architecture without a GPU (the op enums in `src/backend/op.rs` name the kernels they launch);
//! - [`nvrtc`]: finding NVRTC and compiling one module;
//! - [`allocator`]: the caching allocator, generic over the driver's allocation calls;
//! - [`host_allocator`]: the caching allocator of pinned host memory, and what may still use a
//!   pinned buffer;
//! - `device`: per-device context, stream, kernel cache, allocator and cuBLAS;
//! - `storage`: [`CudaStorage`], host↔device copies, pinned memory, kernel launchers;
//! - `blas`: matmul through cuBLAS;
//! - `reduce`: reductions and their launch plan.

pub mod allocator;
pub mod host_allocator;
pub mod nvrtc;
pub mod registry;

mod blas;
pub(crate) mod device;
mod error;
mod reduce;
mod storage;

pub use device::{CudaDevice, DeviceBuffer};
pub use error::{CudaError, CudaResult};
pub use storage::{CudaStorage, PinnedBuffer};
