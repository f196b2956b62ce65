//! Every public entry point that can fail (tensor ops, creation and moves, autograd, `nn` layers
//! and functional, losses, optimizers, modules and parameters, checkpoint loads) is called here so
//! that it fails, and its error must be located at the calling line of this file: never at a line
//! inside devcheck, never at a line of a helper devcheck called.
//!
//! The list of entry points is read from devcheck's own source with `syn` (every `pub fn` that
//! returns a `Result`, the `Result` methods of the public traits, and the `Forward` and
//! `Optimizer` impls), so a new public function without a row here fails
//! `every_public_entry_point_has_a_row`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use devcheck::checkpoint::LoadOptions;
use devcheck::nn::functional::{self as f, ClassLossOptions, Conv2dOptions, GeluApproximate, Reduction};
use devcheck::nn::{
    CausalSelfAttention, Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, Forward, Gelu, Layer,
    LayerNorm, Linear, MaxPool2d, MseLoss, Relu, Sequential, Sigmoid, Silu, SinusoidalPositionalEncoding,
    Tanh,
};
use devcheck::optim::{Adam, AdamConfig, AdamW, Optimizer, Sgd, SgdConfig};
use devcheck::{BinaryOp, CmpOp, DType, Device, Error, Module, Param, Tensor, UnaryOp};

/// A call and the line it is on.
struct Row {
    name: &'static str,
    line: u32,
    error: Option<Error>,
}

/// `row!("Type::method", call)`: one line each, so that `line!()` is the call's line.
macro_rules! row {
    ($name:literal, $call:expr) => {
        Row { name: $name, line: line!(), error: ($call).err() }
    };
}

/// Entry points that cannot fail at a call on a machine without a GPU, or whose only errors are
/// about a file rather than a call, with the reason.
const NO_ROW: &[(&str, &str)] = &[
    ("Tensor::cpu", "copying to the host fails only when a real GPU fails (a fake tensor copies for free)"),
    ("Tensor::contiguous", "fails only when a real GPU fails"),
    ("Tensor::to_dtype", "every cast between the dtypes is defined"),
    ("Tensor::cmp_scalar", "every dtype compares with a scalar: fails only when a real GPU fails"),
    ("Tensor::sum_all", "every dtype sums (bool and integers to i64): fails only when a real GPU fails"),
    ("Param::to_dtype", "every cast between the dtypes is defined"),
    ("Module::to_dtype", "covered by its own row: an integer dtype"),
    ("Module::visit", "returns only the visitor's own errors"),
    ("Module::visit_mut", "returns only the visitor's own errors"),
    ("Module::walk", "returns only the visitor's own errors"),
    ("Module::walk_mut", "returns only the visitor's own errors"),
    ("walk::submodule", "returns only the visitor's own errors"),
    ("walk::submodule_mut", "returns only the visitor's own errors"),
    ("walk::items", "returns only the visitor's own errors"),
    ("walk::items_mut", "returns only the visitor's own errors"),
    ("Visitor::enter_module", "a callback for walks to call, not an entry point"),
    ("Visitor::exit_module", "a callback for walks to call, not an entry point"),
    ("Visitor::visit_param", "a callback for walks to call, not an entry point"),
    ("Visitor::visit_buffer", "a callback for walks to call, not an entry point"),
    ("Visitor::visit_skipped", "a callback for walks to call, not an entry point"),
    ("VisitorMut::enter_module", "a callback for walks to call, not an entry point"),
    ("VisitorMut::exit_module", "a callback for walks to call, not an entry point"),
    ("VisitorMut::visit_param", "a callback for walks to call, not an entry point"),
    ("VisitorMut::visit_buffer", "a callback for walks to call, not an entry point"),
    ("VisitorMut::visit_skipped", "a callback for walks to call, not an entry point"),
    ("Forward::forward", "a trait method: every implementation has its own row"),
    ("Optimizer::step", "a trait method: every implementation has its own row"),
    ("Optimizer::load_state_dict", "a trait method: every implementation has its own row"),
    ("Optimizer::save", "file errors name the file (the state has no fake tensors to refuse)"),
    ("Optimizer::load", "file errors name the file"),
    (
        "checkpoint::save_tensors",
        "file errors name the file; a fake tensor is refused by `Module::save`'s row",
    ),
];

