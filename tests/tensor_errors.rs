//! The diagnostics are the product's face: their rendered text is snapshotted.

use crate::support;

use devcheck::{DType, Device, Error, Tensor};

fn render(e: &Error) -> String {
    e.render(100)
}

#[test]
fn device_mismatch_names_both_tensors_and_lines() {
    let (x, y) = support::x::pair().unwrap();
    let err = x.add(&y).unwrap_err();
    let text = render(&err);
    assert!(text.contains("tests/support/x.rs:10:13"), "{text}");
    assert!(text.contains("tests/support/x.rs:11:13"), "{text}");
    assert!(text.contains("cpu") && text.contains("cuda:0"), "{text}");
    snapshot(&err);
}

#[test]
fn device_mismatch_shows_module_paths_when_named() {
    let (x, y) = support::x::pair().unwrap();
    y.set_name("encoder.layers.0.mask");
    let err = x.mul(&y).unwrap_err();
    snapshot(&err);
}

#[test]
fn zero_dim_tensors_must_match_devices_too() {
    let (x, _) = support::x::pair().unwrap();
    let s = Tensor::fake([], DType::F32, &Device::Cuda(0)).unwrap();
    assert!(matches!(x.add(&s), Err(Error::DeviceMismatch { .. })));
}

#[test]
fn shape_mismatch_explains_broadcasting() {
    let a = Tensor::zeros([2, 3], &Device::Cpu).unwrap();
    let b = Tensor::zeros([4], &Device::Cpu).unwrap();
    let err = a.add(&b).unwrap_err();
    snapshot(&err);
}

#[test]
fn matmul_inner_dim_mismatch() {
    let a = Tensor::zeros([2, 3], &Device::Cpu).unwrap();
    let b = Tensor::zeros([2, 3], &Device::Cpu).unwrap();
    let err = a.matmul(&b).unwrap_err();
    snapshot(&err);
}

#[test]
fn dtype_mismatch_says_what_to_cast() {
    let a = Tensor::zeros([2], &Device::Cpu).unwrap();
    let b = Tensor::zeros([2], (DType::I64, &Device::Cpu)).unwrap();
    let err = a.sub(&b).unwrap_err();
    let text = render(&err);
    assert!(text.contains("rhs.to_dtype(DType::F32)"), "{text}");
    snapshot(&err);
}

#[test]
fn unknown_device_lists_valid_forms() {
    let err = "gpu:0".parse::<Device>().unwrap_err();
    snapshot(&err);
}

#[test]
fn cuda_without_a_driver_says_so() {
    if devcheck::cuda::is_available() {
        eprintln!("skipped: a CUDA device is present");
        return;
    }
    let err = Tensor::zeros([2], &Device::Cuda(0)).unwrap_err();
    assert!(matches!(err, Error::DeviceUnavailable { .. }));
    snapshot(&err);
}

#[test]
fn reading_a_fake_tensor_is_a_clear_error() {
    let (_, y) = support::x::pair().unwrap();
    let err = y.to_vec::<f32>().unwrap_err();
    snapshot(&err);
}

#[test]
fn debug_of_an_error_is_the_full_report() {
    let err = "cuda:x".parse::<Device>().unwrap_err();
    let debug = format!("{err:?}");
    assert!(debug.contains("help: valid devices are"), "{debug}");
}

#[test]
#[should_panic(expected = "device mismatch in `add`")]
fn operator_sugar_panics_with_the_report() {
    let (x, y) = support::x::pair().unwrap();
    let _ = &x + &y;
}

/// Snapshots the rendered report with this file's line numbers masked, so editing the tests does
/// not churn the snapshots (`tests/support/x.rs` keeps real, fixed locations).
#[track_caller]
fn snapshot(err: &Error) {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"tests/tensor_errors\.rs:\d+:\d+", "tests/tensor_errors.rs:[LINE]");
    // libtest names each test's thread after the test (with its module's path): one snapshot per
    // test.
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("unnamed").rsplit("::").next().unwrap_or("unnamed").to_string();
    settings.bind(|| insta::assert_snapshot!(name, render(err)));
}
