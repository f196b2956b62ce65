//! Checkpoints: a module's parameters and persistent buffers as a safetensors file.
//!
//! * [`save`] writes [`state_dict`] (every parameter and persistent buffer by dotted path) and
//!   records, in the file's metadata, the device each tensor was saved from. The file is replaced
//!   atomically: written to a temporary file beside it, synced, and renamed over it, so a full
//!   disk or a crash never leaves half a file, and of concurrent saves the last one wins. Through
//!   a symlink, the file it points to is replaced and the link stays.
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
//! size overflows) are errors that say what is wrong, never panics. A load reads and checks the
//! header before any tensor data, then reads one tensor at a time: a damaged file of gigabytes is
//! rejected at once, and nothing of the model changes unless everything loads.
//!
//! Checkpoint keys must be unambiguous: a `BTreeMap` key that contains `.`, or two tensors under
//! one key, makes [`save`] and [`load_state_dict`] fail and name the keys. A tied parameter
//! (one `Param` under several paths) loads only when the file holds the same values at each.
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

mod file;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::panic::Location;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype as FileDType, Metadata, TensorInfo};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, LayerDetail, LayerError, Result};
use crate::module::{
    EntryKind, Module, ModulePath, Param, ParamId, ParamInstaller, Persistence, Visitor, VisitorMut,
};
use crate::shape::fmt_shape;
use crate::tensor::{Tensor, TensorRole};

pub(crate) use file::CheckpointFile;

/// The metadata key holding a JSON object `{tensor key: device it was saved from}`.
pub const DEVICES_METADATA_KEY: &str = "devcheck.devices";

/// Every parameter and persistent buffer by dotted path: what a checkpoint holds. Tied parameters
/// appear under each of their paths. Non-persistent buffers and skipped fields are not included.
///
/// Paths that are ambiguous (a `BTreeMap` key containing `.`, or two tensors under one path)
/// collapse here to one entry; [`save`] and [`load_state_dict`] refuse such models instead.
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
///
/// The file is replaced atomically: the new checkpoint is written to a temporary file beside it,
/// synced to disk and renamed over the old one, so a full disk or a crash leaves the old file
/// whole, and of concurrent saves to one path the last to finish wins. A symlink at `path` stays
/// a link; the file it points to is replaced. A model whose tensor paths are ambiguous (see
/// [`state_dict`]) is refused, and nothing is written.
#[track_caller]
pub fn save<M: Module + ?Sized>(module: &M, path: impl AsRef<Path>) -> Result<()> {
    let location = Location::caller();
    let path = path.as_ref();
    let entries = checked_entries(module, path, "save")?;
    let tensors: BTreeMap<String, Tensor> = entries.into_iter().map(|e| (e.key, e.tensor)).collect();
    write_tensors(&tensors, path, location)
}

/// Saves named tensors to `path` as safetensors, recording each tensor's device in the metadata
/// under [`DEVICES_METADATA_KEY`]. The file is replaced atomically, as by [`save`].
#[track_caller]
pub fn save_tensors(tensors: &BTreeMap<String, Tensor>, path: impl AsRef<Path>) -> Result<()> {
    write_tensors(tensors, path.as_ref(), Location::caller())
}

