//! Reading safetensors files: the header first, then each tensor's bytes when asked for.
//!
//! A file is checked before any tensor data is read: its header length, its header (UTF-8 JSON
//! whose byte ranges tile the data without gaps or overlaps, with sizes that match dtype and
//! shape), and that the data ends where the file ends. A damaged or hostile file of many gigabytes
//! is therefore rejected after reading at most its header (at most 100 MB, safetensors' own
//! limit), and a good one is read one tensor at a time, never whole.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::panic::Location;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Metadata, SafeTensorError, TensorInfo};

use super::CheckpointError;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

/// safetensors' limit on the header size.
const MAX_HEADER: u64 = 100_000_000;

/// The length field in front of the header.
const LENGTH_FIELD: u64 = 8;

/// An open checkpoint whose header has been read and checked.
#[derive(Debug)]
pub(crate) struct CheckpointFile {
    path: PathBuf,
    file: File,
    metadata: Metadata,
    /// Where the tensor data starts in the file.
    data_start: u64,
}

/// The header as JSON has it: the optional `__metadata__` strings and one entry per tensor.
#[derive(serde::Deserialize)]
struct Header {
    #[serde(rename = "__metadata__")]
    metadata: Option<HashMap<String, String>>,
    #[serde(flatten)]
    tensors: HashMap<String, TensorInfo>,
}

impl CheckpointFile {
    /// Opens `path` and reads and checks its header; no tensor data is read.
    pub(crate) fn open(path: &Path) -> Result<CheckpointFile> {
        let io_error = |source| CheckpointError::Io { action: "read", path: path.to_path_buf(), source };
        let malformed = |detail: String| CheckpointError::Malformed { path: path.to_path_buf(), detail };
        // A FIFO or a device named `*.safetensors` is refused before anything waits on it.
        let mut file = devcheck_files::open_regular(path).map_err(|e| match e {
            devcheck_files::ReadError::Io(e) => io_error(e),
            other => io_error(std::io::Error::other(other)),
        })?;
        let file_len = file.metadata().map_err(io_error)?.len();
        if file_len < LENGTH_FIELD {
            return Err(malformed(
                "it is shorter than the 8-byte header length (truncated, or not a safetensors file)".into(),
            )
            .into());
        }
        let mut length_field = [0u8; LENGTH_FIELD as usize];
        file.read_exact(&mut length_field).map_err(io_error)?;
        let header_len = u64::from_le_bytes(length_field);
        if header_len > MAX_HEADER {
            return Err(malformed("its header length field claims more than 100 MB".into()).into());
        }
        if LENGTH_FIELD + header_len > file_len {
            return Err(malformed(
                "its header length field points past the end of the file (truncated or corrupted)".into(),
            )
            .into());
        }
        // At most MAX_HEADER bytes (checked above), and no more than the file holds.
        let mut header = Vec::new();
        (&mut file).take(header_len).read_to_end(&mut header).map_err(io_error)?;
        if header.len() as u64 != header_len {
            return Err(
                malformed("the file ended while its header was read (it is being written?)".into()).into()
            );
        }
        let metadata = parse_header(&header).map_err(malformed)?;
        let data_start = LENGTH_FIELD + header_len;
        let data_len = file_len - data_start;
        if metadata.data_len() as u64 != data_len {
            return Err(malformed(format!(
                "the header describes {} of tensor data but the file holds {} (truncated, or extra bytes \
                 at the end)",
                crate::units::format_bytes(metadata.data_len(), 1),
                crate::units::format_bytes(usize::try_from(data_len).unwrap_or(usize::MAX), 1)
            ))
            .into());
        }
        Ok(CheckpointFile { path: path.to_path_buf(), file, metadata, data_start })
    }

    pub(crate) fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The tensor names, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.metadata.tensors().into_keys().collect();
        names.sort_unstable();
        names
    }

    pub(crate) fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.metadata.info(name)
    }

    /// The bytes of tensor `name` (the header's byte range, checked at open). Host memory for them
    /// is reserved first: a header may describe tensors larger than this machine's memory.
    pub(crate) fn read_bytes(
        &self,
        name: &str,
        op: &'static str,
        location: &'static Location<'static>,
    ) -> Result<Vec<u8>> {
        let malformed = |detail: String| CheckpointError::Malformed { path: self.path.clone(), detail };
        let io_error = |source| CheckpointError::Io { action: "read", path: self.path.clone(), source };
        let info = self.info(name).ok_or_else(|| malformed(format!("it has no tensor `{name}`")))?;
        let (start, end) = info.data_offsets;
        // Both lie within the data (checked at open), so neither sum overflows.
        let len = end - start;
        let mut bytes = crate::backend::try_vec::<u8>(len).map_err(|e| e.into_error(op, location))?;
        let mut file = &self.file;
        file.seek(SeekFrom::Start(self.data_start + start as u64)).map_err(io_error)?;
        file.take(len as u64).read_to_end(&mut bytes).map_err(io_error)?;
        if bytes.len() != len {
            return Err(malformed(format!(
                "the file ended inside tensor `{name}` (it was truncated while being read?)"
            ))
            .into());
        }
        Ok(bytes)
    }

    /// Tensor `name` as a devcheck tensor of `dtype` on `device` (the caller matched the dtype).
    pub(crate) fn read_tensor(
        &self,
        name: &str,
        dtype: DType,
        device: &Device,
        op: &'static str,
        location: &'static Location<'static>,
    ) -> Result<Tensor> {
        let bytes = self.read_bytes(name, op, location)?;
        let shape = self.info(name).map(|info| info.shape.clone()).unwrap_or_default();
        Tensor::from_raw_bytes_at(&bytes, dtype, &shape, device, op, location)
    }
}

/// The checked header; the error says what is wrong in words.
fn parse_header(header: &[u8]) -> std::result::Result<Metadata, String> {
    let text = std::str::from_utf8(header).map_err(|_| "its header is not UTF-8 text".to_string())?;
    let header: Header =
        serde_json::from_str(text).map_err(|e| format!("its header is not valid safetensors JSON: {e}"))?;
    let mut tensors: Vec<(String, TensorInfo)> = header.tensors.into_iter().collect();
    // Byte ranges in file order: each must start where the previous one ended.
    tensors.sort_by(|(a_name, a), (b_name, b)| a.data_offsets.cmp(&b.data_offsets).then(a_name.cmp(b_name)));
    Metadata::new(header.metadata, tensors).map_err(|e| describe(&e))
}

/// Human words for what is wrong with a header.
fn describe(error: &SafeTensorError) -> String {
    match error {
        SafeTensorError::ValidationOverflow => {
            "a tensor's shape or byte size overflows (a corrupted header)".into()
        }
        SafeTensorError::TensorInvalidInfo => "a tensor's dtype and shape do not match its byte range".into(),
        SafeTensorError::InvalidOffset(name) => {
            format!("the byte range of tensor `{name}` is invalid (gaps or overlaps between tensors)")
        }
        SafeTensorError::MisalignedSlice => "a tensor's size is not a whole number of bytes".into(),
        other => other.to_string(),
    }
}
