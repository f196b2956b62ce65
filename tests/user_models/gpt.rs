//! A GPT-style decoder as a PyTorch user writes it from the README: token and position
//! embeddings, causal self-attention whose mask is a buffer, LayerNorm, a GELU MLP, and a head
//! tied to the token embedding. Not `Clone`: the checker must not need it.

use devcheck::nn::{Dropout, Embedding, Forward, Gelu, LayerNorm, Linear};
use devcheck::{DType, Device, Module, Result, Tensor};

#[derive(Clone, Copy, Debug)]
pub struct GptConfig {
    pub vocab: usize,
    pub max_len: usize,
    pub dim: usize,
    pub heads: usize,
    pub layers: usize,
    pub dropout: f64,
}

pub const TINY: GptConfig = GptConfig { vocab: 16, max_len: 8, dim: 16, heads: 2, layers: 2, dropout: 0.0 };

/// Multi-head attention that only looks back. `mask` is `register_buffer("mask", ..)` in PyTorch:
/// here a plain `Tensor` field, so `model.to(..)` moves it.
#[derive(Module)]
pub struct CausalAttention {
    qkv: Linear,
    proj: Linear,
    #[module(non_persistent)]
    mask: Tensor,
    heads: usize,
}

impl CausalAttention {
    pub fn new(config: &GptConfig, device: &Device) -> Result<CausalAttention> {
        let future = Tensor::ones([config.max_len, config.max_len], (DType::Bool, device))?.triu(1)?;
        Ok(CausalAttention {
            qkv: Linear::new(config.dim, 3 * config.dim, device)?,
            proj: Linear::new(config.dim, config.dim, device)?,
            mask: future,
            heads: config.heads,
        })
    }
}

impl Forward for CausalAttention {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (b, t, d) = (x.size(0)?, x.size(1)?, x.size(2)?);
        let head_dim = d / self.heads;
        let qkv = self.qkv.forward(x)?;
        let q = qkv.narrow(2, 0, d)?.reshape([b, t, self.heads, head_dim])?.transpose(1, 2)?;
        let k = qkv.narrow(2, d, d)?.reshape([b, t, self.heads, head_dim])?.transpose(1, 2)?;
        let v = qkv.narrow(2, 2 * d, d)?.reshape([b, t, self.heads, head_dim])?.transpose(1, 2)?;
        let scores = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(1.0 / (head_dim as f64).sqrt())?;
        let future = self.mask.narrow(0, 0, t)?.narrow(1, 0, t)?;
        let weights = scores.masked_fill(&future, f64::NEG_INFINITY)?.softmax(-1)?;
        let out = weights.matmul(&v)?.transpose(1, 2)?.reshape([b, t, d])?;
        self.proj.forward(&out)
    }
}

#[derive(Module)]
pub struct Mlp {
    fc: Linear,
    act: Gelu,
    proj: Linear,
    drop: Dropout,
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.act.forward(&self.fc.forward(x)?)?;
        self.drop.forward(&self.proj.forward(&h)?)
    }
}

#[derive(Module)]
pub struct Block {
    ln1: LayerNorm,
    attn: CausalAttention,
    ln2: LayerNorm,
    mlp: Mlp,
}

impl Block {
    pub fn new(config: &GptConfig, device: &Device) -> Result<Block> {
        Ok(Block {
            ln1: LayerNorm::new([config.dim], device)?,
            attn: CausalAttention::new(config, device)?,
            ln2: LayerNorm::new([config.dim], device)?,
            mlp: Mlp {
                fc: Linear::new(config.dim, 4 * config.dim, device)?,
                act: Gelu::tanh(),
                proj: Linear::new(4 * config.dim, config.dim, device)?,
                drop: Dropout::new(config.dropout),
            },
        })
    }
}

impl Forward for Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.add(&self.attn.forward(&self.ln1.forward(x)?)?)?;
        x.add(&self.mlp.forward(&self.ln2.forward(&x)?)?)
    }
}

#[derive(Module)]
pub struct Gpt {
    wte: Embedding,
    wpe: Embedding,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    lm_head: Linear,
}

impl Gpt {
    pub fn new(config: &GptConfig, device: &Device) -> Result<Gpt> {
        let wte = Embedding::new(config.vocab, config.dim, device)?;
        let mut lm_head = Linear::with_bias(config.dim, config.vocab, false, device)?;
        // Weight tying, PyTorch's `self.lm_head.weight = self.wte.weight`.
        lm_head.weight = wte.weight.clone();
        Ok(Gpt {
            wte,
            wpe: Embedding::new(config.max_len, config.dim, device)?,
            blocks: (0..config.layers).map(|_| Block::new(config, device)).collect::<Result<_>>()?,
            ln_f: LayerNorm::new([config.dim], device)?,
            lm_head,
        })
    }
}

impl Forward for Gpt {
    /// `ids`: `[batch, tokens]` i64; the logits are `[batch, tokens, vocab]`.
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let t = ids.size(1)?;
        let positions = Tensor::arange(0.0, t as f64, 1.0, (DType::I64, &ids.device()))?;
        let mut h = self.wte.forward(ids)?.add(&self.wpe.forward(&positions)?)?;
        for block in &self.blocks {
            h = block.forward(&h)?;
        }
        self.lm_head.forward(&self.ln_f.forward(&h)?)
    }
}

/// Next-token cross-entropy of `ids` (`[batch, tokens]`) against `targets` (the same shape).
pub fn loss(model: &Gpt, ids: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let logits = model.forward(ids)?;
    let (b, t, v) = (logits.size(0)?, logits.size(1)?, logits.size(2)?);
    devcheck::nn::functional::cross_entropy(
        &logits.reshape([b * t, v])?,
        &targets.reshape([b * t])?,
        &Default::default(),
    )
}

/// A batch of a repeating sequence and its next tokens, on the CPU as a loader yields it.
pub fn batch(config: &GptConfig) -> Result<(Tensor, Tensor)> {
    let (b, t) = (4, config.max_len);
    let ids: Vec<i64> = (0..b * t).map(|i| ((i / t + i % t) % config.vocab) as i64).collect();
    let next: Vec<i64> = (0..b * t).map(|i| ((i / t + i % t + 1) % config.vocab) as i64).collect();
    Ok((Tensor::from_vec(ids, [b, t], &Device::Cpu)?, Tensor::from_vec(next, [b, t], &Device::Cpu)?))
}
