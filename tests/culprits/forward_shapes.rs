//! Forward passes that do more than compute: read values, move data, fail, hard-code a device.

use devcheck::{Device, Module, Param, Result, Tensor};

#[derive(Module, Clone)]
pub struct Gate {
    pub weight: Param,
    #[module(skip)]
    pub table: Tensor,
}

impl Gate {
    pub fn new(device: &Device) -> Result<Gate> {
        Ok(Gate { weight: Param::new(Tensor::ones([4, 4], device)?), table: Tensor::ones([4], device)? })
    }

    /// Branches on a value: the dry run has none.
    pub fn forward_branching(&self, x: &Tensor) -> Result<Tensor> {
        let y = x.matmul(&self.weight.tensor())?;
        if y.max_all()?.to_scalar::<f32>()? > 10.0 { y.mul_scalar(0.1) } else { Ok(y) }
    }

    /// Copies the skipped table to the input's device at every call.
    pub fn forward_uploading(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight.tensor())?.add(&self.table.to(&x.device())?)
    }

    /// Returns its result on the host.
    pub fn forward_to_host(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight.tensor())?.cpu()
    }

    /// A shape bug: the weight is `[4, 4]`, the input's last dim is not 4.
    pub fn forward_failing(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight.tensor())
    }

    /// Creates a helper on a hard-coded `cuda:0`: right only when the model is there.
    pub fn forward_hard_coded(&self, x: &Tensor) -> Result<Tensor> {
        let scale = Tensor::full([4], 0.5, &Device::Cuda(0))?;
        x.matmul(&self.weight.tensor())?.mul(&scale)
    }

    /// Operator sugar panics on errors.
    pub fn forward_panicking(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x + &x.t()?)
    }
}
