//! Models written the way a PyTorch user writes them from the README (a GPT-style decoder, a CNN,
//! a GRU-like cell), each trained on the CPU, dry-run on a fake `cuda:0`, inventoried, saved and
//! loaded; then the usual device bugs planted in such code (`user_models/bugs.rs`), each reported
//! at the bug's own line with the help for what the tensor is. Reports are snapshotted.

pub mod bugs;
pub mod cnn;
pub mod gpt;
pub mod gru;

use devcheck::check::{ForwardReport, Input};
use devcheck::nn::Forward;
use devcheck::nn::functional as f;
use devcheck::optim::{AdamW, Optimizer};
use devcheck::{DType, Device, Module, Result, Tensor};

const GPU: Device = Device::Cuda(0);
const BUGS_FILE: &str = "tests/user_models/bugs.rs";

/// `steps` AdamW steps of `loss`; the first and last loss.
fn train<M: Module>(model: &M, steps: usize, loss: impl Fn(&M) -> Result<Tensor>) -> Result<(f32, f32)> {
    let mut optimizer = AdamW::new(model.parameters(), 1e-2)?;
    let mut losses = Vec::new();
    for _ in 0..steps {
        optimizer.zero_grad();
        let value = loss(model)?;
        value.backward()?;
        optimizer.step()?;
        losses.push(value.to_scalar::<f32>()?);
    }
    Ok((losses[0], losses[steps - 1]))
}

/// Saves `model`, loads the file into `fresh` and checks both compute the same on `x`.
fn save_and_load<M: Module + Forward>(model: &M, fresh: &mut M, x: &Tensor) -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| devcheck::Error::InvalidArgument {
        op: "tempdir",
        detail: e.to_string(),
        help: String::new(),
        location: std::panic::Location::caller(),
    })?;
    let path = dir.path().join("model.safetensors");
    model.save(&path)?;
    assert_ne!(fresh.forward(x)?.to_vec::<f32>()?, model.forward(x)?.to_vec::<f32>()?);
    fresh.load_state_dict(&path, &Device::Cpu)?;
    assert_eq!(fresh.forward(x)?.to_vec::<f32>()?, model.forward(x)?.to_vec::<f32>()?);
    Ok(())
}

/// A whole training step on the model's device, with the optimizer built from the model as the
/// guides do, for a dry run of everything a real step does.
fn gpt_step(model: &mut gpt::Gpt, batch: &[Tensor]) -> Result<()> {
    let device = model.device()?;
    let (ids, targets) = (batch[0].to(&device)?, batch[1].to(&device)?);
    let mut optimizer = AdamW::new(model.parameters(), 1e-3)?;
    optimizer.zero_grad();
    gpt::loss(model, &ids, &targets)?.backward()?;
    optimizer.step()
}

fn gpt_batch_inputs() -> [Input; 2] {
    [
        Input::new("batch.ids", [4, gpt::TINY.max_len], DType::I64).on(&Device::Cpu),
        Input::new("batch.labels", [4, gpt::TINY.max_len], DType::I64).on(&Device::Cpu),
    ]
}

// ---------------------------------------------------------------------------------------------
// Clean models

#[test]
fn a_gpt_trains_dry_runs_clean_and_round_trips() -> Result<()> {
    devcheck::manual_seed(1);
    let mut model = gpt::Gpt::new(&gpt::TINY, &Device::Cpu)?;
    let (ids, targets) = gpt::batch(&gpt::TINY)?;
    let (first, last) = train(&model, 15, |m| gpt::loss(m, &ids, &targets))?;
    assert!(last < first * 0.7, "the loss went from {first} to {last}");

    // Not `Clone`, built from `nn` layers, tied head: a whole training step dry-runs clean.
    devcheck::assert_forward_clean!(model, gpt_batch_inputs(), GPU, gpt_step);
    assert!(!model.blocks_are_fake(), "the dry run put the model's own tensors back");

    let inventory = devcheck::inspect(&model);
    assert!(inventory.is_clean(), "{inventory}");
    let head = inventory.rows().iter().find(|r| r.path == "lm_head.weight").unwrap();
    assert_eq!(head.tied_to.as_deref(), Some("wte.weight"));
    assert!(inventory.rows().iter().any(|r| r.path == "blocks.1.attn.mask"), "{inventory}");

    let mut fresh = gpt::Gpt::new(&gpt::TINY, &Device::Cpu)?;
    save_and_load(&model, &mut fresh, &ids)
}

