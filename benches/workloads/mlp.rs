//! One training step of an MLP 784-256-10 (ReLU, batch 64, AdamW, cross-entropy), the same
//! model and step `scripts/bench_peers.py` runs in PyTorch.

use devcheck::nn::functional::cross_entropy;
use devcheck::nn::{Forward, Linear, Relu, Sequential};
use devcheck::optim::{AdamW, Optimizer};
use devcheck::{Device, Module, Result, Tensor};

pub const BATCH: usize = 64;
pub const SIZES: [usize; 3] = [784, 256, 10];

pub struct MlpStep {
    model: Sequential,
    optimizer: AdamW,
    x: Tensor,
    y: Tensor,
}

impl MlpStep {
    pub fn new() -> Result<MlpStep> {
        MlpStep::on(&Device::Cpu)
    }

    /// The same model, optimizer and batch on `device` (made on the CPU from the same seed, then
    /// moved).
    pub fn on(device: &Device) -> Result<MlpStep> {
        let cpu = Device::Cpu;
        devcheck::manual_seed(0);
        let model = Sequential::new()
            .append(Linear::new(SIZES[0], SIZES[1], &cpu)?)
            .append(Relu)
            .append(Linear::new(SIZES[1], SIZES[2], &cpu)?);
        let mut model = model;
        model.to(device)?;
        let optimizer = AdamW::new(model.parameters(), 1e-3)?;
        let x = Tensor::randn([BATCH, SIZES[0]], &cpu)?.to(device)?;
        let labels: Vec<i64> = (0..BATCH as i64).map(|i| (i * 7) % SIZES[2] as i64).collect();
        let y = Tensor::from_vec(labels, [BATCH], device)?;
        Ok(MlpStep { model, optimizer, x, y })
    }

    /// zero_grad, forward, loss, backward, update; returns the loss (left on its device: the
    /// step does not read it back, as a training loop should not every step).
    pub fn step(&mut self) -> Result<Tensor> {
        self.optimizer.zero_grad();
        let loss = cross_entropy(&self.model.forward(&self.x)?, &self.y, &Default::default())?;
        loss.backward()?;
        self.optimizer.step()?;
        Ok(loss)
    }
}
