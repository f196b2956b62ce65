//! Fused backward ops (and the fused layer norm). On the host (and for fake tensors) each runs its
//! CPU kernel (`src/backend/cpu/grad.rs`, `norm.rs`, `reduce.rs`), one pass over the data instead
//! of a chain of allocating ops; on other devices each falls back to the same math written with
//! tensor ops, so autograd works wherever the forward ops do. This file decides which, and records
//! the result; the arithmetic is in the backend.

use std::panic::Location;

use crate::backend::CpuStorage;
use crate::backend::fake;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;
use crate::tensor::{CmpOp, Storage, Tensor, compute, host_only};

use super::GradFn;

/// Whether the fused kernels can run: every operand's data is on the host, or there is no data.
fn host_or_fake(tensors: &[&Tensor]) -> bool {
    fake::is_active() || tensors.iter().all(|t| t.device().is_cpu() || t.is_fake())
}

/// `g` where `x > 0`, else 0. `g` is the gradient the autograd engine hands over: where nothing
/// else holds its buffer, the result is written over it (one pass reading `x`), instead of into
/// a fresh buffer (which also reads each of its cache lines from memory before writing it).
pub(crate) fn relu_backward(x: &Tensor, g: Tensor) -> Result<Tensor> {
    if !host_or_fake(&[x, &g]) {
        return g.mul(&x.cmp_scalar(CmpOp::Gt, 0.0)?.to_dtype(g.dtype())?);
    }
    let location = Location::caller();
    let in_place = !fake::is_active()
        && x.is_contiguous()
        && x.shape() == g.shape()
        && matches!(*x.storage(), Storage::Cpu(_));
    if let Some(mut elements) = in_place.then(|| g.take_sole_host_elements()).flatten() {
        let written = {
            let guard = x.storage();
            let Storage::Cpu(xs) = &*guard else { unreachable!("checked above: `x` is in host memory") };
            // `x` is contiguous with `g`'s shape: its elements are `g.numel()` from its offset.
            let run = x.layout().offset..x.layout().offset + g.numel();
            elements.relu_backward_in_place(xs, run);
            Storage::Cpu(elements)
        };
        return Ok(g.derived(written, g.shape(), g.dtype(), "relu_backward", location));
    }
    let storage = compute(
        "relu_backward",
        location,
        &[x, &g],
        (g.shape(), g.dtype()),
        |s| s[0].relu_backward(x.layout(), s[1], g.layout()),
        host_only("relu_backward"),
    )?;
    Ok(g.derived(storage, g.shape(), g.dtype(), "relu_backward", location))
}

/// The gradient of `softmax`/`log_softmax` along `dim` from its output `y`:
/// softmax: `y * (g - sum(g * y))`; log-softmax: `g - exp(y) * sum(g)`.
pub(crate) fn softmax_backward(y: &Tensor, g: &Tensor, dim: usize, log: bool) -> Result<Tensor> {
    let last = y.rank().saturating_sub(1);
    let fused = dim == last && y.is_contiguous() && g.is_contiguous() && host_or_fake(&[y, g]);
    if !fused {
        let d = dim as isize;
        return if log {
            g.sub(&y.exp()?.mul(&g.sum(d, true)?)?)
        } else {
            y.mul(&g.sub(&g.mul(y)?.sum(d, true)?)?)
        };
    }
    let row = y.shape().get(dim).copied().unwrap_or(1);
    let storage = compute(
        "softmax_backward",
        Location::caller(),
        &[y, g],
        (g.shape(), g.dtype()),
        |s| s[0].softmax_backward(y.layout(), s[1], g.layout(), row, log),
        host_only("softmax_backward"),
    )?;
    let op = if log { "log_softmax_backward" } else { "softmax_backward" };
    Ok(g.derived(storage, g.shape(), g.dtype(), op, Location::caller()))
}

