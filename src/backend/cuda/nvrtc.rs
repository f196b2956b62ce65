//! NVRTC, the CUDA runtime compiler: finding it, and compiling one kernel module for one
//! architecture. The library is loaded at run time by name (`libnvrtc.so.12`, ...), so a build of
//! devcheck works without it and says plainly where it looked when it is missing.

use std::ffi::{CStr, CString, c_char, c_int};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::nvrtc::sys;

use super::error::{CudaError, CudaResult};
use super::registry::{HEADERS, KernelModule};

/// What a bug report needs to know about NVRTC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcInfo {
    /// Could the library be loaded?
    pub found: bool,
    /// Its version, `(12, 9)`, when found.
    pub version: Option<(i32, i32)>,
    /// The file the dynamic loader picked, when it can be told (Linux).
    pub library: Option<PathBuf>,
    /// The library names tried, in order.
    pub searched: Vec<String>,
    /// LD_LIBRARY_PATH as the loader saw it.
    pub ld_library_path: Option<String>,
    /// Directories where the CUDA headers the kernels include (cuda_fp16.h) were found.
    pub include_dirs: Vec<PathBuf>,
    /// Why a library that was loaded cannot be used (a function it must have is missing); it
    /// then counts as not found.
    pub unusable: Option<String>,
}

/// The NVRTC functions devcheck calls.
const NVRTC_FUNCTIONS: &[&str] = &[
    "nvrtcVersion",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcDestroyProgram",
];

/// Probes NVRTC once per process; never panics.
pub fn info() -> &'static NvrtcInfo {
    static INFO: OnceLock<NvrtcInfo> = OnceLock::new();
    INFO.get_or_init(|| {
        let mut searched: Vec<String> = Vec::new();
        for name in cudarc::get_lib_name_candidates("nvrtc") {
            if !searched.contains(&name) {
                searched.push(name);
            }
        }
        let ld_library_path = std::env::var("LD_LIBRARY_PATH").ok();
        // SAFETY: `is_culib_present` only tries to dlopen the library by the names above and drops
        // the handle again; no NVRTC function is called.
        let present = unsafe { sys::is_culib_present() };
        // cudarc panics at the first call of a function the library lacks (a stub or foreign
        // library of the same name): look them up first.
        let unusable = present
            .then(|| {
                // SAFETY: the library is present; looking symbols up runs none of its code.
                let library = unsafe { sys::culib() };
                crate::cuda::first_missing(NVRTC_FUNCTIONS, |symbol| {
                    // SAFETY: only the lookup, never a call through this type.
                    unsafe { library.get::<unsafe extern "C" fn()>(symbol) }.is_ok()
                })
            })
            .flatten()
            .map(|missing| format!("the library that was found is not usable: it has no `{missing}`"));
        let found = present && unusable.is_none();
        let (version, library) = if found {
            let (mut major, mut minor): (c_int, c_int) = (0, 0);
            // SAFETY: NVRTC is loadable (checked above), and both pointers are valid for writes.
            let version =
                unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result().ok().map(|()| (major, minor));
            (version, loaded_library_path())
        } else {
            (None, None)
        };
        let include_dirs = default_include_dirs(library.as_deref());
        NvrtcInfo { found, version, library, searched, ld_library_path, include_dirs, unusable }
    })
}

/// Is NVRTC loadable in this process?
pub fn is_available() -> bool {
    info().found
}

/// The error for a missing NVRTC, listing where it was looked for.
pub fn not_found_error() -> CudaError {
    let info = info();
    CudaError::NvrtcNotFound {
        searched: info.searched.clone(),
        ld_library_path: info.ld_library_path.clone(),
    }
}

/// A GPU architecture as NVRTC spells it: real (`sm_80`, `sm_90a`: NVRTC also runs ptxas and
/// yields a cubin) or virtual (`compute_80`: PTX only).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch(String);

impl Arch {
    /// Parses `sm_80`, `sm_90a`, `compute_80`; anything else is [`CudaError::InvalidArch`].
    pub fn parse(arch: &str) -> CudaResult<Arch> {
        let digits_then_suffix = |rest: &str| {
            let digits = rest.trim_end_matches(|c: char| c.is_ascii_lowercase());
            digits.len() >= 2 && digits.bytes().all(|b| b.is_ascii_digit()) && rest.len() - digits.len() <= 1
        };
        let ok = arch.strip_prefix("sm_").is_some_and(digits_then_suffix)
            || arch.strip_prefix("compute_").is_some_and(digits_then_suffix);
        if ok { Ok(Arch(arch.to_string())) } else { Err(CudaError::InvalidArch { arch: arch.to_string() }) }
    }

    /// The real architecture of a device of compute capability `major.minor`.
    pub fn from_compute_capability(major: i32, minor: i32) -> Arch {
        Arch(format!("sm_{major}{minor}"))
    }

