//! The six usual culprits of the guides' debugging table, each caught by a dry run on a fake
//! `cuda:0` (no GPU here) and pointed at the right line; each clean twin passes. The rendered
//! reports are snapshotted.

use crate::culprits;

/// Snapshots with this file's own line numbers masked, so that editing the tests does not churn
/// the snapshots (the fixtures in `tests/culprits/` keep real, fixed locations).
macro_rules! snapshot {
    ($name:expr, $text:expr) => {{
        let mut settings = insta::Settings::clone_current();
        settings.add_filter(r"tests/check_culprits\.rs:\d+:\d+", "tests/check_culprits.rs:[LINE]");
        settings.bind(|| insta::assert_snapshot!($name, $text));
    }};
}

use culprits::common::{BATCH, CLASSES, Classifier, FEATURES, loader_batch};
use culprits::{hidden_state, input_batch, labels, loss_weight, mask, pos_enc};
use devcheck::check::{ForwardReport, Input};
use devcheck::{DType, Device, Result, Tensor};

const GPU: Device = Device::Cuda(0);

fn codes(report: &ForwardReport) -> Vec<&'static str> {
    report.findings().iter().map(|f| f.code()).collect()
}

/// Every dry run: no element data, and the report points at `file:line`.
#[track_caller]
fn assert_names(report: &ForwardReport, lines: &[&str]) {
    assert_eq!(report.data_bytes(), 0, "a dry run allocated element data");
    let text = report.render(100);
    for line in lines {
        assert!(text.contains(line), "the report does not name {line}:\n{text}");
    }
}

#[track_caller]
fn assert_clean(report: &ForwardReport) {
    assert_eq!(report.data_bytes(), 0);
    assert!(report.completed());
    assert!(report.is_clean(), "{}", report.render(100));
}

fn snapshot(name: &str, report: &ForwardReport) {
    snapshot!(name, report.render(100));
}

#[test]
fn input_batch_still_on_the_cpu() -> Result<()> {
    let mut model = Classifier::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, loader_batch(), &GPU, input_batch::step)?;
    assert_eq!(codes(&report), ["device-mismatch"], "{}", report.render(100));
    assert_names(&report, &["tests/culprits/common.rs:25:11", "`batch.x`", "`hidden.weight`"]);
    snapshot("input_batch", &report);

    let fixed = devcheck::check_forward(&mut model, loader_batch(), &GPU, input_batch::step_fixed)?;
    assert_clean(&fixed);
    Ok(())
}

#[test]
fn labels_still_on_the_cpu() -> Result<()> {
    let mut model = Classifier::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, loader_batch(), &GPU, labels::step)?;
    assert_eq!(codes(&report), ["device-mismatch"], "{}", report.render(100));
    assert_names(&report, &["tests/culprits/common.rs:47:42", "`batch.labels` (an input, a view)"]);
    snapshot("labels", &report);

    assert_clean(&devcheck::check_forward(&mut model, loader_batch(), &GPU, labels::step_fixed)?);
    Ok(())
}

#[test]
fn mask_created_in_forward_without_the_input_device() -> Result<()> {
    let mut model = mask::SelfAttention::new(4, &Device::Cpu)?;
    let x = [Input::new("x", [2, 5, 4], DType::F32)];
    let report = devcheck::check_forward(&mut model, &x, &GPU, |m, x| m.forward(&x[0]))?;
    assert_eq!(codes(&report), ["created-off-device", "device-mismatch"], "{}", report.render(100));
    assert_names(&report, &["tests/culprits/mask.rs:25:22", "tests/culprits/mask.rs:26:16", "`ones`"]);
    snapshot("mask", &report);

    assert_clean(&devcheck::check_forward(&mut model, &x, &GPU, |m, x| m.forward_fixed(&x[0]))?);
    Ok(())
}

#[test]
fn positional_encoding_kept_as_a_skipped_field() -> Result<()> {
    let x = [Input::new("x", [2, 5, pos_enc::WIDTH], DType::F32)];
    let mut model = pos_enc::Embedder::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, &x, &GPU, |m, x| m.forward(&x[0]))?;
    assert_eq!(codes(&report), ["skipped-tensor", "device-mismatch"], "{}", report.render(100));
    assert_names(
        &report,
        &[
            "tests/culprits/pos_enc.rs:18:5",
            "tests/culprits/pos_enc.rs:47:40",
            "`pos_enc` (a `#[module(skip)]` field, a view)",
        ],
    );
    snapshot("pos_enc", &report);

    let mut fixed = pos_enc::EmbedderFixed::new(&Device::Cpu)?;
    assert_clean(&devcheck::check_forward(&mut fixed, &x, &GPU, |m, x| m.forward(&x[0]))?);
    Ok(())
}

#[test]
fn loss_weight_created_on_the_cpu() -> Result<()> {
    let mut model = Classifier::new(&Device::Cpu)?;
    let batch = [
        Input::new("batch.x", [BATCH, FEATURES], DType::F32).on(&Device::Cpu),
        Input::new("batch.targets", [BATCH, CLASSES], DType::F32).on(&Device::Cpu),
    ];
    let report = devcheck::check_forward(&mut model, &batch, &GPU, loss_weight::step)?;
    assert_eq!(codes(&report), ["created-off-device", "device-mismatch"], "{}", report.render(100));
    assert_names(
        &report,
        &["tests/culprits/loss_weight.rs:12:19", "tests/culprits/loss_weight.rs:14:15", "`from_vec`"],
    );
    snapshot("loss_weight", &report);

    assert_clean(&devcheck::check_forward(&mut model, &batch, &GPU, loss_weight::step_fixed)?);
    Ok(())
}

#[test]
fn cached_hidden_state_from_a_previous_device() -> Result<()> {
    let x = Tensor::randn([3, hidden_state::WIDTH], &Device::Cpu)?;
    // A warm-up step on the CPU leaves a cached state there.
    let mut model = hidden_state::Recurrent::new(&Device::Cpu)?;
    let _ = model.forward(&x)?;
    let report = devcheck::check_forward(&mut model, [Input::like("x", &x)], &GPU, |m, x| m.forward(&x[0]))?;
    assert_eq!(codes(&report), ["skipped-tensor", "device-mismatch"], "{}", report.render(100));
    assert_names(
        &report,
        &["tests/culprits/hidden_state.rs:43:28", "tests/culprits/hidden_state.rs:42:36", "`hidden`"],
    );
    snapshot("hidden_state", &report);
    // The caller's model is untouched: its cached state is the real one from the warm-up.
    assert!(!model.hidden.as_ref().is_some_and(Tensor::is_fake));

    let mut fixed = hidden_state::RecurrentFixed::new(&Device::Cpu)?;
    let _ = fixed.forward(&x)?;
    assert_clean(&devcheck::check_forward(&mut fixed, [Input::like("x", &x)], &GPU, |m, x| {
        m.forward(&x[0])
    })?);
    Ok(())
}
