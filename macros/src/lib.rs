//! `#[derive(Module)]` for devcheck.
//!
//! Use it through `devcheck::Module`; the trait's documentation describes what the derive
//! generates and which field types it accepts. The classification of fields lives in
//! `devcheck-classify`, shared with `devcheck inspect`, so the linter shows exactly what the
//! derive does.

use proc_macro::TokenStream;

mod expand;

/// Implements `devcheck::Module` for a struct or enum: every `Param`, `Tensor` and submodule field
/// (also inside `Option`, `Vec`, `[T; N]`, `Box` and `BTreeMap`) is visited with its dotted path,
/// so `model.to(&device)` moves all of them.
///
/// Field attributes: `#[module(skip)]` (not moved, not saved, reported by the checker) and
/// `#[module(non_persistent)]` (moved, not saved). On the item: `#[module(crate = path)]`.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    expand::derive_module(input.into()).into()
}
