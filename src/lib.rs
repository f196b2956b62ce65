//! devcheck: a tensor runtime and checker that make device placement checkable (the linter is
//! the `devcheck-lint` crate, the command the `devcheck-cli` crate).
//!
//! Every tensor knows its [`Device`] and its [`Origin`] (the file:line:column where it was made),
//! and every op checks its operands in one place before any backend runs, so a device mismatch
//! names both tensors, where each was created, and how to fix it.

// Generated `#[derive(Module)]` code names `::devcheck`; this makes that path work inside the crate.
extern crate self as devcheck;

pub mod autograd;
mod backend;
pub mod check;
pub mod checkpoint;
pub mod cuda;
pub mod data;
pub mod device;
pub mod dtype;
pub mod error;
pub mod module;
pub mod nn;
pub mod optim;
pub mod random;
pub mod shape;
pub mod tensor;
pub mod units;

/// Dry runs without data: while a scope from [`fake::enter`] is alive on a thread, every tensor
/// created or moved on it is fake (device, dtype, shape and origin; no element data), so device
/// placement can be checked for any `cuda:N` on a machine without a GPU.
pub mod fake {
    pub use crate::backend::fake::{FakeScope, enter, is_active};
}

pub use autograd::{enable_grad, is_grad_enabled, no_grad};
pub use check::{check_forward, inspect, trace};
pub use device::{Device, default_device, set_default_device};
pub use dtype::{DType, WithDType};
pub use error::{Error, Result};
pub use module::{Module, Param};
pub use random::manual_seed;
pub use tensor::{
    BinaryOp, CmpOp, LogicalOp, Origin, SkippedField, Tensor, TensorOptions, TensorRole, UnaryOp,
};
