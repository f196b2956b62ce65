//! Discarded moves and op results are compiler warnings (errors under `deny(unused_must_use)`).

#[test]
fn discarded_moves_do_not_compile_under_deny_unused_must_use() {
    trybuild::TestCases::new().compile_fail("tests/compile/*.rs");
}
