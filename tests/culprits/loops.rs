//! Training-loop shapes for the transfer ledger, run on a fake device: one pattern each.

use devcheck::{Device, Result, Tensor};

/// Each step's result goes to the host and straight back: a round trip per step.
pub fn round_trip(steps: usize, device: &Device) -> Result<()> {
    let weight = Tensor::randn([4, 4], &Device::Cpu)?.to(device)?;
    let mut x = Tensor::ones([2, 4], device)?;
    for _ in 0..steps {
        let y = x.matmul(&weight)?;
        let on_host = y.cpu()?;
        x = on_host.to(device)?;
    }
    Ok(())
}

/// A constant uploaded again at every step instead of once before the loop.
pub fn repeated_upload(steps: usize, device: &Device) -> Result<()> {
    let class_weights = Tensor::from_vec(vec![1.0f32, 2.0, 0.5], [3], &Device::Cpu)?;
    let logits = Tensor::ones([2, 3], device)?;
    for _ in 0..steps {
        let weights = class_weights.to(device)?;
        let _weighted = logits.mul(&weights)?;
    }
    Ok(())
}

/// The loss read back at every step: a sync per step.
pub fn sync_every_step(steps: usize, device: &Device) -> Result<f32> {
    let logits = Tensor::ones([2, 3], device)?;
    let mut total = 0.0;
    for _ in 0..steps {
        let loss = logits.mean_all()?;
        total += loss.to_scalar::<f32>()?;
    }
    Ok(total)
}

/// The clean shape: a fresh batch uploaded per step, the loss summed on the device, one read.
pub fn clean(steps: usize, device: &Device) -> Result<f32> {
    let weight = Tensor::randn([4, 3], &Device::Cpu)?.to(device)?;
    let mut total = Tensor::zeros([], device)?;
    for step in 0..steps {
        let batch = Tensor::full([2, 4], step as f64, &Device::Cpu)?.to(device)?;
        total = total.add(&batch.matmul(&weight)?.mean_all()?)?;
    }
    total.to_scalar()
}
