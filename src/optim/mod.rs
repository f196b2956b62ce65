//! Optimizers: [`Sgd`], [`Adam`] and [`AdamW`], with PyTorch's update rules and defaults.
//!
//! Optimizer state (Adam's `exp_avg`/`exp_avg_sq`, SGD's `momentum_buffer`) is stored on each
//! [`Param`] ([`Param::set_state`]), created from the parameter on its device. `model.to(&device)`
//! moves every parameter together with its gradient and its state, so an optimizer built before
//! the move keeps working after it: the classic "optimizer state on the wrong device" error of a
//! resumed run cannot happen. Loading a saved optimizer state puts each tensor on its parameter's
//! current device.
//!
//! On the host the update is one fused pass that writes the parameter and its state in place; on
//! other devices (and in dry runs on fake devices) it is the same math with tensor ops.
//!
//! ```
//! use devcheck::nn::{Forward, Linear};
//! use devcheck::optim::{AdamW, Optimizer};
//! use devcheck::{Device, Module, Tensor};
//!
//! # fn main() -> devcheck::Result<()> {
//! let model = Linear::new(3, 1, &Device::Cpu)?;
//! let mut optimizer = AdamW::new(model.parameters(), 1e-2)?;
//! let x = Tensor::randn([16, 3], &Device::Cpu)?;
//! let y = x.sum(1, true)?; // learn y = x0 + x1 + x2
//! let mut first = None;
//! for _ in 0..200 {
//!     optimizer.zero_grad();
//!     let loss = model.forward(&x)?.sub(&y)?.pow_scalar(2.0)?.mean_all()?;
//!     loss.backward()?;
//!     optimizer.step()?;
//!     first.get_or_insert(loss.to_scalar::<f32>()?);
//! }
//! let last = model.forward(&x)?.sub(&y)?.pow_scalar(2.0)?.mean_all()?.to_scalar::<f32>()?;
//! assert!(last < first.unwrap() / 10.0);
//! # Ok(())
//! # }
//! ```

mod adam;
mod sgd;

use std::collections::BTreeMap;
use std::panic::Location;
use std::path::Path;

pub use adam::{Adam, AdamConfig, AdamW};
pub use sgd::{Sgd, SgdConfig};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::module::Param;
use crate::shape::fmt_shape;
use crate::tensor::Tensor;

/// What every optimizer does. The usual step, as in the guides:
/// `optimizer.zero_grad(); let loss = ...; loss.backward()?; optimizer.step()?;`
pub trait Optimizer {
    /// Updates every parameter that has a gradient (parameters without one are left alone, as in
    /// PyTorch). Runs with recording off.
    #[track_caller]
    fn step(&mut self) -> Result<()>;

    /// The parameters being optimized, in the order given.
    fn params(&self) -> &[Param];

    fn learning_rate(&self) -> f64;

    /// Changes the learning rate (a schedule calls this between steps).
    fn set_learning_rate(&mut self, lr: f64);

    /// Clears every parameter's gradient (PyTorch's `zero_grad(set_to_none=True)`).
    fn zero_grad(&self) {
        for p in self.params() {
            p.zero_grad();
        }
    }

    /// The state to resume from, by key: `state.{i}.{name}` for the `i`-th parameter's state
    /// tensors, `state.{i}.step` (i64) for its step count, `hparams.{name}` (f64) for the
    /// hyperparameters.
    fn state_dict(&self) -> BTreeMap<String, Tensor>;

    /// Restores [`Optimizer::state_dict`]: every state tensor lands on its parameter's current
    /// device. Strict: the optimizer kind, the parameter count and every shape must match, or
    /// nothing is loaded.
    #[track_caller]
    fn load_state_dict(&mut self, state: &BTreeMap<String, Tensor>) -> Result<()>;

    /// Writes [`Optimizer::state_dict`] as a safetensors file, replacing it atomically (see
    /// [`crate::checkpoint::save`]).
    #[track_caller]
    fn save(&self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        crate::checkpoint::save_tensors(&self.state_dict(), path)
    }

    /// Reads a file written by [`Optimizer::save`] and loads it (onto the parameters' devices).
    #[track_caller]
    fn load(&mut self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        let state = read_tensors(path.as_ref())?;
        self.load_state_dict(&state)
    }
}

/// The value and gradient of one parameter at a step, checked to fit together.
struct Slot {
    value: Tensor,
    grad: Tensor,
}