fn write_tensors(
    tensors: &BTreeMap<String, Tensor>,
    path: &Path,
    location: &'static Location<'static>,
) -> Result<()> {
    let encode_error = |detail: String| CheckpointError::Encode { path: path.to_path_buf(), detail };
    // safetensors' order: larger elements first (so every tensor stays aligned), then by name.
    let mut order: Vec<(&String, &Tensor)> = tensors.iter().collect();
    order.sort_by(|(a_key, a), (b_key, b)| {
        file_dtype(b.dtype()).cmp(&file_dtype(a.dtype())).then(a_key.cmp(b_key))
    });
    let mut infos = Vec::with_capacity(order.len());
    let mut devices = serde_json::Map::new();
    let mut offset = 0usize;
    for (key, tensor) in &order {
        let end = offset
            .checked_add(tensor.nbytes())
            .ok_or_else(|| encode_error("the tensors' total size overflows".into()))?;
        infos.push((
            key.to_string(),
            TensorInfo {
                dtype: file_dtype(tensor.dtype()),
                shape: tensor.shape().to_vec(),
                data_offsets: (offset, end),
            },
        ));
        offset = end;
        devices.insert(key.to_string(), serde_json::Value::String(tensor.device().to_string()));
    }
    let metadata =
        HashMap::from([(DEVICES_METADATA_KEY.to_string(), serde_json::Value::Object(devices).to_string())]);
    let metadata = Metadata::new(Some(metadata), infos).map_err(|e| encode_error(e.to_string()))?;
    let mut header = serde_json::to_vec(&metadata).map_err(|e| encode_error(e.to_string()))?;
    // The data starts 8-byte aligned, as safetensors writes it.
    header.resize(header.len().next_multiple_of(8), b' ');

    // A tensor that cannot be read (a fake one, a failing device) stops the write; its error is
    // the one to report, not the I/O error that carries it out of the writer.
    let mut tensor_error = None;
    let written = devcheck_files::write_atomically(path, |out| {
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(&header)?;
        for (_, tensor) in &order {
            match tensor.raw_bytes_at("save", location) {
                Ok(bytes) => out.write_all(&bytes)?,
                Err(error) => {
                    tensor_error = Some(error);
                    return Err(std::io::Error::other("a tensor could not be read"));
                }
            }
        }
        Ok(())
    });
    match (written, tensor_error) {
        (Ok(_), _) => Ok(()),
        (Err(_), Some(error)) => Err(error),
        (Err(source), None) => {
            Err(CheckpointError::Io { action: "write", path: path.to_path_buf(), source }.into())
        }
    }
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
    load_at(module, path.as_ref(), &LoadOptions::new(device), Location::caller()).map(|_| ())
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
    load_at(module, path.as_ref(), options, Location::caller())
}

fn load_at<M: Module + ?Sized>(
    module: &mut M,
    path: &Path,
    options: &LoadOptions,
    location: &'static Location<'static>,
) -> Result<LoadReport> {
    if !crate::fake::is_active() {
        options.device.ensure_available().map_err(|error| CheckpointError::TargetUnavailable {
            path: path.to_path_buf(),
            device: options.device,
            reason: error.to_string(),
        })?;
    }
    let entries = checked_entries(module, path, "load")?;
    // Only the header is read here; tensor data is read below, key by key.
    let file = CheckpointFile::open(path)?;
    let saved_from: HashMap<String, Device> = saved_devices(file.metadata().metadata().as_ref());
    let found = |key: &str, info: &TensorInfo| FileTensor {
        key: key.to_string(),
        dtype: format!("{:?}", info.dtype).to_lowercase(),
        shape: info.shape.clone(),
        saved_from: saved_from.get(key).copied(),
    };

    let mut report = LoadReport {
        module: crate::module::short_type_name(module.module_name()),
        path: path.to_path_buf(),
        location: Some(location),
        ..LoadReport::default()
    };
    let mut matched = Vec::new();
    for entry in &entries {
        let want = entry.expected();
        let Some(info) = file.info(&entry.key) else {
            report.missing.push(want);
            continue;
        };
        let found = found(&entry.key, info);
        if found.shape != want.shape {
            report.shape_mismatches.push(Mismatch { expected: want, found });
        } else if model_dtype(info.dtype) != Some(want.dtype) {
            report.dtype_mismatches.push(Mismatch { expected: want, found });
        } else {
            matched.push(entry);
        }
    }
    let model_keys: HashSet<&str> = entries.iter().map(|e| e.key.as_str()).collect();
    for key in file.names() {
        if !model_keys.contains(key.as_str())
            && let Some(info) = file.info(&key)
        {
            report.unexpected.push(found(&key, info));
        }
    }
    if options.strict && !report.is_clean() {
        return Err(CheckpointError::Mismatch(Box::new(report)).into());
    }

    // Create every tensor (and move optimizer state) before touching the model: all or nothing.
    // A tied parameter is read once; its other paths must hold the same bytes.
    let mut loaded = HashMap::with_capacity(matched.len());
    let mut paths_per_param: HashMap<ParamId, usize> = HashMap::new();
    for id in entries.iter().filter_map(|e| e.param) {
        *paths_per_param.entry(id).or_default() += 1;
    }
    // Per tied parameter: its first path, the bytes there, and the tensor made of them.
    let mut tied: HashMap<ParamId, (&str, Vec<u8>, Tensor)> = HashMap::new();
    for entry in matched {
        let key = entry.key.as_str();
        let shared = entry.param.filter(|id| paths_per_param.get(id).is_some_and(|&n| n > 1));
        let tensor = match shared {
            None => {
                file.read_tensor(key, entry.tensor.dtype(), &options.device, "load_state_dict", location)?
            }
            Some(id) => {
                let bytes = file.read_bytes(key, "load_state_dict", location)?;
                match tied.get(&id) {
                    Some((first, first_bytes, _)) if *first_bytes != bytes => {
                        return Err(CheckpointError::TiedValuesDiffer {
                            path: path.to_path_buf(),
                            module: report.module.clone(),
                            paths: [first.to_string(), key.to_string()],
                        }
                        .into());
                    }
                    Some((_, _, tensor)) => tensor.clone(),
                    None => {
                        let tensor = Tensor::from_raw_bytes_at(
                            &bytes,
                            entry.tensor.dtype(),
                            entry.tensor.shape(),
                            &options.device,
                            "load_state_dict",
                            location,
                        )?;
                        tied.insert(id, (key, bytes, tensor.clone()));
                        tensor
                    }
                }
            }
        };
        report.loaded.push(key.to_string());
        loaded.insert(key.to_string(), tensor);
    }
    report.loaded.sort_unstable();
    let states = param_states(module, &loaded, &options.device)?;
    let installer = ParamInstaller::for_module(module);
    module.walk_mut(&mut Install { loaded, states, installer })?;
    Ok(report)
}

