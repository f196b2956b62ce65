//! Checkpoints: a module's parameters and persistent buffers as a safetensors file.
//!
//! * [`save`] writes [`state_dict`] (every parameter and persistent buffer by dotted path) and
//!   records, in the file's metadata, the device each tensor was saved from. The file is written
//!   next to the target and renamed into place, so an interrupted save never leaves half a file.
//! * [`load_state_dict`] reads it onto a device of your choice (PyTorch's `map_location`). It is
//!   strict: unless every key of the model is in the file with the same shape and dtype, and the
//!   file has no other keys, it loads nothing and returns one error listing every missing,
//!   unexpected, shape- and dtype-mismatched key, with the device each was saved from.
//! * [`load_state_dict_with`] and `LoadOptions::new(&device).strict(false)` load the keys that
//!   match and return the rest as a [`LoadReport`].
//!
//! A load replaces what it loads and nothing else: non-persistent buffers and skipped fields stay
//! where they are, so load onto the device the model is on, or call `model.to(&device)` after.
//! A parameter keeps its identity (an optimizer holding it sees the loaded value); its gradient is
//! cleared and its optimizer state follows it to the target device.
//!
//! Malformed files (truncated, a header length past the end, an unknown dtype, a shape whose
//! size overflows) are errors that say what is wrong, never panics.
//!
//! ```
//! use devcheck::{Device, Module, Param, Tensor};
//!
//! #[derive(Module)]
//! struct Linear { weight: Param, bias: Tensor }
//!
//! # fn main() -> devcheck::Result<()> {
//! let dir = std::env::temp_dir().join(format!("devcheck-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).ok();
//! let path = dir.join("linear.safetensors");
//! let cpu = Device::Cpu;
//! let saved = Linear { weight: Param::new(Tensor::randn([2, 3], &cpu)?), bias: Tensor::zeros([2], &cpu)? };
//! saved.save(&path)?;
//!
//! let mut loaded = Linear { weight: Param::new(Tensor::zeros([2, 3], &cpu)?), bias: Tensor::ones([2], &cpu)? };
//! loaded.load_state_dict(&path, &cpu)?;
//! assert_eq!(loaded.weight.tensor().to_vec::<f32>()?, saved.weight.tensor().to_vec::<f32>()?);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::Location;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype as FileDType, SafeTensorError, SafeTensors, TensorView};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::module::{EntryKind, Module, ModulePath, Param, ParamInstaller, Persistence, Visitor, VisitorMut};
use crate::shape::fmt_shape;
use crate::tensor::{Tensor, TensorRole};

/// The metadata key holding a JSON object `{tensor key: device it was saved from}`.
pub const DEVICES_METADATA_KEY: &str = "devcheck.devices";

/// Every parameter and persistent buffer by dotted path: what a checkpoint holds. Tied parameters
/// appear under each of their paths. Non-persistent buffers and skipped fields are not included.
pub fn state_dict<M: Module + ?Sized>(module: &M) -> BTreeMap<String, Tensor> {
    module
        .entries()
        .into_iter()
        .filter(|e| matches!(e.kind, EntryKind::Parameter | EntryKind::Buffer))
        .filter_map(|e| e.tensor.map(|t| (e.path, t)))
        .collect()
}

/// Saves `module`'s [`state_dict`] to `path` as safetensors. Tensors on an accelerator are copied
/// to the host to be written; fake tensors have no data and cannot be saved.
#[track_caller]
pub fn save<M: Module + ?Sized>(module: &M, path: impl AsRef<Path>) -> Result<()> {
    save_tensors(&state_dict(module), path)
}

