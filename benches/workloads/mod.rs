//! Workloads shared by the bench runner, `benches/lint.rs` and `examples/bench_check.rs`.

pub mod check;
pub mod cnn;
pub mod gpt;
pub mod lint;
pub mod mlp;
pub mod ops;