#[test]
fn a_cnn_trains_dry_runs_clean_and_round_trips() -> Result<()> {
    devcheck::manual_seed(2);
    let mut model = cnn::Cnn::new(&Device::Cpu)?;
    let (images, labels) = cnn::batch()?;
    let (first, last) =
        train(&model, 20, |m| f::cross_entropy(&m.forward(&images)?, &labels, &Default::default()))?;
    assert!(last < first * 0.7, "the loss went from {first} to {last}");

    devcheck::assert_forward_clean!(
        model,
        Input::new("images", [8, 1, cnn::SIDE, cnn::SIDE], DType::F32),
        GPU
    );
    let inventory = devcheck::inspect(&model);
    assert!(inventory.is_clean(), "{inventory}");
    assert_eq!(inventory.rows().len(), 6, "{inventory}");

    let mut fresh = cnn::Cnn::new(&Device::Cpu)?;
    save_and_load(&model, &mut fresh, &images)
}

#[test]
fn a_gru_trains_dry_runs_clean_and_round_trips() -> Result<()> {
    devcheck::manual_seed(3);
    let mut model = gru::GruRegressor::new(&Device::Cpu)?;
    let (x, y) = gru::batch()?;
    let (first, last) = train(&model, 20, |m| f::mse_loss(&m.forward(&x)?, &y, f::Reduction::Mean))?;
    assert!(last < first * 0.7, "the loss went from {first} to {last}");

    devcheck::assert_forward_clean!(model, Input::new("x", [16, gru::STEPS, gru::INPUT], DType::F32), GPU);
    let inventory = devcheck::inspect(&model);
    assert!(inventory.is_clean(), "{inventory}");
    let buffers: Vec<&str> = inventory
        .rows()
        .iter()
        .filter(|r| r.kind == devcheck::module::EntryKind::Buffer)
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(buffers, ["target_mean", "target_std"]);

    let mut fresh = gru::GruRegressor::new(&Device::Cpu)?;
    save_and_load(&model, &mut fresh, &x)
}

// ---------------------------------------------------------------------------------------------
// What a clone of a model is

#[test]
fn moving_a_clone_moves_the_clone_and_never_half_moves_the_original() -> Result<()> {
    let _fake = devcheck::fake::enter();
    let model = cnn::Cnn::new(&Device::Cpu)?;
    let optimizer = AdamW::new(model.parameters(), 1e-3)?;
    let mut copy = model.clone();
    // A clone shares the parameters' values until it moves.
    assert!(model.fc.weight.same_param(&copy.fc.weight));

    copy.to(&GPU)?;
    assert_eq!(copy.device()?, GPU);
    assert_eq!(model.device()?, Device::Cpu, "the original did not move, not even in part");
    assert!(!model.fc.weight.same_param(&copy.fc.weight), "the moved clone has its own parameters");
    // The optimizer was built from the original: it still holds the original's parameters.
    assert!(optimizer.params().iter().all(|p| p.device() == Device::Cpu));

    // Moving the original itself moves it in place: its optimizer follows.
    let mut model = model;
    model.to(&GPU)?;
    assert!(optimizer.params().iter().all(|p| p.device() == GPU));
    Ok(())
}

