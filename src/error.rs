//! The one error type of devcheck: every failure is a [`miette::Diagnostic`] with a help line.
//!
//! This file sits below every layer that raises errors and imports none of them: it holds the
//! errors of the tensor core (devices, dtypes, shapes, memory) and the help lines they share with
//! the checker's reports. The layers above keep their own error types next to their code
//! (`ModuleError`, `CheckpointError`, `CheckError`, `DataError`, `CudaError`), each a
//! [`LayerError`] with a `From` into [`Error`] beside it.
//!
//! `Debug` renders the full report (not a struct dump), so a test written
//! `fn t() -> devcheck::Result<()>` that fails through `?` prints what a person needs to fix it.

use std::fmt;
use std::panic::Location;

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};

use crate::device::{DEVICE_FORMS, Device};
use crate::dtype::DType;

/// `Result<T, devcheck::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One tensor taking part in a failing op, as errors and reports describe it.
#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    /// Its role in the op: `lhs`, `rhs`, `input`, `mask`, `index`, `tensors[2]`, ...
    pub role: String,
    /// Its path in a module (`encoder.layers.0.mask`) or a name given with `Tensor::set_name`.
    pub name: Option<String>,
    /// What it is to a model (a parameter, a buffer, a skipped field, a dry run's input); `None`
    /// for a tensor no model holds (a helper made in forward, or a batch).
    pub kind: Option<crate::tensor::TensorRole>,
    /// A view of another tensor's data (`x.t()`, `x.narrow(..)`): name, kind and origin are its
    /// source's.
    pub view: bool,
    pub device: Device,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Where it was created: file:line:col and the op that made it.
    pub origin: crate::tensor::Origin,
}

impl fmt::Display for Operand {
    /// `rhs \`fc.weight\` (a parameter, a view): cpu f32 [3, 2], made by \`Linear::new\` at ..`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.role)?;
        if let Some(name) = &self.name {
            write!(f, " `{name}`")?;
        }
        let mut about: Vec<String> = match &self.kind {
            // The skipped field itself, not a tensor inside a skipped submodule.
            Some(crate::tensor::TensorRole::Skipped(field))
                if self.name.as_deref() == Some(field.path.as_str()) =>
            {
                vec!["a `#[module(skip)]` field".to_string()]
            }
            kind => kind.iter().map(ToString::to_string).collect(),
        };
        if self.view {
            about.push("a view".to_string());
        }
        if !about.is_empty() {
            write!(f, " ({})", about.join(", "))?;
        }
        write!(
            f,
            ": {} {} {}, made by `{}` at {}",
            self.device,
            self.dtype,
            crate::shape::fmt_shape(&self.shape),
            self.origin.op(),
            self.origin.location_string()
        )
    }
}

fn operand_lines(operands: &[Operand]) -> String {
    operands.iter().map(|o| format!("\n  {o}")).collect()
}

fn call_site(location: &&'static Location<'static>) -> String {
    format!("{}:{}:{}", location.file(), location.line(), location.column())
}

/// `\n  at file:line:col`, or nothing for an unknown location.
fn at_line(location: &Option<&'static Location<'static>>) -> String {
    location.as_ref().map(|l| format!("\n  at {}", call_site(l))).unwrap_or_default()
}

/// Everything that can go wrong in devcheck.
#[derive(thiserror::Error, Diagnostic)]
#[non_exhaustive]
pub enum Error {
    #[error("unknown device `{input}`")]
    #[diagnostic(code(devcheck::invalid_device), help("valid devices are {DEVICE_FORMS}"))]
    InvalidDevice { input: String },

