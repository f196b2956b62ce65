//! Reverse-mode automatic differentiation, as PyTorch users know it.
//!
//! ```
//! use devcheck::{Device, Tensor};
//! # fn main() -> devcheck::Result<()> {
//! let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &Device::Cpu)?.with_requires_grad()?;
//! let loss = w.mul(&w)?.sum_all()?; // sum(w²)
//! loss.backward()?;
//! assert_eq!(w.grad().unwrap().to_vec::<f32>()?, vec![2.0, 4.0, 6.0]);
//! # Ok(())
//! # }
//! ```
//!
//! - A tensor that [requires grad](Tensor::requires_grad) is a *leaf*; every differentiable op on
//!   it records a node, and [`Tensor::backward`] on a scalar result accumulates gradients into the
//!   leaves' [`grad`](Tensor::grad) slots, on each leaf's own device and in its dtype.
//! - Nothing is recorded when no input requires grad, or inside a [`no_grad`] scope (evaluation,
//!   optimizer updates).
//! - The graph is kept as long as a tensor of it is alive, so `backward` may run more than once;
//!   gradients accumulate until cleared (`set_grad(None)`, an optimizer's `zero_grad`).
//! - First-order only: the backward pass itself is not recorded (no `create_graph`).

mod functions;
mod fused;
mod graph;
mod window;

use std::cell::Cell;
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::Arc;

pub(crate) use functions::{GradFn, unary_keeps_output};
pub(crate) use fused::layer_norm;
use graph::Edge;
pub(crate) use graph::GradMeta;
pub(crate) use graph::Node;
pub(crate) use window::{conv2d, max_pool2d};

use crate::error::{Error, Result};
use crate::shape::fmt_shape;
use crate::tensor::Tensor;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Is gradient recording on for this thread? (`torch.is_grad_enabled()`)
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Turns recording on or off for this thread until the returned guard is dropped, which restores
/// the previous mode.
pub fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    let previous = GRAD_ENABLED.with(|g| g.replace(enabled));
    GradModeGuard { previous, _not_send: PhantomData }
}

/// Stops recording on this thread until the guard is dropped (`with torch.no_grad():`).
///
/// ```
/// # use devcheck::{Device, Tensor};
/// # fn main() -> devcheck::Result<()> {
/// let w = Tensor::ones([2], &Device::Cpu)?.with_requires_grad()?;
/// let y = {
///     let _guard = devcheck::no_grad();
///     w.mul_scalar(2.0)?
/// };
/// assert!(!y.requires_grad());
/// # Ok(())
/// # }
/// ```
pub fn no_grad() -> GradModeGuard {
    set_grad_enabled(false)
}

/// Turns recording back on inside a [`no_grad`] scope until the guard is dropped.
pub fn enable_grad() -> GradModeGuard {
    set_grad_enabled(true)
}

/// Restores the previous grad mode when dropped.
#[must_use = "the grad mode reverts when the guard is dropped; bind it: `let _guard = no_grad();`"]
pub struct GradModeGuard {
    previous: bool,
    // Grad mode is per thread: the guard must be dropped on the thread that made it.
    _not_send: PhantomData<*const ()>,
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.previous));
    }
}

/// Attaches a backward node to `out` when an input requires grad and recording is on; otherwise
/// returns `out` untouched, having built nothing (`grad_fn` is only called when recording).
#[inline]
pub(crate) fn record(out: Tensor, inputs: &[&Tensor], grad_fn: impl FnOnce(&Tensor) -> GradFn) -> Tensor {
    if !inputs.iter().any(|t| t.requires_grad()) || !out.dtype().is_float() || !is_grad_enabled() {
        return out;
    }
    let edges = inputs.iter().map(|t| Edge::of(t)).collect();
    let grad_fn = grad_fn(&out);
    out.with_grad_fn(Arc::new(Node { grad_fn, edges }))
}

/// Ops that write into an existing tensor (`add_into`) record nothing, so none of their operands
/// may require grad while recording is on (PyTorch refuses `out=` with autograd too).
pub(crate) fn check_untracked_write(
    op: &'static str,
    operands: &[(&str, &Tensor)],
    location: &'static Location<'static>,
) -> Result<()> {
    let Some((role, _)) = operands.iter().find(|(_, t)| t.requires_grad()) else { return Ok(()) };
    if !is_grad_enabled() {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        op,
        detail: format!(
            "`{op}_into` writes into an existing tensor, which autograd cannot record, and {role} requires grad"
        ),
        help: format!(
            "use the allocating form (`a.{op}(&b)?`) where gradients must flow, or run the update inside \
             `let _guard = devcheck::no_grad();`"
        ),
        location,
    })
}

impl Tensor {
    /// Are gradients tracked for this tensor: a leaf marked with [`Tensor::set_requires_grad`], or
    /// the result of an op on one (while recording)?
    #[inline]
    pub fn requires_grad(&self) -> bool {
        self.grad_meta().requires_grad()
    }

    /// True for tensors not made by a recorded op: user-created tensors and parameters. Only
    /// leaves receive a `grad`.
    pub fn is_leaf(&self) -> bool {
        self.grad_meta().grad_fn.is_none()
    }

