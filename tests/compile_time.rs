//! Compile-time behaviour, checked by compiling small crates (one trybuild run, so the
//! dependencies are built once):
//! - `#[derive(Module)]`: every rejected shape and attribute error is a spanned compile error
//!   with a hint (`tests/ui/`; the `.stderr` files are the expected compiler output);
//! - discarded moves and op results are compiler warnings, errors under
//!   `deny(unused_must_use)` (`tests/compile/`).

#[test]
fn compile_time() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/hidden_tensors.rs");
    t.compile_fail("tests/ui/borrowed_and_odd_containers.rs");
    t.compile_fail("tests/ui/unknown_attribute.rs");
    t.compile_fail("tests/ui/skip_and_non_persistent_misuse.rs");
    t.compile_fail("tests/ui/not_a_module.rs");
    t.compile_fail("tests/ui/union_and_variant_attributes.rs");
    t.compile_fail("tests/compile/*.rs");
}
