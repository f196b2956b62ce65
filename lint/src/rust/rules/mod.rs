//! The rules, one file each. A rule's doc comment is its `devcheck explain` text.

mod d001_tensor_on_fixed_device;
mod d002_hardcoded_accelerator;
mod d003_discarded_transfer;
mod d004_unmoved_tensor_field;
mod d005_host_round_trip_in_loop;
mod d006_empty_cache_in_loop;
mod d007_unsynchronized_timing;

pub use d001_tensor_on_fixed_device::D001TensorOnFixedDevice;
pub use d002_hardcoded_accelerator::D002HardcodedAccelerator;
pub use d003_discarded_transfer::D003DiscardedTransfer;
pub use d004_unmoved_tensor_field::D004UnmovedTensorField;
pub use d005_host_round_trip_in_loop::D005HostRoundTripInLoop;
pub use d006_empty_cache_in_loop::D006EmptyCacheInLoop;
pub use d007_unsynchronized_timing::D007UnsynchronizedTiming;

use super::walker::Check;

/// Fresh per-file state for every enabled rule.
pub(crate) fn checks(enabled: &dyn Fn(&str) -> bool) -> Vec<Box<dyn Check>> {
    let mut checks: Vec<Box<dyn Check>> = Vec::new();
    if enabled(D001TensorOnFixedDevice::META.code) {
        checks.push(Box::<d001_tensor_on_fixed_device::Check001>::default());
    }
    if enabled(D002HardcodedAccelerator::META.code) {
        checks.push(Box::<d002_hardcoded_accelerator::Check002>::default());
    }
    if enabled(D003DiscardedTransfer::META.code) {
        checks.push(Box::<d003_discarded_transfer::Check003>::default());
    }
    if enabled(D004UnmovedTensorField::META.code) {
        checks.push(Box::<d004_unmoved_tensor_field::Check004>::default());
    }
    if enabled(D005HostRoundTripInLoop::META.code) {
        checks.push(Box::<d005_host_round_trip_in_loop::Check005>::default());
    }
    if enabled(D006EmptyCacheInLoop::META.code) {
        checks.push(Box::<d006_empty_cache_in_loop::Check006>::default());
    }
    if enabled(D007UnsynchronizedTiming::META.code) {
        checks.push(Box::<d007_unsynchronized_timing::Check007>::default());
    }
    checks
}
