//! The one error type of devcheck: every failure is a [`miette::Diagnostic`] with a help line.
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
    pub device: Device,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// Where it was created: file:line:col and the op that made it.
    pub origin: crate::tensor::Origin,
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.role)?;
        if let Some(name) = &self.name {
            write!(f, " `{name}`")?;
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

    #[error("device {device} is not available: {reason}")]
    #[diagnostic(
        code(devcheck::device_unavailable),
        help(
            "pick the device at run time with `Device::best_available()` (cuda:0 when present, else cpu), \
             or pass `cpu`; to check device placement without a GPU use a fake device (`devcheck::fake`)"
        )
    )]
    DeviceUnavailable { device: Device, reason: String },

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
        crate::backend::cuda::allocator::format_bytes(*requested),
        crate::backend::cuda::allocator::capacity_line(*total, *free),
        crate::backend::cuda::allocator::format_bytes(*allocated),
        crate::backend::cuda::allocator::format_bytes(reserved.saturating_sub(*allocated))
    )]
    #[diagnostic(
        code(devcheck::cuda_out_of_memory),
        help("{}", crate::backend::cuda::allocator::out_of_memory_help(*allocated, *reserved))
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

    /// A module-wide problem: tensors on several devices, no tensors at all.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Module(#[from] crate::module::ModuleError),

    /// A checkpoint that cannot be read, written or loaded into the model.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),

    /// A check that found problems: an inventory, a forward dry run, a trace (see
    /// [`crate::check`]), with every finding, its source line and help.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Check(#[from] crate::check::CheckError),

    /// A data file that cannot be read or parsed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Data(#[from] crate::data::DataError),

    /// The CUDA backend failed below the op front end: a kernel that did not compile or load, a
    /// driver or cuBLAS call (see [`crate::backend::cuda::CudaError`]).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Cuda(Box<crate::backend::cuda::CudaError>),
}

impl From<crate::backend::cuda::CudaError> for Error {
    /// A devcheck error that travelled through the backend comes out as itself.
    fn from(e: crate::backend::cuda::CudaError) -> Self {
        match e {
            crate::backend::cuda::CudaError::Core(inner) => *inner,
            other => Error::Cuda(Box::new(other)),
        }
    }
}

impl Error {
    /// The error for host memory that could not be had, with the machine's memory as it is now.
    pub(crate) fn host_out_of_memory(
        op: &'static str,
        requested: usize,
        location: &'static Location<'static>,
    ) -> Error {
        let memory = crate::backend::cpu::host_memory();
        Error::HostOutOfMemory {
            op,
            requested,
            total: memory.map(|m| m.total),
            available: memory.map(|m| m.available),
            location,
        }
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

fn mismatch_summary(operands: &[Operand]) -> String {
    let parts: Vec<String> = operands.iter().map(|o| format!("{} is on {}", o.role, o.device)).collect();
    parts.join(", ")
}

fn device_help(operands: &[Operand]) -> String {
    // The fix is nearly always to bring host tensors to the accelerator the rest lives on.
    let target = operands.iter().find(|o| !o.device.is_cpu()).or(operands.first());
    let Some(target) = target else { return String::new() };
    let odd: Vec<String> = operands
        .iter()
        .filter(|o| o.device != target.device)
        .map(|o| match &o.name {
            Some(name) => format!("`{name}`"),
            None => format!("{} (made at {})", o.role, o.origin.location_string()),
        })
        .collect();
    format!(
        "move {} to {} where it is created or loaded, e.g. `.to({}.device())`; create helper tensors \
         from an input (`x.new_zeros(..)`, `Tensor::zeros_like(&x)`) so they follow it to every device",
        odd.join(" and "),
        target.device,
        target.name.as_deref().unwrap_or(&target.role)
    )
}

impl Error {
    /// The full report, rendered without colour at `width` columns (what tests snapshot).
    pub fn render(&self, width: usize) -> String {
        render_diagnostic(self, width)
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
