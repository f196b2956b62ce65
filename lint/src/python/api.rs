//! What the rules know of PyTorch's API, by qualified name: which functions make tensors (and
//! where), which methods return a new tensor or read it on the host, which `nn` classes are
//! modules. One table per question; the rules and the type inference ask here.

/// A `torch` function that makes a tensor from nothing or from host data: with no `device=`, it
/// lands on the default device (the CPU unless `torch.set_default_device` says otherwise).
pub(crate) fn is_creation(q: &str) -> bool {
    let Some(name) = q.strip_prefix("torch.") else { return false };
    matches!(
        name,
        "tensor"
            | "as_tensor"
            | "asarray"
            | "from_numpy"
            | "zeros"
            | "ones"
            | "full"
            | "empty"
            | "arange"
            | "range"
            | "linspace"
            | "logspace"
            | "eye"
            | "rand"
            | "randn"
            | "randint"
            | "randperm"
            | "tril_indices"
            | "triu_indices"
            | "empty_strided"
            | "frombuffer"
            | "FloatTensor"
            | "LongTensor"
            | "IntTensor"
            | "BoolTensor"
            | "ByteTensor"
            | "DoubleTensor"
            | "HalfTensor"
            | "ShortTensor"
            | "CharTensor"
            | "BFloat16Tensor"
            | "Tensor"
            // Sample frequencies and the signal windows `stft` takes: made on the default
            // device like `arange`.
            | "fft.fftfreq"
            | "fft.rfftfreq"
            | "hann_window"
            | "hamming_window"
            | "blackman_window"
            | "bartlett_window"
            | "kaiser_window"
    )
}

/// The legacy typed constructors (`torch.LongTensor(..)`, `torch.Tensor(..)`): they make CPU
/// tensors only, and raise when given another device.
pub(crate) fn is_typed_constructor(q: &str) -> bool {
    is_creation(q) && q.ends_with("Tensor")
}

/// Creation functions that take a `device=` argument. `torch.from_numpy` and `torch.frombuffer`
/// share the host memory and take none; the typed constructors (`torch.FloatTensor(..)`) refuse
/// any device but the CPU.
pub(crate) fn creation_takes_device(q: &str) -> bool {
    is_creation(q) && !matches!(q, "torch.from_numpy" | "torch.frombuffer") && !is_typed_constructor(q)
}

/// Creation functions whose result is the data passed in, not a shape: `torch.tensor(0.5)` is a
/// 0-dim tensor, which PyTorch lets CUDA ops take from the CPU.
pub(crate) fn creation_takes_data(q: &str) -> bool {
    matches!(q, "torch.tensor" | "torch.as_tensor" | "torch.asarray" | "torch.from_numpy")
}

