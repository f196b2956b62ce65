//! Numeric CSV tables (optionally gzip-compressed) as one tensor.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::GzDecoder;

use super::DataError;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::Tensor;

/// Reads a comma-separated table of numbers into an f32 tensor `[rows, columns]` on the CPU. A
/// path ending in `.gz` is decompressed on the fly; `has_header` skips the first line. Blank
/// lines are ignored.
///
/// ```no_run
/// # fn main() -> devcheck::Result<()> {
/// let table = devcheck::data::read_csv("fixtures/digits.csv.gz", false)?;
/// let pixels = table.narrow(1, 0, 64)?;
/// let labels = table.narrow(1, 64, 1)?.squeeze(1)?.to_dtype(devcheck::DType::I64)?;
/// # Ok(())
/// # }
/// ```
#[track_caller]
pub fn read_csv(path: impl AsRef<Path>, has_header: bool) -> Result<Tensor> {
    let path = path.as_ref();
    let io = |source| DataError::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(GzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut values = Vec::new();
    let mut columns = None;
    let mut rows = 0;
    for (number, line) in BufReader::new(reader).lines().enumerate() {
        let line = line.map_err(io)?;
        if (number == 0 && has_header) || line.trim().is_empty() {
            continue;
        }
        let before = values.len();
        for (column, field) in line.split(',').enumerate() {
            let text = field.trim();
            let value: f32 = text.parse().map_err(|_| DataError::Parse {
                path: path.to_path_buf(),
                line: number + 1,
                column: column + 1,
                text: text.to_string(),
            })?;
            values.push(value);
        }
        let found = values.len() - before;
        match columns {
            None => columns = Some(found),
            Some(expected) if expected != found => {
                return Err(DataError::Ragged {
                    path: path.to_path_buf(),
                    line: number + 1,
                    expected,
                    found,
                }
                .into());
            }
            Some(_) => {}
        }
        rows += 1;
    }
    let Some(columns) = columns else { return Err(DataError::Empty { path: path.to_path_buf() }.into()) };
    Tensor::from_vec(values, [rows, columns], &Device::Cpu)
}