    #[error("unknown dtype `{input}`")]
    #[diagnostic(
        code(devcheck::invalid_dtype),
        help(
            "valid dtypes are f32, f64, f16, bf16, i64, i32, u8, bool (PyTorch's names such as `float32` work too)"
        )
    )]
    InvalidDType { input: String },

    #[error("device {device} is not available: {reason}{}", at_line(location))]
    #[diagnostic(
        code(devcheck::device_unavailable),
        help(
            "pick the device at run time with `Device::best_available()` (cuda:0 when present, else cpu), \
             or pass `cpu`; to check device placement without a GPU use a fake device (`devcheck::fake`)"
        )
    )]
    DeviceUnavailable {
        device: Device,
        reason: String,
        /// The call that needed the device, when it is known.
        location: Option<&'static Location<'static>>,
    },

    #[error(
        "device mismatch in `{op}`: {}\n  at {}{}",
        mismatch_summary(operands),
        call_site(location),
        operand_lines(operands)
    )]
    #[diagnostic(code(devcheck::device_mismatch), help("{}", device_help(operands)))]
    DeviceMismatch { op: &'static str, operands: Vec<Operand>, location: &'static Location<'static> },

    #[error("shape mismatch in `{op}`: {detail}\n  at {}{}", call_site(location), operand_lines(operands))]
    #[diagnostic(code(devcheck::shape_mismatch), help("{help}"))]
    ShapeMismatch {
        op: &'static str,
        detail: String,
        help: String,
        operands: Vec<Operand>,
        location: &'static Location<'static>,
    },

    #[error("dtype mismatch in `{op}`: {detail}\n  at {}{}", call_site(location), operand_lines(operands))]
    #[diagnostic(code(devcheck::dtype_mismatch), help("{help}"))]
    DTypeMismatch {
        op: &'static str,
        detail: String,
        help: String,
        operands: Vec<Operand>,
        location: &'static Location<'static>,
    },

    #[error("invalid argument to `{op}`: {detail}\n  at {}", call_site(location))]
    #[diagnostic(code(devcheck::invalid_argument), help("{help}"))]
    InvalidArgument { op: &'static str, detail: String, help: String, location: &'static Location<'static> },

    #[error(
        "`{op}` needs element data, but {} has none: it lives on a fake {}\n  at {}{}",
        operand.role,
        operand.device,
        call_site(location),
        operand_lines(std::slice::from_ref(operand))
    )]
    #[diagnostic(
        code(devcheck::no_data),
        help(
            "fake tensors carry shape, dtype and device only (they exist for dry runs); \
             code that reads values during a dry run needs real data at this line"
        )
    )]
    NoData { op: &'static str, operand: Box<Operand>, location: &'static Location<'static> },

    #[error(
        "`{op}` reads host memory, but the tensor lives on {}\n  at {}{}",
        operand.device,
        call_site(location),
        operand_lines(std::slice::from_ref(operand))
    )]
    #[diagnostic(
        code(devcheck::not_on_host),
        help(
            "copy it to the host first with `.cpu()?` (PyTorch's `.cpu().numpy()` rule); do it once, \
             outside hot loops, since every copy from an accelerator waits for it to finish"
        )
    )]
    NotOnHost { op: &'static str, operand: Box<Operand>, location: &'static Location<'static> },

    #[error("`{op}` is not supported on {device} yet\n  at {}", call_site(location))]
    #[diagnostic(code(devcheck::unsupported), help("{help}"))]
    Unsupported { op: &'static str, device: Device, help: String, location: &'static Location<'static> },

    #[error(
        "CUDA out of memory: tried to allocate {} on {device}\n  {device}: {}\n  devcheck: {} allocated by tensors, {} reserved but unused (cached)",
        crate::units::format_bytes(*requested, 2),
        device_capacity_line(*total, *free),
        crate::units::format_bytes(*allocated, 2),
        crate::units::format_bytes(reserved.saturating_sub(*allocated), 2)
    )]
    #[diagnostic(
        code(devcheck::cuda_out_of_memory),
        help("{}", device_out_of_memory_help(*allocated, *reserved))
    )]
    OutOfMemory {
        device: Device,
        /// Bytes asked for, before rounding.
        requested: usize,
        /// The device's memory, as the driver reports it (`None` when it could not be asked).
        total: Option<usize>,
        free: Option<usize>,
        /// Bytes held by live tensors, and bytes held by the caching allocator in all.
        allocated: usize,
        reserved: usize,
    },

    #[error(
        "out of host memory in `{op}`: tried to allocate {}\n  at {}\n  this machine: {}",
        crate::units::format_bytes(*requested, 1),
        call_site(location),
        host_capacity_line(*total, *available)
    )]
    #[diagnostic(code(devcheck::host_out_of_memory), help("{}", host_out_of_memory_help(*requested, *total)))]
    HostOutOfMemory {
        op: &'static str,
        /// Bytes asked for.
        requested: usize,
        /// The machine's memory and what is available now (`/proc/meminfo`; `None` where it
        /// cannot be read).
        total: Option<usize>,
        available: Option<usize>,
        location: &'static Location<'static>,
    },

    /// A module-wide problem: tensors on several devices, no tensors at all
    /// (a `ModuleError`, from `devcheck::module`).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Module(LayerDetail),

    /// A checkpoint that cannot be read, written or loaded into the model
    /// (a `CheckpointError`, from `devcheck::checkpoint`).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Checkpoint(LayerDetail),

    /// A check that found problems: an inventory, a forward dry run, a trace, with every finding,
    /// its source line and help (a `CheckError`, from `devcheck::check`).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Check(LayerDetail),

    /// A data file that cannot be read or parsed (a `DataError`, from `devcheck::data`).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Data(LayerDetail),

    /// The CUDA backend failed below the op front end: a kernel that did not compile or load, a
    /// driver or cuBLAS call (a `CudaError`, from `devcheck::cuda`).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Cuda(LayerDetail),
}

