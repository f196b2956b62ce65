//! Datasets: anything that can produce a batch of samples by index.

use std::panic::Location;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::fmt_shape;
use crate::tensor::Tensor;

/// A collection of samples (PyTorch's map-style `Dataset`), read a batch at a time: batching by
/// index lets a tensor-backed dataset gather a whole batch in one op per tensor.
pub trait Dataset: Send + Sync + 'static {
    /// What one batch is, e.g. `(Tensor, Tensor)` for inputs and labels.
    type Batch: Send + 'static;

    /// The number of samples.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The samples at `indices` (each `< len()`), stacked along a new first dim.
    fn batch(&self, indices: &[usize]) -> Result<Self::Batch>;

    /// `batch` in page-locked host memory, for a loader with `pin_memory(true)`
    /// ([`Tensor::pin_memory`] on each tensor). The default returns it unchanged: a dataset
    /// whose batches hold no tensors has nothing to pin.
    fn pin_batch(&self, batch: Self::Batch) -> Result<Self::Batch> {
        Ok(batch)
    }
}

/// The tensors a [`TensorDataset`] holds: one `Tensor`, a pair, a triple, or a `Vec`.
pub trait Tensors: Clone + Send + Sync + 'static {
    fn tensors(&self) -> Vec<&Tensor>;

    /// The same structure with every tensor replaced by `f(tensor)`.
    fn try_map(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Self>;
}

impl Tensors for Tensor {
    fn tensors(&self) -> Vec<&Tensor> {
        vec![self]
    }

    fn try_map(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Self> {
        f(self)
    }
}

impl Tensors for (Tensor, Tensor) {
    fn tensors(&self) -> Vec<&Tensor> {
        vec![&self.0, &self.1]
    }

    fn try_map(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Self> {
        Ok((f(&self.0)?, f(&self.1)?))
    }
}

impl Tensors for (Tensor, Tensor, Tensor) {
    fn tensors(&self) -> Vec<&Tensor> {
        vec![&self.0, &self.1, &self.2]
    }

    fn try_map(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Self> {
        Ok((f(&self.0)?, f(&self.1)?, f(&self.2)?))
    }
}

impl Tensors for Vec<Tensor> {
    fn tensors(&self) -> Vec<&Tensor> {
        self.iter().collect()
    }

    fn try_map(&self, f: &mut dyn FnMut(&Tensor) -> Result<Tensor>) -> Result<Self> {
        self.iter().map(f).collect()
    }
}

/// Samples along the first dim of one or more tensors (PyTorch's `TensorDataset`): sample `i` is
/// row `i` of each.
#[derive(Clone, Debug)]
pub struct TensorDataset<T: Tensors> {
    tensors: T,
    len: usize,
}

impl<T: Tensors> TensorDataset<T> {
    /// Every tensor must have at least one dim, all with the same first dim.
    #[track_caller]
    pub fn new(tensors: T) -> Result<TensorDataset<T>> {
        let location = Location::caller();
        let all = tensors.tensors();
        let len = all.first().and_then(|t| t.shape().first().copied());
        let agree = all.iter().all(|t| t.rank() > 0 && Some(t.shape()[0]) == len);
        match len {
            Some(len) if agree => Ok(TensorDataset { len, tensors }),
            _ => Err(Error::ShapeMismatch {
                op: "TensorDataset::new",
                detail: format!(
                    "the tensors must share their first dim (the sample count), got {}",
                    all.iter().map(|t| fmt_shape(t.shape())).collect::<Vec<_>>().join(", ")
                ),
                help: "pass inputs and labels with one row per sample, e.g. x [N, features] and y [N]"
                    .to_string(),
                operands: all.iter().enumerate().map(|(i, t)| t.operand(format!("tensors[{i}]"))).collect(),
                location,
            }),
        }
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The tensors, whole.
    pub fn tensors(&self) -> &T {
        &self.tensors
    }

    /// Splits the samples at random into parts of the given fractions (which must sum to 1; the
    /// last part takes any rounding remainder), with a fixed `seed` so the split is the same on
    /// every run (PyTorch's `random_split` with a seeded generator).
    #[track_caller]
    pub fn random_split(&self, fractions: &[f64], seed: u64) -> Result<Vec<TensorDataset<T>>> {
        let location = Location::caller();
        let sum: f64 = fractions.iter().sum();
        if fractions.is_empty()
            || fractions.iter().any(|f| !(0.0..=1.0).contains(f))
            || (sum - 1.0).abs() > 1e-9
        {
            return Err(Error::InvalidArgument {
                op: "random_split",
                detail: format!("fractions {fractions:?} do not split the whole dataset"),
                help: "give fractions in [0, 1] that sum to 1, e.g. `&[0.8, 0.2]`".to_string(),
                location,
            });
        }
        let mut order: Vec<usize> = (0..self.len).collect();
        order.shuffle(&mut StdRng::seed_from_u64(seed));
        let mut parts = Vec::with_capacity(fractions.len());
        let mut start = 0;
        for (i, f) in fractions.iter().enumerate() {
            let end = if i + 1 == fractions.len() {
                self.len
            } else {
                start + (f * self.len as f64).round() as usize
            };
            let end = end.min(self.len);
            parts.push(TensorDataset { tensors: self.select(&order[start..end])?, len: end - start });
            start = end;
        }
        Ok(parts)
    }

    /// Rows `indices` of every tensor, on each tensor's device.
    fn select(&self, indices: &[usize]) -> Result<T> {
        let index: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
        let mut index_on = |t: &Tensor| -> Result<Tensor> {
            let index = Tensor::from_slice(&index, [index.len()], &t.device())?;
            debug_assert_eq!(index.dtype(), DType::I64);
            t.index_select(0, &index)
        };
        self.tensors.try_map(&mut index_on)
    }
}

impl<T: Tensors> Dataset for TensorDataset<T> {
    type Batch = T;

    fn len(&self) -> usize {
        self.len
    }

    #[track_caller]
    fn batch(&self, indices: &[usize]) -> Result<T> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= self.len) {
            return Err(Error::InvalidArgument {
                op: "TensorDataset::batch",
                detail: format!("index {bad} is out of range for {} samples", self.len),
                help: "indices run from 0 to len() - 1".to_string(),
                location: Location::caller(),
            });
        }
        self.select(indices)
    }

    fn pin_batch(&self, batch: T) -> Result<T> {
        batch.try_map(&mut |t| if t.device().is_cpu() { t.pin_memory() } else { Ok(t.clone()) })
    }
}