/// Entry points written by `macro_rules!` (the activations, `Adam`/`AdamW`), which a `syn` parse
/// of the source does not see: their rows are checked like the others.
const MACRO_MADE: &[&str] = &[
    "Relu::forward",
    "Tanh::forward",
    "Sigmoid::forward",
    "Silu::forward",
    "Adam::new",
    "Adam::with_config",
    "Adam::step",
    "Adam::load_state_dict",
    "AdamW::new",
    "AdamW::with_config",
    "AdamW::step",
    "AdamW::load_state_dict",
];

#[test]
fn every_public_entry_point_reports_at_the_calling_line() {
    let rows = all_rows();
    let mut wrong = Vec::new();
    for row in &rows {
        let Some(error) = &row.error else {
            wrong.push(format!("{} (line {}): no error", row.name, row.line));
            continue;
        };
        match error.location() {
            Some(at) if at.file() == file!() && at.line() == row.line => {}
            at => wrong.push(format!(
                "{} (line {}): located at {}\n{}",
                row.name,
                row.line,
                at.map_or("nowhere".to_string(), |l| format!("{}:{}:{}", l.file(), l.line(), l.column())),
                error.render(100)
            )),
        }
    }
    assert!(wrong.is_empty(), "{} of {} rows are wrong:\n\n{}", wrong.len(), rows.len(), wrong.join("\n\n"));
}

#[test]
fn every_public_entry_point_has_a_row() {
    let rows: BTreeSet<&str> = all_rows().iter().map(|r| r.name).collect();
    let exempt: BTreeMap<&str, &str> = NO_ROW.iter().copied().collect();
    let entry_points = public_entry_points();
    let missing: Vec<&String> = entry_points
        .iter()
        .filter(|e| !rows.contains(e.as_str()) && !exempt.contains_key(e.as_str()))
        .collect();
    assert!(missing.is_empty(), "public functions without a row in tests/locations.rs: {missing:?}");
    let stale: Vec<&&str> = rows
        .iter()
        .chain(exempt.keys())
        .filter(|r| !entry_points.contains(**r) && !MACRO_MADE.contains(r))
        .collect();
    assert!(stale.is_empty(), "rows or exemptions for functions that do not exist: {stale:?}");
}

fn all_rows() -> Vec<Row> {
    [tensor_rows(), autograd_rows(), nn_rows(), optim_rows(), module_rows()].into_iter().flatten().collect()
}

// ---------------------------------------------------------------------------------------------
// Fixtures

const CPU: Device = Device::Cpu;
const GPU: Device = Device::Cuda(0);
/// Not available on any machine (without a GPU, and with fewer than 100).
const ABSENT: Device = Device::Cuda(99);

fn cpu(shape: &[usize]) -> Tensor {
    Tensor::ones(shape, &CPU).unwrap()
}

/// A data-less tensor on `cuda:0`: an operand on another device than [`cpu`]'s.
fn gpu(shape: &[usize]) -> Tensor {
    Tensor::fake(shape, DType::F32, &GPU).unwrap()
}

fn ids(values: &[i64], device: &Device) -> Tensor {
    if device.is_cpu() {
        Tensor::from_slice(values, [values.len()], device).unwrap()
    } else {
        Tensor::fake([values.len()], DType::I64, device).unwrap()
    }
}

fn int(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, (DType::I64, &CPU)).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Rows