/// The error type of a layer above this file (a module walk, a checkpoint, a check report, a
/// data file, the CUDA backend), defined next to the code that raises it, with its `From` into
/// [`Error`] there: this file depends on no layer above it. [`Error::downcast_ref`] gives the
/// layer's own type back.
pub trait LayerError: std::any::Any + Diagnostic + Send + Sync {
    /// The line in the user's code to fix, when the error has one (see [`Error::location`]).
    fn location(&self) -> Option<&'static Location<'static>> {
        None
    }
}

/// A [`LayerError`] inside [`Error`]: displays, renders and chains exactly as the error it
/// holds.
pub struct LayerDetail(Box<dyn LayerError>);

impl LayerDetail {
    pub(crate) fn new(error: impl LayerError) -> LayerDetail {
        LayerDetail(Box::new(error))
    }

    /// The layer's error as its own type (`CheckpointError`, `CheckError`, ...), if it is one.
    pub fn downcast_ref<E: LayerError>(&self) -> Option<&E> {
        (&*self.0 as &dyn std::any::Any).downcast_ref()
    }

    pub fn location(&self) -> Option<&'static Location<'static>> {
        self.0.location()
    }
}

impl fmt::Debug for LayerDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for LayerDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for LayerDetail {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl Diagnostic for LayerDetail {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.code()
    }
    fn severity(&self) -> Option<miette::Severity> {
        self.0.severity()
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.help()
    }
    fn url<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.url()
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.0.source_code()
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        self.0.labels()
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        self.0.related()
    }
    fn diagnostic_source(&self) -> Option<&dyn Diagnostic> {
        self.0.diagnostic_source()
    }
}

fn host_capacity_line(total: Option<usize>, available: Option<usize>) -> String {
    match (total, available) {
        (Some(total), Some(available)) => format!(
            "{} of memory, {} available",
            crate::units::format_bytes(total, 1),
            crate::units::format_bytes(available, 1)
        ),
        _ => "its memory is unknown (no /proc/meminfo)".to_string(),
    }
}

/// The fixes in the order to try them: a request beyond the whole machine is nearly always a
/// shape that grew by mistake; one that nearly fits is a workload to make smaller.
fn host_out_of_memory_help(requested: usize, total: Option<usize>) -> String {
    let beyond_machine = total.is_some_and(|total| requested > total);
    let shape = "check the shapes first: broadcasting and `expand` can make results far larger than their \
                 inputs (`[N, 1] + [N]` is `[N, N]`), and an expanded view is copied in full by ops \
                 that need its elements";
    let workload = "lower the batch size (accumulate gradients over several smaller batches to keep the \
                    effective batch size), drop tensors that are no longer needed (a loss kept for logging \
                    without `.detach()` keeps its whole graph alive), and run evaluation under \
                    `devcheck::no_grad()`";
    if beyond_machine {
        format!("this is more than the machine has in all, so {shape}. If the size is meant, {workload}")
    } else {
        format!("{workload}; {shape}")
    }
}

/// The device line of the CUDA out-of-memory message.
fn device_capacity_line(total: Option<usize>, free: Option<usize>) -> String {
    match (total, free) {
        (Some(total), Some(free)) => format!(
            "{} total, {} free (other processes included)",
            crate::units::format_bytes(total, 2),
            crate::units::format_bytes(free, 2)
        ),
        _ => "total and free memory unknown (the driver could not be asked)".to_string(),
    }
}

