//! CUDA availability. Every function here answers without panicking, also on a machine with no
//! NVIDIA driver at all (the driver library is loaded at run time, never linked).

use std::sync::OnceLock;

/// What the driver said when first asked; probed once per process.
struct Probe {
    count: usize,
    reason: Option<String>,
}

fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries to dlopen the driver library by its usual names
        // and drops the handle; it touches no CUDA state.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Probe {
                count: 0,
                reason: Some("no NVIDIA driver was found (libcuda.so could not be loaded)".to_string()),
            };
        }
        if let Some(missing) = missing_driver_function() {
            return Probe {
                count: 0,
                reason: Some(format!(
                    "the NVIDIA driver library that was found (libcuda.so) is not usable: it has no `{missing}`"
                )),
            };
        }
        match cudarc::driver::CudaContext::device_count() {
            Ok(n) if n > 0 => Probe { count: n as usize, reason: None },
            Ok(_) => {
                Probe { count: 0, reason: Some("the NVIDIA driver reports no CUDA devices".to_string()) }
            }
            Err(e) => {
                Probe { count: 0, reason: Some(format!("the NVIDIA driver failed to initialise: {e}")) }
            }
        }
    })
}

/// The first driver function the probe and [`device_name`] need that the loaded driver library
/// lacks. cudarc looks each function up when first called and panics when it is missing (a
/// stub or foreign `libcuda.so` on the library path), so they are looked up here first.
fn missing_driver_function() -> Option<&'static str> {
    const NEEDED: &[&str] =
        &["cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute"];
    // SAFETY: the library is present (checked by the caller); looking a symbol up runs none of
    // its code.
    let library = unsafe { cudarc::driver::sys::culib() };
    first_missing(NEEDED, |symbol| {
        // SAFETY: only the lookup, never a call through this type.
        unsafe { library.get::<unsafe extern "C" fn()>(symbol) }.is_ok()
    })
}

/// The first of `names` for which `has` (given the NUL-terminated symbol) says no.
pub(crate) fn first_missing(names: &[&'static str], has: impl Fn(&[u8]) -> bool) -> Option<&'static str> {
    names.iter().copied().find(|name| !has(format!("{name}\0").as_bytes()))
}

/// Is at least one CUDA device usable? (`torch.cuda.is_available()`)
pub fn is_available() -> bool {
    probe().count > 0
}

/// The number of visible CUDA devices; 0 without a driver.
pub fn device_count() -> usize {
    probe().count
}

/// The name of CUDA device `index` (`"NVIDIA A100-SXM4-80GB"`), or `None` when there is no such
/// device.
pub fn device_name(index: usize) -> Option<String> {
    if index >= device_count() {
        return None;
    }
    let ordinal = i32::try_from(index).ok()?;
    // The driver is present and initialised (probe() succeeded with count > index).
    let device = cudarc::driver::result::device::get(ordinal).ok()?;
    cudarc::driver::result::device::get_name(device).ok()
}

/// The theoretical peak memory bandwidth of CUDA device `index` in bytes per second: twice the
/// memory clock times the bus width, as NVIDIA's bandwidth figures are computed. `None` when there
/// is no such device or the driver does not report the numbers.
pub fn device_memory_bandwidth(index: usize) -> Option<f64> {
    use cudarc::driver::sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE,
    };
    if index >= device_count() {
        return None;
    }
    let device = cudarc::driver::result::device::get(i32::try_from(index).ok()?).ok()?;
    // SAFETY: `device` is a valid handle (the driver is initialised and index < count); reading an
    // attribute touches no other state.
    let (clock_khz, bus_bits) = unsafe {
        use cudarc::driver::result::device::get_attribute;
        (
            get_attribute(device, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).ok()?,
            get_attribute(device, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).ok()?,
        )
    };
    (clock_khz > 0 && bus_bits > 0).then(|| 2.0 * f64::from(clock_khz) * 1e3 * f64::from(bus_bits) / 8.0)
}

/// Why CUDA is not available, in words for an error message.
pub(crate) fn unavailable_reason() -> String {
    probe().reason.clone().unwrap_or_else(|| "CUDA is available".to_string())
}

// ---- The CUDA backend's public surface ----

pub use crate::backend::cuda::allocator::MemoryStats;
pub use crate::backend::cuda::host_allocator::HostMemoryStats;
pub use crate::backend::cuda::nvrtc::NvrtcInfo;
/// The kernel registry under its former name (the `devcheck kernels` command's path to it).
pub use crate::backend::cuda::registry as kernels;
pub use crate::backend::cuda::{
    CudaDevice, CudaError, CudaResult, CudaStorage, DeviceBuffer, PinnedBuffer, allocator, host_allocator,
    nvrtc, registry,
};
/// The reductions [`CudaStorage::reduce`] launches (the other op enums are at the crate root).
pub use crate::backend::op::ReduceOp;

use std::panic::Location;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::cuda::device::{
    device as cuda_device, device_if_initialised, host_allocator_if_initialised,
};
use crate::device::Device;

/// What NVRTC (the runtime compiler for devcheck's kernels) looks like in this process: found
/// or not, its version and file, the names tried and the header directories found.
pub fn nvrtc_info() -> &'static NvrtcInfo {
    nvrtc::info()
}

