//! A GPT-2-small-shaped model (12 layers, width 768, 12 heads, vocabulary 50257, context 1024,
//! head tied to the token embedding), written with `Param`/`Tensor` fields and tensor ops: the
//! subject of the dry-run benchmark (`examples/bench_check.rs`) and of `tests/check_gpt2.rs`.
//! It is clean: every tensor it makes follows its input.

use devcheck::{DType, Device, Module, Param, Result, Tensor};

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub layers: usize,
    pub width: usize,
    pub heads: usize,
    pub vocab: usize,
    pub context: usize,
}

/// GPT-2 small.
pub const GPT2_SMALL: Config = Config { layers: 12, width: 768, heads: 12, vocab: 50257, context: 1024 };

/// GPT-2 small's parameter count (the head is tied to the token embedding).
pub const GPT2_SMALL_PARAMETERS: usize = 124_439_808;

#[derive(Module, Clone)]
pub struct Linear {
    pub weight: Param,
    pub bias: Param,
}

impl Linear {
    fn new(inputs: usize, outputs: usize, device: &Device) -> Result<Linear> {
        Ok(Linear {
            weight: Param::new(Tensor::randn([inputs, outputs], device)?),
            bias: Param::new(Tensor::zeros([outputs], device)?),
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.matmul(&self.weight.tensor())?.add(&self.bias.tensor())
    }
}

#[derive(Module, Clone)]
pub struct LayerNorm {
    pub weight: Param,
    pub bias: Param,
}

impl LayerNorm {
    fn new(width: usize, device: &Device) -> Result<LayerNorm> {
        Ok(LayerNorm {
            weight: Param::new(Tensor::ones([width], device)?),
            bias: Param::new(Tensor::zeros([width], device)?),
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mean = x.mean([-1], true)?;
        let var = x.var_with_correction([-1], 0, true)?;
        let normed = x.sub(&mean)?.div(&var.add_scalar(1e-5)?.sqrt()?)?;
        normed.mul(&self.weight.tensor())?.add(&self.bias.tensor())
    }
}

#[derive(Module, Clone)]
pub struct Attention {
    pub c_attn: Linear,
    pub c_proj: Linear,
    /// Lower-triangular `[1, 1, context, context]`: moved with the model, not saved.
    #[module(non_persistent)]
    pub causal: Tensor,
    #[module(skip)]
    pub heads: usize,
}

impl Attention {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (batch, time, width) = (x.size(0)?, x.size(1)?, x.size(2)?);
        let head_width = width / self.heads;
        let qkv = self.c_attn.forward(x)?;
        let split = |i: usize| -> Result<Tensor> {
            qkv.narrow(-1, i * width, width)?.reshape([batch, time, self.heads, head_width])?.transpose(1, 2)
        };
        let (q, k, v) = (split(0)?, split(1)?, split(2)?);
        let scores = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(1.0 / (head_width as f64).sqrt())?;
        let allowed = self.causal.narrow(2, 0, time)?.narrow(3, 0, time)?;
        let weights = scores.masked_fill(&allowed.logical_not()?, f64::NEG_INFINITY)?.softmax(-1)?;
        let out = weights.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape([batch, time, width])?;
        self.c_proj.forward(&out)
    }
}

#[derive(Module, Clone)]
pub struct Mlp {
    pub c_fc: Linear,
    pub c_proj: Linear,
}

#[derive(Module, Clone)]
pub struct Block {
    pub ln_1: LayerNorm,
    pub attn: Attention,
    pub ln_2: LayerNorm,
    pub mlp: Mlp,
}

impl Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.add(&self.attn.forward(&self.ln_1.forward(x)?)?)?;
        let hidden = self.mlp.c_fc.forward(&self.ln_2.forward(&x)?)?.gelu()?;
        x.add(&self.mlp.c_proj.forward(&hidden)?)
    }
}

#[derive(Module, Clone)]
pub struct Gpt2 {
    pub wte: Param,
    pub wpe: Param,
    pub h: Vec<Block>,
    pub ln_f: LayerNorm,
    /// The same parameter as `wte`.
    pub lm_head: Param,
}

impl Gpt2 {
    /// Randomly initialised on `device` (inside `devcheck::fake::enter()`: without data).
    pub fn new(config: Config, device: &Device) -> Result<Gpt2> {
        let c = config;
        let wte = Param::new(Tensor::randn([c.vocab, c.width], device)?);
        let mut h = Vec::with_capacity(c.layers);
        for _ in 0..c.layers {
            h.push(Block {
                ln_1: LayerNorm::new(c.width, device)?,
                attn: Attention {
                    c_attn: Linear::new(c.width, 3 * c.width, device)?,
                    c_proj: Linear::new(c.width, c.width, device)?,
                    causal: Tensor::ones([1, 1, c.context, c.context], (DType::Bool, device))?.tril(0)?,
                    heads: c.heads,
                },
                ln_2: LayerNorm::new(c.width, device)?,
                mlp: Mlp {
                    c_fc: Linear::new(c.width, 4 * c.width, device)?,
                    c_proj: Linear::new(4 * c.width, c.width, device)?,
                },
            });
        }
        Ok(Gpt2 {
            lm_head: wte.clone(),
            wte,
            wpe: Param::new(Tensor::randn([c.context, c.width], device)?),
            h,
            ln_f: LayerNorm::new(c.width, device)?,
        })
    }

    /// Logits `[batch, time, vocab]` of token ids `[batch, time]` (i64).
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let (batch, time) = (ids.size(0)?, ids.size(1)?);
        let width = self.wte.shape()[1];
        let tokens = self.wte.tensor().index_select(0, &ids.reshape([batch * time])?)?;
        let mut x = tokens.reshape([batch, time, width])?.add(&self.wpe.tensor().narrow(0, 0, time)?)?;
        for block in &self.h {
            x = block.forward(&x)?;
        }
        self.ln_f.forward(&x)?.matmul(&self.lm_head.tensor().t()?)
    }
}
