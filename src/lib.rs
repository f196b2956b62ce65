//! devcheck: a tensor runtime, checker and linter that make device placement checkable.
//!
//! Every tensor knows its [`Device`] and its [`Origin`] (the file:line:column where it was made),
//! and every op checks its operands in one place before any backend runs, so a device mismatch
//! names both tensors, where each was created, and how to fix it.

pub mod cuda;
pub mod device;
pub mod dtype;
pub mod error;
pub mod lint;
pub mod shape;
pub mod tensor;

pub use device::{Device, default_device, set_default_device};
pub use dtype::{DType, WithDType};
pub use error::{Error, Result};
pub use tensor::Origin;
