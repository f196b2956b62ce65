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

use ruff_python_ast::{Expr, Stmt};

use crate::diagnostic::Finding;

use super::checker::{Checker, Reads, Rule};

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
pub(crate) const NOT_MEASURED: &str = "It reported nothing in the Python files of the ecosystem check (36 public PyTorch repositories, and the .py files of the Rust ones), so its precision on real code is not measured yet.";

/// Every rule's per-file state and which rules are enabled. The walk calls the enabled rules
/// directly, in code order ([`each_rule!`]): no `dyn` call per node, and a rule's early return
/// (most nodes are not what it looks for) is inlined into the walk.
#[derive(Default)]
pub(crate) struct Rules {
    /// Bit `i`: the `i`-th rule in code order is enabled.
    on: u32,
    d001: d001_tensor_on_fixed_device::Check,
    d002: d002_hardcoded_accelerator::Check,
    d003: d003_discarded_transfer::Check,
    d004: d004_unmoved_tensor_field::Check,
    d005: d005_host_sync_in_loop::Check,
    d006: d006_empty_cache_in_loop::Check,
    d007: d007_unsynchronized_timing::Check,
    d008: d008_host_conversion_of_device_tensor::Check,
    d009: d009_ineffective_non_blocking::Check,
    d010: d010_load_without_map_location::Check,
}

/// Runs `$body` with `$r` bound to each rule of `$rules` whose bit is set in `$bits` (and `$bit`
/// to that bit), in code order.
macro_rules! each_rule {
    ($rules:expr, $bits:expr, |$r:ident, $bit:ident| $body:expr) => {{
        let bits: u32 = $bits;
        let rules: &mut Rules = $rules;
        each_rule!(@ rules, bits, $r, $bit, $body;
            0 d001, 1 d002, 2 d003, 3 d004, 4 d005, 5 d006, 6 d007, 7 d008, 8 d009, 9 d010);
    }};
    (@ $rules:ident, $bits:ident, $r:ident, $bit:ident, $body:expr; $($i:literal $field:ident),+) => {
        $(
            if $bits & (1 << $i) != 0 {
                let $bit: u32 = 1 << $i;
                let $r = &mut $rules.$field;
                $body;
            }
        )+
    };
}

/// The codes of the rules in [`Rules`]' order.
const CODES: [&str; 10] = ["D001", "D002", "D003", "D004", "D005", "D006", "D007", "D008", "D009", "D010"];

impl Rules {
    /// Fresh per-file state, with the rules `enabled` says yes to.
    pub(crate) fn enabled(enabled: &dyn Fn(&str) -> bool) -> Rules {
        debug_assert_eq!(CODES[7], D008HostConversionOfDeviceTensor::META.code);
        debug_assert_eq!(CODES[8], D009IneffectiveNonBlocking::META.code);
        debug_assert_eq!(CODES[9], D010LoadWithoutMapLocation::META.code);
        let on = CODES.iter().enumerate().filter(|(_, c)| enabled(c)).fold(0, |on, (i, _)| on | 1 << i);
        Rules { on, ..Rules::default() }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.on == 0
    }

    /// The enabled rules whose [`Rule::reads`] meets `reads`, a bit each.
    pub(crate) fn readers(&mut self, reads: Reads) -> u32 {
        let mut readers = 0;
        each_rule!(self, self.on, |r, bit| if r.reads().meets(reads) {
            readers |= bit
        });
        readers
    }

    /// The enabled rules' [`Rule::calls`], with each rule's bit.
    pub(crate) fn calls(&mut self) -> Vec<(&'static str, u32)> {
        let mut calls = Vec::new();
        each_rule!(self, self.on, |r, bit| calls.extend(r.calls().iter().map(|&name| (name, bit))));
        calls
    }

    #[inline]
    pub(crate) fn stmt(&mut self, bits: u32, cx: &Checker<'_, '_>, stmt: &Stmt, out: &mut Vec<Finding>) {
        each_rule!(self, bits, |r, _bit| r.stmt(cx, stmt, out));
    }

    #[inline]
    pub(crate) fn expr(&mut self, bits: u32, cx: &Checker<'_, '_>, expr: &Expr, out: &mut Vec<Finding>) {
        each_rule!(self, bits, |r, _bit| r.expr(cx, expr, out));
    }

    #[inline]
    pub(crate) fn test(&mut self, bits: u32, cx: &Checker<'_, '_>, test: &Expr, out: &mut Vec<Finding>) {
        each_rule!(self, bits, |r, _bit| r.test(cx, test, out));
    }

    pub(crate) fn finish(&mut self, cx: &Checker<'_, '_>, out: &mut Vec<Finding>) {
        each_rule!(self, self.on, |r, _bit| r.finish(cx, out));
    }
}
