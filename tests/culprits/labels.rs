//! Culprit: the labels are still on the CPU. The step moves the features, not the labels, so
//! the loss mixes devices.

use devcheck::{Module, Result, Tensor};

use super::common::{Classifier, cross_entropy};

pub fn step(model: &mut Classifier, batch: &[Tensor]) -> Result<Tensor> {
    let device = model.device()?;
    let x = batch[0].to(&device)?;
    let logits = model.forward(&x)?;
    cross_entropy(&logits, &batch[1])
}

/// The clean twin.
pub fn step_fixed(model: &mut Classifier, batch: &[Tensor]) -> Result<Tensor> {
    let device = model.device()?;
    let (x, labels) = (batch[0].to(&device)?, batch[1].to(&device)?);
    let logits = model.forward(&x)?;
    cross_entropy(&logits, &labels)
}
