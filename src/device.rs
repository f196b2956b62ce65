//! Where a tensor lives: [`Device`], its PyTorch spelling, availability and the default device.

use std::fmt;
use std::str::FromStr;
use std::sync::RwLock;

use crate::error::{Error, Result};

/// A device a tensor can live on. Spelled exactly as PyTorch spells it: `cpu`, `cuda:1`, `mps`.
///
/// `Device` is a small `Copy` value: errors, reports and the checker carry it around freely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// Host memory.
    Cpu,
    /// The NVIDIA GPU with this ordinal (`cuda:N`).
    Cuda(usize),
    /// Apple's Metal Performance Shaders device. It parses and prints, so code and checkpoints that
    /// name it are understood, but this build has no MPS backend: it is never available.
    Mps,
}

/// The valid spellings, listed in every parse error.
pub const DEVICE_FORMS: &str = "`cpu`, `cuda`, `cuda:N` (N = 0, 1, ...), `mps`";

impl Device {
    /// `cuda:0` when a CUDA device is usable, otherwise `mps` where supported (never in this build),
    /// otherwise `cpu`. The usual first line of a device-agnostic program.
    pub fn best_available() -> Device {
        if crate::cuda::is_available() { Device::Cuda(0) } else { Device::Cpu }
    }

    /// Is this the host?
    pub fn is_cpu(&self) -> bool {
        matches!(self, Device::Cpu)
    }

    /// Is this a CUDA device?
    pub fn is_cuda(&self) -> bool {
        matches!(self, Device::Cuda(_))
    }

    /// The ordinal of an accelerator (`Some(1)` for `cuda:1`), `None` for the host.
    pub fn index(&self) -> Option<usize> {
        match self {
            Device::Cuda(i) => Some(*i),
            Device::Mps => Some(0),
            Device::Cpu => None,
        }
    }

    /// The device type without the ordinal, as PyTorch's `device.type`: `cpu`, `cuda`, `mps`.
    pub fn kind(&self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda(_) => "cuda",
            Device::Mps => "mps",
        }
    }

    /// Ok when tensors with real data can be made here; otherwise an error that says why and
    /// what to use instead.
    pub fn ensure_available(&self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Cuda(i) => {
                let count = crate::cuda::device_count();
                if *i < count {
                    Ok(())
                } else {
                    Err(Error::DeviceUnavailable {
                        device: *self,
                        reason: if count == 0 {
                            crate::cuda::unavailable_reason()
                        } else {
                            format!("only {count} CUDA device(s) are visible (cuda:0..cuda:{})", count - 1)
                        },
                        location: None,
                    })
                }
            }
            Device::Mps => Err(Error::DeviceUnavailable {
                device: *self,
                reason: "this build of devcheck has no MPS backend".to_string(),
                location: None,
            }),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
            Device::Mps => f.write_str("mps"),
        }
    }
}

impl FromStr for Device {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let invalid = || Error::InvalidDevice { input: s.to_string() };
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            "mps" | "mps:0" => Ok(Device::Mps),
            _ => {
                let index = s.strip_prefix("cuda:").ok_or_else(invalid)?;
                // `cuda:+1` and `cuda:01` are not PyTorch spellings either.
                if index.is_empty()
                    || !index.bytes().all(|b| b.is_ascii_digit())
                    || (index.len() > 1 && index.starts_with('0'))
                {
                    return Err(invalid());
                }
                index.parse().map(Device::Cuda).map_err(|_| invalid())
            }
        }
    }
}

impl TryFrom<&str> for Device {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self> {
        s.parse()
    }
}

impl Default for Device {
    /// The process-wide default device (see [`set_default_device`]); `cpu` unless changed.
    fn default() -> Self {
        default_device()
    }
}

static DEFAULT_DEVICE: RwLock<Device> = RwLock::new(Device::Cpu);

/// Sets the device that [`default_device`] and `Device::default()` return, for the whole process
/// (like `torch.set_default_device`). Code that creates tensors should still prefer the device of
/// its inputs; the linter flags a default device used inside `forward` (D001).
pub fn set_default_device(device: Device) {
    // A poisoned lock only means another thread panicked mid-write of a `Copy` value: still valid.
    let mut slot = DEFAULT_DEVICE.write().unwrap_or_else(|e| e.into_inner());
    *slot = device;
}

/// The process-wide default device; `cpu` until [`set_default_device`] changes it.
pub fn default_device() -> Device {
    *DEFAULT_DEVICE.read().unwrap_or_else(|e| e.into_inner())
}

/// The Rust expression for a device, for help lines.
pub(crate) fn device_expr(device: &Device) -> String {
    match device {
        Device::Cpu => "Device::Cpu".to_string(),
        Device::Cuda(i) => format!("Device::Cuda({i})"),
        Device::Mps => "Device::Mps".to_string(),
    }
}