/// One tensor a checkpoint of a module holds: its key (the dotted path), and what it is.
struct StateEntry {
    key: String,
    kind: EntryKind,
    tensor: Tensor,
    /// For a parameter, its identity (a tied parameter has several keys).
    param: Option<ParamId>,
}

impl StateEntry {
    fn expected(&self) -> ExpectedTensor {
        ExpectedTensor {
            key: self.key.clone(),
            kind: self.kind,
            dtype: self.tensor.dtype(),
            shape: self.tensor.shape().to_vec(),
        }
    }
}

/// The parameters and persistent buffers of `module` with their keys, in visit order, or the
/// error when keys are ambiguous: a path segment containing `.` (a `BTreeMap` key such as
/// `"b.c"`), which a key cannot be split back into, or several tensors under one key
/// (`{"a": {"b.c"}}` and `{"a.b": {"c"}}` are both `a.b.c`). `action` is `save` or `load`.
fn checked_entries<M: Module + ?Sized>(
    module: &M,
    path: &Path,
    action: &'static str,
) -> Result<Vec<StateEntry>> {
    #[derive(Default)]
    struct Collect {
        entries: Vec<StateEntry>,
        /// Per entry, its path's segments when one of them contains a `.`.
        dotted: Vec<Option<Vec<String>>>,
    }
    impl Collect {
        fn push(&mut self, path: &ModulePath, kind: EntryKind, tensor: Tensor, param: Option<ParamId>) {
            let segments: Vec<String> = path.segments().map(str::to_string).collect();
            self.dotted.push(segments.iter().any(|s| s.contains('.')).then_some(segments));
            self.entries.push(StateEntry { key: path.to_string(), kind, tensor, param });
        }
    }
    impl Visitor for Collect {
        fn visit_param(&mut self, path: &ModulePath, param: &Param) -> Result<()> {
            self.push(path, EntryKind::Parameter, param.tensor(), Some(param.id()));
            Ok(())
        }

        fn visit_buffer(
            &mut self,
            path: &ModulePath,
            tensor: &Tensor,
            persistence: Persistence,
        ) -> Result<()> {
            if persistence == Persistence::Persistent {
                self.push(path, EntryKind::Buffer, tensor.clone(), None);
            }
            Ok(())
        }
    }
    let mut collect = Collect::default();
    module.walk(&mut collect)?;

    let mut problems: Vec<AmbiguousKey> = Vec::new();
    for (entry, dotted) in collect.entries.iter().zip(&collect.dotted) {
        if let Some(segments) = dotted {
            problems.push(AmbiguousKey::DottedSegment { key: entry.key.clone(), segments: segments.clone() });
        }
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in &collect.entries {
        *seen.entry(entry.key.as_str()).or_default() += 1;
    }
    for (key, count) in seen.into_iter().filter(|(_, count)| *count > 1) {
        problems.push(AmbiguousKey::Shared { key: key.to_string(), count });
    }
    if problems.is_empty() {
        return Ok(collect.entries);
    }
    Err(CheckpointError::AmbiguousKeys {
        action,
        module: crate::module::short_type_name(module.module_name()),
        path: path.to_path_buf(),
        problems,
    }
    .into())
}

/// Why a checkpoint key cannot be used (see [`CheckpointError::AmbiguousKeys`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AmbiguousKey {
    /// A path segment contains `.`: the key cannot be split back into the path it came from.
    DottedSegment { key: String, segments: Vec<String> },
    /// `count` tensors of the model have this key; a checkpoint can hold only one.
    Shared { key: String, count: usize },
}