/// Saves named tensors to `path` as safetensors, recording each tensor's device in the metadata
/// under [`DEVICES_METADATA_KEY`].
#[track_caller]
pub fn save_tensors(tensors: &BTreeMap<String, Tensor>, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let mut data = Vec::with_capacity(tensors.len());
    let mut devices = serde_json::Map::new();
    for (key, tensor) in tensors {
        data.push((
            key.as_str(),
            file_dtype(tensor.dtype()),
            tensor.shape().to_vec(),
            tensor.to_raw_bytes()?,
        ));
        devices.insert(key.clone(), serde_json::Value::String(tensor.device().to_string()));
    }
    let encode_error =
        |e: SafeTensorError| CheckpointError::Encode { path: path.to_path_buf(), detail: e.to_string() };
    let views = data
        .iter()
        .map(|(key, dtype, shape, bytes)| Ok((*key, TensorView::new(*dtype, shape.clone(), bytes)?)))
        .collect::<std::result::Result<Vec<_>, SafeTensorError>>()
        .map_err(encode_error)?;
    let metadata =
        HashMap::from([(DEVICES_METADATA_KEY.to_string(), serde_json::Value::Object(devices).to_string())]);
    let buffer = safetensors::serialize(views, Some(metadata)).map_err(encode_error)?;

    // Write beside the target and rename: a crash mid-write leaves the old checkpoint intact.
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    let io_error = |source| CheckpointError::Io { action: "write", path: path.to_path_buf(), source };
    if let Err(error) = std::fs::write(&temp, &buffer).and_then(|()| std::fs::rename(&temp, path)) {
        // The temporary file may or may not exist; either way the error to report is the write's.
        let _ = std::fs::remove_file(&temp);
        return Err(io_error(error).into());
    }
    Ok(())
}

/// How to load a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// Where the loaded tensors are created (PyTorch's `map_location`).
    pub device: Device,
    /// Fail (loading nothing) on any missing, unexpected or mismatched key. Default `true`.
    pub strict: bool,
}

impl LoadOptions {
    /// Strict loading onto `device`.
    pub fn new(device: &Device) -> LoadOptions {
        LoadOptions { device: *device, strict: true }
    }

    pub fn strict(mut self, strict: bool) -> LoadOptions {
        self.strict = strict;
        self
    }
}

/// Loads a checkpoint onto `device`, strictly. See the [module docs](self).
#[track_caller]
pub fn load_state_dict<M: Module + ?Sized>(
    module: &mut M,
    path: impl AsRef<Path>,
    device: &Device,
) -> Result<()> {
    load_state_dict_with(module, path, &LoadOptions::new(device)).map(|_| ())
}

/// Loads a checkpoint with `options`. Strict: an error unless everything matches, and then the
/// report lists the loaded keys. Non-strict: loads every key whose shape and dtype match and
/// reports the rest.
#[track_caller]
pub fn load_state_dict_with<M: Module + ?Sized>(
    module: &mut M,
    path: impl AsRef<Path>,
    options: &LoadOptions,
) -> Result<LoadReport> {
    let location = Location::caller();
    let path = path.as_ref();
    if !crate::fake::is_active() {
        options.device.ensure_available().map_err(|error| CheckpointError::TargetUnavailable {
            path: path.to_path_buf(),
            device: options.device,
            reason: error.to_string(),
        })?;
    }
    let bytes = std::fs::read(path).map_err(|source| CheckpointError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    let malformed =
        |e: SafeTensorError| CheckpointError::Malformed { path: path.to_path_buf(), detail: describe(&e) };
    let file = SafeTensors::deserialize(&bytes).map_err(malformed)?;
    let (_, metadata) = SafeTensors::read_metadata(&bytes).map_err(malformed)?;
    let saved_from: HashMap<String, Device> = saved_devices(metadata.metadata().as_ref());

    let expected = expected_entries(module);
    let mut report = LoadReport {
        module: crate::module::short_type_name(module.module_name()),
        path: path.to_path_buf(),
        location: Some(location),
        ..LoadReport::default()
    };
    let mut matched = Vec::new();
    for (key, want) in &expected {
        let Ok(view) = file.tensor(key) else {
            report.missing.push(want.clone());
            continue;
        };
        let found = FileTensor {
            key: key.clone(),
            dtype: format!("{:?}", view.dtype()).to_lowercase(),
            shape: view.shape().to_vec(),
            saved_from: saved_from.get(key).copied(),
        };
        let dtype = model_dtype(view.dtype());
        if found.shape != want.shape {
            report.shape_mismatches.push(Mismatch { expected: want.clone(), found });
        } else if dtype != Some(want.dtype) {
            report.dtype_mismatches.push(Mismatch { expected: want.clone(), found });
        } else {
            matched.push((key.clone(), want.dtype, view));
        }
    }
    let mut unexpected: Vec<&str> = file.names().into_iter().filter(|k| !expected.contains_key(*k)).collect();
    unexpected.sort_unstable();
    for key in unexpected {
        if let Ok(view) = file.tensor(key) {
            report.unexpected.push(FileTensor {
                key: key.to_string(),
                dtype: format!("{:?}", view.dtype()).to_lowercase(),
                shape: view.shape().to_vec(),
                saved_from: saved_from.get(key).copied(),
            });
        }
    }
    if options.strict && !report.is_clean() {
        return Err(CheckpointError::Mismatch(Box::new(report)).into());
    }

    // Create every tensor (and move optimizer state) before touching the model: all or nothing.
    let mut loaded = HashMap::with_capacity(matched.len());
    for (key, dtype, view) in matched {
        let tensor = Tensor::from_raw_bytes(view.data(), dtype, view.shape(), &options.device)?;
        report.loaded.push(key.clone());
        loaded.insert(key, tensor);
    }
    let states = param_states(module, &loaded, &options.device)?;
    let installer = ParamInstaller::for_module(module);
    module.walk_mut(&mut Install { loaded, states, installer })?;
    Ok(report)
}

/// What a model expects to find in a checkpoint at one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedTensor {
    pub key: String,
    /// [`EntryKind::Parameter`] or [`EntryKind::Buffer`].
    pub kind: EntryKind,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// A tensor as a checkpoint file describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileTensor {
    pub key: String,
    /// The file's dtype, lowercase (`f32`, `bf16`, and also types devcheck does not have: `f8_e4m3`).
    pub dtype: String,
    pub shape: Vec<usize>,
    /// The device it was saved from, when the file records it (files written by devcheck do).
    pub saved_from: Option<Device>,
}

