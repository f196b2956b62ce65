//! Neural-network building blocks: layers that are [`Module`]s (so `model.to(&device)` moves every
//! parameter and buffer), the [`Forward`] trait that runs them, losses, and the functional forms
//! in [`functional`].
//!
//! ```
//! use devcheck::nn::{self, Forward, Linear, Relu, Sequential};
//! use devcheck::{Device, Module, Tensor};
//!
//! # fn main() -> devcheck::Result<()> {
//! let device = Device::Cpu;
//! let model = Sequential::new()
//!     .append(Linear::new(64, 32, &device)?)
//!     .append(Relu)
//!     .append(Linear::new(32, 10, &device)?);
//! let x = Tensor::randn([8, 64], &device)?;
//! let target = Tensor::from_vec((0..8).collect::<Vec<i64>>(), [8], &device)?;
//! let loss = nn::functional::cross_entropy(&model.forward(&x)?, &target, &Default::default())?;
//! loss.backward()?;
//! assert!(model.parameters().iter().all(|p| p.tensor().grad().is_some()));
//! # Ok(())
//! # }
//! ```

mod attention;
pub mod functional;
mod layers;
mod loss;

pub use attention::{CausalSelfAttention, SinusoidalPositionalEncoding};
pub use functional::{ClassLossOptions, Conv2dOptions, GeluApproximate, Reduction};
pub use layers::{
    Conv2d, Dropout, Embedding, Flatten, Gelu, LayerNorm, Linear, MaxPool2d, Relu, Sigmoid, Silu, Tanh,
};
pub use loss::{CrossEntropyLoss, MseLoss};

use crate::error::Result;
use crate::module::{Module, ModulePath, Visitor, VisitorMut, walk};
use crate::tensor::Tensor;

/// Runs a layer or model on an input (PyTorch's `forward`, called as `model(x)` there).
///
/// Errors and dry-run findings are located at the line to fix. devcheck's own layers mark their
/// `forward` `#[track_caller]`, so what goes wrong inside them is reported at the line that called
/// them (`self.fc.forward(&h)?` in your model). Your own layers need nothing: a tensor made inside
/// your `forward` is reported at the line in your `forward` that made it. (Mark your `forward`
/// `#[track_caller]` only if you want your layer to report at its callers' lines too.)
pub trait Forward {
    fn forward(&self, x: &Tensor) -> Result<Tensor>;
}

/// A [`Module`] that maps one tensor to another and can be cloned behind a `Box`: what
/// [`Sequential`] holds. Every `Module + Forward + Clone + Send + Sync` type is a `Layer`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `Layer`, so it cannot go into a `Sequential`",
    note = "a layer is `Module + Forward + Clone + Send + Sync + 'static`: derive `Module` and `Clone`, and \
            implement `Forward`"
)]
pub trait Layer: Module + Forward + Send + Sync {
    /// [`Forward::forward`] through a `dyn Layer`, keeping the caller's location for layers
    /// whose `forward` is `#[track_caller]` (a call through a trait object otherwise reports the
    /// line of the layer's `forward` itself).
    #[track_caller]
    fn forward_layer(&self, x: &Tensor) -> Result<Tensor>;

    /// A clone in a new box ([`Sequential`] is `Clone`).
    fn clone_layer(&self) -> Box<dyn Layer>;
}

impl<T: Module + Forward + Clone + Send + Sync + 'static> Layer for T {
    fn forward_layer(&self, x: &Tensor) -> Result<Tensor> {
        self.forward(x)
    }

    fn clone_layer(&self) -> Box<dyn Layer> {
        Box::new(self.clone())
    }
}

/// Layers applied in order (PyTorch's `nn.Sequential`); paths are the layer's index, as in
/// PyTorch checkpoints: `0.weight`, `2.bias`.
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Box<dyn Layer>>,
}

impl Clone for Sequential {
    fn clone(&self) -> Sequential {
        Sequential { layers: self.layers.iter().map(|layer| layer.clone_layer()).collect() }
    }
}

impl Module for Sequential {
    fn visit(&self, visitor: &mut dyn Visitor, path: &mut ModulePath) -> Result<()> {
        for (index, layer) in self.layers.iter().enumerate() {
            path.push_index(index);
            walk::submodule(visitor, path, &**layer)?;
            path.pop();
        }
        Ok(())
    }

    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut, path: &mut ModulePath) -> Result<()> {
        for (index, layer) in self.layers.iter_mut().enumerate() {
            path.push_index(index);
            walk::submodule_mut(visitor, path, &mut **layer)?;
            path.pop();
        }
        Ok(())
    }
}

impl Sequential {
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// Appends a layer and returns the model (PyTorch's `Sequential.append`).
    #[must_use = "`append` returns the extended model"]
    pub fn append(mut self, layer: impl Layer + 'static) -> Sequential {
        self.layers.push(Box::new(layer));
        self
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Forward for Sequential {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut x = x.clone();
        for layer in &self.layers {
            x = layer.forward_layer(&x)?;
        }
        Ok(x)
    }
}