#[rustfmt::skip]
fn tensor_rows() -> Vec<Row> {
    let (a, g) = (cpu(&[2, 3]), gpu(&[2, 3]));
    let mask = Tensor::zeros([2, 3], (DType::Bool, &CPU)).unwrap();
    let (square, tall) = (cpu(&[3, 3]), cpu(&[4, 2]));
    let nowhere = Tensor::fake([2, 3], DType::F32, &ABSENT).unwrap();
    vec![
        // creation
        row!("Tensor::zeros", Tensor::zeros([usize::MAX, 2], &CPU)),
        row!("Tensor::fake", Tensor::fake([usize::MAX, 2], DType::F32, &GPU)),
        row!("Tensor::ones", Tensor::ones([usize::MAX, 2], &CPU)),
        row!("Tensor::full", Tensor::full([usize::MAX, 2], 1.0, &CPU)),
        row!("Tensor::arange", Tensor::arange(0.0, 1.0, 0.0, &CPU)),
        row!("Tensor::linspace", Tensor::linspace(0.0, 1.0, 3, &ABSENT)),
        row!("Tensor::eye", Tensor::eye(usize::MAX, &CPU)),
        row!("Tensor::rand", Tensor::rand([usize::MAX, 2], &CPU)),
        row!("Tensor::randn", Tensor::randn([usize::MAX, 2], &CPU)),
        row!("Tensor::from_vec", Tensor::from_vec(vec![1.0f32, 2.0], [3], &CPU)),
        row!("Tensor::from_slice", Tensor::from_slice(&[1.0f32, 2.0], [3], &CPU)),
        row!("Tensor::scalar", Tensor::scalar(1.0f32, &ABSENT)),
        row!("Tensor::from_raw_bytes", Tensor::from_raw_bytes(&[0u8; 3], DType::F32, [1], &CPU)),
        row!("Tensor::zeros_like", Tensor::zeros_like(&nowhere)),
        row!("Tensor::ones_like", Tensor::ones_like(&nowhere)),
        row!("Tensor::full_like", Tensor::full_like(&nowhere, 2.0)),
        row!("Tensor::rand_like", Tensor::rand_like(&nowhere)),
        row!("Tensor::randn_like", Tensor::randn_like(&nowhere)),
        row!("Tensor::new_zeros", nowhere.new_zeros([2])),
        row!("Tensor::new_ones", nowhere.new_ones([2])),
        row!("Tensor::new_full", nowhere.new_full([2], 1.0)),
        row!("Tensor::new_tensor", a.new_tensor(&[1.0f32, 2.0], [3])),
        // moves and host reads
        row!("Tensor::to", a.to(&ABSENT)),
        row!("Tensor::cuda", a.cuda(99)),
        row!("Tensor::to_non_blocking", a.to_non_blocking(&ABSENT)),
        row!("Tensor::pin_memory", g.pin_memory()),
        row!("Tensor::to_vec", g.to_vec::<f32>()),
        row!("Tensor::to_scalar", a.to_scalar::<f32>()),
        row!("Tensor::to_raw_bytes", g.to_raw_bytes()),
        row!("Tensor::size", a.size(5)),
        // element-wise
        row!("Tensor::add", a.add(&g)),
        row!("Tensor::sub", a.sub(&g)),
        row!("Tensor::mul", a.mul(&g)),
        row!("Tensor::div", a.div(&g)),
        row!("Tensor::pow", a.pow(&g)),
        row!("Tensor::maximum", a.maximum(&g)),
        row!("Tensor::minimum", a.minimum(&g)),
        row!("Tensor::binary_op", a.binary_op(BinaryOp::Add, &g)),
        row!("Tensor::add_into", a.add_into(&a, &g)),
        row!("Tensor::sub_into", a.sub_into(&a, &g)),
        row!("Tensor::mul_into", a.mul_into(&a, &g)),
        row!("Tensor::div_into", a.div_into(&a, &g)),
        row!("Tensor::binary_op_into", a.binary_op_into(BinaryOp::Mul, &a, &g)),
        row!("Tensor::add_scalar", mask.add_scalar(1.0)),
        row!("Tensor::sub_scalar", mask.sub_scalar(1.0)),
        row!("Tensor::rsub_scalar", mask.rsub_scalar(1.0)),
        row!("Tensor::mul_scalar", mask.mul_scalar(2.0)),
        row!("Tensor::div_scalar", mask.div_scalar(2.0)),
        row!("Tensor::pow_scalar", mask.pow_scalar(2.0)),
        row!("Tensor::maximum_scalar", mask.maximum_scalar(0.0)),
        row!("Tensor::minimum_scalar", mask.minimum_scalar(0.0)),
        row!("Tensor::clamp", mask.clamp(0.0, 1.0)),
        row!("Tensor::eq", a.eq(&g)),
        row!("Tensor::ne", a.ne(&g)),
        row!("Tensor::lt", a.lt(&g)),
        row!("Tensor::le", a.le(&g)),
        row!("Tensor::gt", a.gt(&g)),
        row!("Tensor::ge", a.ge(&g)),
        row!("Tensor::cmp_op", a.cmp_op(CmpOp::Lt, &g)),
        row!("Tensor::logical_and", mask.logical_and(&g)),
        row!("Tensor::logical_or", mask.logical_or(&g)),
        row!("Tensor::logical_not", a.logical_not()),
        row!("Tensor::neg", mask.neg()),
        row!("Tensor::abs", mask.abs()),
        row!("Tensor::relu", mask.relu()),
        row!("Tensor::exp", int(&[2]).exp()),
        row!("Tensor::log", int(&[2]).log()),
        row!("Tensor::sqrt", int(&[2]).sqrt()),
        row!("Tensor::rsqrt", int(&[2]).rsqrt()),
        row!("Tensor::tanh", int(&[2]).tanh()),
        row!("Tensor::sigmoid", int(&[2]).sigmoid()),
        row!("Tensor::gelu", int(&[2]).gelu()),
        row!("Tensor::gelu_tanh", int(&[2]).gelu_tanh()),
        row!("Tensor::silu", int(&[2]).silu()),
        row!("Tensor::sin", int(&[2]).sin()),
        row!("Tensor::cos", int(&[2]).cos()),
        row!("Tensor::unary_op", int(&[2]).unary_op(UnaryOp::Exp)),
        // matmul, reductions, selection
        row!("Tensor::matmul", a.matmul(&square.t().unwrap().reshape([9]).unwrap())),
        row!("Tensor::mm", a.mm(&g)),
        row!("Tensor::sum", a.sum(5, false)),
        row!("Tensor::mean", a.mean(5, false)),
        row!("Tensor::max", a.max(5, false)),
        row!("Tensor::min", a.min(5, false)),
        row!("Tensor::argmax", a.argmax(5, false)),
        row!("Tensor::argmin", a.argmin(5, false)),
        row!("Tensor::var", a.var(5, false)),
        row!("Tensor::var_with_correction", a.var_with_correction(5, 1, false)),
        row!("Tensor::mean_all", mask.mean_all()),
        row!("Tensor::max_all", cpu(&[0]).max_all()),
        row!("Tensor::min_all", cpu(&[0]).min_all()),
        row!("Tensor::softmax", a.softmax(5)),
        row!("Tensor::log_softmax", a.log_softmax(5)),
        row!("Tensor::where_cond", mask.where_cond(&a, &g)),
        row!("Tensor::masked_fill", g.masked_fill(&mask, 0.0)),
        row!("Tensor::triu", cpu(&[3]).triu(0)),
        row!("Tensor::tril", cpu(&[3]).tril(0)),
        // shape ops
        row!("Tensor::reshape", a.reshape([4])),
        row!("Tensor::flatten_from", a.flatten_from(5)),
        row!("Tensor::transpose", a.transpose(0, 5)),
        row!("Tensor::t", cpu(&[2, 2, 2]).t()),
        row!("Tensor::permute", a.permute([0, 0])),
        row!("Tensor::narrow", a.narrow(1, 2, 5)),
        row!("Tensor::squeeze", a.squeeze(5)),
        row!("Tensor::unsqueeze", a.unsqueeze(5)),
        row!("Tensor::expand", tall.expand([3, 3])),
        row!("Tensor::cat", Tensor::cat(&[&a, &g], 0)),
        row!("Tensor::stack", Tensor::stack(&[&a, &tall], 0)),
        row!("Tensor::index_select", g.index_select(0, &ids(&[0], &CPU))),
        row!("Tensor::gather", g.gather(0, &int(&[2, 3]))),
    ]
}