/// `torch` functions (outside `nn.functional`, `linalg`, `fft`, `special`, which all return
/// tensors) that return a tensor computed from their tensor arguments.
const TENSOR_FUNCTIONS: &[&str] = &[
    "abs",
    "acos",
    "add",
    "addcdiv",
    "addcmul",
    "addmm",
    "all",
    "amax",
    "amin",
    "angle",
    "any",
    "argmax",
    "argmin",
    "argsort",
    "argwhere",
    "asin",
    "atan",
    "atan2",
    "baddbmm",
    "bernoulli",
    "bincount",
    "block_diag",
    "bmm",
    "broadcast_to",
    "bucketize",
    "cartesian_prod",
    "cat",
    "cdist",
    "ceil",
    "chunk",
    "clamp",
    "clamp_max",
    "clamp_min",
    "clip",
    "clone",
    "column_stack",
    "combinations",
    "complex",
    "concat",
    "concatenate",
    "conj",
    "conv1d",
    "conv2d",
    "conv3d",
    "corrcoef",
    "cos",
    "cosh",
    "cosine_similarity",
    "count_nonzero",
    "cov",
    "cross",
    "cummax",
    "cummin",
    "cumprod",
    "cumsum",
    "deg2rad",
    "det",
    "detach",
    "diag",
    "diag_embed",
    "diagonal",
    "diff",
    "dist",
    "div",
    "dot",
    "dropout",
    "dstack",
    "einsum",
    "empty_like",
    "eq",
    "erf",
    "erfinv",
    "exp",
    "exp2",
    "expm1",
    "flatten",
    "flip",
    "fliplr",
    "flipud",
    "float_power",
    "floor",
    "floor_divide",
    "fmod",
    "frac",
    "full_like",
    "gather",
    "ge",
    "gt",
    "heaviside",
    "histc",
    "hstack",
    "hypot",
    "imag",
    "index_add",
    "index_select",
    "inverse",
    "isclose",
    "isfinite",
    "isin",
    "isinf",
    "isnan",
    "istft",
    "kron",
    "layer_norm",
    "le",
    "lerp",
    "lgamma",
    "log",
    "log10",
    "log1p",
    "log2",
    "log_softmax",
    "logaddexp",
    "logcumsumexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "logit",
    "logsumexp",
    "lt",
    "masked_fill",
    "masked_select",
    "matmul",
    "max",
    "maximum",
    "mean",
    "median",
    "meshgrid",
    "min",
    "minimum",
    "mm",
    "movedim",
    "mul",
    "multinomial",
    "mv",
    "nan_to_num",
    "narrow",
    "ne",
    "neg",
    "nonzero",
    "norm",
    "normal",
    "ones_like",
    "outer",
    "pairwise_distance",
    "permute",
    "polar",
    "pow",
    "prod",
    "quantile",
    "rad2deg",
    "rand_like",
    "randint_like",
    "randn_like",
    "real",
    "reciprocal",
    "relu",
    "remainder",
    "repeat_interleave",
    "reshape",
    "roll",
    "rot90",
    "round",
    "rsqrt",
    "scatter",
    "scatter_add",
    "searchsorted",
    "select",
    "sgn",
    "sigmoid",
    "sign",
    "signbit",
    "sin",
    "sinc",
    "sinh",
    "softmax",
    "sort",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "std",
    "std_mean",
    "stft",
    "sub",
    "sum",
    "t",
    "take",
    "take_along_dim",
    "tan",
    "tanh",
    "tensordot",
    "tile",
    "topk",
    "trace",
    "transpose",
    "tril",
    "triu",
    "true_divide",
    "trunc",
    "unbind",
    "unique",
    "unsqueeze",
    "var",
    "var_mean",
    "view_as_complex",
    "view_as_real",
    "vstack",
    "where",
    "zeros_like",
];

/// A `torch` function that returns a tensor (or a tuple or list of tensors).
pub(crate) fn returns_tensor(q: &str) -> bool {
    if is_creation(q) {
        return true;
    }
    for module in ["torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special."] {
        if q.strip_prefix(module).is_some_and(|rest| !rest.contains('.')) {
            return true;
        }
    }
    q.strip_prefix("torch.").is_some_and(|name| TENSOR_FUNCTIONS.binary_search(&name).is_ok())
}

/// An einops function (`rearrange`, `repeat`, `reduce`) that returns an array of the kind and on
/// the device of its first argument (a tensor for a tensor, a numpy array for an array); or a
/// padding helper of `torch.nn.utils.rnn` whose data (the result, or the first of its fields:
/// [`host_fields_after_first`]) is its first argument, packed or unpacked.
pub(crate) fn keeps_its_input(q: &str) -> bool {
    matches!(q, "einops.rearrange" | "einops.repeat" | "einops.reduce") || host_fields_after_first(q)
}

/// `torch.nn.utils.rnn.pack_padded_sequence(x, lengths)` and `pad_packed_sequence(packed)`: the
/// first field is the data, on its input's device; the others (`batch_sizes`, `lengths`) are
/// always on the host.
pub(crate) fn host_fields_after_first(q: &str) -> bool {
    matches!(q, "torch.nn.utils.rnn.pack_padded_sequence" | "torch.nn.utils.rnn.pad_packed_sequence")
}

