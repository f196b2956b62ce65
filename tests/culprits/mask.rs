//! Culprit: a mask created inside forward without the input's device. The causal mask of a
//! self-attention is built per call on the CPU (PyTorch's `torch.ones(T, T)` without `device=`).

use devcheck::{DType, Device, Module, Param, Result, Tensor};

#[derive(Module, Clone)]
pub struct SelfAttention {
    pub query: Param,
    pub key: Param,
}

impl SelfAttention {
    pub fn new(width: usize, device: &Device) -> Result<SelfAttention> {
        Ok(SelfAttention {
            query: Param::new(Tensor::randn([width, width], device)?),
            key: Param::new(Tensor::randn([width, width], device)?),
        })
    }

    /// Attention weights `[batch, time, time]` of `x: [batch, time, width]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let time = x.size(1)?;
        let scores =
            x.matmul(&self.query.tensor())?.matmul(&x.matmul(&self.key.tensor())?.transpose(1, 2)?)?;
        let future = Tensor::ones([time, time], (DType::Bool, &Device::Cpu))?.triu(1)?;
        scores.masked_fill(&future, f64::NEG_INFINITY)?.softmax(-1)
    }

    /// The clean twin: the mask is made on the input's device.
    pub fn forward_fixed(&self, x: &Tensor) -> Result<Tensor> {
        let time = x.size(1)?;
        let scores =
            x.matmul(&self.query.tensor())?.matmul(&x.matmul(&self.key.tensor())?.transpose(1, 2)?)?;
        let future = Tensor::ones([time, time], (DType::Bool, &x.device()))?.triu(1)?;
        scores.masked_fill(&future, f64::NEG_INFINITY)?.softmax(-1)
    }
}