/// A key present in both, with a different shape or dtype.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub expected: ExpectedTensor,
    pub found: FileTensor,
}

/// What a load did and did not match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// The module's type name.
    pub module: String,
    pub path: PathBuf,
    /// Keys loaded, sorted.
    pub loaded: Vec<String>,
    /// Keys of the model not in the file.
    pub missing: Vec<ExpectedTensor>,
    /// Keys of the file not in the model.
    pub unexpected: Vec<FileTensor>,
    pub shape_mismatches: Vec<Mismatch>,
    pub dtype_mismatches: Vec<Mismatch>,
    /// The call that loaded.
    pub location: Option<&'static Location<'static>>,
}

impl LoadReport {
    /// Did every key match?
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty()
            && self.unexpected.is_empty()
            && self.shape_mismatches.is_empty()
            && self.dtype_mismatches.is_empty()
    }

    fn summary(&self) -> String {
        let count = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(count(self.missing.len(), "missing key", "missing keys"));
        }
        if !self.unexpected.is_empty() {
            parts.push(count(self.unexpected.len(), "unexpected key", "unexpected keys"));
        }
        if !self.shape_mismatches.is_empty() {
            parts.push(count(self.shape_mismatches.len(), "shape mismatch", "shape mismatches"));
        }
        if !self.dtype_mismatches.is_empty() {
            parts.push(count(self.dtype_mismatches.len(), "dtype mismatch", "dtype mismatches"));
        }
        parts.join(", ")
    }
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clean() {
            return write!(f, "checkpoint `{}` matches `{}`", self.path.display(), self.module);
        }
        write!(
            f,
            "checkpoint `{}` does not match `{}`: {}",
            self.path.display(),
            self.module,
            self.summary()
        )?;
        if let Some(at) = self.location {
            write!(f, "\n  at {}:{}:{}", at.file(), at.line(), at.column())?;
        }
        for want in &self.missing {
            write!(
                f,
                "\n  missing     {}: model {} {} {}",
                want.key,
                want.kind,
                want.dtype,
                fmt_shape(&want.shape)
            )?;
        }
        for found in &self.unexpected {
            write!(f, "\n  unexpected  {}: checkpoint {}", found.key, describe_found(found))?;
        }
        for m in &self.shape_mismatches {
            write!(
                f,
                "\n  shape       {}: checkpoint {}, model {} {}",
                m.found.key,
                describe_found(&m.found),
                m.expected.dtype,
                fmt_shape(&m.expected.shape)
            )?;
        }
        for m in &self.dtype_mismatches {
            write!(
                f,
                "\n  dtype       {}: checkpoint {}, model {} {}",
                m.found.key,
                describe_found(&m.found),
                m.expected.dtype,
                fmt_shape(&m.expected.shape)
            )?;
        }
        Ok(())
    }
}