#[rustfmt::skip]
fn autograd_rows() -> Vec<Row> {
    let loss = cpu(&[2]).with_requires_grad().unwrap().mul_scalar(2.0).unwrap();
    vec![
        row!("Tensor::set_requires_grad", int(&[2]).set_requires_grad(true)),
        row!("Tensor::with_requires_grad", int(&[2]).with_requires_grad()),
        row!("Tensor::set_grad", cpu(&[2]).set_grad(Some(cpu(&[3])))),
        row!("Tensor::backward", loss.backward()),
        row!("Tensor::backward_with_grad", loss.backward_with_grad(&cpu(&[3]))),
    ]
}

#[rustfmt::skip]
fn nn_rows() -> Vec<Row> {
    let (x, images) = (gpu(&[2, 4]), Tensor::fake([1, 2, 5, 5], DType::F32, &GPU).unwrap());
    let linear = Linear::new(4, 3, &CPU).unwrap();
    let embedding = Embedding::new(10, 4, &CPU).unwrap();
    let norm = LayerNorm::new([4], &CPU).unwrap();
    let conv = Conv2d::new(2, 3, 3, &CPU).unwrap();
    let attention = CausalSelfAttention::new(4, 2, 8, &CPU).unwrap();
    let positions = SinusoidalPositionalEncoding::new(4, 8, &CPU).unwrap();
    let tokens = Tensor::fake([1, 3, 4], DType::F32, &GPU).unwrap();
    let sequential = Sequential::new().append(Linear::new(4, 3, &CPU).unwrap());
    let layer: &dyn Layer = &linear;
    let (logits, labels) = (gpu(&[2, 3]), ids(&[0, 1], &CPU));
    let weighted = ClassLossOptions { weight: Some(cpu(&[3])), ..Default::default() };
    let nothing_here = Tensor::fake([2, 4], DType::F32, &ABSENT).unwrap();
    vec![
        row!("Linear::new", Linear::new(4, 3, &Device::Mps)),
        row!("Linear::with_bias", Linear::with_bias(4, 3, false, &Device::Mps)),
        row!("Embedding::new", Embedding::new(10, 4, &Device::Mps)),
        row!("LayerNorm::new", LayerNorm::new([4], &Device::Mps)),
        row!("Conv2d::new", Conv2d::new(2, 3, 3, &Device::Mps)),
        row!("Conv2d::with_options", Conv2d::with_options(2, 3, [3, 3], Conv2dOptions::default(), true, &Device::Mps)),
        row!("CausalSelfAttention::new", CausalSelfAttention::new(5, 2, 8, &CPU)),
        row!("SinusoidalPositionalEncoding::new", SinusoidalPositionalEncoding::new(4, 8, &Device::Mps)),
        row!("Linear::forward", linear.forward(&x)),
        row!("Embedding::forward", embedding.forward(&ids(&[1, 2], &GPU))),
        row!("LayerNorm::forward", norm.forward(&x)),
        row!("Dropout::forward", Dropout::new(2.0).forward(&x)),
        row!("Conv2d::forward", conv.forward(&images)),
        row!("MaxPool2d::forward", MaxPool2d::new(2).forward(&x)),
        row!("Relu::forward", Relu.forward(&int(&[2]).to_dtype(DType::Bool).unwrap())),
        row!("Tanh::forward", Tanh.forward(&int(&[2]))),
        row!("Sigmoid::forward", Sigmoid.forward(&int(&[2]))),
        row!("Silu::forward", Silu.forward(&int(&[2]))),
        row!("Gelu::forward", Gelu::tanh().forward(&int(&[2]))),
        row!("Flatten::forward", Flatten.forward(&cpu(&[2]))),
        row!("CausalSelfAttention::forward", attention.forward(&tokens)),
        row!("SinusoidalPositionalEncoding::forward", positions.forward(&tokens)),
        row!("Sequential::forward", sequential.forward(&x)),
        row!("Layer::forward_layer", layer.forward_layer(&x)),
        row!("CrossEntropyLoss::forward", CrossEntropyLoss::new().forward(&logits, &labels)),
        row!("MseLoss::forward", MseLoss::new().forward(&logits, &cpu(&[2, 3]))),
        row!("functional::linear", f::linear(&x, &linear.weight.tensor(), None)),
        row!("functional::embedding", f::embedding(&ids(&[1], &GPU), &embedding.weight.tensor())),
        row!("functional::layer_norm", f::layer_norm(&x, &[4], Some(&norm.weight.tensor()), None, 1e-5)),
        row!("functional::gelu", f::gelu(&int(&[2]), GeluApproximate::None)),
        row!("functional::dropout", f::dropout(&x, -1.0, true)),
        row!("functional::conv2d", f::conv2d(&images, &conv.weight.tensor(), None, Conv2dOptions::default())),
        row!("functional::max_pool2d", f::max_pool2d(&images, [9, 9], Conv2dOptions::default())),
        row!("functional::cross_entropy", f::cross_entropy(&logits, &labels, &Default::default())),
        row!("functional::nll_loss", f::nll_loss(&logits, &ids(&[0, 1], &GPU), &weighted)),
        row!("functional::mse_loss", f::mse_loss(&x, &nothing_here, Reduction::Mean)),
    ]
}