/// Tensor methods that return a new tensor (or tuple or list of tensors): a statement made of
/// one throws its result away.
const TENSOR_METHODS: &[&str] = &[
    "T",
    "abs",
    "add",
    "addmm",
    "all",
    "amax",
    "amin",
    "any",
    "argmax",
    "argmin",
    "argsort",
    "baddbmm",
    "bernoulli",
    "bfloat16",
    "bmm",
    "bool",
    "byte",
    "ceil",
    "char",
    "chunk",
    "clamp",
    "clamp_max",
    "clamp_min",
    "clip",
    "clone",
    "contiguous",
    "cos",
    "cpu",
    "cuda",
    "cumprod",
    "cumsum",
    "detach",
    "diag",
    "diagonal",
    "div",
    "double",
    "eq",
    "exp",
    "expand",
    "expand_as",
    "flatten",
    "flip",
    "float",
    "floor",
    "gather",
    "ge",
    "gt",
    "half",
    "index_add",
    "index_copy",
    "index_fill",
    "index_select",
    "int",
    "isinf",
    "isnan",
    "le",
    "log",
    "log_softmax",
    "logical_not",
    "logsumexp",
    "long",
    "lt",
    "masked_fill",
    "masked_scatter",
    "masked_select",
    "matmul",
    "max",
    "mean",
    "min",
    "mm",
    "mul",
    "multinomial",
    "narrow",
    "ne",
    "neg",
    "new_empty",
    "new_full",
    "new_ones",
    "new_tensor",
    "new_zeros",
    "nonzero",
    "norm",
    "permute",
    "pin_memory",
    "pow",
    "prod",
    "reciprocal",
    "relu",
    "repeat",
    "repeat_interleave",
    "reshape",
    "reshape_as",
    "roll",
    "round",
    "rsqrt",
    "scatter",
    "scatter_add",
    "select",
    "short",
    "sigmoid",
    "sign",
    "sin",
    "softmax",
    "sort",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "std",
    "stft",
    "sub",
    "sum",
    "t",
    "tanh",
    "to",
    "topk",
    "transpose",
    "tril",
    "triu",
    "type",
    "type_as",
    "unbind",
    "unflatten",
    "unique",
    "unsqueeze",
    "var",
    "view",
    "view_as",
    "where",
];

/// A call of a Transformers model's method that hands out one of its layers
/// (`model.get_input_embeddings()`, `get_output_embeddings()`): a module, on the model's device.
pub(crate) fn returns_a_layer(e: &ruff_python_ast::Expr) -> bool {
    matches!(e, ruff_python_ast::Expr::Call(c) if matches!(&*c.func,
        ruff_python_ast::Expr::Attribute(a) if matches!(a.attr.as_str(), "get_input_embeddings" | "get_output_embeddings")))
}

/// Tensor methods whose result lives where their receiver does: views, copies and casts of dtype.
pub(crate) fn keeps_place(method: &str) -> bool {
    matches!(
        method,
        "expand"
            | "expand_as"
            | "unsqueeze"
            | "squeeze"
            | "view"
            | "view_as"
            | "reshape"
            | "flatten"
            | "permute"
            | "transpose"
            | "t"
            | "repeat"
            | "narrow"
            | "clone"
            | "detach"
            | "contiguous"
            | "float"
            | "half"
            | "double"
            | "bfloat16"
            | "long"
            | "int"
            | "bool"
            | "flip"
    )
}

pub(crate) fn tensor_method_returns_tensor(method: &str) -> bool {
    TENSOR_METHODS.binary_search(&method).is_ok() || method.ends_with('_')
}