/// The help of the CUDA out-of-memory message, in the order the fixes should be tried. By the
/// time it is shown the allocator has already released every segment without a live tensor.
fn device_out_of_memory_help(allocated: usize, reserved: usize) -> String {
    let unused = reserved.saturating_sub(allocated);
    let cache = if unused > allocated.max(1) * 2 {
        format!(
            "here {} is reserved but unused against {} allocated even after devcheck released its unused \
             segments: the free memory is split across segments that each still hold a live tensor \
             (fragmentation), so create long-lived tensors before the loop; `devcheck::cuda::empty_cache` \
             helps only when reserved ≫ allocated, and belongs outside the loop, never inside it",
            crate::units::format_bytes(unused, 2),
            crate::units::format_bytes(allocated, 2)
        )
    } else {
        "call `devcheck::cuda::empty_cache` only when reserved memory is much larger than allocated, and \
         never inside the training loop: it cannot free memory that tensors still hold"
            .to_string()
    };
    format!(
        "lower the batch size first; to keep the effective batch size, accumulate gradients over several \
         smaller batches (gradient accumulation); {cache}; look for tensors kept alive between steps, such \
         as a loss kept for logging without `.detach()` or a list of outputs: `devcheck::trace` around \
         one step counts the tensors and bytes it creates on each device"
    )
}

fn mismatch_summary(operands: &[Operand]) -> String {
    let parts: Vec<String> = operands.iter().map(|o| format!("{} is on {}", o.role, o.device)).collect();
    parts.join(", ")
}

fn device_help(operands: &[Operand]) -> String {
    // The fix is nearly always to bring host tensors to the accelerator the rest lives on.
    let target = operands.iter().find(|o| !o.device.is_cpu()).or(operands.first());
    let Some(target) = target else { return String::new() };
    device_fixes(operands.iter().filter(|o| o.device != target.device), target.device, Unlabelled::Unknown)
}

/// The fixes for every operand off `target`, the model's own tensors in one sentence (one move of
/// the model fixes them all), the others each with its own ([`operand_fix`]).
pub(crate) fn device_fixes<'a>(
    operands: impl IntoIterator<Item = &'a Operand>,
    target: Device,
    unlabelled: Unlabelled,
) -> String {
    use crate::tensor::TensorRole;
    let (model, others): (Vec<&Operand>, Vec<&Operand>) = operands.into_iter().partition(|o| {
        matches!(o.kind, Some(TensorRole::Parameter | TensorRole::Buffer | TensorRole::NonPersistentBuffer))
    });
    let mut fixes = Vec::new();
    if let [first, rest @ ..] = model.as_slice() {
        let names: Vec<String> = model.iter().map(|o| who(o)).collect();
        let same_kind = rest.iter().all(|o| o.kind == first.kind);
        let what = match (names.len(), same_kind) {
            (1, _) => format!(
                "is {} of the model",
                first.kind.as_ref().map(ToString::to_string).unwrap_or_default()
            ),
            (_, true) => format!("are {} of the model", plural_role(first.kind.as_ref())),
            (_, false) => "belong to the model".to_string(),
        };
        let devices: std::collections::BTreeSet<String> =
            model.iter().map(|o| o.device.to_string()).collect();
        fixes.push(format!(
            "{} {what}, on {}: move the model once, after building or loading it, with `model.to(&{})?` \
             (it moves every parameter and buffer)",
            and_list(&names),
            devices.into_iter().collect::<Vec<_>>().join(" and "),
            crate::device::device_expr(&target)
        ));
    }
    // Tensors inside one skipped submodule: one fix, the skip.
    let mut inside_skipped: Vec<(&crate::tensor::SkippedField, Vec<String>)> = Vec::new();
    for operand in others {
        match &operand.kind {
            Some(TensorRole::Skipped(field)) if operand.name.as_deref() != Some(field.path.as_str()) => {
                match inside_skipped.iter_mut().find(|(f, _)| f.path == field.path) {
                    Some((_, names)) => names.push(who(operand)),
                    None => inside_skipped.push((field, vec![who(operand)])),
                }
            }
            _ => fixes.push(operand_fix(operand, target, unlabelled)),
        }
    }
    for (field, names) in inside_skipped {
        let (verb, it) = if names.len() == 1 { ("is", "it") } else { ("are", "them") };
        fixes.push(format!(
            "{} {verb} inside `{}`, a submodule marked `#[module(skip)]`{}: `model.to(..)` does not move \
             {it}, checkpoints do not save {it} and the optimizer never sees {it}; remove the skip",
            and_list(&names),
            field.path,
            declared(field)
        ));
    }
    fixes.join("; ")
}

