//! The math of the layers and losses as plain functions (PyTorch's `torch.nn.functional`). Each
//! is composed of tensor ops, so it runs on every device, fake ones included, and is
//! differentiable wherever its inputs require grad.

use std::panic::Location;

use crate::backend::WindowGeometry;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::fmt_shape;
use crate::tensor::{CmpOp, Tensor, on_one_device};

type Loc = &'static Location<'static>;

/// How a loss combines its per-element values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The (weighted) mean, PyTorch's default.
    #[default]
    Mean,
    Sum,
    /// One value per element (per sample for classification losses).
    None,
}

/// `x @ weight.t() + bias`: `x` is `[.., in]`, `weight` `[out, in]`, `bias` `[out]`.
#[track_caller]
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let location = Location::caller();
    if weight.rank() != 2 || x.rank() == 0 || x.shape()[x.rank() - 1] != weight.shape()[1] {
        return Err(shape_error(
            "linear",
            format!(
                "input {} does not fit weight {} (expected [.., in] with [out, in])",
                fmt_shape(x.shape()),
                fmt_shape(weight.shape())
            ),
            "the input's last dim must equal the layer's `in_features`; check the layer sizes",
            &[("input", x), ("weight", weight)],
            location,
        ));
    }
    let [x, weight, bias] =
        aligned("linear", [("input", Some(x)), ("weight", Some(weight)), ("bias", bias)], location)?;
    let (x, weight) = (expect(x), expect(weight));
    let out = x.matmul(&weight.t()?)?;
    match bias {
        Some(b) => out.add(&b),
        None => Ok(out),
    }
}

/// `operands` checked to be on one device at the caller's line ([`on_one_device`]), `None`s kept
/// in place: the tensors an op of optional arguments computes with.
#[track_caller]
fn aligned<const N: usize>(
    op: &'static str,
    operands: [(&str, Option<&Tensor>); N],
    location: Loc,
) -> Result<[Option<Tensor>; N]> {
    let given: Vec<(&str, &Tensor)> = operands.iter().filter_map(|(role, t)| Some((*role, (*t)?))).collect();
    let mut on_device = on_one_device(op, &given, location)?.into_iter();
    Ok(operands.map(|(_, t)| t.and_then(|_| on_device.next())))
}

/// An operand [`aligned`] was given (`Some` in, `Some` out).
fn expect(t: Option<Tensor>) -> Tensor {
    t.unwrap_or_else(|| unreachable!("aligned keeps every given operand"))
}

/// Rows of `weight` (`[num_embeddings, dim]`) picked by the i64 `ids` of any shape; the result is
/// `[ids.., dim]`.
#[track_caller]
pub fn embedding(ids: &Tensor, weight: &Tensor) -> Result<Tensor> {
    let location = Location::caller();
    if weight.rank() != 2 {
        return Err(shape_error(
            "embedding",
            format!("the table must be [num_embeddings, dim], got {}", fmt_shape(weight.shape())),
            "an embedding table is a matrix with one row per id",
            &[("weight", weight)],
            location,
        ));
    }
    if ids.dtype() != DType::I64 {
        return Err(Error::DTypeMismatch {
            op: "embedding",
            detail: format!("ids must be i64, got {}", ids.dtype()),
            help: "cast the ids: `ids.to_dtype(DType::I64)?`".to_string(),
            operands: vec![ids.operand("ids")],
            location,
        });
    }
    let [ids, weight] = aligned("embedding", [("ids", Some(ids)), ("weight", Some(weight))], location)?;
    let (ids, weight) = (expect(ids), expect(weight));
    let flat = ids.reshape([ids.numel()])?;
    let rows = weight.index_select(0, &flat)?;
    let mut shape = ids.shape().to_vec();
    shape.push(weight.shape()[1]);
    rows.reshape(shape)
}

