//! The checker's workloads: the forward dry run of a GPT-2-small-shaped model (12 layers, width
//! 768, vocabulary 50257) on a fake `cuda:0`, and `inspect` on it and on a 1,000-layer model.
//! Shared by the bench runner (`benches/bench.rs`) and `examples/bench_check.rs`.

#[allow(dead_code)]
#[path = "../../tests/culprits/gpt2.rs"]
mod gpt2;

use devcheck::check::{ForwardReport, Input, Inventory};
use devcheck::nn::{Linear, Relu, Sequential};
use devcheck::{DType, Device, Result};

use gpt2::{GPT2_SMALL, Gpt2};

/// GPT-2 small's shapes without its 500 MB of data: the dry run needs nothing more.
pub struct Gpt2DryRun {
    model: Gpt2,
    inputs: [Input; 1],
    target: Device,
}

impl Gpt2DryRun {
    pub fn new() -> Result<Gpt2DryRun> {
        let model = {
            let _fake = devcheck::fake::enter();
            Gpt2::new(GPT2_SMALL, &Device::Cpu)?
        };
        Ok(Gpt2DryRun { model, inputs: [Input::new("ids", [8, 1024], DType::I64)], target: Device::Cuda(0) })
    }

    pub fn target(&self) -> Device {
        self.target
    }

    /// Fake placement on the target, forward and restoring the model, as `check_forward` does for
    /// a user.
    pub fn dry_run(&mut self) -> Result<ForwardReport> {
        devcheck::check_forward(&mut self.model, &self.inputs, &self.target, |m, x| m.forward(&x[0]))
    }

    pub fn inspect(&self) -> Inventory {
        devcheck::inspect(&self.model)
    }
}

/// `layers` linear layers of `width` (with a ReLU after each but the last) whose shapes exist
/// but whose data does not: what `inspect` walks does not depend on the element data.
pub fn deep_model(layers: usize, width: usize) -> Result<Sequential> {
    let _fake = devcheck::fake::enter();
    let mut model = Sequential::new();
    for i in 0..layers {
        model = model.append(Linear::new(width, width, &Device::Cpu)?);
        if i + 1 < layers {
            model = model.append(Relu);
        }
    }
    Ok(model)
}
