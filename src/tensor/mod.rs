//! Tensors: a cheap handle over shared storage that knows its device and where it was made.

mod origin;

pub use origin::Origin;