/// `g.sum(dims, keepdim = true)`, with a fast path for a contiguous f32/f64 tensor whose summed
/// dims are some leading and some trailing ones: a bias gradient, `[N, F]` summed over the batch or
/// `[N, C, H, W]` summed over all but the channels.
pub(crate) fn sum_keepdim(g: &Tensor, dims: &[isize]) -> Result<Tensor> {
    let r = g.rank();
    let lead = dims.iter().enumerate().take_while(|&(i, &d)| d == i as isize).count();
    let trail = dims.len() - lead;
    let split = dims[lead..].iter().enumerate().all(|(i, &d)| d == (r - trail + i) as isize);
    let fast =
        split && g.is_contiguous() && matches!(g.dtype(), DType::F32 | DType::F64) && host_or_fake(&[g]);
    if !fast {
        return g.sum(dims.to_vec(), true);
    }
    let outer: usize = g.shape()[..lead].iter().product();
    let kept: usize = g.shape()[lead..r - trail].iter().product();
    let inner: usize = g.shape()[r - trail..].iter().product();
    let mut shape = g.shape().to_vec();
    shape[..lead].fill(1);
    shape[r - trail..].fill(1);
    let storage = compute(
        "sum",
        Location::caller(),
        &[g],
        (&shape, g.dtype()),
        |s| s[0].sum_outer_inner(g.layout(), (outer, kept, inner)),
        host_only("sum"),
    )?;
    Ok(g.derived(storage, &shape, g.dtype(), "sum", Location::caller()))
}

/// Zeros of `shape` with `g` at `start` along `dim`: the gradient of `narrow`. On the host it is
/// one pass that writes each element once; elsewhere (other devices, fake tensors) `g` is
/// concatenated between zero pads.
#[track_caller]
pub(crate) fn narrow_backward(shape: &[usize], dim: usize, start: usize, g: &Tensor) -> Result<Tensor> {
    let host = !fake::is_active() && g.device().is_cpu() && !g.is_fake();
    if !host {
        let after = shape[dim] - start - g.shape()[dim];
        let pad = |n: usize| {
            let mut s = shape.to_vec();
            s[dim] = n;
            g.new_zeros(s)
        };
        let mut parts = Vec::with_capacity(3);
        if start > 0 {
            parts.push(pad(start)?);
        }
        parts.push(g.clone());
        if after > 0 {
            parts.push(pad(after)?);
        }
        let refs: Vec<&Tensor> = parts.iter().collect();
        return Tensor::cat(&refs, dim as isize);
    }
    let storage = compute(
        "narrow_backward",
        Location::caller(),
        &[g],
        (shape, g.dtype()),
        |s| s[0].narrow_backward(g.layout(), shape, dim, start),
        host_only("narrow_backward"),
    )?;
    Ok(g.derived(storage, shape, g.dtype(), "narrow_backward", Location::caller()))
}

/// Zeros of `shape` with `g` added at `index` along `dim` (the gradient of `index_select`).
pub(crate) fn index_add(shape: &[usize], dim: usize, index: &Tensor, g: &Tensor) -> Result<Tensor> {
    if !host_or_fake(&[index, g]) {
        // One-hot matrix product: [size, n] @ g with `dim` moved to the front and the rest flattened.
        let size = shape[dim];
        let moved = g.transpose(0, dim as isize)?;
        let rest: Vec<usize> = moved.shape()[1..].to_vec();
        let flat = moved.reshape([index.numel(), rest.iter().product()])?;
        let classes = Tensor::arange(0.0, size as f64, 1.0, (DType::I64, &g.device()))?;
        let one_hot = classes.unsqueeze(1)?.eq(&index.unsqueeze(0)?)?.to_dtype(g.dtype())?;
        let mut out_shape = vec![size];
        out_shape.extend(rest);
        return one_hot.matmul(&flat)?.reshape(out_shape)?.transpose(0, dim as isize);
    }
    let storage = compute(
        "index_add",
        Location::caller(),
        &[index, g],
        (shape, g.dtype()),
        |s| s[1].index_add(g.layout(), s[0], index.layout(), shape, dim),
        host_only("index_add"),
    )?;
    Ok(g.derived(storage, shape, g.dtype(), "index_add", Location::caller()))
}