fn describe_found(found: &FileTensor) -> String {
    let mut out = format!("{} {}", found.dtype, fmt_shape(&found.shape));
    if let Some(device) = found.saved_from {
        out.push_str(&format!(" (saved from {device})"));
    }
    out
}

fn mismatch_help(report: &LoadReport) -> String {
    let mut help = String::from("strict loading loads nothing when keys disagree. ");
    if !report.shape_mismatches.is_empty() {
        help.push_str(
            "A shape mismatch usually means the model was built with a different config (sizes, layer \
             count) than the one saved. ",
        );
    }
    let last = |key: &str| key.rsplit('.').next().unwrap_or(key).to_string();
    let renamed = report
        .missing
        .iter()
        .any(|m| report.unexpected.iter().any(|u| last(&u.key) == last(&m.key) && u.key != m.key));
    if renamed {
        help.push_str(
            "Missing and unexpected keys with the same last segment mean field paths changed (a renamed \
             field or a wrapper module); rename the keys or the fields. ",
        );
    }
    help.push_str(
        "To load the keys that match and get this report back, use \
         `model.load_state_dict_with(path, &LoadOptions::new(&device).strict(false))`",
    );
    help
}

/// Errors reading, writing or loading checkpoints (part of [`crate::Error`]).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum CheckpointError {
    #[error("cannot {action} checkpoint `{}`", path.display())]
    #[diagnostic(code(devcheck::checkpoint_io), help("{}", io_help(action)))]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{}` is not a valid safetensors checkpoint: {detail}", path.display())]
    #[diagnostic(
        code(devcheck::checkpoint_malformed),
        help(
            "the file is damaged or is not a safetensors file: an interrupted download or copy truncates \
             files; save it again with `model.save(path)` or download it again"
        )
    )]
    Malformed { path: PathBuf, detail: String },

    #[error("cannot encode checkpoint `{}`: {detail}", path.display())]
    #[diagnostic(
        code(devcheck::checkpoint_encode),
        help("report this with the model's parameter shapes and dtypes")
    )]
    Encode { path: PathBuf, detail: String },

    #[error("cannot load `{}` onto {device}: {reason}", path.display())]
    #[diagnostic(
        code(devcheck::checkpoint_target_unavailable),
        help(
            "load onto the CPU instead: `model.load_state_dict(path, &Device::Cpu)`, then move the model \
             with `model.to(&device)` on a machine that has the device; to check placement without a GPU, \
             load inside a fake scope (`devcheck::fake::enter()`)"
        )
    )]
    TargetUnavailable { path: PathBuf, device: Device, reason: String },

    #[error("{0}")]
    #[diagnostic(code(devcheck::checkpoint_mismatch), help("{}", mismatch_help(.0)))]
    Mismatch(Box<LoadReport>),
}

impl CheckpointError {
    /// The call that loaded, for a report of mismatched keys.
    pub fn location(&self) -> Option<&'static Location<'static>> {
        match self {
            CheckpointError::Mismatch(report) => report.location,
            _ => None,
        }
    }
}

fn io_help(action: &str) -> &'static str {
    if action == "write" {
        "check that the folder exists and is writable, and that the disk has room"
    } else {
        "check the path (relative paths start at the current directory) and that the file is readable"
    }
}

/// Human words for what is wrong with a file.
fn describe(error: &SafeTensorError) -> String {
    match error {
        SafeTensorError::HeaderTooSmall => {
            "it is shorter than the 8-byte header length (truncated, or not a safetensors file)".into()
        }
        SafeTensorError::HeaderTooLarge => "its header length field claims more than 100 MB".into(),
        SafeTensorError::InvalidHeaderLength => {
            "its header length field points past the end of the file (truncated or corrupted)".into()
        }
        SafeTensorError::InvalidHeader(_) => "its header is not UTF-8 text".into(),
        SafeTensorError::InvalidHeaderDeserialization(e) => {
            format!("its header is not valid safetensors JSON: {e}")
        }
        SafeTensorError::MetadataIncompleteBuffer => {
            "the tensor data does not end where the file ends (truncated, or extra bytes at the end)".into()
        }
        SafeTensorError::ValidationOverflow => {
            "a tensor's shape or byte size overflows (a corrupted header)".into()
        }
        SafeTensorError::TensorInvalidInfo => "a tensor's dtype and shape do not match its byte range".into(),
        SafeTensorError::InvalidOffset(name) => format!("the byte range of tensor `{name}` is invalid"),
        other => other.to_string(),
    }
}

