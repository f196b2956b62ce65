//! Adam and AdamW (decoupled weight decay), following PyTorch's update exactly:
//! `m = b1 m + (1 - b1) g`, `v = b2 v + (1 - b2) g^2`,
//! `p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`; Adam adds `wd * p` to the
//! gradient, AdamW first scales `p` by `1 - lr * wd`.

use std::collections::BTreeMap;
use std::panic::Location;

use super::{
    Optimizer, Slot, build_state_dict, check_hparam, fused_on_host, install_state, install_value,
    read_state_dict, slot, state_or_zeros,
};
// One step's numbers: the CPU backend's update takes them, the GPU and composite paths read them.
use crate::backend::AdamStep as Hyper;
use crate::error::Result;
use crate::module::Param;
use crate::tensor::{Storage, Tensor};

/// Hyperparameters of [`Adam`] and [`AdamW`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamConfig {
    pub lr: f64,
    /// Decay rates of the first and second moment estimates.
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
}

impl AdamConfig {
    /// PyTorch's `Adam` defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay.
    pub fn adam() -> AdamConfig {
        AdamConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.0 }
    }

    /// PyTorch's `AdamW` defaults: as Adam, with weight decay 0.01.
    pub fn adamw() -> AdamConfig {
        AdamConfig { weight_decay: 0.01, ..AdamConfig::adam() }
    }
}

const STATE: [&str; 2] = ["exp_avg", "exp_avg_sq"];
const HPARAMS: [&str; 5] = ["lr", "beta1", "beta2", "eps", "weight_decay"];

/// The shared implementation; `decoupled` selects AdamW's weight decay.
struct Core {
    params: Vec<Param>,
    config: AdamConfig,
    steps: Vec<u64>,
    decoupled: bool,
}

impl Core {
    #[track_caller]
    fn new(name: &'static str, params: Vec<Param>, config: AdamConfig, decoupled: bool) -> Result<Core> {
        check_hparam(name, "lr", config.lr, 0.0..f64::INFINITY)?;
        check_hparam(name, "betas.0", config.betas.0, 0.0..1.0)?;
        check_hparam(name, "betas.1", config.betas.1, 0.0..1.0)?;
        check_hparam(name, "eps", config.eps, 0.0..f64::INFINITY)?;
        check_hparam(name, "weight_decay", config.weight_decay, 0.0..f64::INFINITY)?;
        let steps = vec![0; params.len()];
        Ok(Core { params, config, steps, decoupled })
    }

    fn step(&mut self, name: &'static str, location: &'static Location<'static>) -> Result<()> {
        // The update's ops run inside devcheck: what they report belongs to the user's call.
        let _user_call = crate::tensor::observe::on_behalf_of(location, false);
        self.step_at(name, location).map_err(|e| e.relocated(location))
    }

    fn step_at(&mut self, name: &'static str, location: &'static Location<'static>) -> Result<()> {
        let _recording_off = crate::no_grad();
        for (i, p) in self.params.iter().enumerate() {
            let Some(Slot { value, grad }) = slot(name, p, location)? else { continue };
            self.steps[i] += 1;
            let m = state_or_zeros(p, "exp_avg", &value)?;
            let v = state_or_zeros(p, "exp_avg_sq", &value)?;
            let h = Hyper::new(&self.config, self.steps[i], self.decoupled);
            if fused_on_host(&[&value, &grad, &m, &v]) {
                fused(&value, &grad, &m, &v, &h);
            } else if let Some(on_gpu) = fused_on_gpu(&value, &grad, &m, &v, &h, self.steps[i]) {
                on_gpu.map_err(|e| crate::tensor::cuda_error(e, location))?;
            } else {
                composite(p, &value, &grad, &m, &v, &h)?;
            }
        }
        Ok(())
    }