/// Normalises over the last `normalized.len()` dims (which must equal `normalized`), then scales
/// and shifts by `weight` and `bias` when given. On the host (f32/f64, weight and bias of the
/// normalized shape) it runs as one fused kernel each way; elsewhere, and in dry runs, it is
/// composed of tensor ops.
#[track_caller]
pub fn layer_norm(
    x: &Tensor,
    normalized: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    let location = Location::caller();
    let n = normalized.len();
    if n == 0 || x.rank() < n || x.shape()[x.rank() - n..] != *normalized {
        return Err(shape_error(
            "layer_norm",
            format!(
                "input {} does not end with the normalized shape {}",
                fmt_shape(x.shape()),
                fmt_shape(normalized)
            ),
            "the last dims of the input must equal the layer's `normalized_shape`",
            &[("input", x)],
            location,
        ));
    }
    let [x, weight, bias] =
        aligned("layer_norm", [("input", Some(x)), ("weight", weight), ("bias", bias)], location)?;
    let x = expect(x);
    if let Some(fused) =
        crate::autograd::layer_norm(&x, normalized, weight.as_ref(), bias.as_ref(), eps, location)
    {
        return fused;
    }
    let dims: Vec<isize> = (x.rank() - n..x.rank()).map(|d| d as isize).collect();
    let mean = x.mean(dims.clone(), true)?;
    let centered = x.sub(&mean)?;
    let var = centered.mul(&centered)?.mean(dims, true)?;
    let mut out = centered.mul(&var.add_scalar(eps)?.rsqrt()?)?;
    if let Some(w) = weight {
        out = out.mul(&w)?;
    }
    if let Some(b) = bias {
        out = out.add(&b)?;
    }
    Ok(out)
}

/// Which GELU: PyTorch's `approximate` argument.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GeluApproximate {
    /// The exact form `x Φ(x)` (`approximate='none'`, the default).
    #[default]
    None,
    /// `x/2 (1 + tanh(√(2/π) (x + 0.044715 x³)))` (`approximate='tanh'`).
    Tanh,
}

/// GELU (PyTorch's `F.gelu(x, approximate=..)`): [`Tensor::gelu`] or [`Tensor::gelu_tanh`].
#[track_caller]
pub fn gelu(x: &Tensor, approximate: GeluApproximate) -> Result<Tensor> {
    match approximate {
        GeluApproximate::None => x.gelu(),
        GeluApproximate::Tanh => x.gelu_tanh(),
    }
}

/// Zeroes each element with probability `p` and scales the rest by `1 / (1 - p)` when
/// `training`; the identity otherwise. The mask is drawn on `x`'s device from the seeded
/// generator ([`crate::manual_seed`]).
#[track_caller]
pub fn dropout(x: &Tensor, p: f64, training: bool) -> Result<Tensor> {
    let location = Location::caller();
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::InvalidArgument {
            op: "dropout",
            detail: format!("the drop probability must be in [0, 1], got {p}"),
            help: "pass e.g. 0.1 to drop one element in ten".to_string(),
            location,
        });
    }
    if !training || p == 0.0 {
        return Ok(x.clone());
    }
    if p == 1.0 {
        return x.mul_scalar(0.0);
    }
    let keep = Tensor::rand_like(x)?.cmp_scalar(CmpOp::Ge, p)?.to_dtype(x.dtype())?;
    x.mul(&keep.mul_scalar(1.0 / (1.0 - p))?)
}

/// The geometry of a 2-D convolution or pooling window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dOptions {
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions { stride: [1, 1], padding: [0, 0], dilation: [1, 1], groups: 1 }
    }
}

/// 2-D convolution (cross-correlation, as PyTorch): `x` `[N, C, H, W]`, `weight`
/// `[O, C / groups, kh, kw]`, `bias` `[O]`; the result is `[N, O, H', W']`.
#[track_caller]
pub fn conv2d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, options: Conv2dOptions) -> Result<Tensor> {
    let location = Location::caller();
    let op = "conv2d";
    if x.rank() != 4 || weight.rank() != 4 {
        return Err(shape_error(
            op,
            format!(
                "expected input [N, C, H, W] and weight [O, C/groups, kh, kw], got {} and {}",
                fmt_shape(x.shape()),
                fmt_shape(weight.shape())
            ),
            "add a batch dim to a single image with `x.unsqueeze(0)?`",
            &[("input", x), ("weight", weight)],
            location,
        ));
    }
    let c = x.shape()[1];
    let (o, cg, kh, kw) = (weight.shape()[0], weight.shape()[1], weight.shape()[2], weight.shape()[3]);
    let g = options.groups;
    if g == 0 || !c.is_multiple_of(g) || !o.is_multiple_of(g) || cg * g != c {
        return Err(shape_error(
            op,
            format!(
                "input has {c} channels, weight expects {cg} per group with groups = {g} (and {o} outputs)"
            ),
            "in_channels and out_channels must both divide by groups, and weight.shape[1] = in_channels / groups",
            &[("input", x), ("weight", weight)],
            location,
        ));
    }
    let [x, weight, bias] =
        aligned(op, [("input", Some(x)), ("weight", Some(weight)), ("bias", bias)], location)?;
    let (x, weight) = (expect(x), expect(weight));
    let window = Window::new(op, &x, [kh, kw], options, location)?;
    match crate::autograd::conv2d(&x, &weight, bias.as_ref(), &window.geometry(&x), g) {
        Some(out) => out,
        None => window.composed_conv2d(&x, &weight, bias.as_ref(), g),
    }
}

