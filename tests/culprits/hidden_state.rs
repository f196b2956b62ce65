//! Culprit: a cached hidden state carried over from a previous device. A recurrent cell keeps
//! its last hidden state between calls in a skipped field; after a warm-up run on the CPU the
//! model is moved, the cached state is not.

use devcheck::{Device, Module, Param, Result, Tensor};

pub const WIDTH: usize = 6;

#[derive(Module, Clone)]
pub struct Recurrent {
    pub input_weight: Param,
    pub hidden_weight: Param,
    #[module(skip)]
    pub hidden: Option<Tensor>,
}

/// The clean twin: the state is a non-persistent buffer, so `to` moves it with the model.
#[derive(Module, Clone)]
pub struct RecurrentFixed {
    pub input_weight: Param,
    pub hidden_weight: Param,
    #[module(non_persistent)]
    pub hidden: Option<Tensor>,
}

fn weights(device: &Device) -> Result<(Param, Param)> {
    Ok((
        Param::new(Tensor::randn([WIDTH, WIDTH], device)?),
        Param::new(Tensor::randn([WIDTH, WIDTH], device)?),
    ))
}

/// `h = tanh(x W_in + h_prev W_h)`, with `h_prev` the cached state (zeros the first time).
fn cell(
    x: &Tensor,
    previous: Option<&Tensor>,
    input_weight: &Param,
    hidden_weight: &Param,
) -> Result<Tensor> {
    let from_input = x.matmul(&input_weight.tensor())?;
    match previous {
        Some(previous) => previous.matmul(&hidden_weight.tensor())?.add(&from_input)?.tanh(),
        None => from_input.tanh(),
    }
}

impl Recurrent {
    pub fn new(device: &Device) -> Result<Recurrent> {
        let (input_weight, hidden_weight) = weights(device)?;
        Ok(Recurrent { input_weight, hidden_weight, hidden: None })
    }

    pub fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        let h = cell(x, self.hidden.as_ref(), &self.input_weight, &self.hidden_weight)?;
        self.hidden = Some(h.clone());
        Ok(h)
    }
}

impl RecurrentFixed {
    pub fn new(device: &Device) -> Result<RecurrentFixed> {
        let (input_weight, hidden_weight) = weights(device)?;
        Ok(RecurrentFixed { input_weight, hidden_weight, hidden: None })
    }

    pub fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        let h = cell(x, self.hidden.as_ref(), &self.input_weight, &self.hidden_weight)?;
        self.hidden = Some(h.clone());
        Ok(h)
    }
}
