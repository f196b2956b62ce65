//! `devcheck::check_forward` beyond the six culprits: host reads, moves inside forward, failures,
//! hard-coded devices, tied weights, the caller's model left alone, and the report's forms.

use crate::culprits;

/// Snapshots with this file's own line numbers masked, so that editing the tests does not churn
/// the snapshots (the fixtures in `tests/culprits/` keep real, fixed locations).
macro_rules! snapshot {
    ($name:expr, $text:expr) => {{
        let mut settings = insta::Settings::clone_current();
        settings.add_filter(r"tests/check_forward\.rs:\d+:\d+", "tests/check_forward.rs:[LINE]");
        settings.bind(|| insta::assert_snapshot!($name, $text));
    }};
}

use culprits::common::{Classifier, loader_batch};
use culprits::forward_shapes::Gate;
use culprits::input_batch;
use devcheck::check::{ForwardReport, Input};
use devcheck::{DType, Device, Error, Module, Param, Result, Tensor};

const GPU: Device = Device::Cuda(0);

fn codes(report: &ForwardReport) -> Vec<&'static str> {
    report.findings().iter().map(|f| f.code()).collect()
}

fn x() -> [Input; 1] {
    [Input::new("x", [2, 4], DType::F32)]
}

#[test]
fn a_value_read_in_forward_needs_data_and_the_run_goes_on() -> Result<()> {
    let mut model = Gate::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, x(), &GPU, |m, x| m.forward_branching(&x[0]))?;
    assert_eq!(codes(&report), ["skipped-tensor", "host-read"], "{}", report.render(100));
    assert!(report.completed());
    assert_eq!(report.data_bytes(), 0);
    let read = &report.findings()[1];
    assert_eq!(read.message(), "`to_scalar` needs data: forward reads the values of a tensor");
    assert_eq!(read.location_string().as_deref(), Some("tests/culprits/forward_shapes.rs:20:25"));
    assert_eq!(report.host_reads()[0].without_data, 1);
    snapshot!("needs_data", report.render(100));
    Ok(())
}

#[test]
fn a_model_tensor_copied_in_every_forward_is_a_warning() -> Result<()> {
    let mut model = Gate::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, x(), &GPU, |m, x| m.forward_uploading(&x[0]))?;
    // The skipped table is copied where it is needed: no mismatch, but a copy per call.
    assert_eq!(codes(&report), ["skipped-tensor", "moved-in-forward"], "{}", report.render(100));
    let moved = &report.findings()[1];
    assert!(moved.message().contains("`table`"), "{}", moved.message());
    assert_eq!(report.transfers()[0].direction(), "cpu -> cuda:0");
    Ok(())
}

#[test]
fn a_copy_off_the_device_in_forward_is_a_warning() -> Result<()> {
    let mut model = Gate::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, x(), &GPU, |m, x| m.forward_to_host(&x[0]))?;
    assert_eq!(codes(&report), ["skipped-tensor", "moved-off-device"], "{}", report.render(100));
    assert_eq!(
        report.findings()[1].location_string().as_deref(),
        Some("tests/culprits/forward_shapes.rs:30:42")
    );
    Ok(())
}

#[test]
fn an_error_in_forward_ends_the_run_and_is_reported() -> Result<()> {
    let mut model = Gate::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, [Input::new("x", [2, 5], DType::F32)], &GPU, |m, x| {
        m.forward_failing(&x[0])
    })?;
    assert!(!report.completed());
    assert_eq!(codes(&report), ["skipped-tensor", "forward-failed"]);
    let failed = &report.findings()[1];
    assert!(
        failed.message().starts_with("forward returned an error: shape mismatch in `matmul`"),
        "{}",
        failed.message()
    );
    snapshot!("forward_failed", report.render(100));
    Ok(())
}

#[test]
fn a_panic_in_forward_ends_the_run_and_is_reported() -> Result<()> {
    let mut model = Gate::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, [Input::new("x", [2, 3], DType::F32)], &GPU, |m, x| {
        m.forward_panicking(&x[0])
    })?;
    assert!(!report.completed());
    let failed = report.findings().last().unwrap();
    assert_eq!(failed.code(), "forward-failed");
    assert!(
        failed.message().starts_with("forward panicked: shape mismatch in `add`"),
        "{}",
        failed.message()
    );
    // The recorder and fake mode ended with the run.
    assert!(!devcheck::fake::is_active());
    let (_, trace) = devcheck::trace(|| Tensor::ones([1], &Device::Cpu));
    assert_eq!(trace.allocations()[&Device::Cpu].tensors, 1);
    Ok(())
}