/// 2-D max pooling over `kernel` windows (stride defaults to the kernel, as in PyTorch); padding
/// counts as -inf.
#[track_caller]
pub fn max_pool2d(x: &Tensor, kernel: [usize; 2], options: Conv2dOptions) -> Result<Tensor> {
    let location = Location::caller();
    if x.rank() != 4 {
        return Err(shape_error(
            "max_pool2d",
            format!("expected input [N, C, H, W], got {}", fmt_shape(x.shape())),
            "add a batch dim to a single image with `x.unsqueeze(0)?`",
            &[("input", x)],
            location,
        ));
    }
    let window = Window::new("max_pool2d", x, kernel, options, location)?;
    match crate::autograd::max_pool2d(x, &window.geometry(x)) {
        Some(pooled) => pooled,
        None => window.composed_max_pool(x),
    }
}

/// Where each output position of a sliding window reads the (padded) input.
struct Window {
    kernel: [usize; 2],
    options: Conv2dOptions,
    padded: [usize; 2],
    out: [usize; 2],
}

impl Window {
    fn new(
        op: &'static str,
        x: &Tensor,
        kernel: [usize; 2],
        options: Conv2dOptions,
        location: Loc,
    ) -> Result<Window> {
        let (h, w) = (x.shape()[2], x.shape()[3]);
        let padded = [h + 2 * options.padding[0], w + 2 * options.padding[1]];
        let mut out = [0; 2];
        for i in 0..2 {
            let span = options.dilation[i] * (kernel[i].max(1) - 1) + 1;
            if options.stride[i] == 0 || options.dilation[i] == 0 || kernel[i] == 0 || span > padded[i] {
                return Err(Error::InvalidArgument {
                    op,
                    detail: format!(
                        "a {}x{} window (stride {:?}, padding {:?}, dilation {:?}) does not fit a {h}x{w} input",
                        kernel[0], kernel[1], options.stride, options.padding, options.dilation
                    ),
                    help:
                        "use a smaller kernel or more padding; stride, dilation and kernel must be at least 1"
                            .to_string(),
                    location,
                });
            }
            out[i] = (padded[i] - span) / options.stride[i] + 1;
        }
        Ok(Window { kernel, options, padded, out })
    }

    fn positions(&self) -> usize {
        self.out[0] * self.out[1]
    }

    fn geometry(&self, x: &Tensor) -> WindowGeometry {
        let s = x.shape();
        WindowGeometry {
            input: [s[0], s[1], s[2], s[3]],
            kernel: self.kernel,
            stride: self.options.stride,
            padding: self.options.padding,
            dilation: self.options.dilation,
            out: self.out,
        }
    }

    /// [`conv2d`] from tensor ops, for every device: the column matrix `[N, C, kh*kw*L]` as one
    /// gather, times the weight `[g, O/g, C/g*kh*kw]`, one product per sample and group.
    #[track_caller]
    fn composed_conv2d(
        &self,
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        groups: usize,
    ) -> Result<Tensor> {
        let (n, o) = (x.shape()[0], weight.shape()[0]);
        let k: usize = weight.shape()[1..].iter().product();
        let cols = self.composed_columns(x, 0.0)?;
        let cols = cols.reshape([n, groups, k, self.positions()])?;
        let out = weight.reshape([groups, o / groups, k])?.matmul(&cols)?; // [N, g, O/g, L]
        let out = out.reshape([n, o, self.out[0], self.out[1]])?;
        match bias {
            Some(b) => out.add(&b.reshape([o, 1, 1])?),
            None => Ok(out),
        }
    }

    /// The maximum of each window of `x`, padding counting as -inf, from tensor ops (for every
    /// device).
    #[track_caller]
    fn composed_max_pool(&self, x: &Tensor) -> Result<Tensor> {
        let (n, c) = (x.shape()[0], x.shape()[1]);
        let cols = self.composed_columns(x, f64::NEG_INFINITY)?;
        let cols = cols.reshape([n, c, self.kernel[0] * self.kernel[1], self.positions()])?;
        cols.max(2, false)?.reshape([n, c, self.out[0], self.out[1]])
    }

