//! The rules for PyTorch code, one file each (`d001_tensor_on_fixed_device.rs`, named as the Rust
//! rule of the same code), with its docs in a Markdown file of the same name (the `## In PyTorch
//! code` part of `devcheck explain`). Which rules exist, and which of them check Python, is the
//! rule table's ([`crate::registry`]); this module loads them and calls the enabled ones. Shared
//! logic lives in [`helpers`]; whether a value is on the device, for the index checks of D001 and
//! D004, in [`device_evidence`].

pub(crate) mod device_evidence;
pub(crate) mod helpers;

/// D005's notion of a value the host needs at once, also what a call to another file's function
/// tells that file ([`super::project`]).
pub(crate) use d005_host_round_trip_in_loop::result_needed_on_host;
/// D010's notion of a file that runs without an accelerator, asked of every file of the project.
pub(crate) use d010_load_without_map_location::names_cpu_path;

use ruff_python_ast::{Expr, Stmt};

use super::checker::{Checker, Reads, Rule};
use crate::diagnostic::Finding;

/// Something to do with each enabled rule. The walk calls the rules through it with each rule's
/// own type: no `dyn` call per node, and a rule's early return (most nodes are not what it looks
/// for) is inlined into the walk.
trait EachRule {
    fn rule<R: Rule>(&mut self, rule: &mut R, bit: u32);
}

/// The Python rules of the table: their modules, and [`Rules`] (every rule's per-file state, a
/// bit per rule for the enabled ones, in code order).
macro_rules! python_rules {
    ($(
        $code:ident $ty:ident {
            name: $name:literal,
            group: $group:ident,
            fix: $fix:ident,
            summary: $summary:literal,
            $(rust: $rust:ident ($($rust_status:tt)*),)?
            $(python: $python:ident ($($python_status:tt)*),)?
        }
    )*) => {
        $($(mod $python;)?)*

        /// Every rule's per-file state and which rules are enabled.
        #[derive(Default)]
        pub(crate) struct Rules {
            /// Bit `i`: the `i`-th rule in code order is enabled.
            on: u32,
            $($($python: $python::Check,)?)*
        }

        /// The codes of the rules in [`Rules`]' order.
        const CODES: &[&str] = &[$($({ let _ = stringify!($python); stringify!($code) },)?)*];

        impl Rules {
            /// Calls `op` with each rule whose bit is set in `bits`, in code order.
            #[inline(always)]
            fn each(&mut self, bits: u32, op: &mut impl EachRule) {
                let mut bit = 1u32;
                $($(
                    if bits & bit != 0 {
                        op.rule(&mut self.$python, bit);
                    }
                    bit <<= 1;
                )?)*
                let _ = bit;
            }
        }
    };
}

crate::registry::with_rules!(python_rules);

impl Rules {
    /// Fresh per-file state, with the rules `enabled` says yes to.
    pub(crate) fn enabled(enabled: &dyn Fn(&str) -> bool) -> Rules {
        let on = CODES.iter().enumerate().filter(|(_, c)| enabled(c)).fold(0, |on, (i, _)| on | 1 << i);
        Rules { on, ..Rules::default() }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.on == 0
    }

    /// The enabled rules whose [`Rule::reads`] meets `reads`, a bit each.
    pub(crate) fn readers(&mut self, reads: Reads) -> u32 {
        struct Readers(Reads, u32);
        impl EachRule for Readers {
            fn rule<R: Rule>(&mut self, rule: &mut R, bit: u32) {
                if rule.reads().meets(self.0) {
                    self.1 |= bit;
                }
            }
        }
        let mut readers = Readers(reads, 0);
        self.each(self.on, &mut readers);
        readers.1
    }

    /// The enabled rules' [`Rule::calls`], with each rule's bit.
    pub(crate) fn calls(&mut self) -> Vec<(&'static str, u32)> {
        struct Calls(Vec<(&'static str, u32)>);
        impl EachRule for Calls {
            fn rule<R: Rule>(&mut self, rule: &mut R, bit: u32) {
                self.0.extend(rule.calls().iter().map(|&name| (name, bit)));
            }
        }
        let mut calls = Calls(Vec::new());
        self.each(self.on, &mut calls);
        calls.0
    }

    #[inline]
    pub(crate) fn stmt(&mut self, bits: u32, cx: &Checker<'_, '_>, stmt: &Stmt, out: &mut Vec<Finding>) {
        struct Visit<'c, 'm, 'a, 'n, 'o>(&'c Checker<'m, 'a>, &'n Stmt, &'o mut Vec<Finding>);
        impl EachRule for Visit<'_, '_, '_, '_, '_> {
            #[inline(always)]
            fn rule<R: Rule>(&mut self, rule: &mut R, _bit: u32) {
                rule.stmt(self.0, self.1, self.2);
            }
        }
        self.each(bits, &mut Visit(cx, stmt, out));
    }

    #[inline]
    pub(crate) fn expr(&mut self, bits: u32, cx: &Checker<'_, '_>, expr: &Expr, out: &mut Vec<Finding>) {
        struct Visit<'c, 'm, 'a, 'n, 'o>(&'c Checker<'m, 'a>, &'n Expr, &'o mut Vec<Finding>);
        impl EachRule for Visit<'_, '_, '_, '_, '_> {
            #[inline(always)]
            fn rule<R: Rule>(&mut self, rule: &mut R, _bit: u32) {
                rule.expr(self.0, self.1, self.2);
            }
        }
        self.each(bits, &mut Visit(cx, expr, out));
    }

    #[inline]
    pub(crate) fn test(&mut self, bits: u32, cx: &Checker<'_, '_>, test: &Expr, out: &mut Vec<Finding>) {
        struct Visit<'c, 'm, 'a, 'n, 'o>(&'c Checker<'m, 'a>, &'n Expr, &'o mut Vec<Finding>);
        impl EachRule for Visit<'_, '_, '_, '_, '_> {
            #[inline(always)]
            fn rule<R: Rule>(&mut self, rule: &mut R, _bit: u32) {
                rule.test(self.0, self.1, self.2);
            }
        }
        self.each(bits, &mut Visit(cx, test, out));
    }

    pub(crate) fn finish(&mut self, cx: &Checker<'_, '_>, out: &mut Vec<Finding>) {
        struct Finish<'c, 'm, 'a, 'o>(&'c Checker<'m, 'a>, &'o mut Vec<Finding>);
        impl EachRule for Finish<'_, '_, '_, '_> {
            fn rule<R: Rule>(&mut self, rule: &mut R, _bit: u32) {
                rule.finish(self.0, self.1);
            }
        }
        self.each(self.on, &mut Finish(cx, out));
    }
}