#[test]
fn a_dry_run_on_another_gpu_catches_a_hard_coded_cuda_0() -> Result<()> {
    let mut model = Gate::new(&Device::Cpu)?;
    let on_0 =
        devcheck::check_forward(&mut model, x(), &Device::Cuda(0), |m, x| m.forward_hard_coded(&x[0]))?;
    assert_eq!(codes(&on_0), ["skipped-tensor"]);
    let on_1 =
        devcheck::check_forward(&mut model, x(), &Device::Cuda(1), |m, x| m.forward_hard_coded(&x[0]))?;
    assert_eq!(codes(&on_1), ["skipped-tensor", "created-off-device", "device-mismatch"]);
    assert_eq!(
        on_1.findings()[1].message(),
        "`full` made a tensor on cuda:0 during forward; the target is cuda:1"
    );
    Ok(())
}

#[test]
fn the_callers_model_and_its_parameters_are_untouched() -> Result<()> {
    let mut model = Classifier::new(&Device::Cpu)?;
    let held_by_an_optimizer: Vec<Param> = model.parameters();
    let before: Vec<Vec<f32>> =
        held_by_an_optimizer.iter().map(|p| p.tensor().to_vec()).collect::<Result<_>>()?;
    let report = devcheck::check_forward(&mut model, loader_batch(), &GPU, |m, batch| {
        // Inside: a fake copy on the target, in new cells.
        assert_eq!(m.device()?, GPU);
        assert!(m.parameters().iter().all(|p| p.tensor().is_fake()));
        assert!(!m.hidden.weight.same_param(&held_by_an_optimizer[0]));
        input_batch::step_fixed(m, batch)
    })?;
    assert!(report.is_clean(), "{}", report.render(100));
    assert_eq!(model.device()?, Device::Cpu);
    for (param, values) in held_by_an_optimizer.iter().zip(&before) {
        assert_eq!(param.device(), Device::Cpu);
        assert_eq!(&param.tensor().to_vec::<f32>()?, values);
    }
    Ok(())
}

#[derive(Module, Clone)]
struct Tied {
    embed: Param,
    head: Param,
}

#[test]
fn tied_weights_stay_tied_in_the_fake_copy() -> Result<()> {
    let embed = Param::new(Tensor::randn([5, 4], &Device::Cpu)?);
    let mut model = Tied { head: embed.clone(), embed };
    let report =
        devcheck::check_forward(&mut model, [Input::new("ids", [3], DType::I64)], &GPU, |m, ids| {
            assert!(m.embed.same_param(&m.head));
            m.embed.tensor().index_select(0, &ids[0])?.matmul(&m.head.tensor().t()?)
        })?;
    assert!(report.is_clean(), "{}", report.render(100));
    Ok(())
}

#[test]
fn inputs_from_example_tensors_keep_shape_dtype_and_origin() -> Result<()> {
    let example = Tensor::zeros([2, 4], (DType::F64, &Device::Cpu))?;
    let input = Input::like("x", &example);
    assert_eq!((input.shape(), input.dtype()), (&[2, 4][..], DType::F64));
    let report = devcheck::check_forward(&mut Gate::new(&Device::Cpu)?, [input], &GPU, |_, x| {
        assert_eq!((x[0].device(), x[0].dtype(), x[0].origin()), (GPU, DType::F64, example.origin()));
        assert_eq!(x[0].name().as_deref(), Some("x"));
        Ok(())
    })?;
    assert_eq!(report.to_json()["inputs"][0]["dtype"], "f64");
    Ok(())
}