    /// [`Window::columns`] from tensor ops, for every device: one gather, so its gradient is one
    /// scatter.
    #[track_caller]
    fn composed_columns(&self, x: &Tensor, pad_value: f64) -> Result<Tensor> {
        let [ph, pw] = self.options.padding;
        let padded = pad2d(x, ph, pw, pad_value)?;
        let (n, c) = (x.shape()[0], x.shape()[1]);
        let [sh, sw] = self.options.stride;
        let [dh, dw] = self.options.dilation;
        let wp = self.padded[1];
        let mut index = Vec::with_capacity(self.kernel[0] * self.kernel[1] * self.positions());
        for ki in 0..self.kernel[0] {
            for kj in 0..self.kernel[1] {
                for oi in 0..self.out[0] {
                    for oj in 0..self.out[1] {
                        index.push(((ki * dh + oi * sh) * wp + kj * dw + oj * sw) as i64);
                    }
                }
            }
        }
        let len = index.len();
        let index = Tensor::from_vec(index, [len], &x.device())?;
        padded.reshape([n, c, self.padded[0] * wp])?.index_select(2, &index)
    }
}

/// `x` (`[N, C, H, W]`) with `ph` rows above and below and `pw` columns left and right of
/// `value`.
#[track_caller]
fn pad2d(x: &Tensor, ph: usize, pw: usize, value: f64) -> Result<Tensor> {
    let mut out = x.clone();
    for (dim, amount) in [(2usize, ph), (3, pw)] {
        if amount == 0 {
            continue;
        }
        let mut shape = out.shape().to_vec();
        shape[dim] = amount;
        let pad = out.new_full(shape, value)?;
        out = Tensor::cat(&[&pad, &out, &pad], dim as isize)?;
    }
    Ok(out)
}

/// Options of [`cross_entropy`] and [`nll_loss`] (PyTorch's keyword arguments).
#[derive(Clone, Debug)]
pub struct ClassLossOptions {
    /// A weight per class (`[C]`, on the logits' device): rare classes can count more.
    pub weight: Option<Tensor>,
    /// Targets equal to this contribute nothing (and do not count in the mean).
    pub ignore_index: i64,
    /// Mixes the one-hot target with the uniform distribution: `(1 - s) * one_hot + s / C`.
    pub label_smoothing: f64,
    pub reduction: Reduction,
}

impl Default for ClassLossOptions {
    fn default() -> Self {
        ClassLossOptions {
            weight: None,
            ignore_index: -100,
            label_smoothing: 0.0,
            reduction: Reduction::Mean,
        }
    }
}

/// Cross-entropy between `logits` and class indices: `logits` is `[N, C]` (or `[C]`, or
/// `[N, C, d..]` with targets `[N, d..]`), `target` i64 class indices. A floating `target` of the
/// logits' shape is read as class probabilities instead.
#[track_caller]
pub fn cross_entropy(logits: &Tensor, target: &Tensor, options: &ClassLossOptions) -> Result<Tensor> {
    let location = Location::caller();
    let class_dim = if logits.rank() == 1 { 0 } else { 1 };
    if logits.rank() == 0 {
        return Err(shape_error(
            "cross_entropy",
            "logits need a class dim, got a 0-dim tensor".to_string(),
            "pass logits of shape [N, C] (or [C] for one sample)",
            &[("logits", logits)],
            location,
        ));
    }
    let [logits, target, weight] = aligned(
        "cross_entropy",
        [("logits", Some(logits)), ("target", Some(target)), ("weight", options.weight.as_ref())],
        location,
    )?;
    let (logits, target) = (expect(logits), expect(target));
    if target.dtype().is_float() {
        return soft_cross_entropy(&logits, &target, class_dim, weight.as_ref(), options, location);
    }
    check_class_target("cross_entropy", &logits, &target, location)?;
    let logp = logits.log_softmax(class_dim as isize)?;
    class_loss("cross_entropy", &logp, &target, weight.as_ref(), options, location)
}

/// Negative log-likelihood of class indices under log-probabilities `log_probs` (the output of
/// `log_softmax`); shapes as in [`cross_entropy`].
#[track_caller]
pub fn nll_loss(log_probs: &Tensor, target: &Tensor, options: &ClassLossOptions) -> Result<Tensor> {
    let location = Location::caller();
    let [log_probs, target, weight] = aligned(
        "nll_loss",
        [("log_probs", Some(log_probs)), ("target", Some(target)), ("weight", options.weight.as_ref())],
        location,
    )?;
    class_loss("nll_loss", &expect(log_probs), &expect(target), weight.as_ref(), options, location)
}