/// Zeros of `shape` with `g[pos]` added at `pos` with its `dim` coordinate replaced by
/// `index[pos]` (the gradient of `gather`).
pub(crate) fn scatter_add(shape: &[usize], dim: usize, index: &Tensor, g: &Tensor) -> Result<Tensor> {
    if !host_or_fake(&[index, g]) {
        return scatter_add_composite(shape, dim, index, g);
    }
    let storage = compute(
        "scatter_add",
        Location::caller(),
        &[index, g],
        (shape, g.dtype()),
        |s| s[1].scatter_add(g.layout(), s[0], index.layout(), shape, dim),
        host_only("scatter_add"),
    )?;
    Ok(g.derived(storage, shape, g.dtype(), "scatter_add", Location::caller()))
}

/// `scatter_add` with tensor ops: a one-hot of the index along a new last dim, weighted by `g`,
/// summed over `dim`, moved back into place and zero-padded where the index was smaller.
fn scatter_add_composite(shape: &[usize], dim: usize, index: &Tensor, g: &Tensor) -> Result<Tensor> {
    let size = shape[dim];
    let classes = Tensor::arange(0.0, size as f64, 1.0, (DType::I64, &g.device()))?;
    let one_hot = index.unsqueeze(-1)?.eq(&classes)?.to_dtype(g.dtype())?;
    let summed = one_hot.mul(&g.unsqueeze(-1)?)?.sum(dim as isize, false)?;
    // `summed` has the index's dims without `dim`, then `size`: move `size` back to `dim`.
    let r = summed.rank();
    let mut order: Vec<usize> = (0..r - 1).collect();
    order.insert(dim, r - 1);
    let mut out = summed.permute(order)?;
    for (d, &want) in shape.iter().enumerate() {
        let have = out.shape()[d];
        if have < want {
            let mut pad_shape = out.shape().to_vec();
            pad_shape[d] = want - have;
            let pad = out.new_zeros(pad_shape)?;
            out = Tensor::cat(&[&out, &pad], d as isize)?;
        }
    }
    Ok(out)
}

/// The gradient of GELU from its input `x` in one pass on the host: `g (Φ(x) + x φ(x))` for the
/// exact form, `g (s + 2 x s (1 - s) k (1 + 3 c x²))` with `s = sigmoid(2u)`,
/// `u = k (x + c x³)`, `k = √(2/π)` for the tanh form. `None` where the data is on another
/// device: the caller composes the same math from tensor ops.
pub(crate) fn gelu_backward(x: &Tensor, g: &Tensor, tanh: bool) -> Option<Result<Tensor>> {
    if !host_or_fake(&[x, g]) || x.dtype() != g.dtype() || x.shape() != g.shape() {
        return None;
    }
    let storage = compute(
        "gelu_backward",
        Location::caller(),
        &[x, g],
        (g.shape(), g.dtype()),
        |s| s[0].gelu_backward(x.layout(), s[1], g.layout(), tanh),
        host_only("gelu_backward"),
    );
    Some(storage.map(|s| g.derived(s, g.shape(), g.dtype(), "gelu_backward", Location::caller())))
}

/// What a fused layer norm keeps for its backward pass.
pub(crate) struct LayerNormSaved {
    input: Tensor,
    weight: Option<Tensor>,
    has_bias: bool,
    /// The normalised dims, which the weight and bias have.
    normalized: Vec<usize>,
    /// Per row of the normalised dims: the mean and `1 / sqrt(var + eps)`, each `[rows]`.
    mean: Tensor,
    rstd: Tensor,
}

