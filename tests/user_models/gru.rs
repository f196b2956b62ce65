//! A GRU-like recurrent cell unrolled over a sequence, as a PyTorch user writes it from the README:
//! gates from `Linear` layers over `[x, h]`, the initial state made from the input, and the
//! target's normalisation statistics kept as buffers.

use devcheck::nn::{Forward, Linear};
use devcheck::{Device, Module, Result, Tensor};

pub const INPUT: usize = 3;
pub const HIDDEN: usize = 8;
pub const STEPS: usize = 5;

#[derive(Module)]
pub struct GruRegressor {
    pub update: Linear,
    pub reset: Linear,
    pub candidate: Linear,
    pub head: Linear,
    /// The target's mean and standard deviation: the head predicts in normalised units.
    pub target_mean: Tensor,
    pub target_std: Tensor,
}

impl GruRegressor {
    pub fn new(device: &Device) -> Result<GruRegressor> {
        Ok(GruRegressor {
            update: Linear::new(INPUT + HIDDEN, HIDDEN, device)?,
            reset: Linear::new(INPUT + HIDDEN, HIDDEN, device)?,
            candidate: Linear::new(INPUT + HIDDEN, HIDDEN, device)?,
            head: Linear::new(HIDDEN, 1, device)?,
            target_mean: Tensor::zeros([1], device)?,
            target_std: Tensor::full([1], 2.0, device)?,
        })
    }

    /// One step of the cell: `h' = (1 - z) h + z tanh(W [x, r h])`.
    fn cell(&self, x: &Tensor, h: &Tensor) -> Result<Tensor> {
        let xh = Tensor::cat(&[x, h], 1)?;
        let z = self.update.forward(&xh)?.sigmoid()?;
        let r = self.reset.forward(&xh)?.sigmoid()?;
        let candidate = self.candidate.forward(&Tensor::cat(&[x, &r.mul(h)?], 1)?)?.tanh()?;
        h.add(&z.mul(&candidate.sub(h)?)?)
    }
}

impl Forward for GruRegressor {
    /// `x`: `[batch, steps, 3]`; the prediction is `[batch, 1]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.new_zeros([x.size(0)?, HIDDEN])?;
        for t in 0..x.size(1)? {
            h = self.cell(&x.narrow(1, t, 1)?.squeeze(1)?, &h)?;
        }
        let normalised = self.head.forward(&h)?;
        normalised.mul(&self.target_std)?.add(&self.target_mean)
    }
}

/// Sequences and the sum of their first feature, on the CPU.
pub fn batch() -> Result<(Tensor, Tensor)> {
    let x = Tensor::randn([16, STEPS, INPUT], &Device::Cpu)?.mul_scalar(0.5)?;
    let y = x.narrow(2, 0, 1)?.sum(1, false)?;
    Ok((x, y))
}