/// The mean (or sum, or each) of `(input - target)^2`.
#[track_caller]
pub fn mse_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    let location = Location::caller();
    if input.shape() != target.shape() {
        return Err(shape_error(
            "mse_loss",
            format!("input {} and target {} differ", fmt_shape(input.shape()), fmt_shape(target.shape())),
            "the target must have the prediction's shape (PyTorch would broadcast and warn; devcheck refuses)",
            &[("input", input), ("target", target)],
            location,
        ));
    }
    let [input, target] = aligned("mse_loss", [("input", Some(input)), ("target", Some(target))], location)?;
    let diff = expect(input).sub(&expect(target))?;
    reduce(&diff.mul(&diff)?, reduction)
}

#[track_caller]
fn reduce(t: &Tensor, reduction: Reduction) -> Result<Tensor> {
    match reduction {
        Reduction::Mean => t.mean_all(),
        Reduction::Sum => t.sum_all(),
        Reduction::None => Ok(t.clone()),
    }
}

/// Class-index targets must be i64 with the input's shape minus the class dim (dim 1, or the
/// only dim of a single sample).
fn check_class_target(op: &'static str, input: &Tensor, target: &Tensor, location: Loc) -> Result<()> {
    if target.dtype() != DType::I64 {
        return Err(Error::DTypeMismatch {
            op,
            detail: format!("class targets must be i64, got {}", target.dtype()),
            help: "cast the labels: `target.to_dtype(DType::I64)?`; for class probabilities pass a floating \
                   target of the logits' shape to `cross_entropy`"
                .to_string(),
            operands: vec![target.operand("target")],
            location,
        });
    }
    let mut expected = input.shape().to_vec();
    expected.remove(if input.rank() == 1 { 0 } else { 1 });
    if target.shape() == expected {
        return Ok(());
    }
    Err(shape_error(
        op,
        format!(
            "{} {} need targets of shape {}, got {}",
            if op == "cross_entropy" { "logits" } else { "log-probabilities" },
            fmt_shape(input.shape()),
            fmt_shape(&expected),
            fmt_shape(target.shape())
        ),
        "targets hold one class index per sample: [N] for [N, C] inputs",
        &[("input", input), ("target", target)],
        location,
    ))
}

/// `logp` with the class dim last and every other dim flattened into rows (`[rows, C]`), the
/// target flattened to `[rows]`, and the per-sample shape. The caller checked the shapes.
#[track_caller]
fn rows_and_classes(logp: &Tensor, target: &Tensor) -> Result<(Tensor, Tensor, Vec<usize>)> {
    match logp.rank() {
        1 => Ok((logp.unsqueeze(0)?, target.reshape([1])?, vec![])),
        2 => Ok((logp.clone(), target.clone(), target.shape().to_vec())),
        r => {
            let mut order: Vec<usize> = (0..r).filter(|&d| d != 1).collect();
            order.push(1);
            let c = logp.shape()[1];
            let rows = logp.permute(order)?.reshape([target.numel(), c])?;
            Ok((rows, target.reshape([target.numel()])?, target.shape().to_vec()))
        }
    }
}

/// The class-index loss of `logp` (log-probabilities), with the class `weight` the caller aligned
/// with it. `#[track_caller]`: every step is located at the user's call.
#[track_caller]
fn class_loss(
    op: &'static str,
    logp: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    options: &ClassLossOptions,
    location: Loc,
) -> Result<Tensor> {
    check_class_target(op, logp, target, location)?;
    let (logp, target, sample_shape) = rows_and_classes(logp, target)?;
    let classes = logp.shape()[1];
    if let Some(w) = weight
        && (w.rank() != 1 || w.shape()[0] != classes)
    {
        return Err(shape_error(
            op,
            format!("class weights {} do not match {classes} classes", fmt_shape(w.shape())),
            "pass one weight per class, shape [C]",
            &[("weight", w)],
            location,
        ));
    }
    if !(0.0..=1.0).contains(&options.label_smoothing) {
        return Err(Error::InvalidArgument {
            op,
            detail: format!("label_smoothing must be in [0, 1], got {}", options.label_smoothing),
            help: "0.1 is a common choice; 0 turns smoothing off".to_string(),
            location,
        });
    }
    check_targets(op, &target, classes, options.ignore_index, location)?;

    let valid = target.cmp_scalar(CmpOp::Ne, options.ignore_index as f64)?;
    // Ignored rows point at class 0 (their loss is weighted 0): no tensor is made for it, so
    // nothing here can be on another device than the user's target.
    let safe_target = target.mul(&valid.to_dtype(DType::I64)?)?;
    let valid = valid.to_dtype(logp.dtype())?;
    // Weight of each row's target class, 0 for ignored rows.
    let row_weight = match weight {
        Some(w) => w.index_select(0, &safe_target)?.mul(&valid)?,
        None => valid.clone(),
    };
    let picked = logp.gather(1, &safe_target.unsqueeze(1)?)?.squeeze(1)?;
    let mut per_row = picked.mul(&row_weight)?.neg()?;
    let s = options.label_smoothing;
    if s > 0.0 {
        let all = match weight {
            Some(w) => logp.mul(&w.unsqueeze(0)?)?,
            None => logp.clone(),
        };
        let smooth = all.sum(1, false)?.neg()?.mul(&valid)?;
        per_row = per_row.mul_scalar(1.0 - s)?.add(&smooth.mul_scalar(s / classes as f64)?)?;
    }
    match options.reduction {
        Reduction::Mean => per_row.sum_all()?.div(&row_weight.sum_all()?),
        Reduction::Sum => per_row.sum_all(),
        Reduction::None => per_row.reshape(sample_shape),
    }
}

