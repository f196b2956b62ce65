//! One training step of a small CNN on 28x28 single-channel images, batch 64, the same model and
//! step `scripts/bench_peers.py` runs in PyTorch: Conv2d(1, 16, 3) ReLU MaxPool2d(2),
//! Conv2d(16, 32, 3) ReLU MaxPool2d(2), Flatten, Linear(32*5*5, 10); cross-entropy and AdamW.

use devcheck::nn::functional::cross_entropy;
use devcheck::nn::{Conv2d, Flatten, Forward, Linear, MaxPool2d, Relu, Sequential};
use devcheck::optim::{AdamW, Optimizer};
use devcheck::{Device, Module, Result, Tensor};

pub const BATCH: usize = 64;
pub const SIDE: usize = 28;
pub const CLASSES: usize = 10;

pub struct CnnStep {
    model: Sequential,
    optimizer: AdamW,
    x: Tensor,
    y: Tensor,
}

impl CnnStep {
    pub fn new() -> Result<CnnStep> {
        let cpu = Device::Cpu;
        devcheck::manual_seed(0);
        let model = Sequential::new()
            .append(Conv2d::new(1, 16, 3, &cpu)?)
            .append(Relu)
            .append(MaxPool2d::new(2))
            .append(Conv2d::new(16, 32, 3, &cpu)?)
            .append(Relu)
            .append(MaxPool2d::new(2))
            .append(Flatten)
            .append(Linear::new(32 * 5 * 5, CLASSES, &cpu)?);
        let optimizer = AdamW::new(model.parameters(), 1e-3)?;
        let x = Tensor::randn([BATCH, 1, SIDE, SIDE], &cpu)?;
        let labels: Vec<i64> = (0..BATCH as i64).map(|i| (i * 7) % CLASSES as i64).collect();
        let y = Tensor::from_vec(labels, [BATCH], &cpu)?;
        Ok(CnnStep { model, optimizer, x, y })
    }

    /// zero_grad, forward, loss, backward, update; returns the loss.
    pub fn step(&mut self) -> Result<Tensor> {
        self.optimizer.zero_grad();
        let loss = cross_entropy(&self.model.forward(&self.x)?, &self.y, &Default::default())?;
        loss.backward()?;
        self.optimizer.step()?;
        Ok(loss)
    }
}