/// A wrapper that returns a module running the one it is given first (`DataParallel(net, ..)`,
/// `torch.compile(net)`), torch's or a repository's own `DataParallel`.
pub(crate) fn is_module_wrapper(q: &str) -> bool {
    is_torch_wrapper(q)
        || q.rsplit('.').next().is_some_and(|last| matches!(last, "DataParallel" | "DistributedDataParallel"))
}

/// PyTorch's wrappers of a module: what they return is a module that runs the one they wrap.
fn is_torch_wrapper(q: &str) -> bool {
    matches!(
        q,
        "torch.nn.parallel.DistributedDataParallel"
            | "torch.nn.parallel.DataParallel"
            | "torch.nn.parallel.distributed.DistributedDataParallel"
            | "torch.distributed.fsdp.FullyShardedDataParallel"
            | "torch.compile"
    )
}

/// Methods that move or convert a tensor and return the new one: `x.to(..)`, `x.cuda()`,
/// `x.half()`. On an `nn.Module` the same names work in place.
pub(crate) fn is_move_or_convert(method: &str) -> bool {
    matches!(method, "to" | "cuda" | "cpu" | "half" | "float" | "double" | "bfloat16" | "type")
}

/// Module methods that work in place and return the module itself.
pub(crate) fn module_method_returns_self(method: &str) -> bool {
    matches!(
        method,
        "to" | "cuda"
            | "cpu"
            | "train"
            | "eval"
            | "float"
            | "half"
            | "double"
            | "bfloat16"
            | "type"
            | "requires_grad_"
            | "apply"
            | "share_memory"
            | "to_empty"
    )
}

/// An `nn.Module` class (or a function that builds one) by qualified name, from PyTorch and the
/// libraries built on it.
pub(crate) fn is_module_class(q: &str) -> bool {
    if let Some(name) = q.strip_prefix("torch.nn.")
        && !name.starts_with("parallel.")
    {
        return !name.contains('.')
            && name.starts_with(|c: char| c.is_ascii_uppercase())
            && !matches!(name, "Parameter" | "Buffer" | "UninitializedParameter" | "UninitializedBuffer");
    }
    matches!(
        q,
        "pytorch_lightning.LightningModule"
            | "lightning.LightningModule"
            | "lightning.pytorch.LightningModule"
            | "pytorch_lightning.core.LightningModule"
            | "transformers.PreTrainedModel"
            | "transformers.modeling_utils.PreTrainedModel"
            | "timm.create_model"
    ) || is_torch_wrapper(q)
        || is_openmmlab_module(q)
        || q.strip_prefix("torchvision.models.")
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_lowercase()))
        || transformers_model_class(q)
}

/// OpenMMLab's `nn.Module` bases (`mmcv.runner.BaseModule`, `mmengine.model.BaseModule`, their
/// `ModuleList` and `Sequential`), which detection and segmentation code bases build on.
fn is_openmmlab_module(q: &str) -> bool {
    let Some(rest) = q.strip_prefix("mmcv.runner.").or_else(|| q.strip_prefix("mmengine.model.")) else {
        return false;
    };
    let name = rest.strip_prefix("base_module.").unwrap_or(rest);
    matches!(name, "BaseModule" | "ModuleList" | "Sequential" | "ModuleDict" | "BaseModel")
}

/// A PyTorch model class of Transformers, as its modelling files name them: a base
/// (`BertPreTrainedModel`), a model (`RobertaModel`) or a model with a head
/// (`BertForMaskedLM`), not TensorFlow's or Flax's (`TFBertModel`, `FlaxBertModel`).
fn transformers_model_class(q: &str) -> bool {
    let Some(rest) = q.strip_prefix("transformers.") else { return false };
    let name = rest.rsplit('.').next().unwrap_or(rest);
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && !name.starts_with("TF")
        && !name.starts_with("Flax")
        && !name.starts_with("Auto")
        && (name.ends_with("Model") || name.contains("For"))
}