/// Cross-entropy with class probabilities as the target.
#[track_caller]
fn soft_cross_entropy(
    logits: &Tensor,
    target: &Tensor,
    class_dim: usize,
    weight: Option<&Tensor>,
    options: &ClassLossOptions,
    location: Loc,
) -> Result<Tensor> {
    if target.shape() != logits.shape() {
        return Err(shape_error(
            "cross_entropy",
            format!(
                "a probability target must have the logits' shape {}, got {}",
                fmt_shape(logits.shape()),
                fmt_shape(target.shape())
            ),
            "for class indices pass an i64 target of shape [N]: `labels.to_dtype(DType::I64)?`",
            &[("logits", logits), ("target", target)],
            location,
        ));
    }
    let classes = logits.shape()[class_dim];
    let s = options.label_smoothing;
    let target =
        if s > 0.0 { target.mul_scalar(1.0 - s)?.add_scalar(s / classes as f64)? } else { target.clone() };
    let mut terms = logits.log_softmax(class_dim as isize)?.mul(&target)?;
    if let Some(w) = weight {
        let mut shape = vec![1; logits.rank()];
        shape[class_dim] = classes;
        terms = terms.mul(&w.reshape(shape)?)?;
    }
    let per_sample = terms.sum(class_dim as isize, false)?.neg()?;
    reduce(&per_sample, options.reduction)
}

/// Every target is a class index or the ignore index. Read only when the targets are on the host
/// (reading them from an accelerator would stall it every step).
#[track_caller]
fn check_targets(
    op: &'static str,
    target: &Tensor,
    classes: usize,
    ignore: i64,
    location: Loc,
) -> Result<()> {
    if target.device() != Device::Cpu || target.is_fake() || crate::fake::is_active() {
        return Ok(());
    }
    let values: Vec<i64> = target.to_vec()?;
    if let Some(bad) = values.iter().find(|&&t| t != ignore && !(0..classes as i64).contains(&t)) {
        return Err(Error::InvalidArgument {
            op,
            detail: format!("target {bad} is out of range for {classes} classes"),
            help: format!(
                "class indices run from 0 to {}; check the label encoding or the layer's output size{}",
                classes.saturating_sub(1),
                if ignore == -100 { String::new() } else { format!(" ({ignore} is the ignore index)") }
            ),
            location,
        });
    }
    Ok(())
}