    /// Marks this leaf (and every clone of this handle) as trainable, or not. Only floating
    /// tensors can require grad; a computed tensor cannot be switched off (use [`Tensor::detach`]).
    #[track_caller]
    pub fn set_requires_grad(&self, requires_grad: bool) -> Result<()> {
        let location = Location::caller();
        if requires_grad && !self.dtype().is_float() {
            return Err(Error::DTypeMismatch {
                op: "set_requires_grad",
                detail: format!("only floating tensors can require grad, this one is {}", self.dtype()),
                help: "cast first: `x.to_dtype(DType::F32)?`; integer and bool tensors (indices, \
                       masks) have no gradient"
                    .to_string(),
                operands: vec![self.operand("input")],
                location,
            });
        }
        if !self.is_leaf() {
            if requires_grad {
                return Ok(());
            }
            return Err(Error::InvalidArgument {
                op: "set_requires_grad",
                detail: "only leaf tensors can change requires_grad; this one was computed by \
                         a recorded op"
                    .to_string(),
                help: "use `x.detach()` for a copy of the handle outside the graph".to_string(),
                location,
            });
        }
        self.grad_meta().set_leaf_requires_grad(requires_grad);
        Ok(())
    }

    /// This tensor, marked as requiring grad: `Tensor::randn(..)?.with_requires_grad()?`.
    #[track_caller]
    pub fn with_requires_grad(self) -> Result<Tensor> {
        self.set_requires_grad(true)?;
        Ok(self)
    }

    /// The gradient accumulated for this leaf by [`Tensor::backward`], if any. Always `None` for
    /// computed tensors (PyTorch's `.grad` of a non-leaf).
    pub fn grad(&self) -> Option<Tensor> {
        self.grad_meta().grad_slot().clone()
    }

    /// Replaces this leaf's gradient: `None` clears it (what `zero_grad` does). A new gradient
    /// must match the tensor's shape, dtype and device.
    #[track_caller]
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        let location = Location::caller();
        if let Some(g) = &grad {
            matches_tensor("set_grad", self, g, location)?;
        }
        *self.grad_meta().grad_slot() = grad;
        Ok(())
    }

    /// A handle to the same data outside the graph: it does not require grad, and nothing done to
    /// it flows back. Keeps this tensor's origin, name and role (it is the same tensor to reports).
    pub fn detach(&self) -> Tensor {
        let detached = self.view(self.layout().clone(), self.origin());
        detached.copy_label_from(self);
        detached
    }

    /// The name of the node that made this tensor (`"MulBackward"`), like PyTorch's `grad_fn`.
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        self.grad_meta().grad_fn.as_ref().map(|n| n.grad_fn.name())
    }

    /// Computes the gradient of this one-element tensor (a loss) with respect to every leaf it
    /// depends on, adding it to their [`grad`](Tensor::grad).
    #[track_caller]
    pub fn backward(&self) -> Result<()> {
        let location = Location::caller();
        if self.numel() != 1 {
            return Err(Error::InvalidArgument {
                op: "backward",
                detail: format!(
                    "`backward()` needs a one-element tensor (a loss), this one has shape {}",
                    fmt_shape(self.shape())
                ),
                help: "reduce it first (`loss.mean_all()?` or `.sum_all()?`), or pass the output \
                       gradient: `y.backward_with_grad(&grad)`"
                    .to_string(),
                location,
            });
        }
        let seed = Tensor::ones_like(self)?;
        self.backward_at(seed, location)
    }

    /// Backward from a tensor of any shape, given the gradient of some scalar with respect to it
    /// (`y.backward(gradient=g)`); `grad` must match this tensor's shape, dtype and device.
    #[track_caller]
    pub fn backward_with_grad(&self, grad: &Tensor) -> Result<()> {
        let location = Location::caller();
        matches_tensor("backward", self, grad, location)?;
        self.backward_at(grad.clone(), location)
    }

    fn backward_at(&self, seed: Tensor, location: &'static Location<'static>) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::InvalidArgument {
                op: "backward",
                detail: "this tensor does not require grad: no leaf it was computed from requires \
                         grad, or it was computed with recording off"
                    .to_string(),
                help: "mark the parameters with `set_requires_grad(true)` (model parameters are \
                       `Param`s, which do), and do not compute the loss inside `no_grad()`"
                    .to_string(),
                location,
            });
        }
        let _recording_off = no_grad();
        // The gradient ops run inside devcheck: what they report belongs to this call.
        let _user_call = crate::tensor::observe::on_behalf_of(location, true);
        graph::run_backward(self, seed, location).map_err(|e| e.relocated(location))
    }
}

/// A gradient given for `target` must have its device, dtype and shape.
fn matches_tensor(
    op: &'static str,
    target: &Tensor,
    grad: &Tensor,
    location: &'static Location<'static>,
) -> Result<()> {
    let operands = || vec![target.operand("tensor"), grad.operand("grad")];
    if grad.device() != target.device() {
        return Err(Error::DeviceMismatch { op, operands: operands(), location });
    }
    if grad.dtype() != target.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            detail: format!("the tensor is {}, the gradient {}", target.dtype(), grad.dtype()),
            help: format!("cast the gradient: `grad.to_dtype(DType::{:?})`", target.dtype()),
            operands: operands(),
            location,
        });
    }
    if grad.shape() != target.shape() {
        return Err(Error::ShapeMismatch {
            op,
            detail: format!(
                "the tensor has shape {}, the gradient {}",
                fmt_shape(target.shape()),
                fmt_shape(grad.shape())
            ),
            help: "a gradient has exactly the shape of its tensor".to_string(),
            operands: operands(),
            location,
        });
    }
    Ok(())
}