    /// Does compiling for it produce a cubin (machine code) as well as PTX?
    pub fn is_real(&self) -> bool {
        self.0.starts_with("sm_")
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The result of compiling one module.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub ptx: String,
    /// Machine code for a real architecture; `None` for a virtual one.
    pub cubin: Option<Vec<u8>>,
    /// NVRTC's log (warnings); empty when it had nothing to say.
    pub log: String,
}

/// The type of one kernel parameter as PTX declares it: what a launch must pass, by width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxParam {
    /// An integer or pointer of 8, 16, 32 or 64 bits (PTX does not tell pointers from integers).
    Bits(u8),
    F32,
    F64,
    /// Anything else (a struct passed by value): launchers never pass one.
    Other,
}

impl PtxParam {
    fn parse(ty: &str) -> PtxParam {
        match ty {
            ".u64" | ".s64" | ".b64" => PtxParam::Bits(64),
            ".u32" | ".s32" | ".b32" => PtxParam::Bits(32),
            ".u16" | ".s16" | ".b16" => PtxParam::Bits(16),
            ".u8" | ".s8" | ".b8" => PtxParam::Bits(8),
            ".f32" => PtxParam::F32,
            ".f64" => PtxParam::F64,
            _ => PtxParam::Other,
        }
    }
}

impl std::fmt::Display for PtxParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PtxParam::Bits(n) => write!(f, "b{n}"),
            PtxParam::F32 => f.write_str("f32"),
            PtxParam::F64 => f.write_str("f64"),
            PtxParam::Other => f.write_str("struct"),
        }
    }
}

impl Compiled {
    /// Every kernel's parameter list as the PTX declares it, in order of definition. Launches
    /// are checked against these before they run (see `CudaDevice::launch`).
    pub fn signatures(&self) -> Vec<(String, Vec<PtxParam>)> {
        let mut out = Vec::new();
        let mut current: Option<(String, Vec<PtxParam>)> = None;
        for line in self.ptx.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix(".visible .entry ") {
                out.extend(current.take());
                let name = rest.split(|c: char| c == '(' || c.is_whitespace()).next().unwrap_or("");
                current = Some((name.to_string(), Vec::new()));
                if rest.trim_end().ends_with("()") {
                    out.extend(current.take());
                }
            } else if let Some((_, params)) = current.as_mut() {
                if let Some(decl) = line.strip_prefix(".param ") {
                    let is_array = decl.contains('[');
                    let ty = decl.split_whitespace().find(|t| !t.starts_with(".align") && t.starts_with('.'));
                    params.push(if is_array {
                        PtxParam::Other
                    } else {
                        ty.map_or(PtxParam::Other, PtxParam::parse)
                    });
                } else if line.starts_with(')') {
                    out.extend(current.take());
                }
            }
        }
        out.extend(current);
        out
    }

    /// The kernel entry points the PTX defines, in order.
    pub fn entry_points(&self) -> Vec<String> {
        self.ptx
            .lines()
            .filter_map(|line| line.trim_start().strip_prefix(".visible .entry "))
            .map(|rest| rest.split(|c: char| c == '(' || c.is_whitespace()).next().unwrap_or("").to_string())
            .collect()
    }

    /// What the driver loads: the cubin when there is one, else the PTX (JIT-compiled by the
    /// driver). Either way NUL-terminated PTX or a cubin image is what `cuModuleLoadData` takes.
    pub fn image(&self) -> Vec<u8> {
        match &self.cubin {
            Some(cubin) => cubin.clone(),
            None => {
                let mut bytes = self.ptx.clone().into_bytes();
                bytes.push(0);
                bytes
            }
        }
    }
}

/// Compiles `module` for `arch` with the given include directories (for cuda_fp16.h and
/// cuda_bf16.h). The shared `.cuh` headers are passed to NVRTC from memory.
pub fn compile(module: &KernelModule, arch: &Arch, include_dirs: &[PathBuf]) -> CudaResult<Compiled> {
    if !is_available() {
        return Err(not_found_error());
    }
    let compile_error = |status: String, log: String| CudaError::Compile {
        module: module.name,
        file: module.file,
        arch: arch.to_string(),
        status,
        log,
    };
    let to_c = |s: &str| {
        CString::new(s)
            .map_err(|_| compile_error("invalid input".into(), format!("{s:?} contains a NUL byte")))
    };
    let source = to_c(module.source)?;
    let name = to_c(module.file)?;
    let header_sources = HEADERS.iter().map(|(_, text)| to_c(text)).collect::<CudaResult<Vec<_>>>()?;
    let header_names = HEADERS.iter().map(|(name, _)| to_c(name)).collect::<CudaResult<Vec<_>>>()?;
    let header_source_ptrs: Vec<*const c_char> = header_sources.iter().map(|s| s.as_ptr()).collect();
    let header_name_ptrs: Vec<*const c_char> = header_names.iter().map(|s| s.as_ptr()).collect();

    let mut options = vec![format!("--gpu-architecture={arch}"), "--std=c++17".to_string()];
    options.extend(include_dirs.iter().map(|dir| format!("--include-path={}", dir.display())));
    let options = options.iter().map(|o| to_c(o)).collect::<CudaResult<Vec<_>>>()?;
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();

    let mut program: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: NVRTC is loaded (checked above); every pointer refers to a NUL-terminated string
    // that outlives the program, and the header arrays have `HEADERS.len()` entries each.
    let status = unsafe {
        sys::nvrtcCreateProgram(
            &mut program,
            source.as_ptr(),
            name.as_ptr(),
            HEADERS.len() as c_int,
            header_source_ptrs.as_ptr(),
            header_name_ptrs.as_ptr(),
        )
    };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(compile_error(status_string(status), String::new()));
    }
    let program = Program(program);

    // SAFETY: `program` is a live program; `option_ptrs` holds `options.len()` valid C strings.
    let status =
        unsafe { sys::nvrtcCompileProgram(program.0, option_ptrs.len() as c_int, option_ptrs.as_ptr()) };
    let log = program.log();
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(compile_error(status_string(status), log));
    }
    let ptx = program
        .output(sys::nvrtcGetPTXSize, sys::nvrtcGetPTX)
        .map_err(|s| compile_error(format!("reading the PTX: {}", status_string(s)), log.clone()))?;
    let ptx = String::from_utf8_lossy(ptx.strip_suffix(&[0]).unwrap_or(&ptx)).into_owned();
    let cubin = if arch.is_real() {
        let cubin = program
            .output(sys::nvrtcGetCUBINSize, sys::nvrtcGetCUBIN)
            .map_err(|s| compile_error(format!("reading the cubin: {}", status_string(s)), log.clone()))?;
        Some(cubin)
    } else {
        None
    };
    Ok(Compiled { ptx, cubin, log })
}