fn shape_error(
    op: &'static str,
    detail: String,
    help: &str,
    operands: &[(&str, &Tensor)],
    location: Loc,
) -> Error {
    Error::ShapeMismatch {
        op,
        detail,
        help: help.to_string(),
        operands: operands.iter().map(|(role, t)| t.operand(*role)).collect(),
        location,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// `[N, C, H, W]` values with many ties (a few distinct small integers) or spread out.
    fn input(shape: [usize; 4], ties: bool, dtype: DType) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n)
            .map(|i| if ties { ((i * 7) % 5) as f64 - 2.0 } else { ((i * 37) % 101) as f64 / 13.0 - 3.5 })
            .collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap().to_dtype(dtype).unwrap()
    }

    /// The values of `f(x)` and the gradient of `sum(f(x) * w)` with respect to `x`.
    fn value_and_grad(x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> (Vec<f64>, Vec<f64>) {
        let x = x.detach().with_requires_grad().unwrap();
        let y = f(&x).unwrap();
        let w: Vec<f64> = (0..y.numel()).map(|i| ((i * 11) % 17) as f64 / 4.0 - 2.0).collect();
        let w = Tensor::from_vec(w, y.shape(), &Device::Cpu).unwrap().to_dtype(y.dtype()).unwrap();
        y.backward_with_grad(&w).unwrap();
        let f64s = |t: &Tensor| t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        (f64s(&y), f64s(&x.grad().unwrap()))
    }

    /// Host max pooling against the composed gather path: the same values and gradients, bit for
    /// bit (both visit each window in the same order).
    fn pooling_same_as_composed(
        shape: [usize; 4],
        kernel: [usize; 2],
        options: Conv2dOptions,
        permuted: bool,
    ) {
        let [n, c, h, w] = shape;
        for dtype in [DType::F64, DType::F32, DType::BF16] {
            for ties in [false, true] {
                let mut x = input(shape, ties, dtype);
                if permuted {
                    // The same shape, read through strides that are not contiguous ones.
                    x = input([n, w, h, c], ties, dtype).permute([0, 3, 2, 1]).unwrap();
                }
                let window = Window::new("test", &x, kernel, options, Location::caller()).unwrap();
                assert!(crate::autograd::max_pool2d(&x, &window.geometry(&x)).is_some());
                let case =
                    format!("{shape:?} {kernel:?} {options:?} {dtype:?} ties {ties} permuted {permuted}");
                let fused = value_and_grad(&x, |x| max_pool2d(x, kernel, options));
                let composed = value_and_grad(&x, |x| window.composed_max_pool(x));
                assert_eq!(fused, composed, "max pool of {case}");
            }
            // Rows broadcast along W: a zero stride.
            let x = input([n, c, h, 1], false, dtype).expand([n, c, h, w]).unwrap();
            let window = Window::new("test", &x, kernel, options, Location::caller()).unwrap();
            let case = format!("{shape:?} {kernel:?} {options:?} {dtype:?} broadcast");
            let fused = value_and_grad(&x, |x| max_pool2d(x, kernel, options));
            assert_eq!(fused, value_and_grad(&x, |x| window.composed_max_pool(x)), "max pool of {case}");
        }
    }

    /// The values of a convolution and the gradients of `sum(out * w)` with respect to its input,
    /// weight and bias (empty where there is none).
    type ConvRun = [Vec<f64>; 4];

    fn conv_run(
        x: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        f: impl Fn(&Tensor, &Tensor, Option<&Tensor>) -> Result<Tensor>,
    ) -> ConvRun {
        let leaf = |t: &Tensor| t.detach().with_requires_grad().unwrap();
        let (x, weight, bias) = (leaf(x), leaf(weight), bias.map(leaf));
        let y = f(&x, &weight, bias.as_ref()).unwrap();
        let w: Vec<f64> = (0..y.numel()).map(|i| ((i * 11) % 17) as f64 / 4.0 - 2.0).collect();
        let w = Tensor::from_vec(w, y.shape(), &Device::Cpu).unwrap().to_dtype(y.dtype()).unwrap();
        y.backward_with_grad(&w).unwrap();
        let f64s = |t: &Tensor| t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let grad = |t: &Tensor| f64s(&t.grad().unwrap());
        [f64s(&y), grad(&x), grad(&weight), bias.as_ref().map(grad).unwrap_or_default()]
    }

    /// The host convolution against the composed path (one gather, one product per sample): the
    /// same values and gradients, up to the order of the sums, for f64 and f32, contiguous,
    /// permuted and broadcast inputs, with and without a bias.
    fn conv_same_as_composed(
        shape: [usize; 4],
        weight_shape: [usize; 4],
        options: Conv2dOptions,
        permuted: bool,
    ) {
        let [n, c, h, w] = shape;
        for (dtype, tolerance) in [(DType::F64, 1e-12), (DType::F32, 1e-5)] {
            let plain = input(shape, false, dtype);
            let permuted_x = input([n, w, h, c], false, dtype).permute([0, 3, 2, 1]).unwrap();
            let broadcast = input([n, c, h, 1], false, dtype).expand([n, c, h, w]).unwrap();
            let inputs = [("contiguous", plain), ("permuted", permuted_x), ("broadcast", broadcast)];
            for (layout, x) in inputs.iter().filter(|(name, _)| permuted || *name == "contiguous") {
                let weight = input(weight_shape, false, dtype).mul_scalar(0.5).unwrap();
                let bias = input([1, 1, 1, weight_shape[0]], true, dtype).reshape([weight_shape[0]]).unwrap();
                let window =
                    Window::new("test", x, [weight_shape[2], weight_shape[3]], options, Location::caller())
                        .unwrap();
                for bias in [None, Some(&bias)] {
                    let case = format!(
                        "{shape:?} {weight_shape:?} {options:?} {dtype:?} {layout} bias {}",
                        bias.is_some()
                    );
                    let geometry = window.geometry(x);
                    assert!(crate::autograd::conv2d(x, &weight, bias, &geometry, options.groups).is_some());
                    let fused = conv_run(x, &weight, bias, |x, w, b| conv2d(x, w, b, options));
                    let composed =
                        conv_run(x, &weight, bias, |x, w, b| window.composed_conv2d(x, w, b, options.groups));
                    for (part, (f, c)) in ["values", "input grad", "weight grad", "bias grad"]
                        .iter()
                        .zip(fused.iter().zip(&composed))
                    {
                        assert_eq!(f.len(), c.len(), "{part} of {case}");
                        let scale = c.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                        for (i, (a, b)) in f.iter().zip(c).enumerate() {
                            assert!(
                                (a - b).abs() <= tolerance * scale,
                                "{part} of {case}, element {i}: {a} vs {b}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn host_windows_match_the_composed_path() {
        let default = Conv2dOptions::default();
        // The benchmark CNN's geometry, then odd and overlapping ones.
        pooling_same_as_composed([2, 3, 28, 28], [3, 3], default, false);
        pooling_same_as_composed([2, 3, 26, 26], [2, 2], Conv2dOptions { stride: [2, 2], ..default }, false);
        pooling_same_as_composed([1, 1, 5, 7], [3, 2], default, true);
        pooling_same_as_composed(
            [2, 2, 7, 9],
            [3, 3],
            Conv2dOptions { stride: [2, 1], padding: [2, 1], dilation: [2, 3], groups: 1 },
            true,
        );
        pooling_same_as_composed([1, 2, 4, 4], [2, 2], Conv2dOptions { padding: [1, 1], ..default }, false);
    }

    #[test]
    fn host_convolution_matches_the_composed_path() {
        let default = Conv2dOptions::default();
        // The benchmark CNN's two layers (a smaller batch), then odd geometries.
        conv_same_as_composed([3, 1, 28, 28], [16, 1, 3, 3], default, false);
        conv_same_as_composed([3, 16, 13, 13], [32, 16, 3, 3], default, true);
        conv_same_as_composed([1, 1, 5, 7], [2, 1, 3, 2], default, true);
        conv_same_as_composed(
            [2, 4, 7, 9],
            [6, 2, 3, 3],
            Conv2dOptions { stride: [2, 1], padding: [2, 1], dilation: [2, 3], groups: 2 },
            true,
        );
        conv_same_as_composed(
            [2, 6, 5, 4],
            [3, 2, 2, 2],
            Conv2dOptions { groups: 3, padding: [1, 0], ..default },
            true,
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn host_windows_match_the_composed_path_for_any_geometry(
            n in 1usize..3, c in 1usize..3, h in 1usize..8, w in 1usize..8,
            kernel in [1usize..4, 1usize..4], stride in [1usize..4, 1usize..4],
            padding in [0usize..3, 0usize..3], dilation in [1usize..3, 1usize..3],
            permuted in any::<bool>(),
        ) {
            let options = Conv2dOptions { stride, padding, dilation, groups: 1 };
            let fits = (0..2).all(|i| dilation[i] * (kernel[i] - 1) < [h, w][i] + 2 * padding[i]);
            prop_assume!(fits);
            pooling_same_as_composed([n, c, h, w], kernel, options, permuted);
        }

        #[test]
        fn host_convolution_matches_the_composed_path_for_any_geometry(
            n in 1usize..3, per_group in [1usize..3, 1usize..3], groups in 1usize..4,
            h in 1usize..8, w in 1usize..8,
            kernel in [1usize..4, 1usize..4], stride in [1usize..4, 1usize..4],
            padding in [0usize..3, 0usize..3], dilation in [1usize..3, 1usize..3],
            permuted in any::<bool>(),
        ) {
            let options = Conv2dOptions { stride, padding, dilation, groups };
            let fits = (0..2).all(|i| dilation[i] * (kernel[i] - 1) < [h, w][i] + 2 * padding[i]);
            prop_assume!(fits);
            let [c, o] = per_group.map(|k| k * groups);
            conv_same_as_composed([n, c, h, w], [o, per_group[0], kernel[0], kernel[1]], options, permuted);
        }
    }
}
