//! Culprit: a loss-weight tensor created on the CPU. Class weights for an imbalanced dataset are
//! made inside the loss from a literal, on the CPU, and multiplied into the per-class loss.

use devcheck::{Device, Module, Result, Tensor};

use super::common::Classifier;

const CLASS_WEIGHTS: [f32; 3] = [1.0, 2.0, 0.5];

/// Weighted cross-entropy with one-hot targets `[batch, classes]`.
pub fn weighted_loss(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let weights = Tensor::from_vec(CLASS_WEIGHTS.to_vec(), [3], &Device::Cpu)?;
    let per_class = logits.log_softmax(-1)?.mul(targets)?;
    per_class.mul(&weights)?.sum_all()?.neg()
}

/// The clean twin: the weights are made on the logits' device, with their dtype.
pub fn weighted_loss_fixed(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let weights = logits.new_tensor(&CLASS_WEIGHTS, [3])?;
    let per_class = logits.log_softmax(-1)?.mul(targets)?;
    per_class.mul(&weights)?.sum_all()?.neg()
}

pub fn step(model: &mut Classifier, batch: &[Tensor]) -> Result<Tensor> {
    let device = model.device()?;
    let (x, targets) = (batch[0].to(&device)?, batch[1].to(&device)?);
    weighted_loss(&model.forward(&x)?, &targets)
}

pub fn step_fixed(model: &mut Classifier, batch: &[Tensor]) -> Result<Tensor> {
    let device = model.device()?;
    let (x, targets) = (batch[0].to(&device)?, batch[1].to(&device)?);
    weighted_loss_fixed(&model.forward(&x)?, &targets)
}
