//! The main job: train a small network on handwritten digits, the device-agnostic way the guides
//! teach. Pick a device once, move the model once, move each batch once, read the loss back once
//! per epoch, save a checkpoint.
//!
//! ```text
//! cargo run --release --example train_digits                 # best available device
//! cargo run --release --example train_digits -- --device cpu
//! cargo run --release --example train_digits -- --device cuda:1 --epochs 50
//! ```
//!
//! Data: the UCI "Optical Recognition of Handwritten Digits" test set (1,797 8x8 images, pixel
//! values 0..16, labels 0..9), shipped in `fixtures/digits.csv.gz`.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use devcheck::data::{DataLoader, TensorDataset, read_csv};
use devcheck::nn::functional::cross_entropy;
use devcheck::nn::{Dropout, Forward, Linear};
use devcheck::optim::{AdamW, Optimizer};
use devcheck::{DType, Device, Module, Result, Tensor};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug, Clone)]
#[command(about = "Train an MLP on the UCI digits with devcheck")]
pub struct Args {
    /// Where to train: cpu, cuda, cuda:N, or auto (cuda:0 when available, else cpu).
    #[arg(long, default_value = "auto")]
    pub device: String,
    #[arg(long, default_value_t = 30)]
    pub epochs: usize,
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    #[arg(long, default_value_t = 3e-3)]
    pub lr: f64,
    /// Seeds the weights, the train/test split and the shuffling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/digits.csv.gz"))]
    pub data: PathBuf,
    /// Where to write the trained weights (safetensors).
    #[arg(long, default_value = "digits_mlp.safetensors")]
    pub checkpoint: PathBuf,
    /// Print nothing but errors (for tests).
    #[arg(long)]
    pub quiet: bool,
}

/// 64 pixels -> 128 hidden units -> 10 classes.
#[derive(Module)]
pub struct Mlp {
    hidden: Linear,
    dropout: Dropout,
    out: Linear,
}

impl Mlp {
    pub fn new(device: &Device) -> Result<Mlp> {
        Ok(Mlp {
            hidden: Linear::new(64, 128, device)?,
            dropout: Dropout::new(0.1),
            out: Linear::new(128, 10, device)?,
        })
    }
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.hidden.forward(x)?.relu()?;
        self.out.forward(&self.dropout.forward(&h)?)
    }
}

/// What a run reports.
#[derive(Debug)]
pub struct Summary {
    pub device: Device,
    /// The mean training loss of every epoch.
    pub epoch_losses: Vec<f32>,
    pub test_accuracy: f64,
    pub seconds: f64,
}

/// `auto` is the best available device; anything else must parse as a device and be usable.
pub fn pick_device(name: &str) -> Result<Device> {
    let device = if name == "auto" { Device::best_available() } else { name.parse()? };
    device.ensure_available()?;
    Ok(device)
}

pub fn run(args: &Args) -> Result<Summary> {
    let start = Instant::now();
    let device = pick_device(&args.device)?;
    devcheck::manual_seed(args.seed);

    // 64 pixel columns, then the label. Pixels scaled to [0, 1].
    let table = read_csv(&args.data, false)?;
    let pixels = table.narrow(1, 0, 64)?.div_scalar(16.0)?;
    let labels = table.narrow(1, 64, 1)?.squeeze(1)?.to_dtype(DType::I64)?;
    let parts = TensorDataset::new((pixels, labels))?.random_split(&[0.8, 0.2], args.seed)?;
    let (train, test) = (&parts[0], &parts[1]);

    let mut model = Mlp::new(&Device::Cpu)?;
    model.to(&device)?;
    let mut optimizer = AdamW::new(model.parameters(), args.lr)?;
    let loader = DataLoader::new(train.clone(), args.batch_size)?
        .shuffle(true)
        .seed(args.seed)
        .pin_memory(device.is_cuda());

    let progress = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new((args.epochs * loader.len()) as u64)
    };
    progress.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} steps, {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    progress.set_prefix(format!("training on {device}"));

    let mut epoch_losses = Vec::with_capacity(args.epochs);
    for epoch in 1..=args.epochs {
        model.train();
        // Summed on the device; read back once per epoch (a read is a sync point).
        let mut loss_sum = Tensor::zeros([], &device)?;
        for batch in &loader {
            let (x, y) = batch?;
            // Pinned batches (on a GPU) copy without blocking the host; elsewhere this is `to`.
            let (x, y) = (x.to_non_blocking(&device)?, y.to_non_blocking(&device)?);
            optimizer.zero_grad();
            let loss = cross_entropy(&model.forward(&x)?, &y, &Default::default())?;
            loss.backward()?;
            optimizer.step()?;
            loss_sum = loss_sum.add(&loss.detach().mul_scalar(x.shape()[0] as f64)?)?;
            progress.inc(1);
        }
        let mean = loss_sum.to_scalar::<f32>()? / train.len() as f32;
        progress.set_message(format!("epoch {epoch}: loss {mean:.4}"));
        epoch_losses.push(mean);
    }
    progress.finish();

    let test_accuracy = accuracy(&mut model, test, &device)?;
    model.save(&args.checkpoint)?;
    Ok(Summary { device, epoch_losses, test_accuracy, seconds: start.elapsed().as_secs_f64() })
}

/// The fraction of `data` the model classifies correctly, in evaluation mode.
fn accuracy(model: &mut Mlp, data: &TensorDataset<(Tensor, Tensor)>, device: &Device) -> Result<f64> {
    model.eval();
    let _recording_off = devcheck::no_grad();
    let (x, y) = data.tensors();
    let predicted = model.forward(&x.to(device)?)?.argmax(1, false)?;
    let correct = predicted.eq(&y.to(device)?)?.sum_all()?.to_scalar::<i64>()?;
    Ok(correct as f64 / y.shape()[0] as f64)
}

#[allow(dead_code)]
fn main() -> Result<()> {
    let args = Args::parse();
    let summary = run(&args)?;
    if !args.quiet {
        let first = summary.epoch_losses.first().copied().unwrap_or(f32::NAN);
        let last = summary.epoch_losses.last().copied().unwrap_or(f32::NAN);
        println!("device:        {}", summary.device);
        println!("train loss:    {first:.4} (epoch 1) -> {last:.4} (epoch {})", summary.epoch_losses.len());
        println!("test accuracy: {:.2}%", summary.test_accuracy * 100.0);
        println!("checkpoint:    {}", args.checkpoint.display());
        println!("time:          {:.1}s", summary.seconds);
    }
    Ok(())
}