/// ` (declared at file:line:col)`, when known.
fn declared(field: &crate::tensor::SkippedField) -> String {
    field
        .declared_at
        .map(|at| format!(" (declared at {}:{}:{})", at.file(), at.line(), at.column()))
        .unwrap_or_default()
}

fn plural_role(role: Option<&crate::tensor::TensorRole>) -> &'static str {
    use crate::tensor::TensorRole;
    match role {
        Some(TensorRole::Parameter) => "parameters",
        Some(TensorRole::NonPersistentBuffer) => "non-persistent buffers",
        _ => "buffers",
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// How an operand is named in a help line: its name, or its role and origin.
fn who(operand: &Operand) -> String {
    match &operand.name {
        Some(name) => format!("`{name}`"),
        // A dry run's creation finding is located where the tensor was made: "it" is enough.
        None if operand.role == "tensor" => "it".to_string(),
        None => format!("the {} made at {}", operand.role, operand.origin.location_string()),
    }
}

/// What an operand without a [`Operand::kind`] is known to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unlabelled {
    /// Made during a dry run's forward: a helper tensor.
    Helper,
    /// A real run: a helper or a batch the code made or loaded.
    Unknown,
}

/// How to bring `operand` to `target`, by what it is: a model tensor is fixed by moving the model,
/// a skipped field by dropping the skip, an input by moving the batch, a helper by making it on
/// an input's device, a 0-dim constant by a Rust scalar. The one help text of device mismatches,
/// in errors and in dry-run reports.
pub(crate) fn operand_fix(operand: &Operand, target: Device, unlabelled: Unlabelled) -> String {
    use crate::tensor::TensorRole;
    let who = who(operand);
    let device = crate::device::device_expr(&target);
    match &operand.kind {
        Some(TensorRole::Parameter | TensorRole::Buffer | TensorRole::NonPersistentBuffer) => {
            device_fixes([operand], target, unlabelled)
        }
        Some(TensorRole::Skipped(field)) if operand.name.as_deref() == Some(field.path.as_str()) => format!(
            "{who} is a field marked `#[module(skip)]`{}, which `model.to(..)` does not move: remove the \
             skip (a `Tensor` field is a buffer, moved and saved with the model; \
             `#[module(non_persistent)]` keeps it out of checkpoints)",
            declared(field)
        ),
        Some(TensorRole::Skipped(_)) => device_fixes([operand], target, unlabelled),
        Some(TensorRole::Input) => format!(
            "move {who} to {target} right after the loader yields it (`let x = x.to(&device)?;`: `to` \
             returns the moved tensor)"
        ),
        None if operand.shape.is_empty() && operand.device.is_cpu() && !target.is_cpu() => format!(
            "{who} is a 0-dim CPU tensor. devcheck is stricter than PyTorch here on purpose: PyTorch lets a \
             0-dim CPU tensor join an op on {target}, hiding a host-to-device copy in it; use a Rust scalar \
             instead (`x.mul_scalar(2.0)`, `add_scalar`, `div_scalar`, `pow_scalar`, `masked_fill(&mask, v)`), \
             or make it on the input's device (`x.new_tensor(..)`)"
        ),
        None => match unlabelled {
            Unlabelled::Helper => format!(
                "create {who} on an input's device so it follows the model everywhere: `x.new_zeros(..)`, \
                 `x.new_tensor(..)`, `Tensor::zeros_like(&x)`, or pass `&x.device()`; a constant can be a \
                 buffer (a `Tensor` field), which `model.to(&{device})` moves once"
            ),
            Unlabelled::Unknown => format!(
                "bring {who} to {target}: a batch is moved once where it is loaded (`let x = \
                 x.to(&device)?;`), a helper tensor is created on an input's device (`x.new_zeros(..)`, \
                 `Tensor::zeros_like(&x)`, `&x.device()`) so it follows the model everywhere"
            ),
        },
    }
}

