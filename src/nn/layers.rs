//! Layers: parameters as [`Param`] fields, buffers as `Tensor` fields, all moved by
//! `model.to(&device)`, with PyTorch's default initialisation.

use std::panic::Location;

use crate::backend::CpuStorage;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::module::{Module, ModulePath, Param, Visitor, VisitorMut};
use crate::tensor::{Tensor, TensorOptions};

use super::Forward;
use super::functional::{self as f, Conv2dOptions, GeluApproximate};

type Loc = &'static Location<'static>;

/// A trainable f32 parameter of `shape` on `device` (a leaf that requires grad) whose values come
/// from `values(numel)`, reported as made by `op` (the layer's constructor) at the user's line.
fn init(
    shape: &[usize],
    device: &Device,
    op: &'static str,
    location: Loc,
    values: impl FnOnce(usize) -> Vec<f64>,
) -> Result<Param> {
    let opts = TensorOptions { dtype: DType::F32, device: *device };
    let tensor = Tensor::create(shape, opts, op, location, |n| {
        CpuStorage::from_vec(values(n).into_iter().map(|v| v as f32).collect::<Vec<f32>>())
    })?;
    Ok(Param::new(tensor.with_requires_grad()?))
}

/// `U(-bound, bound)`: PyTorch's default for linear and conv layers, `bound = 1 / sqrt(fan_in)`.
fn uniform(bound: f64) -> impl FnOnce(usize) -> Vec<f64> {
    move |n| crate::random::uniform(n).into_iter().map(|u| (2.0 * u - 1.0) * bound).collect()
}

fn constant(value: f64) -> impl FnOnce(usize) -> Vec<f64> {
    move |n| vec![value; n]
}

/// `y = x @ weight.t() + bias` (PyTorch's `nn.Linear`): `weight` `[out, in]`, `bias` `[out]`.
#[derive(Module, Clone, Debug)]
pub struct Linear {
    pub weight: Param,
    pub bias: Option<Param>,
}

impl Linear {
    /// A layer with weight and bias drawn from `U(-1/sqrt(in), 1/sqrt(in))`.
    #[track_caller]
    pub fn new(in_features: usize, out_features: usize, device: &Device) -> Result<Linear> {
        Self::with_bias(in_features, out_features, true, device)
    }

    /// Like [`Linear::new`]; `bias = false` leaves the bias out.
    #[track_caller]
    pub fn with_bias(in_features: usize, out_features: usize, bias: bool, device: &Device) -> Result<Linear> {
        let location = Location::caller();
        let bound = 1.0 / (in_features.max(1) as f64).sqrt();
        let weight = init(&[out_features, in_features], device, "Linear::new", location, uniform(bound))?;
        let bias = if bias {
            Some(init(&[out_features], device, "Linear::new", location, uniform(bound))?)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }
}

impl Forward for Linear {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let bias = self.bias.as_ref().map(Param::tensor);
        f::linear(x, &self.weight.tensor(), bias.as_ref())
    }
}

/// A lookup table of `dim`-sized rows, one per id (PyTorch's `nn.Embedding`), initialised from
/// `N(0, 1)`. Its input is an i64 tensor of ids.
#[derive(Module, Clone, Debug)]
pub struct Embedding {
    pub weight: Param,
}

impl Embedding {
    #[track_caller]
    pub fn new(num_embeddings: usize, dim: usize, device: &Device) -> Result<Embedding> {
        let location = Location::caller();
        let weight = init(&[num_embeddings, dim], device, "Embedding::new", location, crate::random::normal)?;
        Ok(Embedding { weight })
    }
}

impl Forward for Embedding {
    #[track_caller]
    fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        f::embedding(ids, &self.weight.tensor())
    }
}

/// Normalises the last dims to zero mean and unit variance, then scales and shifts (PyTorch's
/// `nn.LayerNorm` with `elementwise_affine=True`).
#[derive(Module, Clone, Debug)]
pub struct LayerNorm {
    pub weight: Param,
    pub bias: Param,
    pub normalized_shape: Vec<usize>,
    pub eps: f64,
}

impl LayerNorm {
    /// `eps = 1e-5`, weight ones, bias zeros.
    #[track_caller]
    pub fn new(normalized_shape: impl AsRef<[usize]>, device: &Device) -> Result<LayerNorm> {
        let location = Location::caller();
        let shape = normalized_shape.as_ref().to_vec();
        Ok(LayerNorm {
            weight: init(&shape, device, "LayerNorm::new", location, constant(1.0))?,
            bias: init(&shape, device, "LayerNorm::new", location, constant(0.0))?,
            normalized_shape: shape,
            eps: 1e-5,
        })
    }
}

impl Forward for LayerNorm {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        f::layer_norm(
            x,
            &self.normalized_shape,
            Some(&self.weight.tensor()),
            Some(&self.bias.tensor()),
            self.eps,
        )
    }
}

/// Zeroes elements with probability `p` in training mode and is the identity in evaluation mode
/// (`model.eval()`).
#[derive(Clone, Debug)]
pub struct Dropout {
    pub p: f64,
    training: bool,
}

