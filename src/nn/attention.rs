//! The transformer pieces whose constant tensors are the classic "stayed on the CPU" bug in
//! PyTorch: a causal mask and a positional encoding. Here both are buffers (plain `Tensor`
//! fields), so `model.to(&device)` moves them with the weights.

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::module::Module;
use crate::tensor::{Tensor, on_one_device};

use super::{Forward, Linear};

/// Multi-head self-attention that only looks backwards (GPT-style), with its causal mask kept as
/// a non-persistent buffer (it is rebuilt from the config, so checkpoints do not carry it).
#[derive(Module, Clone, Debug)]
pub struct CausalSelfAttention {
    /// Projects `[.., dim]` to queries, keys and values at once: `[.., 3 * dim]`.
    pub qkv: Linear,
    pub proj: Linear,
    /// `[max_len, max_len]` bool, true above the diagonal: the positions a token may not see.
    #[module(non_persistent)]
    pub mask: Tensor,
    pub heads: usize,
}

impl CausalSelfAttention {
    /// `dim` must divide by `heads`; sequences up to `max_len` tokens.
    #[track_caller]
    pub fn new(dim: usize, heads: usize, max_len: usize, device: &Device) -> Result<CausalSelfAttention> {
        if heads == 0 || !dim.is_multiple_of(heads) {
            return Err(Error::InvalidArgument {
                op: "CausalSelfAttention::new",
                detail: format!("dim {dim} does not split into {heads} heads"),
                help: "pick a head count that divides the model width (e.g. 768 / 12)".to_string(),
                location: std::panic::Location::caller(),
            });
        }
        let mask = Tensor::ones([max_len, max_len], (DType::Bool, device))?.triu(1)?;
        Ok(CausalSelfAttention {
            qkv: Linear::new(dim, 3 * dim, device)?,
            proj: Linear::new(dim, dim, device)?,
            mask,
            heads,
        })
    }
}

impl Forward for CausalSelfAttention {
    /// `x` is `[batch, tokens, dim]`.
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let location = std::panic::Location::caller();
        let max_len = self.mask.shape()[0];
        if x.rank() != 3 || x.shape()[1] > max_len {
            return Err(Error::ShapeMismatch {
                op: "CausalSelfAttention::forward",
                detail: format!(
                    "expected [batch, tokens <= {max_len}, dim], got {}",
                    crate::shape::fmt_shape(x.shape())
                ),
                help: "pass a batch of token embeddings; build the layer with a larger max_len for longer sequences"
                    .to_string(),
                operands: vec![x.operand("input")],
                location,
            });
        }
        // The input against the mask here, at the caller's line; the projections check their own
        // weights.
        let [x, mask] =
            on_one_device("CausalSelfAttention", &[("input", x), ("mask", &self.mask)], location)?
                .try_into()
                .unwrap_or_else(|_| unreachable!("one tensor per operand"));
        let (b, t, d) = (x.shape()[0], x.shape()[1], x.shape()[2]);
        let hd = d / self.heads;
        let qkv = self.qkv.forward(&x)?;
        // No closure here: a closure cannot pass the caller's location on to the ops inside it.
        let q = heads(&qkv, 0, [b, t, self.heads, hd])?;
        let k = heads(&qkv, 1, [b, t, self.heads, hd])?;
        let v = heads(&qkv, 2, [b, t, self.heads, hd])?;
        let scores = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(1.0 / (hd as f64).sqrt())?;
        let mask = mask.narrow(0, 0, t)?.narrow(1, 0, t)?;
        let weights = scores.masked_fill(&mask, f64::NEG_INFINITY)?.softmax(-1)?;
        let out = weights.matmul(&v)?.transpose(1, 2)?.reshape([b, t, d])?;
        self.proj.forward(&out)
    }
}

/// Part `i` (queries 0, keys 1, values 2) of the fused projection `qkv` (`[b, t, 3 * d]`), split
/// into heads: `[b, heads, t, head_dim]`.
#[track_caller]
fn heads(qkv: &Tensor, i: usize, [b, t, heads, head_dim]: [usize; 4]) -> Result<Tensor> {
    let d = heads * head_dim;
    qkv.narrow(2, i * d, d)?.reshape([b, t, heads, head_dim])?.transpose(1, 2)
}

/// Adds the fixed sine/cosine position signal of "Attention Is All You Need" to `[batch, tokens,
/// dim]` inputs. The table is a persistent buffer: saved, and moved with the model.
#[derive(Module, Clone, Debug)]
pub struct SinusoidalPositionalEncoding {
    /// `[max_len, dim]`.
    pub table: Tensor,
}

impl SinusoidalPositionalEncoding {
    #[track_caller]
    pub fn new(dim: usize, max_len: usize, device: &Device) -> Result<SinusoidalPositionalEncoding> {
        let mut values = vec![0f32; max_len * dim];
        for pos in 0..max_len {
            for i in 0..dim {
                let rate = 1.0 / 10000f64.powf((2 * (i / 2)) as f64 / dim as f64);
                let angle = pos as f64 * rate;
                values[pos * dim + i] = if i % 2 == 0 { angle.sin() } else { angle.cos() } as f32;
            }
        }
        Ok(SinusoidalPositionalEncoding { table: Tensor::from_vec(values, [max_len, dim], device)? })
    }
}

impl Forward for SinusoidalPositionalEncoding {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let location = std::panic::Location::caller();
        let (max_len, dim) = (self.table.shape()[0], self.table.shape()[1]);
        if x.rank() != 3 || x.shape()[1] > max_len || x.shape()[2] != dim {
            return Err(Error::ShapeMismatch {
                op: "SinusoidalPositionalEncoding::forward",
                detail: format!(
                    "expected [batch, tokens <= {max_len}, {dim}], got {}",
                    crate::shape::fmt_shape(x.shape())
                ),
                help: "build the encoding with the model width and a max_len covering the longest sequence"
                    .to_string(),
                operands: vec![x.operand("input")],
                location,
            });
        }
        x.add(&self.table.narrow(0, 0, x.shape()[1])?)
    }
}
