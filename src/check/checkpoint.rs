//! The inventory of a safetensors checkpoint: what `devcheck inspect FILE.safetensors` prints.
//!
//! Only the header is read (names, dtypes, shapes, byte ranges and the metadata devcheck writes),
//! so inspecting a checkpoint of many gigabytes is instant.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::checkpoint::{DEVICES_METADATA_KEY, saved_devices};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::fmt_shape;

use super::report::{
    CheckError, Finding, Severity, Table, any_problem, count_by_severity, fmt_bytes, fmt_count, plural,
};

/// One tensor of a checkpoint file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointTensor {
    pub name: String,
    /// The file's dtype, lowercase (`f32`, `bf16`, `f8_e4m3`).
    pub file_dtype: String,
    /// The devcheck dtype it loads as; `None` when devcheck has no such dtype.
    pub dtype: Option<DType>,
    pub shape: Vec<usize>,
    pub bytes: usize,
    /// The device it was saved from, when the file records it (files written by devcheck do).
    pub saved_from: Option<Device>,
}

/// Whether the checkpoint can be loaded onto a device on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadTarget {
    pub device: Device,
    /// `None` when everything loads there; otherwise why not.
    pub blocked: Option<String>,
    /// Tensors in the file saved from this device.
    pub saved_from_here: usize,
}

/// See [`inspect_checkpoint`].
#[derive(Clone, Debug)]
pub struct CheckpointInventory {
    path: PathBuf,
    tensors: Vec<CheckpointTensor>,
    records_devices: bool,
    targets: Vec<LoadTarget>,
    findings: Vec<Finding>,
}

/// Reads the header of a safetensors checkpoint and lists its tensors (name, dtype, shape, bytes,
/// the device each was saved from), whether it loads onto each device that matters here (the CPU,
/// every visible GPU, every device it was saved from), and findings: dtypes devcheck cannot load,
/// a model saved half-moved (tensors from several devices), saved-from devices not present here.
///
/// A file that cannot be read or is not valid safetensors is an error that says what is wrong.
pub fn inspect_checkpoint(path: impl AsRef<Path>) -> Result<CheckpointInventory> {
    let path = path.as_ref();
    let file = crate::checkpoint::CheckpointFile::open(path)?;
    let metadata = file.metadata();
    let saved_from: BTreeMap<String, Device> = saved_devices(metadata.metadata().as_ref());
    let records_devices = metadata.metadata().as_ref().is_some_and(|m| m.contains_key(DEVICES_METADATA_KEY));

    let infos = metadata.tensors();
    let mut names: Vec<&String> = infos.keys().collect();
    names.sort_unstable();
    let tensors: Vec<CheckpointTensor> = names
        .into_iter()
        .filter_map(|name| {
            let info = infos.get(name.as_str())?;
            let file_dtype = format!("{:?}", info.dtype).to_lowercase();
            Some(CheckpointTensor {
                dtype: file_dtype.parse::<DType>().ok(),
                file_dtype,
                shape: info.shape.clone(),
                bytes: info.data_offsets.1 - info.data_offsets.0,
                saved_from: saved_from.get(name).copied(),
                name: name.clone(),
            })
        })
        .collect();

    let targets = load_targets(&tensors);
    let findings = findings(&tensors, &targets, records_devices);
    Ok(CheckpointInventory { path: path.to_path_buf(), tensors, records_devices, targets, findings })
}

impl CheckpointInventory {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sorted by name.
    pub fn tensors(&self) -> &[CheckpointTensor] {
        &self.tensors
    }

    /// Does the file record the device each tensor was saved from?
    pub fn records_devices(&self) -> bool {
        self.records_devices
    }

    /// Where it loads and where it does not: the CPU, every visible GPU, every saved-from device.
    pub fn load_targets(&self) -> &[LoadTarget] {
        &self.targets
    }

    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Bytes of tensor data in the file.
    pub fn bytes(&self) -> usize {
        self.tensors.iter().map(|t| t.bytes).sum()
    }

    /// No errors or warnings.
    pub fn is_clean(&self) -> bool {
        !any_problem(&self.findings)
    }

    /// `Ok(self)` when clean, otherwise the report as an error, for `?`.
    pub fn ensure_clean(self) -> Result<CheckpointInventory> {
        if self.is_clean() { Ok(self) } else { Err(self.to_error().into()) }
    }

    /// The findings as one report error.
    pub fn to_error(&self) -> CheckError {
        CheckError::new(
            "checkpoint",
            format!("checkpoint `{}`: {}", self.path.display(), count_by_severity(&self.findings)),
            vec![format!("{} tensors, {}", fmt_count(self.tensors.len()), fmt_bytes(self.bytes()))],
            "a checkpoint loads onto the device you name (`model.load_state_dict(path, &device)`), \
             whatever device it was saved from",
            self.findings.clone(),
        )
    }

    /// The full report without colour at `width` columns.
    pub fn render(&self, width: usize) -> String {
        self.to_error().render(width)
    }

    /// For tools: `{path, records_devices, tensors: [...], load_targets: [...], findings: [...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "path": self.path.display().to_string(),
            "records_devices": self.records_devices,
            "bytes": self.bytes(),
            "tensors": self.tensors.iter().map(|t| serde_json::json!({
                "name": t.name,
                "dtype": t.file_dtype,
                "loadable_dtype": t.dtype.is_some(),
                "shape": t.shape,
                "bytes": t.bytes,
                "saved_from": t.saved_from.map(|d| d.to_string()),
            })).collect::<Vec<_>>(),
            "load_targets": self.targets.iter().map(|t| serde_json::json!({
                "device": t.device.to_string(),
                "loads": t.blocked.is_none(),
                "reason": t.blocked,
                "saved_from_here": t.saved_from_here,
            })).collect::<Vec<_>>(),
            "findings": self.findings.iter().map(Finding::to_json).collect::<Vec<_>>(),
        })
    }
}

