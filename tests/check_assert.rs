//! `assert_on_device!` and `assert_forward_clean!`: silent when all is well, and on failure a
//! panic whose message is the rendered report (no colour: the tests' stderr is not a terminal).

use crate::culprits;

/// Snapshots with this file's own line numbers masked, so that editing the tests does not churn
/// the snapshots (the fixtures in `tests/culprits/` keep real, fixed locations).
macro_rules! snapshot {
    ($name:expr, $text:expr) => {{
        let mut settings = insta::Settings::clone_current();
        settings.add_filter(r"tests/check_assert\.rs:\d+:\d+", "tests/check_assert.rs:[LINE]");
        settings.bind(|| insta::assert_snapshot!($name, $text));
    }};
}

use culprits::common::{Classifier, loader_batch};
use culprits::inventory::{encoder, half_moved};
use culprits::{input_batch, mask, pos_enc};
use devcheck::check::Input;
use devcheck::{DType, Device, Module, assert_forward_clean, assert_on_device};

/// Runs `f`, which must panic, and returns the panic message.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("it did not panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn on_device_passes_for_a_moved_model() {
    let _fake = devcheck::fake::enter();
    let mut model = Classifier::new(&Device::Cpu).unwrap();
    assert_on_device!(model, Device::Cpu);
    model.to(&Device::Cuda(0)).unwrap();
    assert_on_device!(model, Device::Cuda(0));
}

#[test]
fn on_device_names_every_tensor_elsewhere_with_its_line() {
    let model = half_moved().unwrap();
    let message = panic_message(|| assert_on_device!(model, Device::Cuda(1)));
    assert!(!message.contains('\u{1b}'), "colour codes in a non-terminal panic: {message:?}");
    assert!(message.contains("buffer `blocks.1.norm_scale` is on cpu, not cuda:1"), "{message}");
    assert!(message.contains("tests/culprits/inventory.rs:55:34"), "{message}");
    snapshot!("on_device", message);
}

#[test]
fn on_device_counts_skipped_tensors_too() {
    let _fake = devcheck::fake::enter();
    let mut model = encoder(&Device::Cpu).unwrap();
    model.to(&Device::Cuda(0)).unwrap();
    let message = panic_message(|| assert_on_device!(model, Device::Cuda(0)));
    assert!(message.contains("skipped field `pos_cache` is on cpu"), "{message}");
}

#[test]
#[should_panic(expected = "`Classifier` is not entirely on cuda:0: 4 of 4 tensors are elsewhere")]
fn on_device_fails_for_a_model_never_moved() {
    let model = Classifier::new(&Device::Cpu).unwrap();
    assert_on_device!(model, Device::Cuda(0));
}

#[test]
fn forward_clean_with_one_input_calls_forward() {
    let mut model = pos_enc::EmbedderFixed::new(&Device::Cpu).unwrap();
    assert_forward_clean!(model, Input::new("x", [2, 5, pos_enc::WIDTH], DType::F32), Device::Cuda(0));
    // An example tensor works as the input too.
    let x = devcheck::Tensor::zeros([1, 3, 4], &Device::Cpu).unwrap();
    let mut attention = mask::SelfAttention::new(4, &Device::Cpu).unwrap();
    assert_forward_clean!(attention, [Input::from(&x)], Device::Cuda(1), |m, x| m.forward_fixed(&x[0]));
}

#[test]
fn forward_clean_panics_with_the_report() {
    let mut model = mask::SelfAttention::new(4, &Device::Cpu).unwrap();
    let message = panic_message(|| {
        assert_forward_clean!(model, [Input::new("x", [2, 5, 4], DType::F32)], Device::Cuda(0), |m, x| {
            m.forward(&x[0])
        })
    });
    assert!(message.contains("× dry run of `SelfAttention` on fake cuda:0: 2 errors"), "{message}");
    assert!(message.contains("╭─[tests/culprits/mask.rs:25:22]"), "{message}");
    assert!(!message.contains('\u{1b}'), "{message:?}");
}

#[test]
fn forward_clean_runs_a_training_step() {
    let mut model = Classifier::new(&Device::Cpu).unwrap();
    assert_forward_clean!(model, loader_batch(), Device::Cuda(0), input_batch::step_fixed);
    let message =
        panic_message(|| assert_forward_clean!(model, loader_batch(), Device::Cuda(0), input_batch::step));
    snapshot!("forward_clean", message);
}