impl Error {
    /// The error of the layer that raised it, as that layer's own type: `error.downcast_ref::<
    /// CheckpointError>()` for a checkpoint that did not load, `CheckError` for a failed check.
    /// `None` for the errors of the tensor core (the other variants) and for another type.
    pub fn downcast_ref<E: LayerError>(&self) -> Option<&E> {
        match self {
            Error::Module(detail)
            | Error::Checkpoint(detail)
            | Error::Check(detail)
            | Error::Data(detail)
            | Error::Cuda(detail) => detail.downcast_ref(),
            _ => None,
        }
    }

    /// The full report, rendered without colour at `width` columns (what tests snapshot).
    pub fn render(&self, width: usize) -> String {
        render_diagnostic(self, width)
    }

    /// Where the error is to be fixed: the line in your code that made the failing call (an op,
    /// a layer, a loss, a move, a load), or for a check report the line of its first finding.
    /// `None` for errors about a file or the machine rather than a call (an unreadable file, a
    /// CUDA driver failure).
    pub fn location(&self) -> Option<&'static Location<'static>> {
        match self {
            Error::DeviceMismatch { location, .. }
            | Error::ShapeMismatch { location, .. }
            | Error::DTypeMismatch { location, .. }
            | Error::InvalidArgument { location, .. }
            | Error::NoData { location, .. }
            | Error::NotOnHost { location, .. }
            | Error::HostOutOfMemory { location, .. }
            | Error::Unsupported { location, .. } => Some(location),
            Error::DeviceUnavailable { location, .. } => *location,
            Error::Module(detail)
            | Error::Checkpoint(detail)
            | Error::Check(detail)
            | Error::Data(detail)
            | Error::Cuda(detail) => detail.location(),
            Error::InvalidDevice { .. } | Error::InvalidDType { .. } | Error::OutOfMemory { .. } => None,
        }
    }

    /// This error located at `at`, the user's call that devcheck's own work (a backward pass, an
    /// optimizer step) failed under: whatever line inside devcheck it came from is not one to fix.
    pub(crate) fn relocated(self, at: &'static Location<'static>) -> Error {
        match self {
            Error::DeviceMismatch { op, operands, .. } => {
                Error::DeviceMismatch { op, operands, location: at }
            }
            Error::ShapeMismatch { op, detail, help, operands, .. } => {
                Error::ShapeMismatch { op, detail, help, operands, location: at }
            }
            Error::DTypeMismatch { op, detail, help, operands, .. } => {
                Error::DTypeMismatch { op, detail, help, operands, location: at }
            }
            Error::InvalidArgument { op, detail, help, .. } => {
                Error::InvalidArgument { op, detail, help, location: at }
            }
            Error::NoData { op, operand, .. } => Error::NoData { op, operand, location: at },
            Error::NotOnHost { op, operand, .. } => Error::NotOnHost { op, operand, location: at },
            Error::HostOutOfMemory { op, requested, total, available, .. } => {
                Error::HostOutOfMemory { op, requested, total, available, location: at }
            }
            Error::Unsupported { op, device, help, .. } => {
                Error::Unsupported { op, device, help, location: at }
            }
            Error::DeviceUnavailable { device, reason, .. } => {
                Error::DeviceUnavailable { device, reason, location: Some(at) }
            }
            other => other,
        }
    }

    /// This error located at `location` when it has no location of its own (a device found
    /// unavailable below the call that needed it).
    pub(crate) fn located(self, at: &'static Location<'static>) -> Error {
        match self {
            Error::DeviceUnavailable { device, reason, location: None } => {
                Error::DeviceUnavailable { device, reason, location: Some(at) }
            }
            other => other,
        }
    }
}

/// Renders any diagnostic as miette's graphical report with unicode, no colour, no links, at a
/// fixed width: the form used for `Debug`, panics of the assertion macros, and snapshots.
pub fn render_diagnostic(diagnostic: &dyn Diagnostic, width: usize) -> String {
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_links(false)
        .with_width(width);
    let mut out = String::new();
    if handler.render_report(&mut out, diagnostic).is_err() {
        // Rendering into a String cannot fail on I/O; fall back to the plain message regardless.
        out = diagnostic.to_string();
    }
    out
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{:?}` is what `fn main() -> Result` and failing `?` in tests print: show the report.
        f.write_str("\n")?;
        f.write_str(&self.render(100))
    }
}
