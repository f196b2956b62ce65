//! Culprit: a positional encoding kept as a skipped field. `#[module(skip)]` keeps it out of
//! checkpoints, but also out of `model.to(..)`: it stays on the CPU (PyTorch's plain tensor
//! attribute instead of `register_buffer`).

use devcheck::{Device, Module, Param, Result, Tensor};

pub const MAX_LEN: usize = 16;
pub const WIDTH: usize = 8;

fn sinusoidal(device: &Device) -> Result<Tensor> {
    let mut values = Vec::with_capacity(MAX_LEN * WIDTH);
    for pos in 0..MAX_LEN {
        for i in 0..WIDTH {
            let angle = pos as f32 / 10000f32.powf((i / 2 * 2) as f32 / WIDTH as f32);
            values.push(if i % 2 == 0 { angle.sin() } else { angle.cos() });
        }
    }
    Tensor::from_vec(values, [MAX_LEN, WIDTH], device)
}

#[derive(Module, Clone)]
pub struct Embedder {
    pub proj: Param,
    #[module(skip)]
    pub pos_enc: Tensor,
}

/// The clean twin: a non-persistent buffer, moved with the model and not saved.
#[derive(Module, Clone)]
pub struct EmbedderFixed {
    pub proj: Param,
    #[module(non_persistent)]
    pub pos_enc: Tensor,
}

impl Embedder {
    pub fn new(device: &Device) -> Result<Embedder> {
        Ok(Embedder {
            proj: Param::new(Tensor::randn([WIDTH, WIDTH], device)?),
            pos_enc: sinusoidal(device)?,
        })
    }

    /// `x: [batch, time, width]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let time = x.size(1)?;
        x.matmul(&self.proj.tensor())?.add(&self.pos_enc.narrow(0, 0, time)?)
    }
}

impl EmbedderFixed {
    pub fn new(device: &Device) -> Result<EmbedderFixed> {
        Ok(EmbedderFixed {
            proj: Param::new(Tensor::randn([WIDTH, WIDTH], device)?),
            pos_enc: sinusoidal(device)?,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let time = x.size(1)?;
        x.matmul(&self.proj.tensor())?.add(&self.pos_enc.narrow(0, 0, time)?)
    }
}