fn slot(op: &'static str, p: &Param, location: &'static Location<'static>) -> Result<Option<Slot>> {
    let value = p.tensor();
    // A parameter's gradient lives on its tensor, whether backward accumulated it or
    // `Param::set_grad` put it there.
    let Some(grad) = value.grad() else { return Ok(None) };
    if !value.dtype().is_float() {
        return Err(Error::DTypeMismatch {
            op,
            detail: format!("parameters must be floating to be optimized, this one is {}", value.dtype()),
            help: "keep integer tensors as buffers (plain `Tensor` fields), not `Param`s".to_string(),
            operands: vec![value.operand("param")],
            location,
        });
    }
    if grad.device() != value.device() {
        return Err(Error::DeviceMismatch {
            op,
            operands: vec![value.operand("param"), grad.operand("grad")],
            location,
        });
    }
    if grad.shape() != value.shape() || grad.dtype() != value.dtype() {
        return Err(Error::ShapeMismatch {
            op,
            detail: format!(
                "the gradient ({} {}) does not match its parameter ({} {})",
                grad.dtype(),
                fmt_shape(grad.shape()),
                value.dtype(),
                fmt_shape(value.shape())
            ),
            help: "a gradient set with `set_grad` must have its parameter's shape and dtype".to_string(),
            operands: vec![value.operand("param"), grad.operand("grad")],
            location,
        });
    }
    Ok(Some(Slot { value, grad }))
}

/// The state tensor `key` of `p`, created as zeros like the parameter the first time.
fn state_or_zeros(p: &Param, key: &str, like: &Tensor) -> Result<Tensor> {
    match p.state(key) {
        Some(t) => Ok(t),
        None => {
            let zeros = Tensor::zeros_like(like)?;
            p.set_state(key, zeros.clone())?;
            Ok(zeros)
        }
    }
}

/// Installs the result of a tensor-op update (off the host, or a dry run): the new value stays a
/// trainable leaf.
fn install_value(p: &Param, old: &Tensor, new: Tensor) -> Result<()> {
    let new = new.detach();
    new.set_requires_grad(old.requires_grad())?;
    p.set_tensor(new)
}

/// Can the update run in place on the host: every tensor has host data of `dtype` (f32/f64),
/// is contiguous, and none shares storage with another (one is written while others are read)?
fn fused_on_host(tensors: &[&Tensor]) -> bool {
    if crate::fake::is_active() {
        return false;
    }
    let dtype = tensors[0].dtype();
    let plain = tensors.iter().all(|t| {
        t.device() == Device::Cpu
            && t.dtype() == dtype
            && matches!(dtype, DType::F32 | DType::F64)
            && t.is_contiguous()
            && !t.is_fake()
            // Pinned memory is host memory, but not a `Vec` the kernels can write in place.
            && !t.is_pinned()
    });
    plain && tensors.iter().enumerate().all(|(i, a)| tensors[i + 1..].iter().all(|b| !a.same_storage(b)))
}

// ---- state dicts ---------------------------------------------------------------------------

fn state_key(index: usize, name: &str) -> String {
    format!("state.{index}.{name}")
}

fn hparam_key(name: &str) -> String {
    format!("hparams.{name}")
}

/// The state dict of an optimizer: per-parameter tensors, step counts and hyperparameters.
fn build_state_dict(
    params: &[Param],
    steps: &[u64],
    tensor_keys: &[&str],
    hparams: &[(&str, f64)],
) -> BTreeMap<String, Tensor> {
    let mut out = BTreeMap::new();
    for (i, p) in params.iter().enumerate() {
        for &key in tensor_keys {
            if let Some(t) = p.state(key) {
                out.insert(state_key(i, key), t);
            }
        }
        if steps[i] > 0
            && let Ok(step) = Tensor::scalar(steps[i] as i64, &Device::Cpu)
        {
            out.insert(state_key(i, "step"), step);
        }
    }
    for &(name, value) in hparams {
        if let Ok(t) = Tensor::scalar(value, &Device::Cpu) {
            out.insert(hparam_key(name), t);
        }
    }
    out
}

/// What a loaded state dict gives back: per-parameter state (already on each parameter's device),
/// step counts and hyperparameters. Nothing is installed until all of it has been read.
struct LoadedState {
    tensors: Vec<Vec<(String, Tensor)>>,
    steps: Vec<u64>,
    hparams: BTreeMap<String, f64>,
}