impl fmt::Display for CheckpointInventory {
    /// A table of the tensors, where the file loads, and the findings.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "`{}`: {} tensors, {}",
            self.path.display(),
            fmt_count(self.tensors.len()),
            fmt_bytes(self.bytes())
        )?;
        let mut table = Table::new(&[
            ("name", false),
            ("dtype", false),
            ("shape", false),
            ("bytes", true),
            ("saved from", false),
        ]);
        for t in &self.tensors {
            table.row(vec![
                t.name.clone(),
                t.file_dtype.clone(),
                fmt_shape(&t.shape),
                fmt_bytes(t.bytes),
                t.saved_from.map_or_else(|| "-".to_string(), |d| d.to_string()),
            ]);
        }
        table.write(f, "  ")?;
        writeln!(f, "loads onto:")?;
        let mut targets = Table::new(&[("device", false), ("loads", false), ("saved from here", true)]);
        for t in &self.targets {
            // The reasons in full are in the findings; the table stays narrow.
            let loads = match (&t.blocked, t.device.ensure_available()) {
                (None, _) => "yes",
                (Some(_), Err(_)) => "no: not available here",
                (Some(_), Ok(())) => "no: unsupported dtypes",
            };
            targets.row(vec![t.device.to_string(), loads.to_string(), fmt_count(t.saved_from_here)]);
        }
        targets.write(f, "  ")?;
        write!(f, "findings: {}", count_by_severity(&self.findings))?;
        for finding in &self.findings {
            write!(f, "\n  {}", finding.one_line())?;
        }
        Ok(())
    }
}

/// The header alone: length, JSON, and a check that the file holds all the data it describes.
/// The CPU, every visible CUDA device and every saved-from device, each with whether it loads.
fn load_targets(tensors: &[CheckpointTensor]) -> Vec<LoadTarget> {
    let mut devices: BTreeMap<Device, usize> = BTreeMap::from([(Device::Cpu, 0)]);
    for index in 0..crate::cuda::device_count() {
        devices.insert(Device::Cuda(index), 0);
    }
    for device in tensors.iter().filter_map(|t| t.saved_from) {
        *devices.entry(device).or_default() += 1;
    }
    let unsupported = tensors.iter().filter(|t| t.dtype.is_none()).count();
    devices
        .into_iter()
        .map(|(device, saved_from_here)| {
            let blocked = match device.ensure_available() {
                Err(error) => Some(match error {
                    crate::Error::DeviceUnavailable { reason, .. } => reason,
                    other => other.to_string(),
                }),
                Ok(()) if unsupported > 0 => {
                    Some(format!("{unsupported} tensors have dtypes devcheck does not have"))
                }
                Ok(()) => None,
            };
            LoadTarget { device, blocked, saved_from_here }
        })
        .collect()
}

fn findings(tensors: &[CheckpointTensor], targets: &[LoadTarget], records_devices: bool) -> Vec<Finding> {
    let mut findings = Vec::new();
    for t in tensors.iter().filter(|t| t.dtype.is_none()) {
        findings.push(
            Finding::new(
                "unsupported-dtype",
                Severity::Error,
                format!("`{}` is {}, a dtype devcheck cannot load", t.name, t.file_dtype),
            )
            .detail(format!("{} {}, {}", t.file_dtype, fmt_shape(&t.shape), fmt_bytes(t.bytes)))
            .help("devcheck loads f32, f64, f16, bf16, i64, i32, u8 and bool; convert the checkpoint first"),
        );
    }
    let mut saved: BTreeMap<Device, Vec<&str>> = BTreeMap::new();
    for t in tensors {
        if let Some(device) = t.saved_from {
            saved.entry(device).or_default().push(&t.name);
        }
    }
    if saved.len() > 1 {
        let mut groups: Vec<(&Device, &Vec<&str>)> = saved.iter().collect();
        groups.sort_by_key(|(_, names)| std::cmp::Reverse(names.len()));
        let mut finding = Finding::new(
            "mixed-devices",
            Severity::Warning,
            format!(
                "the model was saved with tensors on {} devices: {}",
                groups.len(),
                groups.iter().map(|(d, n)| format!("{} from {d}", n.len())).collect::<Vec<_>>().join(", ")
            ),
        );
        for (device, names) in groups.iter().skip(1) {
            for name in names.iter().take(8) {
                finding = finding.detail(format!("`{name}` saved from {device}"));
            }
        }
        findings.push(finding.help(
            "a model saved half-moved loads fine onto one device, but the code that saved it left tensors \
             behind: check it with `devcheck::inspect(&model)` before saving",
        ));
    }
    for target in targets.iter().filter(|t| t.saved_from_here > 0) {
        if let Some(reason) = &target.blocked
            && target.device.ensure_available().is_err()
        {
            findings.push(
                Finding::new(
                    "saved-from-unavailable",
                    Severity::Note,
                    format!(
                        "{} saved from {}, which is not available here",
                        plural(target.saved_from_here, "tensor"),
                        target.device
                    ),
                )
                .detail(format!("reason: {reason}"))
                .help("load onto a device this machine has: `model.load_state_dict(path, &Device::Cpu)`"),
            );
        }
    }
    if !records_devices && !tensors.is_empty() {
        findings.push(
            Finding::new(
                "no-device-record",
                Severity::Note,
                "the file does not record the devices its tensors were saved from (it was not written by \
                 devcheck)",
            )
            .help(
                "files written by `model.save(path)` record them under the `devcheck.devices` metadata key",
            ),
        );
    }
    findings
}
