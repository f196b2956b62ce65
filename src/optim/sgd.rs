//! Stochastic gradient descent with momentum, dampening, Nesterov and weight decay, following
//! PyTorch's update: `g += wd p`; `b = g` on the first step, then `b = mu b + (1 - dampening) g`;
//! `g = g + mu b` (Nesterov) or `g = b`; `p -= lr g`.

use std::collections::BTreeMap;
use std::panic::Location;

use super::{
    Optimizer, Slot, build_state_dict, check_hparam, fused_on_host, install_state, install_value,
    read_state_dict, slot,
};
use crate::backend::SgdStep;
use crate::error::{Error, Result};
use crate::module::Param;
use crate::tensor::{Storage, Tensor};

/// Hyperparameters of [`Sgd`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdConfig {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
}

impl Default for SgdConfig {
    /// lr 1e-3 and everything else off (PyTorch's defaults).
    fn default() -> Self {
        SgdConfig { lr: 1e-3, momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false }
    }
}

const STATE: [&str; 1] = ["momentum_buffer"];
const HPARAMS: [&str; 5] = ["lr", "momentum", "dampening", "weight_decay", "nesterov"];

/// SGD (PyTorch's `torch.optim.SGD`).
pub struct Sgd {
    params: Vec<Param>,
    config: SgdConfig,
    steps: Vec<u64>,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    #[track_caller]
    pub fn new(params: Vec<Param>, lr: f64) -> Result<Sgd> {
        Self::with_config(params, SgdConfig { lr, ..SgdConfig::default() })
    }

    #[track_caller]
    pub fn with_config(params: Vec<Param>, config: SgdConfig) -> Result<Sgd> {
        let location = Location::caller();
        check_hparam("SGD", "lr", config.lr, 0.0..f64::INFINITY)?;
        check_hparam("SGD", "momentum", config.momentum, 0.0..f64::INFINITY)?;
        check_hparam("SGD", "dampening", config.dampening, 0.0..f64::INFINITY)?;
        check_hparam("SGD", "weight_decay", config.weight_decay, 0.0..f64::INFINITY)?;
        if config.nesterov && (config.momentum <= 0.0 || config.dampening != 0.0) {
            return Err(Error::InvalidArgument {
                op: "SGD",
                detail: "Nesterov momentum needs momentum > 0 and dampening 0".to_string(),
                help: "set `momentum: 0.9` (for example) and leave dampening at 0, or turn nesterov off"
                    .to_string(),
                location,
            });
        }
        let steps = vec![0; params.len()];
        Ok(Sgd { params, config, steps })
    }

    pub fn config(&self) -> &SgdConfig {
        &self.config
    }

    /// One update of every parameter that has a gradient.
    fn step_at(&mut self, location: &'static Location<'static>) -> Result<()> {
        let _recording_off = crate::no_grad();
        let c = self.config;
        for (i, p) in self.params.iter().enumerate() {
            let Some(Slot { value, grad }) = slot("SGD", p, location)? else { continue };
            self.steps[i] += 1;
            let buffer = if c.momentum != 0.0 {
                match p.state("momentum_buffer") {
                    Some(b) => Some((b, false)),
                    None => {
                        let b = Tensor::zeros_like(&value)?;
                        p.set_state("momentum_buffer", b.clone())?;
                        Some((b, true))
                    }
                }
            } else {
                None
            };
            let mut tensors = vec![&value, &grad];
            if let Some((b, _)) = &buffer {
                tensors.push(b);
            }
            if fused_on_host(&tensors) {
                fused(&value, &grad, buffer.as_ref(), &c);
            } else {
                composite(p, &value, &grad, buffer, &c)?;
            }
        }
        Ok(())
    }
}

impl Optimizer for Sgd {
    #[track_caller]
    fn step(&mut self) -> Result<()> {
        let location = Location::caller();
        // The update's ops run inside devcheck: what they report belongs to this call.
        let _user_call = crate::tensor::observe::on_behalf_of(location, false);
        self.step_at(location).map_err(|e| e.relocated(location))
    }

    fn params(&self) -> &[Param] {
        &self.params
    }

    fn learning_rate(&self) -> f64 {
        self.config.lr
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.config.lr = lr;
    }

    fn state_dict(&self) -> BTreeMap<String, Tensor> {
        let c = &self.config;
        let hparams = [
            ("lr", c.lr),
            ("momentum", c.momentum),
            ("dampening", c.dampening),
            ("weight_decay", c.weight_decay),
            ("nesterov", if c.nesterov { 1.0 } else { 0.0 }),
        ];
        build_state_dict(&self.params, &self.steps, &STATE, &hparams)
    }

    #[track_caller]
    fn load_state_dict(&mut self, state: &BTreeMap<String, Tensor>) -> Result<()> {
        let loaded = read_state_dict("SGD", &self.params, &STATE, &HPARAMS, state)?;
        let get = |k: &str, default: f64| loaded.hparams.get(k).copied().unwrap_or(default);
        let c = self.config;
        self.config = SgdConfig {
            lr: get("lr", c.lr),
            momentum: get("momentum", c.momentum),
            dampening: get("dampening", c.dampening),
            weight_decay: get("weight_decay", c.weight_decay),
            nesterov: get("nesterov", if c.nesterov { 1.0 } else { 0.0 }) != 0.0,
        };
        self.steps = loaded.steps;
        install_state(&self.params, &STATE, loaded.tensors)
    }
}

fn fused(value: &Tensor, grad: &Tensor, buffer: Option<&(Tensor, bool)>, c: &SgdConfig) {
    let step = SgdStep {
        lr: c.lr,
        weight_decay: c.weight_decay,
        momentum: c.momentum,
        dampening: c.dampening,
        nesterov: c.nesterov,
        first: buffer.is_some_and(|(_, first)| *first),
    };
    let span = |t: &Tensor| t.layout().offset..t.layout().offset + t.numel();
    let mut pv = value.storage_mut();
    let gv = grad.storage();
    let mut bv = buffer.map(|(b, _)| b.storage_mut());
    let bspan = buffer.map(|(b, _)| span(b));
    let (sp, sg) = (span(value), span(grad));
    let b = match (bv.as_deref_mut(), bspan) {
        (Some(Storage::Cpu(b)), Some(s)) => Some((b, s)),
        _ => None,
    };
    // `fused_on_host` admitted only host f32/f64 tensors of one dtype.
    if let (Storage::Cpu(p), Storage::Cpu(g)) = (&mut *pv, &*gv) {
        p.sgd_step(sp, (g, sg), b, &step);
    }
}

fn composite(
    p: &Param,
    value: &Tensor,
    grad: &Tensor,
    buffer: Option<(Tensor, bool)>,
    c: &SgdConfig,
) -> Result<()> {
    let mut g =
        if c.weight_decay != 0.0 { grad.add(&value.mul_scalar(c.weight_decay)?)? } else { grad.clone() };
    if let Some((b, first)) = buffer {
        let b = if first {
            g.clone()
        } else {
            b.mul_scalar(c.momentum)?.add(&g.mul_scalar(1.0 - c.dampening)?)?
        };
        g = if c.nesterov { g.add(&b.mul_scalar(c.momentum)?)? } else { b.clone() };
        p.set_state("momentum_buffer", b)?;
    }
    install_value(p, value, value.sub(&g.mul_scalar(c.lr)?)?)
}