#[rustfmt::skip]
fn optim_rows() -> Vec<Row> {
    let params = || vec![Param::new(cpu(&[2]))];
    // An integer parameter with a gradient cannot be updated.
    let frozen = Param::new(int(&[2]));
    frozen.tensor().set_grad(Some(int(&[2]))).unwrap();
    let mut sgd = Sgd::new(vec![frozen.clone()], 0.1).unwrap();
    let mut adam = Adam::new(vec![frozen.clone()], 0.1).unwrap();
    let mut adamw = AdamW::new(vec![frozen], 0.1).unwrap();
    let wrong_state = BTreeMap::from([("state.7.step".to_string(), int(&[1]))]);
    vec![
        row!("Sgd::new", Sgd::new(params(), -1.0)),
        row!("Sgd::with_config", Sgd::with_config(params(), SgdConfig { momentum: -1.0, ..SgdConfig::default() })),
        row!("Adam::new", Adam::new(params(), f64::NAN)),
        row!("Adam::with_config", Adam::with_config(params(), AdamConfig { lr: -1.0, ..AdamConfig::adam() })),
        row!("AdamW::new", AdamW::new(params(), -1.0)),
        row!("AdamW::with_config", AdamW::with_config(params(), AdamConfig { eps: -1.0, ..AdamConfig::adamw() })),
        row!("Sgd::step", sgd.step()),
        row!("Adam::step", adam.step()),
        row!("AdamW::step", adamw.step()),
        row!("Sgd::load_state_dict", sgd.load_state_dict(&wrong_state)),
        row!("Adam::load_state_dict", adam.load_state_dict(&wrong_state)),
        row!("AdamW::load_state_dict", adamw.load_state_dict(&wrong_state)),
    ]
}

