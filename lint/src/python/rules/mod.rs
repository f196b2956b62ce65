//! The rules for PyTorch code, one file each. A rule shared with Rust (D001..D007) keeps its code
//! and name and adds its PyTorch docs and status here ([`PythonSide`]); the PyTorch-only rules
//! (D008..D010) are declared here whole. Shared logic lives in [`helpers`].

pub(crate) mod helpers;

mod d001_tensor_on_fixed_device;
mod d002_hardcoded_accelerator;
mod d003_discarded_transfer;
mod d004_unmoved_tensor_field;
mod d005_host_sync_in_loop;
mod d006_empty_cache_in_loop;
mod d007_unsynchronized_timing;
mod d008_host_conversion_of_device_tensor;
mod d009_ineffective_non_blocking;
mod d010_load_without_map_location;

pub use d001_tensor_on_fixed_device::D001Torch;
pub use d002_hardcoded_accelerator::D002Torch;
pub use d003_discarded_transfer::D003Torch;
pub use d004_unmoved_tensor_field::D004Torch;
pub use d005_host_sync_in_loop::D005Torch;
pub use d006_empty_cache_in_loop::D006Torch;
pub use d007_unsynchronized_timing::D007Torch;
pub use d008_host_conversion_of_device_tensor::D008HostConversionOfDeviceTensor;
pub use d009_ineffective_non_blocking::D009IneffectiveNonBlocking;
pub use d010_load_without_map_location::D010LoadWithoutMapLocation;

use crate::registry::PythonSide;

use super::checker::Rule;

/// Declares the PyTorch side of a rule shared with Rust: its doc comment is the `## In PyTorch
/// code` part of `devcheck explain`.
macro_rules! python_side {
    (
        $(#[doc = $doc:literal])+
        pub struct $ty:ident {
            code: $code:literal
            $(, preview: $why:expr)? $(,)?
        }
    ) => {
        $(#[doc = $doc])+
        pub struct $ty;

        impl $ty {
            pub const SIDE: $crate::registry::PythonSide =
                $crate::registry::PythonSide::new($code, concat!($($doc, "\n"),+))$(.preview($why))?;
        }
    };
}
pub(crate) use python_side;

/// The PyTorch sides of the rules shared with Rust, in code order.
pub static SIDES: [&PythonSide; 7] = [
    &D001Torch::SIDE,
    &D002Torch::SIDE,
    &D003Torch::SIDE,
    &D004Torch::SIDE,
    &D005Torch::SIDE,
    &D006Torch::SIDE,
    &D007Torch::SIDE,
];

/// Why a Python rule that reported nothing on the ecosystem check stays in preview.
pub(crate) const NOT_MEASURED: &str = "It reported nothing in the Python files of the ecosystem check (24 public PyTorch repositories, and the .py files of the Rust ones), so its precision on real code is not measured yet.";

/// Fresh per-file state for every enabled rule.
pub(crate) fn enabled(enabled: &dyn Fn(&str) -> bool) -> Vec<Box<dyn Rule>> {
    let mut rules: Vec<Box<dyn Rule>> = Vec::with_capacity(10);
    if enabled("D001") {
        rules.push(Box::<d001_tensor_on_fixed_device::Check>::default());
    }
    if enabled("D002") {
        rules.push(Box::<d002_hardcoded_accelerator::Check>::default());
    }
    if enabled("D003") {
        rules.push(Box::<d003_discarded_transfer::Check>::default());
    }
    if enabled("D004") {
        rules.push(Box::<d004_unmoved_tensor_field::Check>::default());
    }
    if enabled("D005") {
        rules.push(Box::<d005_host_sync_in_loop::Check>::default());
    }
    if enabled("D006") {
        rules.push(Box::<d006_empty_cache_in_loop::Check>::default());
    }
    if enabled("D007") {
        rules.push(Box::<d007_unsynchronized_timing::Check>::default());
    }
    if enabled(D008HostConversionOfDeviceTensor::META.code) {
        rules.push(Box::<d008_host_conversion_of_device_tensor::Check>::default());
    }
    if enabled(D009IneffectiveNonBlocking::META.code) {
        rules.push(Box::<d009_ineffective_non_blocking::Check>::default());
    }
    if enabled(D010LoadWithoutMapLocation::META.code) {
        rules.push(Box::<d010_load_without_map_location::Check>::default());
    }
    rules
}