fn file_dtype(dtype: DType) -> FileDType {
    match dtype {
        DType::F32 => FileDType::F32,
        DType::F64 => FileDType::F64,
        DType::F16 => FileDType::F16,
        DType::BF16 => FileDType::BF16,
        DType::I64 => FileDType::I64,
        DType::I32 => FileDType::I32,
        DType::U8 => FileDType::U8,
        DType::Bool => FileDType::BOOL,
    }
}

/// The devcheck dtype of a safetensors dtype; `None` for the ones devcheck does not use.
pub(crate) fn model_dtype(dtype: FileDType) -> Option<DType> {
    Some(match dtype {
        FileDType::F32 => DType::F32,
        FileDType::F64 => DType::F64,
        FileDType::F16 => DType::F16,
        FileDType::BF16 => DType::BF16,
        FileDType::I64 => DType::I64,
        FileDType::I32 => DType::I32,
        FileDType::U8 => DType::U8,
        FileDType::BOOL => DType::Bool,
        _ => return None,
    })
}

/// The devices recorded at save time under [`DEVICES_METADATA_KEY`]; a file without them (or
/// with unreadable ones) has none.
pub(crate) fn saved_devices<C: FromIterator<(String, Device)> + Default>(
    metadata: Option<&HashMap<String, String>>,
) -> C {
    let Some(json) = metadata.and_then(|m| m.get(DEVICES_METADATA_KEY)) else {
        return C::default();
    };
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(json) else {
        return C::default();
    };
    map.into_iter().filter_map(|(key, value)| Some((key, value.as_str()?.parse::<Device>().ok()?))).collect()
}

fn expected_entries<M: Module + ?Sized>(module: &M) -> BTreeMap<String, ExpectedTensor> {
    module
        .entries()
        .into_iter()
        .filter(|e| matches!(e.kind, EntryKind::Parameter | EntryKind::Buffer))
        .filter_map(|e| {
            let tensor = e.tensor?;
            Some((
                e.path.clone(),
                ExpectedTensor {
                    key: e.path,
                    kind: e.kind,
                    dtype: tensor.dtype(),
                    shape: tensor.shape().to_vec(),
                },
            ))
        })
        .collect()
}

/// The optimizer state of every parameter that will be loaded, moved to `device` beforehand so
/// that installing cannot fail.
fn param_states<M: Module + ?Sized>(
    module: &M,
    loaded: &HashMap<String, Tensor>,
    device: &Device,
) -> Result<HashMap<String, BTreeMap<String, Tensor>>> {
    struct States<'a> {
        loaded: &'a HashMap<String, Tensor>,
        device: Device,
        out: HashMap<String, BTreeMap<String, Tensor>>,
    }
    impl Visitor for States<'_> {
        fn visit_param(&mut self, path: &ModulePath, param: &Param) -> Result<()> {
            if self.loaded.contains_key(path.as_str()) {
                self.out.insert(path.to_string(), param.state_on(&self.device)?);
            }
            Ok(())
        }
    }
    let mut states = States { loaded, device: *device, out: HashMap::new() };
    module.walk(&mut states)?;
    Ok(states.out)
}

struct Install {
    loaded: HashMap<String, Tensor>,
    states: HashMap<String, BTreeMap<String, Tensor>>,
    /// Loads into this model only, not into a clone sharing its parameters.
    installer: ParamInstaller,
}

impl VisitorMut for Install {
    fn visit_param(&mut self, path: &ModulePath, param: &mut Param) -> Result<()> {
        if let Some(tensor) = self.loaded.remove(path.as_str()) {
            let state = self.states.remove(path.as_str()).unwrap_or_default();
            let values = param.loaded_values(tensor, state);
            self.installer.install(param, values, Some(path.as_str()));
        }
        Ok(())
    }

    fn visit_buffer(
        &mut self,
        path: &ModulePath,
        tensor: &mut Tensor,
        persistence: Persistence,
    ) -> Result<()> {
        if persistence == Persistence::Persistent
            && let Some(new) = self.loaded.remove(path.as_str())
        {
            new.set_label(path.as_str(), TensorRole::Buffer);
            *tensor = new;
        }
        Ok(())
    }
}