/// Two or three lines on NVRTC for `devcheck env` and bug reports.
pub fn nvrtc_report() -> String {
    let info = nvrtc::info();
    let mut out = match (info.found, info.version, &info.library) {
        (true, Some((major, minor)), Some(path)) => format!("NVRTC: {major}.{minor} ({})", path.display()),
        (true, Some((major, minor)), None) => format!("NVRTC: {major}.{minor}"),
        (true, None, _) => "NVRTC: found, version unknown".to_string(),
        (false, _, _) => format!(
            "NVRTC: not found (looked for {}; LD_LIBRARY_PATH={})",
            info.searched.join(", "),
            info.ld_library_path.as_deref().unwrap_or("")
        ),
    };
    if info.include_dirs.is_empty() {
        out.push_str("\nCUDA headers: not found (set DEVCHECK_CUDA_INCLUDE to a directory with cuda_fp16.h)");
    } else {
        let dirs: Vec<String> = info.include_dirs.iter().map(|d| d.display().to_string()).collect();
        out.push_str(&format!("\nCUDA headers: {}", dirs.join(", ")));
    }
    out
}

/// The backend device behind `device`; a clear error for a non-CUDA or unavailable device.
#[track_caller]
pub fn cuda_device_for(device: &Device) -> CudaResult<Arc<CudaDevice>> {
    match device {
        Device::Cuda(i) => cuda_device(*i),
        other => Err(not_cuda("cuda device", other, Location::caller())),
    }
}

/// Waits until all work queued on `device` has finished (`torch.cuda.synchronize`). On `cpu`
/// there is nothing to wait for.
#[track_caller]
pub fn synchronize(device: &Device) -> CudaResult<()> {
    match device {
        Device::Cpu => Ok(()),
        Device::Cuda(i) => cuda_device(*i)?.synchronize(),
        Device::Mps => Err(not_cuda("synchronize", device, Location::caller())),
    }
}

/// Runs `f` and measures its wall-clock time with the device synchronised before the clock
/// starts and before it stops, so queued GPU work is neither charged to `f` nor missed (the
/// timing rule of the guides; lint D007 flags timing without it).
#[track_caller]
pub fn time<R>(device: &Device, f: impl FnOnce() -> R) -> CudaResult<(R, Duration)> {
    synchronize(device)?;
    let start = Instant::now();
    let out = f();
    synchronize(device)?;
    Ok((out, start.elapsed()))
}

/// A CUDA event on a device's stream (`torch.cuda.Event(enable_timing=True)`): record it after
/// work, wait for it, or measure the GPU time between two of them.
#[derive(Debug)]
pub struct Event {
    device: Arc<CudaDevice>,
    event: cudarc::driver::CudaEvent,
}

impl Event {
    /// A timing event on `device`.
    #[track_caller]
    pub fn new(device: &Device) -> CudaResult<Event> {
        let device = cuda_device_for(device)?;
        let event = device
            .context()
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| driver_error(&device, "cuEventCreate", e))?;
        Ok(Event { device, event })
    }

    /// Marks the point in the device's stream reached by the work queued so far.
    pub fn record(&self) -> CudaResult<()> {
        self.event.record(self.device.stream()).map_err(|e| driver_error(&self.device, "cuEventRecord", e))
    }

    /// Waits until the recorded work has finished.
    pub fn synchronize(&self) -> CudaResult<()> {
        self.event.synchronize().map_err(|e| driver_error(&self.device, "cuEventSynchronize", e))
    }

    /// Has the recorded work finished? Does not wait.
    pub fn query(&self) -> bool {
        self.event.is_complete()
    }

    /// Milliseconds of GPU time from this event to `end` (both recorded; waits for `end`).
    pub fn elapsed_time(&self, end: &Event) -> CudaResult<f32> {
        self.event.elapsed_ms(&end.event).map_err(|e| driver_error(&self.device, "cuEventElapsedTime", e))
    }
}

