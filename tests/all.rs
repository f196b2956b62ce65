//! Every integration test of the runtime, one module per file of this folder, built as one test
//! binary: one link and one executable instead of one per file (each links the whole runtime, so
//! 34 binaries took a gigabyte of CI's disk). nextest still runs every test in its own process;
//! `cargo test --test all checkpoint_safety::` runs one file's tests.

mod culprits;
mod support {
    pub mod gpu;
    pub mod gradcheck;
    pub mod reference;
    pub mod x;
}

mod autograd_api;
mod autograd_gradcheck;
mod check_assert;
mod check_checkpoint;
mod check_culprits;
mod check_forward;
mod check_gpt2;
mod check_inventory;
mod check_trace;
mod checkpoint_corrupt;
mod checkpoint_roundtrip;
mod checkpoint_safety;
mod compile_time;
mod cuda_allocator;
mod cuda_device;
mod cuda_host_allocator;
mod cuda_kernels;
mod cuda_tensor;
mod data_loader;
mod dependencies;
mod derive_model;
mod fuzz_checkpoint;
mod fuzz_tensor;
mod locations;
mod ndarray_interop;
mod nn_layers;
mod nn_losses;
mod optim_steps;
mod tensor_errors;
mod tensor_limits;
mod tensor_ops;
mod tensor_props;
mod train_digits;
mod user_models;
