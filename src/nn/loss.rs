//! Losses as modules. A class-weight tensor is a buffer, so it moves with the model (in PyTorch a
//! `CrossEntropyLoss(weight=w)` built with a CPU `w` fails on the first CUDA batch).

use crate::error::Result;
use crate::module::Module;
use crate::tensor::Tensor;

use super::functional::{self as f, ClassLossOptions, Reduction};

/// Cross-entropy over class logits (PyTorch's `nn.CrossEntropyLoss`): see
/// [`functional::cross_entropy`](f::cross_entropy) for the shapes.
#[derive(Module, Clone, Debug, Default)]
pub struct CrossEntropyLoss {
    /// One weight per class, `[C]`.
    pub weight: Option<Tensor>,
    pub label_smoothing: f64,
    pub ignore_index: i64,
    #[module(skip)]
    pub reduction: Reduction,
}

impl CrossEntropyLoss {
    /// Mean reduction, no class weights, no smoothing, ignore index -100 (PyTorch's defaults).
    pub fn new() -> CrossEntropyLoss {
        CrossEntropyLoss { ignore_index: -100, ..CrossEntropyLoss::default() }
    }

    #[must_use = "the builder returns the configured loss"]
    pub fn with_weight(mut self, weight: Tensor) -> Self {
        self.weight = Some(weight);
        self
    }

    #[must_use = "the builder returns the configured loss"]
    pub fn with_label_smoothing(mut self, smoothing: f64) -> Self {
        self.label_smoothing = smoothing;
        self
    }

    #[must_use = "the builder returns the configured loss"]
    pub fn with_ignore_index(mut self, index: i64) -> Self {
        self.ignore_index = index;
        self
    }

    #[must_use = "the builder returns the configured loss"]
    pub fn with_reduction(mut self, reduction: Reduction) -> Self {
        self.reduction = reduction;
        self
    }

    /// The loss of `logits` against `target` (class indices, or class probabilities).
    #[track_caller]
    pub fn forward(&self, logits: &Tensor, target: &Tensor) -> Result<Tensor> {
        let options = ClassLossOptions {
            weight: self.weight.clone(),
            ignore_index: self.ignore_index,
            label_smoothing: self.label_smoothing,
            reduction: self.reduction,
        };
        f::cross_entropy(logits, target, &options)
    }
}

/// Mean squared error (PyTorch's `nn.MSELoss`).
#[derive(Module, Clone, Debug, Default)]
pub struct MseLoss {
    #[module(skip)]
    pub reduction: Reduction,
}

impl MseLoss {
    pub fn new() -> MseLoss {
        MseLoss::default()
    }

    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        f::mse_loss(input, target, self.reduction)
    }
}
