//! The pieces of a transformer step on their own, forward and backward, the same computations
//! `scripts/bench_peers.py` runs in PyTorch: layer norm, GELU, causal attention (softmax of
//! `QKᵀ / √d` with the future masked, times `V`) and cross-entropy. A run clears the input
//! gradients, computes the forward pass and back-propagates a fixed upstream gradient (the loss
//! itself for cross-entropy).

use devcheck::nn::GeluApproximate;
use devcheck::nn::functional::{cross_entropy, gelu, layer_norm};
use devcheck::{DType, Device, Result, Tensor};

/// Rows x features of the layer norm, GELU and cross-entropy inputs.
pub const ROWS: usize = 4096;
pub const COLS: usize = 1024;
/// batch, heads, tokens, head dim of the attention inputs.
pub const ATTENTION: [usize; 4] = [8, 4, 128, 64];

/// The forward computation of a workload, from its inputs.
type Forward = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

/// Makes a workload.
pub type Make = fn() -> Result<FwdBwd>;

/// One forward+backward workload: its inputs (whose gradients are cleared every run) and the
/// computation.
pub struct FwdBwd {
    inputs: Vec<Tensor>,
    upstream: Option<Tensor>,
    forward: Forward,
}

impl FwdBwd {
    pub fn run(&self) -> Result<Tensor> {
        for t in &self.inputs {
            t.set_grad(None)?;
        }
        let out = (self.forward)(&self.inputs)?;
        match &self.upstream {
            Some(g) => out.backward_with_grad(g)?,
            None => out.backward()?,
        }
        Ok(out)
    }
}

fn leaf(shape: &[usize]) -> Result<Tensor> {
    Tensor::randn(shape, &Device::Cpu)?.with_requires_grad()
}

/// `layer_norm` over the last dim of `[ROWS, COLS]` with a weight and a bias.
pub fn layer_norm_fwd_bwd() -> Result<FwdBwd> {
    devcheck::manual_seed(0);
    let inputs = vec![leaf(&[ROWS, COLS])?, leaf(&[COLS])?, leaf(&[COLS])?];
    Ok(FwdBwd {
        inputs,
        upstream: Some(Tensor::randn([ROWS, COLS], &Device::Cpu)?),
        forward: Box::new(|t| layer_norm(&t[0], &[COLS], Some(&t[1]), Some(&t[2]), 1e-5)),
    })
}

/// The exact (erf) GELU, PyTorch's default, over `[ROWS, COLS]`.
pub fn gelu_fwd_bwd() -> Result<FwdBwd> {
    devcheck::manual_seed(0);
    Ok(FwdBwd {
        inputs: vec![leaf(&[ROWS, COLS])?],
        upstream: Some(Tensor::randn([ROWS, COLS], &Device::Cpu)?),
        forward: Box::new(|t| gelu(&t[0], GeluApproximate::None)),
    })
}

/// `softmax(Q Kᵀ / √d + causal mask) V` with Q, K, V `[b, h, t, d]`.
pub fn attention_fwd_bwd() -> Result<FwdBwd> {
    devcheck::manual_seed(0);
    let [_, _, t, d] = ATTENTION;
    let future = Tensor::ones([t, t], (DType::Bool, &Device::Cpu))?.triu(1)?;
    let scale = 1.0 / (d as f64).sqrt();
    Ok(FwdBwd {
        inputs: vec![leaf(&ATTENTION)?, leaf(&ATTENTION)?, leaf(&ATTENTION)?],
        upstream: Some(Tensor::randn(ATTENTION, &Device::Cpu)?),
        forward: Box::new(move |x| {
            let scores = x[0].matmul(&x[1].transpose(-2, -1)?)?.mul_scalar(scale)?;
            scores.masked_fill(&future, f64::NEG_INFINITY)?.softmax(-1)?.matmul(&x[2])
        }),
    })
}

/// Mean cross-entropy of `[ROWS, COLS]` logits against class indices.
pub fn cross_entropy_fwd_bwd() -> Result<FwdBwd> {
    devcheck::manual_seed(0);
    let labels: Vec<i64> = (0..ROWS).map(|i| ((i * 7919) % COLS) as i64).collect();
    let target = Tensor::from_vec(labels, [ROWS], &Device::Cpu)?;
    Ok(FwdBwd {
        inputs: vec![leaf(&[ROWS, COLS])?],
        upstream: None,
        forward: Box::new(move |t| cross_entropy(&t[0], &target, &Default::default())),
    })
}
