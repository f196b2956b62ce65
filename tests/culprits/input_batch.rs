//! Culprit: the input batch is still on the CPU. The step moves the labels but feeds the
//! features to the model where the loader left them.

use devcheck::{Module, Result, Tensor};

use super::common::{Classifier, cross_entropy};

pub fn step(model: &mut Classifier, batch: &[Tensor]) -> Result<Tensor> {
    let device = model.device()?;
    let labels = batch[1].to(&device)?;
    let logits = model.forward(&batch[0])?;
    cross_entropy(&logits, &labels)
}

/// The clean twin: both halves of the batch go to the model's device.
pub fn step_fixed(model: &mut Classifier, batch: &[Tensor]) -> Result<Tensor> {
    let device = model.device()?;
    let (x, labels) = (batch[0].to(&device)?, batch[1].to(&device)?);
    let logits = model.forward(&x)?;
    cross_entropy(&logits, &labels)
}
