//! The rules for Rust code, one file each (`d001_tensor_on_fixed_device.rs`), with its docs in a
//! Markdown file of the same name (what `devcheck explain` prints). Which rules exist, and which
//! of them check Rust, is the rule table's ([`crate::registry`]); this module only loads them.

use super::walker::Rule;

/// The Rust rules of the table: their modules and [`checks`].
macro_rules! rust_rules {
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
        $($(mod $rust;)?)*

        /// Fresh per-file state for every enabled rule, in code order.
        pub(crate) fn checks(enabled: &dyn Fn(&str) -> bool) -> Vec<Box<dyn Rule>> {
            let mut checks: Vec<Box<dyn Rule>> = Vec::new();
            $($(
                if enabled(stringify!($code)) {
                    checks.push(Box::<$rust::Check>::default());
                }
            )?)*
            checks
        }
    };
}

crate::registry::with_rules!(rust_rules);