/// Owns an `nvrtcProgram` and destroys it on every exit path.
struct Program(sys::nvrtcProgram);

impl Program {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: live program, valid out-pointer.
        if unsafe { sys::nvrtcGetProgramLogSize(self.0, &mut size) } != sys::nvrtcResult::NVRTC_SUCCESS {
            return String::new();
        }
        let mut buf = vec![0 as c_char; size.max(1)];
        // SAFETY: `buf` has room for the `size` bytes NVRTC reported, terminator included.
        if unsafe { sys::nvrtcGetProgramLog(self.0, buf.as_mut_ptr()) } != sys::nvrtcResult::NVRTC_SUCCESS {
            return String::new();
        }
        // SAFETY: NVRTC wrote a NUL-terminated string into `buf` (zeroed, so terminated anyway).
        unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().trim_end().to_string()
    }

    fn output(
        &self,
        size_fn: unsafe fn(sys::nvrtcProgram, *mut usize) -> sys::nvrtcResult,
        data_fn: unsafe fn(sys::nvrtcProgram, *mut c_char) -> sys::nvrtcResult,
    ) -> Result<Vec<u8>, sys::nvrtcResult> {
        let mut size = 0usize;
        // SAFETY: live, compiled program; valid out-pointer.
        let status = unsafe { size_fn(self.0, &mut size) };
        if status != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(status);
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` holds exactly the `size` bytes NVRTC asked for.
        let status = unsafe { data_fn(self.0, buf.as_mut_ptr().cast()) };
        if status != sys::nvrtcResult::NVRTC_SUCCESS {
            return Err(status);
        }
        Ok(buf)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is destroyed only here.
        // A failure to free compiler memory is not actionable, so its status is ignored.
        let _ = unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
    }
}

fn status_string(status: sys::nvrtcResult) -> String {
    format!("{status:?}")
}

/// Where the CUDA headers are looked for, first match first: `DEVCHECK_CUDA_INCLUDE` (a path
/// list), `$CUDA_PATH/include`, `$CUDA_HOME/include`, `/usr/local/cuda/include`, and the
/// include directory of the pip wheel `nvidia-cuda-runtime-cu12` next to the loaded NVRTC wheel.
/// Only directories that hold `cuda_fp16.h` are kept.
pub fn default_include_dirs(nvrtc_library: Option<&Path>) -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(list) = std::env::var_os("DEVCHECK_CUDA_INCLUDE") {
        candidates.extend(std::env::split_paths(&list));
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(root) = std::env::var_os(var) {
            candidates.push(PathBuf::from(root).join("include"));
        }
    }
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    // <site-packages>/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 -> <site-packages>/nvidia/cuda_runtime/include
    if let Some(nvidia) = nvrtc_library.and_then(|lib| lib.parent()?.parent()?.parent()) {
        candidates.push(nvidia.join("cuda_runtime").join("include"));
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in candidates {
        if dir.join("cuda_fp16.h").is_file() && !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// The path of the libnvrtc the loader mapped into this process, read from /proc/self/maps.
fn loaded_library_path() -> Option<PathBuf> {
    // The probe dropped its handle; load it once more so the mapping is present while we look.
    // cudarc keeps its own handle for the calls made afterwards.
    // SAFETY: NVRTC's initialisers only set up the library's own state.
    let _lib = unsafe { sys::culib() };
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            Path::new(path)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc.") || n.starts_with("libnvrtc64"))
        })
        .map(PathBuf::from)
}