#[derive(Module)]
struct Pair {
    first: Linear,
    second: Linear,
}

#[rustfmt::skip]
fn module_rows() -> Vec<Row> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pair.safetensors");
    let mut pair = Pair { first: Linear::new(2, 2, &CPU).unwrap(), second: Linear::new(2, 2, &CPU).unwrap() };
    pair.save(&file).unwrap();
    let mut wider = Pair { first: Linear::new(3, 2, &CPU).unwrap(), second: Linear::new(2, 2, &CPU).unwrap() };
    let mixed = {
        let _fake = devcheck::fake::enter();
        let mixed = Pair { first: Linear::new(2, 2, &CPU).unwrap(), second: Linear::new(2, 2, &CPU).unwrap() };
        mixed.second.weight.to(&GPU).unwrap();
        mixed
    };
    let fake_model = {
        let _fake = devcheck::fake::enter();
        Linear::new(2, 2, &GPU).unwrap()
    };
    let p = Param::new(cpu(&[2]));
    let strict = LoadOptions::new(&CPU);
    vec![
        row!("Module::to", pair.to(&ABSENT)),
        row!("Module::to_dtype", pair.to_dtype(DType::I64)),
        row!("Module::device", mixed.device()),
        row!("Module::save", fake_model.save(dir.path().join("fake.safetensors"))),
        row!("Module::load_state_dict", wider.load_state_dict(&file, &CPU)),
        row!("Module::load_state_dict_with", wider.load_state_dict_with(&file, &strict)),
        row!("checkpoint::save", devcheck::checkpoint::save(&fake_model, dir.path().join("fake.safetensors"))),
        row!("checkpoint::load_state_dict", devcheck::checkpoint::load_state_dict(&mut wider, &file, &CPU)),
        row!("checkpoint::load_state_dict_with", devcheck::checkpoint::load_state_dict_with(&mut wider, &file, &strict)),
        row!("Param::set_tensor", p.set_tensor(cpu(&[3]))),
        row!("Param::set_grad", p.set_grad(Some(cpu(&[3])))),
        row!("Param::set_state", p.set_state("exp_avg", gpu(&[2]))),
        row!("Param::to", p.to(&ABSENT)),
    ]
}