/// Bytes held by live tensors on `device` (`torch.cuda.memory_allocated`).
#[track_caller]
pub fn memory_allocated(device: &Device) -> CudaResult<usize> {
    Ok(stats_of(device, "memory_allocated", Location::caller())?.allocated_bytes)
}

/// The peak of [`memory_allocated`] since start or [`reset_peak_memory_stats`].
#[track_caller]
pub fn max_memory_allocated(device: &Device) -> CudaResult<usize> {
    Ok(stats_of(device, "max_memory_allocated", Location::caller())?.peak_allocated_bytes)
}

/// Bytes the caching allocator holds from the driver on `device` (`torch.cuda.memory_reserved`).
#[track_caller]
pub fn memory_reserved(device: &Device) -> CudaResult<usize> {
    Ok(stats_of(device, "memory_reserved", Location::caller())?.reserved_bytes)
}

/// The peak of [`memory_reserved`] since start or [`reset_peak_memory_stats`].
#[track_caller]
pub fn max_memory_reserved(device: &Device) -> CudaResult<usize> {
    Ok(stats_of(device, "max_memory_reserved", Location::caller())?.peak_reserved_bytes)
}

/// All allocator counters of `device` (`torch.cuda.memory_stats`).
#[track_caller]
pub fn memory_stats(device: &Device) -> CudaResult<MemoryStats> {
    stats_of(device, "memory_stats", Location::caller())
}

/// The allocator counters of `device` as a table (`torch.cuda.memory_summary`).
#[track_caller]
pub fn memory_summary(device: &Device) -> CudaResult<String> {
    let location = Location::caller();
    let stats = stats_of(device, "memory_summary", location)?;
    Ok(allocator::format_summary(*device, &stats))
}

/// Sets the peaks of `device` to the current values.
#[track_caller]
pub fn reset_peak_memory_stats(device: &Device) -> CudaResult<()> {
    stats_of(device, "reset_peak_memory_stats", Location::caller())?;
    if let Some(d) = device.index().and_then(device_if_initialised) {
        d.allocator().reset_peak_memory_stats();
    }
    Ok(())
}

/// Gives cached memory that no tensor uses back to the driver, so other processes can use it
/// (`torch.cuda.empty_cache`); returns the bytes released. It never frees memory tensors hold,
/// and calling it inside a training loop only makes every step slower (lint D006).
#[track_caller]
pub fn empty_cache(device: &Device) -> CudaResult<usize> {
    stats_of(device, "empty_cache", Location::caller())?;
    match device.index().and_then(device_if_initialised) {
        Some(d) => d.empty_cache(),
        None => Ok(0),
    }
}

/// The counters of the caching allocator of pinned host memory (all zero before anything was
/// pinned): what live pinned buffers hold, what waits for a copy to complete, what is cached.
pub fn host_memory_stats() -> HostMemoryStats {
    host_allocator_if_initialised().map(|a| a.stats()).unwrap_or_default()
}

/// Unpins the cached pinned blocks no buffer uses and no copy still reads or writes; returns
/// the bytes released. Pinned buffers in use are never released.
pub fn host_empty_cache() -> CudaResult<usize> {
    match host_allocator_if_initialised() {
        Some(mut a) => a.empty_cache(),
        None => Ok(0),
    }
}

/// Statistics without creating a context: a device this process has not used has none yet.
fn stats_of(
    device: &Device,
    op: &'static str,
    location: &'static Location<'static>,
) -> CudaResult<MemoryStats> {
    match device {
        Device::Cuda(i) => {
            device.ensure_available()?;
            Ok(device_if_initialised(*i).map(|d| d.allocator().stats()).unwrap_or_default())
        }
        other => Err(not_cuda(op, other, location)),
    }
}

fn not_cuda(op: &'static str, device: &Device, location: &'static Location<'static>) -> CudaError {
    crate::Error::InvalidArgument {
        op,
        detail: format!("{device} is not a CUDA device"),
        help: "pass a `cuda:N` device, e.g. `Device::Cuda(0)` or `\"cuda:0\".parse()?`".to_string(),
        location,
    }
    .into()
}

fn driver_error(device: &CudaDevice, call: &'static str, e: impl std::fmt::Display) -> CudaError {
    CudaError::Driver { device: device.device(), call, message: e.to_string() }
}