#[test]
fn converting_or_loading_a_clone_onto_another_device_leaves_the_original_whole() -> Result<()> {
    let model = cnn::Cnn::new(&Device::Cpu)?;
    let dir = tempfile::tempdir().expect("a scratch directory");
    let path = dir.path().join("cnn.safetensors");
    model.save(&path)?;

    let mut in_f64 = model.clone();
    in_f64.to_dtype(DType::F64)?;
    assert!(in_f64.named_tensors().iter().all(|(_, t)| t.dtype() == DType::F64));
    assert!(model.named_tensors().iter().all(|(_, t)| t.dtype() == DType::F32), "the original kept f32");

    // A load is a new value: on the same device it is seen through every clone, as a step is.
    let shared = model.clone();
    let mut reloaded = model.clone();
    reloaded.load_state_dict(&path, &Device::Cpu)?;
    assert!(reloaded.fc.weight.same_param(&shared.fc.weight));

    // Onto another device it is a move: only the loaded model moves.
    let _fake = devcheck::fake::enter();
    let mut on_gpu = model.clone();
    on_gpu.load_state_dict(&path, &GPU)?;
    assert_eq!((on_gpu.device()?, model.device()?), (GPU, Device::Cpu));
    assert!(!model.fc.weight.tensor().is_fake(), "the original kept its data");
    Ok(())
}

#[test]
fn a_clone_of_a_tied_model_moves_with_its_ties() -> Result<()> {
    #[derive(Module, Clone)]
    struct Tied {
        embed: devcheck::nn::Embedding,
        head: devcheck::nn::Linear,
    }
    let _fake = devcheck::fake::enter();
    let embed = devcheck::nn::Embedding::new(6, 4, &Device::Cpu)?;
    let mut head = devcheck::nn::Linear::with_bias(4, 6, false, &Device::Cpu)?;
    head.weight = embed.weight.clone();
    let model = Tied { embed, head };
    let mut copy = model.clone();
    copy.to(&GPU)?;
    assert!(copy.head.weight.same_param(&copy.embed.weight), "the tie is kept in the moved clone");
    assert!(model.head.weight.same_param(&model.embed.weight));
    assert_eq!((model.device()?, copy.device()?), (Device::Cpu, GPU));
    assert_eq!(copy.num_parameters(), 24);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Planted bugs

/// Snapshots of the planted bugs, rendered at 100 columns, with this file's own line numbers
/// masked (the models in `tests/user_models/` keep real, fixed locations).
fn snapshot(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"user_models\.rs:\d+:\d+", "user_models.rs:[LINE]");
    settings.bind(|| insta::assert_snapshot!(name, text));
}

fn finding<'r>(report: &'r ForwardReport, code: &str) -> &'r devcheck::check::Finding {
    report
        .findings()
        .iter()
        .find(|f| f.code() == code)
        .unwrap_or_else(|| panic!("no {code} finding:\n{}", report.render(100)))
}

/// No finding points into devcheck's own source.
#[track_caller]
fn assert_all_in_user_code(report: &ForwardReport) {
    for finding in report.findings() {
        let at = finding.location().map(|l| l.file()).unwrap_or("tests/");
        assert!(at.starts_with("tests/"), "a finding inside devcheck:\n{}", report.render(100));
    }
}

#[track_caller]
fn assert_at(location: Option<&'static std::panic::Location<'static>>, file: &str, line: u32) {
    let at = location.expect("a location");
    assert_eq!((at.file(), at.line()), (file, line), "reported at {at}");
}

#[test]
fn a_mask_made_on_the_cpu_in_a_users_layer_is_reported_at_its_own_line() -> Result<()> {
    let mut model = bugs::NoisyLm::new(&gpt::TINY, &Device::Cpu)?;
    let ids = [Input::new("ids", [2, 4], DType::I64)];
    let report = devcheck::check_forward(&mut model, ids, &GPU, |m, x| m.forward(&x[0]))?;
    assert_all_in_user_code(&report);
    let created = finding(&report, "created-off-device");
    assert_at(created.location(), BUGS_FILE, bugs::line_of("dropout-mask"));
    assert!(created.help_text().contains("x.new_zeros(..)"), "{}", created.help_text());
    snapshot("dropout_mask_in_a_users_layer", &report.render(100));
    Ok(())
}

#[test]
fn labels_left_on_the_cpu_are_reported_at_the_loss_naming_the_labels() -> Result<()> {
    let mut model = gpt::Gpt::new(&gpt::TINY, &Device::Cpu)?;
    let report =
        devcheck::check_forward(&mut model, gpt_batch_inputs(), &GPU, bugs::step_with_labels_left_behind)?;
    assert_all_in_user_code(&report);
    assert_eq!(report.findings().len(), 1, "{}", report.render(100));
    let mismatch = finding(&report, "device-mismatch");
    assert_at(mismatch.location(), BUGS_FILE, bugs::line_of("labels"));
    assert!(mismatch.details().iter().any(|d| d.starts_with("target `batch.labels` (an input, a view)")));
    assert!(mismatch.help_text().starts_with("move `batch.labels` to cuda:0 right after the loader"));
    snapshot("labels_left_on_the_cpu", &report.render(100));
    Ok(())
}

