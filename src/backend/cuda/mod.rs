//! The CUDA backend, on cudarc with the driver, NVRTC and cuBLAS loaded at run time: a build of
//! devcheck runs everywhere, and on a machine without them every entry point returns an error
//! that says what is missing instead of panicking.
//!
//! - [`kernels`]: the `.cu` modules under `kernels/`, embedded, with the name of every kernel,
//!   and [`kernels::check_all`], which compiles all of them for an architecture without a GPU;
//! - [`nvrtc`]: finding NVRTC and compiling one module.

pub mod allocator;
pub mod kernels;
pub mod nvrtc;

mod error;

pub use error::{CudaError, CudaResult};
