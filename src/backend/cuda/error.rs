//! What can go wrong below the tensor front end on a CUDA device: finding NVRTC, compiling and
//! looking up kernels, driver and cuBLAS calls. Device availability and out-of-memory are
//! [`crate::Error`]s, carried through unchanged.

use std::fmt;

use miette::Diagnostic;

use crate::device::Device;

/// `Result<T, CudaError>`.
pub type CudaResult<T> = std::result::Result<T, CudaError>;

/// An error of the CUDA backend. Every variant says what was being done, on which device or for
/// which kernel, and how to get further.
#[derive(thiserror::Error, Diagnostic)]
#[non_exhaustive]
pub enum CudaError {
    /// A devcheck error (an unavailable device, CUDA out of memory, a bad argument), unchanged.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Core(Box<crate::Error>),

    #[error("NVRTC (the CUDA runtime compiler) could not be loaded; looked for {}{}", searched.join(", "), ld_path_note(ld_library_path))]
    #[diagnostic(
        code(devcheck::cuda::nvrtc_not_found),
        help(
            "devcheck compiles its kernels at first use with NVRTC. Install it with the CUDA toolkit, or \
             `pip install nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12`, and put the directory holding \
             libnvrtc.so.12 on LD_LIBRARY_PATH (for the pip wheel: <site-packages>/nvidia/cuda_nvrtc/lib)"
        )
    )]
    NvrtcNotFound { searched: Vec<String>, ld_library_path: Option<String> },

    #[error("`{arch}` is not a GPU architecture NVRTC understands")]
    #[diagnostic(
        code(devcheck::cuda::invalid_arch),
        help(
            "give a real architecture such as `sm_80` (A100) or `sm_90` (H100), or a virtual one such as \
             `compute_80`; a device's own is `sm_<major><minor>` of its compute capability"
        )
    )]
    InvalidArch { arch: String },

    #[error("NVRTC failed to compile kernel module `{module}` ({file}) for {arch}: {status}\n{log}")]
    #[diagnostic(code(devcheck::cuda::kernel_compile), help("{}", compile_help(log)))]
    Compile { module: &'static str, file: &'static str, arch: String, status: String, log: String },

    #[error(
        "kernel module `{module}` compiled for {arch} does not match its registry entry{}{}",
        name_list("\n  listed but not compiled: ", missing),
        name_list("\n  compiled but not listed: ", unlisted)
    )]
    #[diagnostic(
        code(devcheck::cuda::kernel_registry),
        help(
            "the kernel names in src/backend/cuda/registry.rs and the instantiations in kernels/{module}.cu \
             must list the same kernels; update whichever side is behind"
        )
    )]
    Registry { module: &'static str, arch: String, missing: Vec<String>, unlisted: Vec<String> },

    #[error("no kernel module defines `{kernel}`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    #[diagnostic(
        code(devcheck::cuda::unknown_kernel),
        help("kernel names are `<op>_<dtype>` as listed by `devcheck::cuda::kernels::MODULES`")
    )]
    UnknownKernel { kernel: String, suggestion: Option<String> },

    #[error("kernel `{kernel}` was not found in module `{module}` loaded on {device}: {message}")]
    #[diagnostic(
        code(devcheck::cuda::kernel_lookup),
        help(
            "the module compiled but the driver does not know this entry point; run \
             `devcheck kernels check --arch <your arch>` to compare the registry with what NVRTC produces"
        )
    )]
    KernelNotFound { module: &'static str, kernel: String, device: Device, message: String },

    #[error("the CUDA driver could not load kernel module `{module}` on {device}: {message}")]
    #[diagnostic(
        code(devcheck::cuda::module_load),
        help(
            "the module was compiled for this device's architecture; a driver older than the NVRTC in use \
             rejects newer binaries, so update the NVIDIA driver or use an NVRTC no newer than it"
        )
    )]
    ModuleLoad { module: &'static str, device: Device, message: String },

    #[error("CUDA driver call `{call}` failed on {device}: {message}")]
    #[diagnostic(
        code(devcheck::cuda::driver),
        help(
            "an earlier asynchronous kernel may have failed and is only reported now; rerun with \
             CUDA_LAUNCH_BLOCKING=1 to make the error appear at the call that caused it"
        )
    )]
    Driver { device: Device, call: &'static str, message: String },

    #[error(
        "could not pin {requested} of host memory: {message} (pinned buffers in use or in flight hold {held})"
    )]
    #[diagnostic(
        code(devcheck::cuda::pinned_out_of_memory),
        help(
            "page-locked memory is limited by the machine's RAM and the locked-memory limit (`ulimit -l`); \
             devcheck already released its cached pinned blocks and tried again. Pin fewer or smaller \
             batches (a smaller batch size or `DataLoader::prefetch`), or keep fewer pinned tensors alive"
        )
    )]
    PinnedOutOfMemory { requested: String, held: String, message: String },

    #[error("launch of kernel `{kernel}` with arguments {given}, but the kernel takes {expected}")]
    #[diagnostic(
        code(devcheck::cuda::launch_arguments),
        help(
            "the launcher in src/backend/cuda/storage.rs and the kernel's parameter list in kernels/ disagree, \
             so nothing was launched; this is a devcheck bug: please report it with the output of `devcheck env`"
        )
    )]
    LaunchArguments { kernel: String, expected: String, given: String },

    #[error("cuBLAS call `{call}` failed on {device}: {message}")]
    #[diagnostic(
        code(devcheck::cuda::cublas),
        help("check that libcublas.so.12 from the same CUDA release as the driver is on LD_LIBRARY_PATH")
    )]
    Cublas { device: Device, call: &'static str, message: String },
}

impl From<crate::Error> for CudaError {
    fn from(e: crate::Error) -> Self {
        CudaError::Core(Box::new(e))
    }
}

impl crate::error::LayerError for CudaError {}

impl From<CudaError> for crate::Error {
    /// A devcheck error that travelled through the backend comes out as itself.
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::Core(inner) => *inner,
            other => crate::Error::Cuda(crate::error::LayerDetail::new(other)),
        }
    }
}

impl CudaError {
    /// The full report, rendered without colour at `width` columns.
    pub fn render(&self, width: usize) -> String {
        crate::error::render_diagnostic(self, width)
    }

    pub(crate) fn driver(device: Device, call: &'static str, e: impl fmt::Display) -> Self {
        CudaError::Driver { device, call, message: e.to_string() }
    }
}

impl fmt::Debug for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Like `devcheck::Error`: a failing `?` in a test or `main` shows the report.
        f.write_str("\n")?;
        f.write_str(&self.render(100))
    }
}

fn ld_path_note(ld_library_path: &Option<String>) -> String {
    match ld_library_path {
        Some(p) if !p.is_empty() => format!("\n  LD_LIBRARY_PATH={p}"),
        _ => "\n  LD_LIBRARY_PATH is not set".to_string(),
    }
}

fn name_list(prefix: &str, names: &[String]) -> String {
    if names.is_empty() { String::new() } else { format!("{prefix}{}", names.join(", ")) }
}

fn compile_help(log: &str) -> String {
    if log.contains("open source file") {
        "a CUDA header was not found: set DEVCHECK_CUDA_INCLUDE to a directory holding cuda_fp16.h \
         (the toolkit's include/, or <site-packages>/nvidia/cuda_runtime/include from \
         `pip install nvidia-cuda-runtime-cu12`)"
            .to_string()
    } else {
        "the kernel sources ship with devcheck and compile on CI for sm_80 and sm_90; if this NVRTC or \
         architecture is different, report the log above with the output of `devcheck env`"
            .to_string()
    }
}