#[test]
fn class_weights_on_the_cpu_are_reported_where_made_and_where_passed() -> Result<()> {
    let mut model = cnn::Cnn::new(&Device::Cpu)?;
    let batch = [
        Input::new("batch.images", [8, 1, cnn::SIDE, cnn::SIDE], DType::F32).on(&Device::Cpu),
        Input::new("batch.labels", [8], DType::I64).on(&Device::Cpu),
    ];
    let report = devcheck::check_forward(&mut model, batch, &GPU, bugs::step_with_cpu_class_weights)?;
    assert_all_in_user_code(&report);
    let codes: Vec<&str> = report.findings().iter().map(|f| f.code()).collect();
    assert_eq!(codes, ["created-off-device", "device-mismatch"], "{}", report.render(100));
    assert_at(finding(&report, "created-off-device").location(), BUGS_FILE, bugs::line_of("weights-made"));
    let mismatch = finding(&report, "device-mismatch");
    assert_at(mismatch.location(), BUGS_FILE, bugs::line_of("weights-used"));
    assert!(mismatch.message().contains("weight is on cpu"), "{}", mismatch.message());
    snapshot("class_weights_on_the_cpu", &report.render(100));
    Ok(())
}

#[test]
fn a_zero_dim_cpu_constant_gets_the_stricter_than_pytorch_help() -> Result<()> {
    let mut model = bugs::TemperedClassifier::new(&Device::Cpu)?;
    let report = devcheck::check_forward(&mut model, [Input::new("x", [2, 4], DType::F32)], &GPU, |m, x| {
        m.forward(&x[0])
    })?;
    assert_all_in_user_code(&report);
    assert_at(finding(&report, "created-off-device").location(), BUGS_FILE, bugs::line_of("scalar-made"));
    let mismatch = finding(&report, "device-mismatch");
    assert_at(mismatch.location(), BUGS_FILE, bugs::line_of("scalar-used"));
    assert!(mismatch.help_text().contains("stricter than PyTorch"), "{}", mismatch.help_text());
    assert!(mismatch.help_text().contains("mul_scalar"), "{}", mismatch.help_text());
    snapshot("zero_dim_cpu_constant", &report.render(100));
    Ok(())
}

#[test]
fn a_skipped_submodule_is_reported_at_its_field_in_every_report() -> Result<()> {
    let mut model = bugs::Tagger::new(&Device::Cpu)?;
    let line = bugs::line_of("skipped-submodule");

    let inventory = devcheck::inspect(&model);
    let skipped = inventory.findings().iter().find(|f| f.code() == "skipped-submodule").expect("a finding");
    assert_eq!(skipped.severity(), devcheck::check::Severity::Error);
    assert_at(skipped.location(), BUGS_FILE, line);
    assert!(skipped.message().contains("`head.weight`"), "{}", skipped.message());
    assert_eq!(model.parameters().len(), 1, "the optimizer would only see `embed.weight`");
    snapshot("skipped_submodule_inventory", &inventory.render(100));

    // A whole training step: backward meets the skipped parameters again, inside devcheck.
    let report =
        devcheck::check_forward(&mut model, [Input::new("ids", [2, 3], DType::I64)], &GPU, |m, x| {
            let mut optimizer = AdamW::new(m.parameters(), 1e-3)?;
            m.forward(&x[0])?.sum_all()?.backward()?;
            optimizer.step()
        })?;
    assert_all_in_user_code(&report);
    assert_at(finding(&report, "skipped-submodule").location(), BUGS_FILE, line);
    let mismatch = finding(&report, "device-mismatch");
    assert_at(mismatch.location(), BUGS_FILE, bugs::line_of("skipped-used"));
    assert!(
        mismatch.help_text().starts_with(
            "`head.weight` and `head.bias` are inside `head`, a submodule marked `#[module(skip)]`"
        ),
        "{}",
        mismatch.help_text()
    );
    snapshot("skipped_submodule_dry_run", &report.render(100));
    Ok(())
}

