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

/// Why CUDA is not available, in words for an error message.
pub(crate) fn unavailable_reason() -> String {
    probe().reason.clone().unwrap_or_else(|| "CUDA is available".to_string())
}
