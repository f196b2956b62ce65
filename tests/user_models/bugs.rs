//! The device bugs of the checker's issue, planted in user code the way they happen. Each bug's
//! line ends with a `BUG(name)` comment; the tests find the line by it, so the reports are checked
//! against the line without hard-coding it.

use devcheck::nn::functional::{self as f, ClassLossOptions};
use devcheck::nn::{Embedding, Forward, Linear};
use devcheck::{CmpOp, Device, Module, Result, Tensor};

use super::gpt::{GptConfig, TINY};
use super::gru::GruRegressor;

/// The source of this file, to find the `BUG(..)` lines.
pub const SOURCE: &str = include_str!("bugs.rs");

/// A user's dropout layer whose mask is drawn on the CPU: on a GPU it meets the activations of
/// another device. The mask is made in the user's own `forward`, so that is where it is reported,
/// not at the line that called the layer.
#[derive(Module)]
pub struct NoisyMlp {
    fc: Linear,
    proj: Linear,
    p: f64,
}

impl Forward for NoisyMlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.fc.forward(x)?.relu()?;
        let keep = Tensor::rand(h.shape(), &Device::Cpu)?.cmp_scalar(CmpOp::Ge, self.p)?; // BUG(dropout-mask)
        let dropped = h.mul(&keep.to_dtype(h.dtype())?)?.mul_scalar(1.0 / (1.0 - self.p))?;
        self.proj.forward(&dropped)
    }
}

#[derive(Module)]
pub struct NoisyLm {
    wte: Embedding,
    mlp: NoisyMlp,
    head: Linear,
}

impl NoisyLm {
    pub fn new(config: &GptConfig, device: &Device) -> Result<NoisyLm> {
        Ok(NoisyLm {
            wte: Embedding::new(config.vocab, config.dim, device)?,
            mlp: NoisyMlp {
                fc: Linear::new(config.dim, 2 * config.dim, device)?,
                proj: Linear::new(2 * config.dim, config.dim, device)?,
                p: 0.1,
            },
            head: Linear::new(config.dim, config.vocab, device)?,
        })
    }
}

impl Forward for NoisyLm {
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let h = self.wte.forward(ids)?;
        let h = h.add(&self.mlp.forward(&h)?)?; // the layer is called here
        self.head.forward(&h)
    }
}

/// A training step that moves the tokens to the model's device but not the labels.
pub fn step_with_labels_left_behind(model: &mut super::gpt::Gpt, batch: &[Tensor]) -> Result<Tensor> {
    let device = model.device()?;
    let ids = batch[0].to(&device)?;
    let logits = model.forward(&ids)?;
    let (b, t, v) = (logits.size(0)?, logits.size(1)?, logits.size(2)?);
    let labels = batch[1].reshape([b * t])?;
    f::cross_entropy(&logits.reshape([b * t, v])?, &labels, &Default::default()) // BUG(labels)
}

/// A step whose class weights are made on the CPU.
pub fn step_with_cpu_class_weights(model: &mut super::cnn::Cnn, batch: &[Tensor]) -> Result<Tensor> {
    let device = model.device()?;
    let (x, labels) = (batch[0].to(&device)?, batch[1].to(&device)?);
    let weights = Tensor::from_vec(vec![1.0f32, 3.0], [2], &Device::Cpu)?; // BUG(weights-made)
    let options = ClassLossOptions { weight: Some(weights), ..Default::default() };
    f::cross_entropy(&model.forward(&x)?, &labels, &options) // BUG(weights-used)
}

/// A model that divides its logits by a temperature kept as a 0-dim CPU tensor, as PyTorch code
/// often does (PyTorch lets a 0-dim CPU tensor join a CUDA op; devcheck does not).
#[derive(Module)]
pub struct TemperedClassifier {
    fc: Linear,
}

impl TemperedClassifier {
    pub fn new(device: &Device) -> Result<TemperedClassifier> {
        Ok(TemperedClassifier { fc: Linear::new(4, 3, device)? })
    }
}

impl Forward for TemperedClassifier {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let temperature = Tensor::scalar(2.0f32, &Device::Cpu)?; // BUG(scalar-made)
        self.fc.forward(x)?.div(&temperature) // BUG(scalar-used)
    }
}

/// A token tagger whose output layer was marked `skip` (meant to freeze it): the optimizer, the
/// checkpoint and `to` never see its parameters.
#[derive(Module)]
pub struct Tagger {
    embed: Embedding,
    #[module(skip)]
    head: Linear, // BUG(skipped-submodule)
}

impl Tagger {
    pub fn new(device: &Device) -> Result<Tagger> {
        Ok(Tagger { embed: Embedding::new(TINY.vocab, 4, device)?, head: Linear::new(4, 3, device)? })
    }
}

impl Forward for Tagger {
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let h = self.embed.forward(ids)?;
        self.head.forward(&h) // BUG(skipped-used)
    }
}

/// A model left on the CPU while the batch went to the GPU: the first layer that meets the batch
/// is the bug's line (in the GRU, the update gate inside `cell`).
pub fn forward_without_moving_the_model(model: &GruRegressor, batch: &Tensor) -> Result<Tensor> {
    let x = batch.to(&Device::Cuda(0))?;
    model.forward(&x)
}

/// The parameters moved one by one instead of the model: the buffers stay behind.
pub fn move_only_the_parameters(model: &GruRegressor, device: &Device) -> Result<()> {
    for p in model.parameters() {
        p.to(device)?;
    }
    Ok(())
}

/// The line of this file that ends with `BUG(name)`.
pub fn line_of(name: &str) -> u32 {
    let marker = format!("BUG({name})");
    let index =
        SOURCE.lines().position(|l| l.trim_end().ends_with(&marker)).unwrap_or_else(|| panic!("no {marker}"));
    index as u32 + 1
}