#[track_caller]
fn read_state_dict(
    optimizer: &'static str,
    params: &[Param],
    tensor_keys: &[&str],
    hparam_names: &[&str],
    state: &BTreeMap<String, Tensor>,
) -> Result<LoadedState> {
    let location = Location::caller();
    let invalid = |detail: String, help: &str| Error::InvalidArgument {
        op: optimizer,
        detail,
        help: help.to_string(),
        location,
    };
    let mut loaded = LoadedState {
        tensors: vec![Vec::new(); params.len()],
        steps: vec![0; params.len()],
        hparams: BTreeMap::new(),
    };
    for (key, tensor) in state {
        if let Some(name) = key.strip_prefix("hparams.") {
            if !hparam_names.contains(&name) {
                return Err(invalid(
                    format!("the state has hyperparameter `{name}`, which {optimizer} does not have"),
                    "this state was saved by another kind of optimizer; load it into the same kind",
                ));
            }
            loaded.hparams.insert(name.to_string(), tensor.to_dtype(DType::F64)?.to_scalar::<f64>()?);
            continue;
        }
        let parsed = key.strip_prefix("state.").and_then(|rest| rest.split_once('.'));
        let Some((index, name)) = parsed.and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n))) else {
            return Err(invalid(
                format!("unexpected key `{key}` in an optimizer state"),
                "load a state written by `Optimizer::save` / `state_dict`",
            ));
        };
        let Some(param) = params.get(index) else {
            return Err(invalid(
                format!("the state is for more parameters than the {} this optimizer holds", params.len()),
                "build the optimizer over the same parameters, in the same order, as the one that saved it",
            ));
        };
        if name == "step" {
            loaded.steps[index] = tensor.to_scalar::<i64>()?.max(0) as u64;
        } else if tensor_keys.contains(&name) {
            if tensor.shape() != param.shape().as_slice() {
                return Err(invalid(
                    format!(
                        "`{key}` has shape {} but parameter {index} has shape {}",
                        fmt_shape(tensor.shape()),
                        fmt_shape(&param.shape())
                    ),
                    "build the optimizer over the same parameters, in the same order, as the one that saved it",
                ));
            }
            let on_device = tensor.to(&param.device())?.to_dtype(param.dtype())?;
            loaded.tensors[index].push((name.to_string(), on_device));
        } else {
            return Err(invalid(
                format!("`{key}` is not state of {optimizer}"),
                "this state was saved by another kind of optimizer; load it into the same kind",
            ));
        }
    }
    Ok(loaded)
}

/// Installs loaded per-parameter state (all of it was checked and moved beforehand).
fn install_state(params: &[Param], tensor_keys: &[&str], loaded: Vec<Vec<(String, Tensor)>>) -> Result<()> {
    for (p, tensors) in params.iter().zip(loaded) {
        for key in tensor_keys {
            p.remove_state(key);
        }
        for (key, t) in tensors {
            p.set_state(key, t)?;
        }
    }
    Ok(())
}

/// Reads every tensor of a safetensors file onto the host.
#[track_caller]
fn read_tensors(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    use crate::checkpoint::{CheckpointError, CheckpointFile};
    let location = Location::caller();
    let file = CheckpointFile::open(path)?;
    let mut out = BTreeMap::new();
    for name in file.names() {
        let Some(info) = file.info(&name) else { continue };
        let Some(dtype) = crate::checkpoint::model_dtype(info.dtype) else {
            return Err(CheckpointError::Malformed {
                path: path.to_path_buf(),
                detail: format!("tensor `{name}` has dtype {:?}, which devcheck does not use", info.dtype),
            }
            .into());
        };
        let tensor = file.read_tensor(&name, dtype, &Device::Cpu, "Optimizer::load", location)?;
        out.insert(name, tensor);
    }
    Ok(out)
}

/// Hyperparameters must be finite and within their range.
#[track_caller]
fn check_hparam(optimizer: &'static str, name: &str, value: f64, valid: std::ops::Range<f64>) -> Result<()> {
    if value.is_finite() && valid.contains(&value) {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        op: optimizer,
        detail: format!("{name} = {value} is out of range"),
        help: format!("{name} must lie in [{}, {})", valid.start, valid.end),
        location: Location::caller(),
    })
}