// ---------------------------------------------------------------------------------------------
// The public entry points, from the source

/// `Type::method`, `Trait::method` and `module::function` for every public function that returns
/// a `Result` in the files of the entry points listed in the module docs.
fn public_entry_points() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["tensor", "nn", "optim", "module"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.extend(["autograd/mod.rs", "checkpoint.rs"].map(|f| root.join(f)));
    let mut out = BTreeSet::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // A folder's `mod.rs` is the module named after the folder.
        let named = if path.ends_with("mod.rs") { path.parent().unwrap() } else { &path };
        let stem = named.file_stem().unwrap().to_string_lossy().to_string();
        collect(&file.items, &stem, &mut out);
    }
    out
}

/// The `.rs` files in `dir` and its folders.
fn rust_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        // The ndarray interop is behind a feature; its errors are dtype errors of a view.
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("interop.rs") {
            files.push(path);
        }
    }
}

fn collect(items: &[syn::Item], module: &str, out: &mut BTreeSet<String>) {
    for item in items {
        match item {
            syn::Item::Fn(f) if is_pub(&f.vis) && returns_result(&f.sig) => {
                out.insert(format!("{module}::{}", f.sig.ident));
            }
            syn::Item::Mod(m) if is_pub(&m.vis) => {
                if let Some((_, items)) = &m.content {
                    collect(items, &m.ident.to_string(), out);
                }
            }
            syn::Item::Trait(t) if is_pub(&t.vis) => {
                for inner in &t.items {
                    if let syn::TraitItem::Fn(f) = inner
                        && returns_result(&f.sig)
                    {
                        out.insert(format!("{}::{}", t.ident, f.sig.ident));
                    }
                }
            }
            syn::Item::Impl(imp) => {
                let Some(ty) = type_name(&imp.self_ty) else { continue };
                let trait_name = imp
                    .trait_
                    .as_ref()
                    .and_then(|(_, path, _)| path.segments.last())
                    .map(|s| s.ident.to_string());
                // Of trait impls only the ones users call: `forward` and the optimizers'.
                let public_trait = matches!(trait_name.as_deref(), Some("Forward" | "Optimizer"));
                if trait_name.is_some() && !public_trait {
                    continue;
                }
                for inner in &imp.items {
                    if let syn::ImplItem::Fn(f) = inner
                        && (public_trait || is_pub(&f.vis))
                        && returns_result(&f.sig)
                    {
                        out.insert(format!("{ty}::{}", f.sig.ident));
                    }
                }
            }
            _ => {}
        }
    }
}

fn is_pub(vis: &syn::Visibility) -> bool {
    matches!(vis, syn::Visibility::Public(_))
}

fn returns_result(sig: &syn::Signature) -> bool {
    match &sig.output {
        syn::ReturnType::Type(_, ty) => type_name(ty).as_deref() == Some("Result"),
        syn::ReturnType::Default => false,
    }
}

fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}
