//! A small CNN as a PyTorch user writes it from the README: convolution, ReLU, max pooling and a
//! linear classifier. It derives `Clone` to check what a clone of a model is.

use devcheck::nn::{Conv2d, Flatten, Forward, Linear, MaxPool2d, Relu};
use devcheck::{Device, Module, Result, Tensor};

pub const SIDE: usize = 8;
pub const CLASSES: usize = 2;

#[derive(Module, Clone)]
pub struct Cnn {
    conv1: Conv2d,
    relu: Relu,
    pool: MaxPool2d,
    conv2: Conv2d,
    flatten: Flatten,
    pub fc: Linear,
}

impl Cnn {
    pub fn new(device: &Device) -> Result<Cnn> {
        Ok(Cnn {
            conv1: Conv2d::new(1, 4, 3, device)?,
            relu: Relu,
            pool: MaxPool2d::new(2),
            conv2: Conv2d::new(4, 4, 3, device)?,
            flatten: Flatten,
            fc: Linear::new(4, CLASSES, device)?,
        })
    }
}

impl Forward for Cnn {
    /// `x`: `[batch, 1, 8, 8]` images; the logits are `[batch, 2]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.pool.forward(&self.relu.forward(&self.conv1.forward(x)?)?)?; // [b, 4, 3, 3]
        let h = self.relu.forward(&self.conv2.forward(&h)?)?; // [b, 4, 1, 1]
        self.fc.forward(&self.flatten.forward(&h)?)
    }
}

/// Eight images whose class says which half is brighter, on the CPU.
pub fn batch() -> Result<(Tensor, Tensor)> {
    let n = 8;
    let mut pixels = Vec::with_capacity(n * SIDE * SIDE);
    let mut labels = Vec::with_capacity(n);
    for i in 0..n {
        let class = i % 2;
        labels.push(class as i64);
        for row in 0..SIDE {
            for col in 0..SIDE {
                let bright = (row < SIDE / 2) == (class == 0);
                let noise = ((i * 31 + row * 7 + col * 3) % 11) as f32 / 22.0;
                pixels.push(if bright { 1.0 } else { 0.0 } + noise);
            }
        }
    }
    Ok((
        Tensor::from_vec(pixels, [n, 1, SIDE, SIDE], &Device::Cpu)?,
        Tensor::from_vec(labels, [n], &Device::Cpu)?,
    ))
}