#[test]
fn an_impossible_input_shape_is_an_error() {
    let mut model = Gate::new(&Device::Cpu).unwrap();
    let error =
        devcheck::check_forward(&mut model, [Input::new("x", [usize::MAX, 4], DType::F32)], &GPU, |_, _| {
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(error, Error::InvalidArgument { op: "check_forward", .. }), "{error:?}");
}

fn step_on_the_gpu() -> Result<()> {
    let mut model = Classifier::new(&Device::Cpu)?;
    devcheck::check_forward(&mut model, loader_batch(), &GPU, input_batch::step)?.ensure_clean()?;
    Ok(())
}

#[test]
fn a_failing_dry_run_through_question_mark_prints_the_full_report() {
    let error = step_on_the_gpu().unwrap_err();
    let debug = format!("{error:?}");
    assert!(debug.contains("dry run of `Classifier` on fake cuda:0: 1 error"), "{debug}");
    assert!(debug.contains("╭─[tests/culprits/common.rs:25:11]"), "{debug}");
    assert!(debug.contains("help: move `batch.x` to cuda:0 right after the loader"), "{debug}");
}

#[test]
fn the_report_as_text_and_json() -> Result<()> {
    let mut model = Classifier::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, loader_batch(), &GPU, input_batch::step)?;
    snapshot!("summary", report.to_string());
    let json = report.to_json();
    assert_eq!(json["target"], "cuda:0");
    assert_eq!(json["data_bytes"], 0);
    assert_eq!(json["findings"][0]["code"], "device-mismatch");
    assert_eq!(json["findings"][0]["line"], 25);
    assert_eq!(json["findings"][0]["count"], 2);
    assert_eq!(json["inputs"][1]["name"], "batch.labels");
    assert_eq!(json["transfers"][0]["from"], "cpu");
    Ok(())
}

/// A model with a cache in a skipped field, and a generic skipped field (the derive cannot tell
/// there whether the type is a module, so it is not looked into).
#[derive(Module)]
struct Cached<M> {
    weight: Param,
    buffer: Tensor,
    #[module(skip)]
    cache: Option<Tensor>,
    #[module(skip)]
    extra: M,
}

impl<M> Cached<M> {
    fn new(extra: M) -> Result<Cached<M>> {
        Ok(Cached {
            weight: Param::new(Tensor::ones([2, 2], &Device::Cpu)?),
            buffer: Tensor::zeros([2], &Device::Cpu)?,
            cache: None,
            extra,
        })
    }

    fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        let y = x.matmul(&self.weight.tensor())?.add(&self.buffer)?;
        self.cache = Some(y.clone());
        Ok(y)
    }
}

/// Every tensor of the model is the one it had before the run: same handles, real data.
fn assert_restored(model: &Cached<u8>, weight: &Param, buffer: &Tensor) {
    assert!(model.weight.same_param(weight) && model.weight.id() == weight.id());
    assert!(!model.weight.tensor().is_fake() && weight.grad().is_none());
    assert!(model.buffer.same_storage(buffer) && !model.buffer.is_fake());
    assert!(model.cache.is_none(), "what forward cached in a skipped field is put back");
}

#[test]
fn the_model_gets_its_tensors_back_after_a_clean_run_an_error_and_a_panic() -> Result<()> {
    let mut model = Cached::new(7u8)?;
    let (weight, buffer) = (model.weight.clone(), model.buffer.clone());
    let x = [Input::new("x", [3, 2], DType::F32)];

    let clean = devcheck::check_forward(&mut model, &x, &GPU, |m, x| {
        assert!(m.weight.tensor().is_fake() && m.weight.device() == GPU, "the run sees fakes on the target");
        m.forward(&x[0])?.sum_all()?.backward()
    })?;
    assert!(clean.is_clean(), "{}", clean.render(100));
    assert_restored(&model, &weight, &buffer);

    let failed = devcheck::check_forward(&mut model, &x, &GPU, |m, x| m.forward(&x[0])?.reshape([7]))?;
    assert!(!failed.completed());
    assert_restored(&model, &weight, &buffer);

    let panicked = devcheck::check_forward(&mut model, &x, &GPU, |m, x| -> Result<()> {
        let _ = m.forward(&x[0])?;
        panic!("a bug in the user's step")
    })?;
    assert_eq!(codes(&panicked), ["forward-failed"]);
    assert_restored(&model, &weight, &buffer);
    assert_eq!(model.extra, 7);
    Ok(())
}