/// A `torch.nn` module that holds no parameter and no buffer (activations, pooling, dropout,
/// padding, reshaping): a move has nothing of it to move.
pub(crate) fn class_holds_no_tensors(q: &str) -> bool {
    let Some(name) = q.strip_prefix("torch.nn.") else { return false };
    matches!(
        name,
        "ReLU"
            | "ReLU6"
            | "LeakyReLU"
            | "ELU"
            | "SELU"
            | "CELU"
            | "GELU"
            | "SiLU"
            | "Mish"
            | "Sigmoid"
            | "Tanh"
            | "Softmax"
            | "Softmin"
            | "LogSoftmax"
            | "LogSigmoid"
            | "Softplus"
            | "Softsign"
            | "Softshrink"
            | "Hardshrink"
            | "Tanhshrink"
            | "Hardtanh"
            | "Hardswish"
            | "Hardsigmoid"
            | "Threshold"
            | "GLU"
            | "Identity"
            | "Flatten"
            | "Unflatten"
            | "Dropout"
            | "Dropout1d"
            | "Dropout2d"
            | "Dropout3d"
            | "AlphaDropout"
            | "FeatureAlphaDropout"
            | "MaxPool1d"
            | "MaxPool2d"
            | "MaxPool3d"
            | "AvgPool1d"
            | "AvgPool2d"
            | "AvgPool3d"
            | "AdaptiveAvgPool1d"
            | "AdaptiveAvgPool2d"
            | "AdaptiveAvgPool3d"
            | "AdaptiveMaxPool1d"
            | "AdaptiveMaxPool2d"
            | "AdaptiveMaxPool3d"
            | "LPPool1d"
            | "LPPool2d"
            | "Upsample"
            | "UpsamplingNearest2d"
            | "UpsamplingBilinear2d"
            | "PixelShuffle"
            | "PixelUnshuffle"
            | "ChannelShuffle"
            | "ZeroPad1d"
            | "ZeroPad2d"
            | "ZeroPad3d"
            | "ConstantPad1d"
            | "ConstantPad2d"
            | "ConstantPad3d"
            | "ReflectionPad1d"
            | "ReflectionPad2d"
            | "ReflectionPad3d"
            | "ReplicationPad1d"
            | "ReplicationPad2d"
            | "ReplicationPad3d"
            | "CircularPad1d"
            | "CircularPad2d"
            | "CircularPad3d"
            | "Fold"
            | "Unfold"
            | "CosineSimilarity"
            | "PairwiseDistance"
    )
}

/// The training framework whose base class `q` names, if any: a framework that calls its
/// subclasses' step methods at every training step with the batch already on the device.
pub(crate) fn training_framework(q: &str) -> Option<Framework> {
    if q.ends_with("LightningModule") {
        return Some(Framework::Lightning);
    }
    // `torch.optim.Optimizer`, or one of its optimizers (not a learning-rate scheduler, whose
    // `step` may run once per epoch).
    if q.strip_prefix("torch.optim.")
        .is_some_and(|rest| !rest.starts_with("lr_scheduler") && !rest.starts_with("swa_utils"))
    {
        return Some(Framework::Optimizer);
    }
    // trl's trainers (`trl.SFTTrainer`, `trl.trainer.dpo_trainer.DPOTrainer`) are subclasses.
    (matches!(
        q,
        "transformers.Trainer"
            | "transformers.trainer.Trainer"
            | "transformers.Seq2SeqTrainer"
            | "transformers.trainer_seq2seq.Seq2SeqTrainer"
    ) || (q.starts_with("trl.") && q.ends_with("Trainer")))
    .then_some(Framework::Transformers)
}

/// A training framework ([`training_framework`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framework {
    /// Lightning calls a `LightningModule`'s `training_step`.
    Lightning,
    /// Transformers' `Trainer` calls its `training_step`, which calls `compute_loss`.
    Transformers,
    /// A training loop calls its optimizer's `step` once per step.
    Optimizer,
}