    fn hparams(&self) -> [(&'static str, f64); 5] {
        let c = &self.config;
        [
            ("lr", c.lr),
            ("beta1", c.betas.0),
            ("beta2", c.betas.1),
            ("eps", c.eps),
            ("weight_decay", c.weight_decay),
        ]
    }

    #[track_caller]
    fn load(&mut self, name: &'static str, state: &BTreeMap<String, crate::tensor::Tensor>) -> Result<()> {
        let loaded = read_state_dict(name, &self.params, &STATE, &HPARAMS, state)?;
        let get = |k: &str, default: f64| loaded.hparams.get(k).copied().unwrap_or(default);
        let c = self.config;
        self.config = AdamConfig {
            lr: get("lr", c.lr),
            betas: (get("beta1", c.betas.0), get("beta2", c.betas.1)),
            eps: get("eps", c.eps),
            weight_decay: get("weight_decay", c.weight_decay),
        };
        self.steps = loaded.steps;
        install_state(&self.params, &STATE, loaded.tensors)
    }
}

impl Hyper {
    fn new(c: &AdamConfig, t: u64, decoupled: bool) -> Hyper {
        let t = t.min(i32::MAX as u64) as i32;
        Hyper {
            lr: c.lr,
            b1: c.betas.0,
            b2: c.betas.1,
            eps: c.eps,
            weight_decay: c.weight_decay,
            decoupled,
            step_size: c.lr / (1.0 - c.betas.0.powi(t)),
            bc2_sqrt: (1.0 - c.betas.1.powi(t)).sqrt(),
        }
    }
}

/// The update in one pass over host memory, writing the parameter and both moments in place.
fn fused(value: &Tensor, grad: &Tensor, m: &Tensor, v: &Tensor, h: &Hyper) {
    let mut pv = value.storage_mut();
    let mut mv = m.storage_mut();
    let mut vv = v.storage_mut();
    let gv = grad.storage();
    let span = |t: &Tensor| t.layout().offset..t.layout().offset + t.numel();
    let (sp, sg, sm, sv) = (span(value), span(grad), span(m), span(v));
    // `fused_on_host` admitted only host f32/f64 tensors of one dtype.
    if let (Storage::Cpu(p), Storage::Cpu(g), Storage::Cpu(m), Storage::Cpu(v)) =
        (&mut *pv, &*gv, &mut *mv, &mut *vv)
    {
        p.adam_step(sp, (g, sg), (m, sm), (v, sv), h);
    }
}

/// The update as one kernel (`kernels/adamw.cu`) on a GPU, in place, when it applies: every
/// tensor whole in its own buffer on one device, of one float dtype, and AdamW's decoupled decay
/// (or no decay). `None` leaves the update to the tensor ops.
fn fused_on_gpu(
    value: &Tensor,
    grad: &Tensor,
    m: &Tensor,
    v: &Tensor,
    h: &Hyper,
    step: u64,
) -> Option<crate::backend::cuda::CudaResult<()>> {
    if crate::fake::is_active() || !(h.decoupled || h.weight_decay == 0.0) {
        return None;
    }
    let tensors = [value, grad, m, v];
    let distinct =
        tensors.iter().enumerate().all(|(i, a)| tensors[i + 1..].iter().all(|b| !a.same_storage(b)));
    let guards: Vec<_> = tensors.iter().map(|t| t.storage()).collect();
    let mut on_device = Vec::with_capacity(4);
    for (t, g) in tensors.iter().zip(&guards) {
        match &**g {
            Storage::Cuda(s)
                if t.dtype() == value.dtype()
                    && t.device() == value.device()
                    && t.is_contiguous()
                    && t.layout().offset == 0
                    && s.len() == t.numel() =>
            {
                on_device.push(s)
            }
            _ => return None,
        }
    }
    let [p, g, m, v] = on_device[..] else { return None };
    if !distinct || !value.dtype().is_float() {
        return None;
    }
    Some(p.adamw_step(g, m, v, h.lr, (h.b1, h.b2), h.eps, h.weight_decay, step))
}

/// The same update with tensor ops, for parameters whose data is not on the host.
fn composite(p: &Param, value: &Tensor, grad: &Tensor, m: &Tensor, v: &Tensor, h: &Hyper) -> Result<()> {
    let g = if !h.decoupled && h.weight_decay != 0.0 {
        grad.add(&value.mul_scalar(h.weight_decay)?)?
    } else {
        grad.clone()
    };
    let base = if h.decoupled && h.weight_decay != 0.0 {
        value.mul_scalar(1.0 - h.lr * h.weight_decay)?
    } else {
        value.clone()
    };
    let m = m.mul_scalar(h.b1)?.add(&g.mul_scalar(1.0 - h.b1)?)?;
    let v = v.mul_scalar(h.b2)?.add(&g.mul(&g)?.mul_scalar(1.0 - h.b2)?)?;
    let denom = v.sqrt()?.div_scalar(h.bc2_sqrt)?.add_scalar(h.eps)?;
    let new = base.sub(&m.div(&denom)?.mul_scalar(h.step_size)?)?;
    p.set_state("exp_avg", m)?;
    p.set_state("exp_avg_sq", v)?;
    install_value(p, value, new)
}

macro_rules! adam_optimizer {
    ($(#[$doc:meta])* $name:ident, $label:literal, $default:ident, $decoupled:expr) => {
        $(#[$doc])*
        pub struct $name(Core);

        impl $name {
            /// Over `params` with learning rate `lr` and PyTorch's other defaults.
            #[track_caller]
            pub fn new(params: Vec<Param>, lr: f64) -> Result<$name> {
                Self::with_config(params, AdamConfig { lr, ..AdamConfig::$default() })
            }

            #[track_caller]
            pub fn with_config(params: Vec<Param>, config: AdamConfig) -> Result<$name> {
                Core::new($label, params, config, $decoupled).map($name)
            }

            pub fn config(&self) -> &AdamConfig {
                &self.0.config
            }
        }

        impl Optimizer for $name {
            #[track_caller]
            fn step(&mut self) -> Result<()> {
                self.0.step($label, Location::caller())
            }

            fn params(&self) -> &[Param] {
                &self.0.params
            }

            fn learning_rate(&self) -> f64 {
                self.0.config.lr
            }

            fn set_learning_rate(&mut self, lr: f64) {
                self.0.config.lr = lr;
            }

            fn state_dict(&self) -> BTreeMap<String, Tensor> {
                build_state_dict(&self.0.params, &self.0.steps, &STATE, &self.0.hparams())
            }

            #[track_caller]
            fn load_state_dict(&mut self, state: &BTreeMap<String, Tensor>) -> Result<()> {
                self.0.load($label, state)
            }
        }
    };
}

adam_optimizer!(
    /// Adam (PyTorch's `torch.optim.Adam`): weight decay, if any, is L2 added to the gradient.
    Adam, "Adam", adam, false
);

adam_optimizer!(
    /// AdamW (PyTorch's `torch.optim.AdamW`): weight decay shrinks the parameter directly,
    /// decoupled from the adaptive step; default weight decay 0.01.
    AdamW, "AdamW", adamw, true
);
