//! Feeding a model: [`Dataset`], [`TensorDataset`], and the [`DataLoader`] that batches,
//! shuffles (seeded) and prepares batches ahead on a background thread.
//!
//! As in PyTorch, batches come out on the CPU and moving them is the training loop's one line per
//! tensor, so the loader never needs to know the device:
//!
//! ```
//! use devcheck::data::{DataLoader, TensorDataset};
//! use devcheck::{DType, Device, Tensor};
//!
//! # fn main() -> devcheck::Result<()> {
//! let device = Device::best_available();
//! let x = Tensor::randn([100, 8], &Device::Cpu)?;
//! let y = Tensor::zeros([100], (DType::I64, &Device::Cpu))?;
//! let loader = DataLoader::new(TensorDataset::new((x, y))?, 32)?.shuffle(true).seed(0);
//! for batch in &loader {
//!     let (x, y) = batch?;
//!     let (x, y) = (x.to(&device)?, y.to(&device)?);
//!     assert_eq!(x.shape()[1], 8);
//!     assert!(y.shape()[0] <= 32);
//! }
//! assert_eq!(loader.len(), 4);
//! # Ok(())
//! # }
//! ```

mod csv;
mod dataset;
mod loader;

pub use csv::read_csv;
pub use dataset::{Dataset, TensorDataset, Tensors};
pub use loader::{Batches, DataLoader};

use std::path::PathBuf;

/// Errors reading data files (part of [`crate::Error`]).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum DataError {
    #[error("cannot read `{}`: {source}", path.display())]
    #[diagnostic(code(devcheck::data_io), help("check that the path exists and is readable"))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("`{}` line {line}, column {column}: `{text}` is not a number", path.display())]
    #[diagnostic(
        code(devcheck::data_parse),
        help("every field must be a number; pass `has_header = true` if the first line holds column names")
    )]
    Parse { path: PathBuf, line: usize, column: usize, text: String },

    #[error("`{}` line {line} has {found} field(s), the lines before it have {expected}", path.display())]
    #[diagnostic(
        code(devcheck::data_ragged),
        help("every row of a numeric table must have the same number of fields")
    )]
    Ragged { path: PathBuf, line: usize, expected: usize, found: usize },

    #[error("`{}` holds no rows", path.display())]
    #[diagnostic(
        code(devcheck::data_empty),
        help("check the file: a table needs at least one row of numbers")
    )]
    Empty { path: PathBuf },
}

impl crate::error::LayerError for DataError {}

impl From<DataError> for crate::Error {
    fn from(error: DataError) -> crate::Error {
        crate::Error::Data(crate::error::LayerDetail::new(error))
    }
}
