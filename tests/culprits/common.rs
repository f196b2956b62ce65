//! A small classifier and its loss, shared by the training-step culprits.

use devcheck::check::Input;
use devcheck::{DType, Device, Module, Param, Result, Tensor};

pub const BATCH: usize = 4;
pub const FEATURES: usize = 8;
pub const CLASSES: usize = 3;

#[derive(Module, Clone)]
pub struct Linear {
    pub weight: Param,
    pub bias: Param,
}

impl Linear {
    pub fn new(inputs: usize, outputs: usize, device: &Device) -> Result<Linear> {
        Ok(Linear {
            weight: Param::new(Tensor::randn([inputs, outputs], device)?.mul_scalar(0.1)?),
            bias: Param::new(Tensor::zeros([outputs], device)?),
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight.tensor())?.add(&self.bias.tensor())
    }
}

#[derive(Module, Clone)]
pub struct Classifier {
    pub hidden: Linear,
    pub head: Linear,
}

impl Classifier {
    pub fn new(device: &Device) -> Result<Classifier> {
        Ok(Classifier { hidden: Linear::new(FEATURES, 16, device)?, head: Linear::new(16, CLASSES, device)? })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.head.forward(&self.hidden.forward(x)?.relu()?)
    }
}

/// Mean negative log-likelihood of `labels` (i64 class ids) under `logits`.
pub fn cross_entropy(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    let picked = logits.log_softmax(-1)?.gather(1, &labels.unsqueeze(1)?)?;
    picked.neg()?.mean_all()
}

/// A batch as a data loader yields it: features and labels on the CPU.
pub fn loader_batch() -> [Input; 2] {
    [
        Input::new("batch.x", [BATCH, FEATURES], DType::F32).on(&Device::Cpu),
        Input::new("batch.labels", [BATCH], DType::I64).on(&Device::Cpu),
    ]
}