impl Framework {
    /// The methods the framework calls at every training step.
    pub(crate) fn calls_at_every_step(self, method: &str) -> bool {
        match self {
            Framework::Lightning => method == "training_step",
            Framework::Transformers => matches!(method, "training_step" | "compute_loss"),
            Framework::Optimizer => method == "step",
        }
    }
}

/// Base classes that are known not to be modules.
pub(crate) fn is_plain_base(q: &str) -> bool {
    matches!(
        q,
        "builtins.object"
            | "builtins.dict"
            | "builtins.list"
            | "builtins.tuple"
            | "builtins.Exception"
            | "builtins.ValueError"
            | "builtins.RuntimeError"
            | "typing.NamedTuple"
            | "typing.Generic"
            | "typing.Protocol"
            | "enum.Enum"
            | "enum.IntEnum"
            | "abc.ABC"
            | "torch.utils.data.Dataset"
            | "torch.utils.data.IterableDataset"
            | "torch.utils.data.Sampler"
            | "torch.autograd.Function"
            | "torch.optim.Optimizer"
            | "torch.optim.lr_scheduler.LRScheduler"
            | "torch.optim.lr_scheduler._LRScheduler"
    )
}

/// `nn` classes whose call returns something other than one tensor (a tuple: output and state).
pub(crate) fn module_returns_tuple(q: &str) -> bool {
    matches!(
        q,
        "torch.nn.LSTM"
            | "torch.nn.GRU"
            | "torch.nn.RNN"
            | "torch.nn.LSTMCell"
            | "torch.nn.MultiheadAttention"
            | "torch.nn.ModuleList"
            | "torch.nn.ModuleDict"
            | "torch.nn.ParameterList"
            | "torch.nn.ParameterDict"
    )
}

pub(crate) fn is_parameter_class(q: &str) -> bool {
    matches!(q, "torch.nn.Parameter" | "torch.nn.UninitializedParameter")
}

/// Loss modules: called with predictions and targets, they return a tensor.
pub(crate) fn is_loss_class(q: &str) -> bool {
    q.strip_prefix("torch.nn.").is_some_and(|n| n.ends_with("Loss"))
}

/// Annotations that say "a tensor".
pub(crate) fn is_tensor_type(q: &str) -> bool {
    matches!(
        q,
        "torch.Tensor"
            | "torch.FloatTensor"
            | "torch.LongTensor"
            | "torch.BoolTensor"
            | "torch.IntTensor"
            | "torch.cuda.FloatTensor"
            | "torch.nn.Parameter"
    )
}

/// The clock functions a timing reads.
pub(crate) fn is_clock(q: &str) -> bool {
    matches!(
        q,
        "time.time"
            | "time.perf_counter"
            | "time.monotonic"
            | "time.perf_counter_ns"
            | "time.time_ns"
            | "timeit.default_timer"
    )
}

/// The DataLoader class.
pub(crate) fn is_data_loader(q: &str) -> bool {
    q == "torch.utils.data.DataLoader"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_are_sorted_for_binary_search() {
        for table in [TENSOR_FUNCTIONS, TENSOR_METHODS] {
            for w in table.windows(2) {
                assert!(w[0] < w[1], "{} before {}", w[0], w[1]);
            }
        }
    }

    #[test]
    fn modules_and_tensors_are_told_apart_by_qualified_name() {
        assert!(is_module_class("torch.nn.Linear"));
        assert!(!is_module_class("torch.nn.Parameter"));
        assert!(!is_module_class("torch.nn.functional.relu"));
        assert!(returns_tensor("torch.nn.functional.relu"));
        assert!(returns_tensor("torch.cat"));
        assert!(!returns_tensor("torch.load"));
        assert!(!returns_tensor("torch.device"));
        assert!(keeps_its_input("einops.repeat"));
        assert!(!keeps_its_input("einops.parse_shape"));
        assert!(is_creation("torch.arange"));
        assert!(!is_creation("torch.zeros_like"));
    }
}