/// `layer_norm` over the trailing dims `normalized` of `x` as one fused host kernel, recorded
/// as one `LayerNormBackward` node whose backward is one fused kernel too. `None` where the
/// caller must compose it from tensor ops: an operand off the host, a fake scope (dry runs record
/// the composed ops), f16/bf16, mixed dtypes, a weight or bias not of exactly `normalized`'s
/// shape, or an empty row.
pub(crate) fn layer_norm(
    x: &Tensor,
    normalized: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
    location: &'static Location<'static>,
) -> Option<Result<Tensor>> {
    let mut operands = vec![x];
    operands.extend(weight);
    operands.extend(bias);
    let on_host = !fake::is_active() && operands.iter().all(|t| t.device().is_cpu() && !t.is_fake());
    let width: usize = normalized.iter().product();
    let fits = operands.iter().all(|t| t.dtype() == x.dtype())
        && matches!(x.dtype(), DType::F32 | DType::F64)
        && operands[1..].iter().all(|t| t.shape() == normalized)
        && width > 0;
    if !on_host || !fits {
        return None;
    }
    let rows = x.numel() / width;
    let mut stats = None;
    let storage = compute(
        "layer_norm",
        location,
        &operands,
        (x.shape(), x.dtype()),
        |s| {
            let layouts: Vec<&Layout> = operands.iter().map(|t| t.layout()).collect();
            let affine = (weight.is_some(), bias.is_some());
            let (out, mean, rstd) = CpuStorage::layer_norm(s, &layouts, affine, width, eps);
            stats = Some((mean, rstd));
            out
        },
        host_only("layer_norm"),
    );
    let storage = match storage {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    let out = x.derived(storage, x.shape(), x.dtype(), "layer_norm", location);
    let Some((mean, rstd)) = stats else {
        unreachable!("on the host with no fake scope, `compute` runs the CPU kernel")
    };
    let stat = |s: CpuStorage| x.derived(Storage::Cpu(s), &[rows], x.dtype(), "layer_norm", location);
    Some(Ok(super::record(out, &operands, |_| {
        GradFn::LayerNorm(LayerNormSaved {
            input: x.clone(),
            weight: weight.cloned(),
            has_bias: bias.is_some(),
            normalized: normalized.to_vec(),
            mean: stat(mean),
            rstd: stat(rstd),
        })
    })))
}

/// The gradients of a fused layer norm, in the order of its edges (input, weight, bias where
/// given), each computed only where `want` asks for it.
pub(crate) fn layer_norm_backward(
    saved: &LayerNormSaved,
    g: &Tensor,
    want: impl Fn(usize) -> bool,
) -> Result<Vec<Option<Tensor>>> {
    let LayerNormSaved { input: x, weight, has_bias, normalized, mean, rstd } = saved;
    let want_weight = weight.is_some() && want(1);
    let want_bias = *has_bias && want(1 + usize::from(weight.is_some()));
    let want = [want(0), want_weight, want_bias];
    let width = x.numel().checked_div(mean.numel()).unwrap_or(0);
    let mut operands = vec![x, g, mean, rstd];
    operands.extend(weight);
    let input_shape: &[usize] = if want[0] { x.shape() } else { &[0] };
    let mut params = None;
    let storage = compute(
        "layer_norm_backward",
        Location::caller(),
        &operands,
        (input_shape, g.dtype()),
        |s| {
            let layouts: Vec<&Layout> = operands.iter().map(|t| t.layout()).collect();
            let [input, weight, bias] = CpuStorage::layer_norm_backward(s, &layouts, width, want);
            params = Some((weight, bias));
            input
        },
        host_only("layer_norm_backward"),
    )?;
    // Without the CPU kernel having run (a fake scope around `backward`), every gradient is fake.
    let (weight_storage, bias_storage) = match params {
        Some((w, b)) => (Storage::Cpu(w), Storage::Cpu(b)),
        None => (Storage::Fake, Storage::Fake),
    };
    let grad = |storage: Storage, shape: &[usize]| {
        g.derived(storage, shape, g.dtype(), "layer_norm_backward", Location::caller())
    };
    let mut grads = vec![want[0].then(|| grad(storage, x.shape()))];
    if weight.is_some() {
        grads.push(want[1].then(|| grad(weight_storage, normalized)));
    }
    if *has_bias {
        grads.push(want[2].then(|| grad(bias_storage, normalized)));
    }
    Ok(grads)
}
