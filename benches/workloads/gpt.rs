//! One training step of a small GPT-style decoder, the same model and step `scripts/bench_peers.py`
//! runs in PyTorch: token and position embeddings, 2 pre-norm blocks of causal self-attention
//! (4 heads) and a tanh-GELU MLP (4x wide), a final LayerNorm, a linear head, next-token
//! cross-entropy and AdamW. d = 256, sequence 128, batch 8, vocabulary 512.

use devcheck::nn::functional::cross_entropy;
use devcheck::nn::{CausalSelfAttention, Embedding, Forward, Gelu, LayerNorm, Linear};
use devcheck::optim::{AdamW, Optimizer};
use devcheck::{DType, Device, Module, Result, Tensor};

pub const VOCAB: usize = 512;
pub const DIM: usize = 256;
pub const HEADS: usize = 4;
pub const LAYERS: usize = 2;
pub const SEQ: usize = 128;
pub const BATCH: usize = 8;

#[derive(Module)]
struct Block {
    ln1: LayerNorm,
    attn: CausalSelfAttention,
    ln2: LayerNorm,
    fc: Linear,
    act: Gelu,
    proj: Linear,
}

impl Forward for Block {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.add(&self.attn.forward(&self.ln1.forward(x)?)?)?;
        let h = self.act.forward(&self.fc.forward(&self.ln2.forward(&x)?)?)?;
        x.add(&self.proj.forward(&h)?)
    }
}

#[derive(Module)]
struct Gpt {
    wte: Embedding,
    wpe: Embedding,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    head: Linear,
}

impl Gpt {
    fn new(device: &Device) -> Result<Gpt> {
        let block = || -> Result<Block> {
            Ok(Block {
                ln1: LayerNorm::new([DIM], device)?,
                attn: CausalSelfAttention::new(DIM, HEADS, SEQ, device)?,
                ln2: LayerNorm::new([DIM], device)?,
                fc: Linear::new(DIM, 4 * DIM, device)?,
                act: Gelu::tanh(),
                proj: Linear::new(4 * DIM, DIM, device)?,
            })
        };
        Ok(Gpt {
            wte: Embedding::new(VOCAB, DIM, device)?,
            wpe: Embedding::new(SEQ, DIM, device)?,
            blocks: (0..LAYERS).map(|_| block()).collect::<Result<_>>()?,
            ln_f: LayerNorm::new([DIM], device)?,
            head: Linear::with_bias(DIM, VOCAB, false, device)?,
        })
    }

    /// `ids` `[batch, tokens]` to logits `[batch * tokens, vocab]`.
    fn logits(&self, ids: &Tensor, positions: &Tensor) -> Result<Tensor> {
        let mut h = self.wte.forward(ids)?.add(&self.wpe.forward(positions)?)?;
        for block in &self.blocks {
            h = block.forward(&h)?;
        }
        self.head.forward(&self.ln_f.forward(&h)?)?.reshape([BATCH * SEQ, VOCAB])
    }
}

pub struct GptStep {
    model: Gpt,
    optimizer: AdamW,
    ids: Tensor,
    positions: Tensor,
    targets: Tensor,
}

impl GptStep {
    pub fn new() -> Result<GptStep> {
        let cpu = Device::Cpu;
        devcheck::manual_seed(0);
        let model = Gpt::new(&cpu)?;
        let optimizer = AdamW::new(model.parameters(), 1e-3)?;
        // A fixed pseudo-random token stream; the targets are the next tokens.
        let stream: Vec<i64> = (0..BATCH * SEQ + 1).map(|i| ((i * 7919 + 13) % VOCAB) as i64).collect();
        let ids = Tensor::from_vec(stream[..BATCH * SEQ].to_vec(), [BATCH, SEQ], &cpu)?;
        let targets = Tensor::from_vec(stream[1..].to_vec(), [BATCH * SEQ], &cpu)?;
        let positions = Tensor::arange(0.0, SEQ as f64, 1.0, (DType::I64, &cpu))?;
        Ok(GptStep { model, optimizer, ids, positions, targets })
    }

    /// zero_grad, forward, loss, backward, update; returns the loss.
    pub fn step(&mut self) -> Result<Tensor> {
        self.optimizer.zero_grad();
        let logits = self.model.logits(&self.ids, &self.positions)?;
        let loss = cross_entropy(&logits, &self.targets, &Default::default())?;
        loss.backward()?;
        self.optimizer.step()?;
        Ok(loss)
    }
}