#[test]
fn a_cpu_model_on_a_gpu_batch_names_the_layers_weight_and_says_to_move_the_model() -> Result<()> {
    let _fake = devcheck::fake::enter();
    let model = gru::GruRegressor::new(&Device::Cpu)?;
    let _optimizer = AdamW::new(model.parameters(), 1e-3)?;
    let (x, _) = gru::batch()?;
    let error = bugs::forward_without_moving_the_model(&model, &x).unwrap_err();
    let gru_source = include_str!("user_models/gru.rs");
    assert_at(
        error.location(),
        "tests/user_models/gru.rs",
        line_containing(gru_source, "self.update.forward(&xh)"),
    );
    let text = error.to_string();
    assert!(text.contains("weight `update.weight` (a parameter): cpu f32 [8, 11], made by `Linear::new` at tests/user_models/gru.rs"), "{text}");
    let help = miette::Diagnostic::help(&error).map(|h| h.to_string()).unwrap_or_default();
    assert!(
        help.starts_with(
            "`update.weight` and `update.bias` are parameters of the model, on cpu: move the model once"
        ),
        "{help}"
    );
    snapshot("cpu_model_on_a_gpu_batch", &error.render(100));
    Ok(())
}

#[test]
fn buffers_left_behind_by_moving_only_the_parameters_say_to_move_the_model() -> Result<()> {
    let _fake = devcheck::fake::enter();
    let model = gru::GruRegressor::new(&Device::Cpu)?;
    bugs::move_only_the_parameters(&model, &GPU)?;
    let x = Tensor::randn([2, gru::STEPS, gru::INPUT], &GPU)?;
    let error = model.forward(&x).unwrap_err();
    let gru_source = include_str!("user_models/gru.rs");
    assert_at(
        error.location(),
        "tests/user_models/gru.rs",
        line_containing(gru_source, "mul(&self.target_std)"),
    );
    assert!(error.to_string().contains("rhs `target_std` (a buffer): cpu f32 [1]"), "{error}");
    let help = miette::Diagnostic::help(&error).map(|h| h.to_string()).unwrap_or_default();
    assert!(help.starts_with("`target_std` is a buffer of the model, on cpu: move the model once"), "{help}");
    snapshot("buffers_left_behind", &error.render(100));
    Ok(())
}

/// The 1-based line of `source` that contains `snippet`.
fn line_containing(source: &str, snippet: &str) -> u32 {
    source.lines().position(|l| l.contains(snippet)).unwrap_or_else(|| panic!("no line with {snippet}"))
        as u32
        + 1
}

impl gpt::Gpt {
    /// Does any of the model's tensors lack data (a fake left behind by a dry run)?
    fn blocks_are_fake(&self) -> bool {
        self.named_tensors().iter().any(|(_, t)| t.is_fake())
    }
}

/// The README's dry run of a model built from `nn` layers, as written there.
#[test]
fn the_readmes_dry_run_of_nn_layers() -> Result<()> {
    use devcheck::nn::{Gelu, LayerNorm, Linear};

    #[derive(Module)]
    struct Mlp {
        norm: LayerNorm,
        fc: Linear,
        act: Gelu,
        proj: Linear,
    }

    impl Forward for Mlp {
        fn forward(&self, x: &Tensor) -> devcheck::Result<Tensor> {
            let h = self.act.forward(&self.fc.forward(&self.norm.forward(x)?)?)?;
            self.proj.forward(&h)
        }
    }

    let cpu = Device::Cpu;
    let mut model = Mlp {
        norm: LayerNorm::new([64], &cpu)?,
        fc: Linear::new(64, 256, &cpu)?,
        act: Gelu::new(),
        proj: Linear::new(256, 64, &cpu)?,
    };
    devcheck::assert_forward_clean!(model, Input::new("x", [8, 64], DType::F32), Device::Cuda(0));
    Ok(())
}