impl fmt::Display for AmbiguousKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AmbiguousKey::DottedSegment { key, segments } => {
                write!(f, "`{key}` comes from the path segments {segments:?}, one of which contains `.`")
            }
            AmbiguousKey::Shared { key, count } => {
                write!(f, "`{key}` is the key of {count} different tensors")
            }
        }
    }
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

    #[error(
        "cannot {action} `{module}` {} `{}`: its checkpoint keys are ambiguous{}",
        if *action == "save" { "to" } else { "from" },
        path.display(),
        problems.iter().map(|p| format!("\n  {p}")).collect::<String>()
    )]
    #[diagnostic(
        code(devcheck::checkpoint_ambiguous_keys),
        help(
            "a checkpoint key joins a tensor's path with `.`, so a `BTreeMap` key that contains `.` cannot \
             be told apart from a deeper path, and two paths can end up as one key (the file would hold \
             only one of the tensors); rename such map keys, e.g. `b_c` for `b.c`"
        )
    )]
    AmbiguousKeys { action: &'static str, module: String, path: PathBuf, problems: Vec<AmbiguousKey> },

    #[error(
        "checkpoint `{}` holds different values for `{}` and `{}`, which are one parameter in `{module}` \
         (tied weights); nothing was loaded",
        path.display(),
        paths[0],
        paths[1]
    )]
    #[diagnostic(
        code(devcheck::checkpoint_tied_values_differ),
        help(
            "the file was saved from a model in which these two were separate parameters: load it into a \
             model built that way (a `Param` of its own for each path), or remove one of the two keys from \
             the file so that the other one is loaded into the shared parameter"
        )
    )]
    TiedValuesDiffer { path: PathBuf, module: String, paths: [String; 2] },
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

impl LayerError for CheckpointError {
    fn location(&self) -> Option<&'static Location<'static>> {
        CheckpointError::location(self)
    }
}

impl From<CheckpointError> for Error {
    fn from(error: CheckpointError) -> Error {
        Error::Checkpoint(LayerDetail::new(error))
    }
}

fn io_help(action: &str) -> &'static str {
    if action == "write" {
        "check that the folder exists and is writable, and that the disk has room"
    } else {
        "check the path (relative paths start at the current directory) and that the file is readable"
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

/// The optimizer state of every parameter that will be loaded, moved to `device` beforehand so
/// that installing cannot fail.
fn param_states<M: Module + ?Sized>(
    module: &M,
    loaded: &HashMap<String, Tensor>,
    device: &Device,
) -> Result<HashMap<ParamId, BTreeMap<String, Tensor>>> {
    struct States<'a> {
        loaded: &'a HashMap<String, Tensor>,
        device: Device,
        out: HashMap<ParamId, BTreeMap<String, Tensor>>,
    }
    impl Visitor for States<'_> {
        fn visit_param(&mut self, path: &ModulePath, param: &Param) -> Result<()> {
            if self.loaded.contains_key(path.as_str()) && !self.out.contains_key(&param.id()) {
                self.out.insert(param.id(), param.state_on(&self.device)?);
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
    states: HashMap<ParamId, BTreeMap<String, Tensor>>,
    /// Loads into this model only, not into a clone sharing its parameters; a tied parameter is
    /// installed at its first path and its other paths follow it.
    installer: ParamInstaller,
}

impl VisitorMut for Install {
    fn visit_param(&mut self, path: &ModulePath, param: &mut Param) -> Result<()> {
        if let Some(tensor) = self.loaded.remove(path.as_str()) {
            let state = self.states.remove(&param.id()).unwrap_or_default();
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