impl Dropout {
    /// A dropout layer in training mode.
    pub fn new(p: f64) -> Dropout {
        Dropout { p, training: true }
    }
}

impl Module for Dropout {
    fn visit(&self, _: &mut dyn Visitor, _: &mut ModulePath) -> Result<()> {
        Ok(())
    }

    fn visit_mut(&mut self, _: &mut dyn VisitorMut, _: &mut ModulePath) -> Result<()> {
        Ok(())
    }

    fn own_training(&self) -> Option<bool> {
        Some(self.training)
    }

    fn set_own_training(&mut self, training: bool) {
        self.training = training;
    }
}

impl Forward for Dropout {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        f::dropout(x, self.p, self.training)
    }
}

/// 2-D convolution over `[N, C, H, W]` inputs (PyTorch's `nn.Conv2d`).
#[derive(Module, Clone, Debug)]
pub struct Conv2d {
    /// `[out_channels, in_channels / groups, kh, kw]`.
    pub weight: Param,
    pub bias: Option<Param>,
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl Conv2d {
    /// A square `kernel` with stride 1, no padding, one group; weights and bias from
    /// `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`, `fan_in = in_channels * kernel^2`.
    #[track_caller]
    pub fn new(in_channels: usize, out_channels: usize, kernel: usize, device: &Device) -> Result<Conv2d> {
        Self::with_options(
            in_channels,
            out_channels,
            [kernel, kernel],
            Conv2dOptions::default(),
            true,
            device,
        )
    }

    #[track_caller]
    pub fn with_options(
        in_channels: usize,
        out_channels: usize,
        kernel: [usize; 2],
        options: Conv2dOptions,
        bias: bool,
        device: &Device,
    ) -> Result<Conv2d> {
        let location = Location::caller();
        let per_group = in_channels / options.groups.max(1);
        let fan_in = per_group * kernel[0] * kernel[1];
        let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
        let shape = [out_channels, per_group, kernel[0], kernel[1]];
        let weight = init(&shape, device, "Conv2d::new", location, uniform(bound))?;
        let bias = if bias {
            Some(init(&[out_channels], device, "Conv2d::new", location, uniform(bound))?)
        } else {
            None
        };
        Ok(Conv2d {
            weight,
            bias,
            stride: options.stride,
            padding: options.padding,
            dilation: options.dilation,
            groups: options.groups,
        })
    }

    fn options(&self) -> Conv2dOptions {
        Conv2dOptions {
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            groups: self.groups,
        }
    }
}

impl Forward for Conv2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let bias = self.bias.as_ref().map(Param::tensor);
        f::conv2d(x, &self.weight.tensor(), bias.as_ref(), self.options())
    }
}

/// 2-D max pooling (PyTorch's `nn.MaxPool2d`); no parameters.
#[derive(Module, Clone, Debug)]
pub struct MaxPool2d {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

impl MaxPool2d {
    /// A square window with stride equal to its size.
    pub fn new(kernel: usize) -> MaxPool2d {
        MaxPool2d { kernel: [kernel, kernel], stride: [kernel, kernel], padding: [0, 0] }
    }
}

impl Forward for MaxPool2d {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let options =
            Conv2dOptions { stride: self.stride, padding: self.padding, ..Conv2dOptions::default() };
        f::max_pool2d(x, self.kernel, options)
    }
}

macro_rules! activation {
    ($(#[$doc:meta] $name:ident => $method:ident),* $(,)?) => {$(
        #[$doc]
        #[derive(Module, Clone, Copy, Debug, Default)]
        pub struct $name;

        impl Forward for $name {
            #[track_caller]
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                x.$method()
            }
        }
    )*};
}

activation! {
    /// `max(x, 0)`.
    Relu => relu,
    /// `tanh(x)`.
    Tanh => tanh,
    /// `1 / (1 + exp(-x))`.
    Sigmoid => sigmoid,
    /// `x * sigmoid(x)`.
    Silu => silu,
}

/// GELU (PyTorch's `nn.GELU`): the exact erf form by default, or its tanh approximation
/// (`Gelu::tanh()`, PyTorch's `nn.GELU(approximate='tanh')`, GPT-2's activation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gelu {
    pub approximate: GeluApproximate,
}

/// No tensors: the approximation is a setting.
impl Module for Gelu {
    fn visit(&self, _: &mut dyn Visitor, _: &mut ModulePath) -> Result<()> {
        Ok(())
    }

    fn visit_mut(&mut self, _: &mut dyn VisitorMut, _: &mut ModulePath) -> Result<()> {
        Ok(())
    }
}

impl Gelu {
    /// The exact form, `x Φ(x)`.
    pub fn new() -> Gelu {
        Gelu::default()
    }

    /// The tanh approximation.
    pub fn tanh() -> Gelu {
        Gelu { approximate: GeluApproximate::Tanh }
    }
}

impl Forward for Gelu {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        f::gelu(x, self.approximate)
    }
}

/// Flattens every dim after the first (PyTorch's `nn.Flatten()`).
#[derive(Module, Clone, Copy, Debug, Default)]
pub struct Flatten;

impl Forward for Flatten {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.flatten_from(1)
    }
}
