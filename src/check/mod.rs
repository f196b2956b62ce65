//! The checker and debugger: where every tensor of a model lives, what a forward pass would do
//! on a device you do not have, and what a real run copies between devices.
//!
//! * [`inspect`]: the inventory of a model (path, kind, device, dtype, shape, bytes), totals per
//!   device, and findings for tensors off the model's device and skipped fields.
//! * [`check_forward`]: a dry run of forward, or of a training step, on a fake device (any
//!   `cuda:N`, no GPU, no element data), reporting tensors created off the target, device
//!   mismatches and host reads, each with the line to fix.
//! * [`trace`]: the transfer ledger of a real run: copies, syncs and allocations per device, with
//!   round trips, repeated uploads and syncs in loops.
//! * [`assert_on_device!`](crate::assert_on_device) and
//!   [`assert_forward_clean!`](crate::assert_forward_clean) for test suites.
//! * [`inspect_checkpoint`]: the tensors of a safetensors file and where they load.
//!
//! Every report has a `Display` summary, `to_json()`, `render(width)` (the full miette report)
//! and `ensure_clean()`, which turns problems into [`crate::Error::Check`] for `?`:
//!
//! ```
//! use devcheck::check::Input;
//! use devcheck::{DType, Device, Module, Param, Tensor};
//!
//! #[derive(Module)]
//! struct Net { weight: Param }
//!
//! fn dry_run() -> devcheck::Result<()> {
//!     let mut net = Net { weight: Param::new(Tensor::ones([3, 2], &Device::Cpu)?) };
//!     devcheck::check_forward(&mut net, &[Input::new("x", [4, 3], DType::F32)], &Device::Cuda(0), |net, x| {
//!         x[0].matmul(&net.weight.tensor())
//!     })?
//!     .ensure_clean()?;
//!     Ok(())
//! }
//! dry_run().unwrap();
//! ```

#[doc(hidden)]
pub mod assert;
mod checkpoint;
mod forward;
mod inventory;
mod ledger;
pub(crate) mod recorder;
mod report;

pub use checkpoint::{CheckpointInventory, CheckpointTensor, LoadTarget, inspect_checkpoint};
pub use forward::{ForwardReport, Input, check_forward};
pub use inventory::{DeviceTotals, Inventory, InventoryRow, TensorFacts, inspect};
pub use ledger::{Allocations, HostRead, SYNC_REPEATS, TraceReport, Transfer, trace};
pub use report::{CheckError, Finding, Severity, fmt_bytes, fmt_count};
