//! Fused backward kernels. On the host (and for fake tensors) each runs as one pass over the data
//! instead of a chain of allocating ops; on other devices each falls back to the same math written
//! with tensor ops, so autograd works wherever the forward ops do.

use std::panic::Location;

use crate::backend::cpu::{self, CpuStorage, Float};
use crate::backend::fake;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;
use crate::tensor::{CmpOp, Tensor, compute, host_only};

/// Whether the fused kernels can run: every operand's data is on the host, or there is no data.
fn host_or_fake(tensors: &[&Tensor]) -> bool {
    fake::is_active() || tensors.iter().all(|t| t.device().is_cpu() || t.is_fake())
}

/// `g` where `x > 0`, else 0.
pub(crate) fn relu_backward(x: &Tensor, g: &Tensor) -> Result<Tensor> {
    if !host_or_fake(&[x, g]) {
        return g.mul(&x.cmp_scalar(CmpOp::Gt, 0.0)?.to_dtype(g.dtype())?);
    }
    let storage = compute(
        "relu_backward",
        Location::caller(),
        &[x, g],
        (g.shape(), g.dtype()),
        |s| {
            fn run<T: Float>(x: &[T], lx: &Layout, g: &[T], lg: &Layout) -> CpuStorage {
                CpuStorage::from_vec(cpu::binary_map(x, lx, g, lg, &lg.shape, |x: T, g: T| {
                    if x > T::ZERO { g } else { T::ZERO }
                }))
            }
            let (lx, lg) = (x.layout(), g.layout());
            match (s[0], s[1]) {
                (CpuStorage::F32(a), CpuStorage::F32(b)) => run(a, lx, b, lg),
                (CpuStorage::F64(a), CpuStorage::F64(b)) => run(a, lx, b, lg),
                (CpuStorage::F16(a), CpuStorage::F16(b)) => run(a, lx, b, lg),
                (CpuStorage::BF16(a), CpuStorage::BF16(b)) => run(a, lx, b, lg),
                _ => unreachable!("relu's gradient is recorded for floating tensors of one dtype only"),
            }
        },
        host_only("relu_backward"),
    )?;
    Ok(g.derived(storage, g.shape(), g.dtype(), "relu_backward", Location::caller()))
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
        |s| {
            let (ly, lg) = (y.layout(), g.layout());
            macro_rules! arm {
                ($a:expr, $b:expr) => {{
                    let y = &$a[ly.offset..ly.offset + ly.numel()];
                    let g = &$b[lg.offset..lg.offset + lg.numel()];
                    CpuStorage::from_vec(cpu::softmax_backward_rows(y, g, row, log))
                }};
            }
            match (s[0], s[1]) {
                (CpuStorage::F32(a), CpuStorage::F32(b)) => arm!(a, b),
                (CpuStorage::F64(a), CpuStorage::F64(b)) => arm!(a, b),
                (CpuStorage::F16(a), CpuStorage::F16(b)) => arm!(a, b),
                (CpuStorage::BF16(a), CpuStorage::BF16(b)) => arm!(a, b),
                _ => unreachable!("softmax's gradient is recorded for floating tensors of one dtype only"),
            }
        },
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
        |s| {
            fn run<T: Float>(v: &[T], outer: usize, kept: usize, inner: usize) -> CpuStorage {
                let mut out = vec![T::ZERO; kept];
                if kept == 0 || inner == 0 {
                    return CpuStorage::from_vec(out);
                }
                for block in v.chunks_exact(kept * inner).take(outer) {
                    if inner == 1 {
                        for (o, &x) in out.iter_mut().zip(block) {
                            *o = o.add(x);
                        }
                    } else {
                        for (o, row) in out.iter_mut().zip(block.chunks_exact(inner)) {
                            *o = o.add(sum_lanes(row));
                        }
                    }
                }
                CpuStorage::from_vec(out)
            }
            let l = g.layout();
            match s[0] {
                CpuStorage::F32(v) => run(&v[l.offset..l.offset + l.numel()], outer, kept, inner),
                CpuStorage::F64(v) => run(&v[l.offset..l.offset + l.numel()], outer, kept, inner),
                _ => unreachable!("fast path taken for f32/f64 only"),
            }
        },
        host_only("sum"),
    )?;
    Ok(g.derived(storage, &shape, g.dtype(), "sum", Location::caller()))
}

/// The sum of `v` in 8 interleaved partial sums, which the compiler keeps in vector registers.
fn sum_lanes<T: Float>(v: &[T]) -> T {
    let mut lanes = [T::ZERO; 8];
    let chunks = v.chunks_exact(8);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (l, &x) in lanes.iter_mut().zip(chunk) {
            *l = l.add(x);
        }
    }
    let total = lanes.iter().fold(T::ZERO, |a, &b| a.add(b));
    tail.iter().fold(total, |a, &b| a.add(b))
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
        |s| {
            let CpuStorage::I64(idx) = s[0] else { unreachable!("index_select checks an i64 index") };
            let idx = cpu::contiguous(idx, index.layout());
            let size = shape[dim] as i64;
            let outer: usize = shape[..dim].iter().product();
            let inner: usize = shape[dim + 1..].iter().product();
            let n = idx.len();
            fn run<T: Float>(
                g: &[T],
                lg: &Layout,
                idx: &[i64],
                size: i64,
                (outer, n, inner): (usize, usize, usize),
            ) -> CpuStorage {
                let g = cpu::contiguous(g, lg);
                let mut out = vec![T::ZERO; outer * size as usize * inner];
                for o in 0..outer {
                    for (k, &i) in idx.iter().enumerate() {
                        // The forward op checked the range; a GPU index was checked by its kernel.
                        if !(0..size).contains(&i) {
                            continue;
                        }
                        let src = &g[(o * n + k) * inner..][..inner];
                        let dst = &mut out[(o * size as usize + i as usize) * inner..][..inner];
                        for (d, &x) in dst.iter_mut().zip(src) {
                            *d = d.add(x);
                        }
                    }
                }
                CpuStorage::from_vec(out)
            }
            let dims = (outer, n, inner);
            match s[1] {
                CpuStorage::F32(v) => run(v, g.layout(), &idx, size, dims),
                CpuStorage::F64(v) => run(v, g.layout(), &idx, size, dims),
                CpuStorage::F16(v) => run(v, g.layout(), &idx, size, dims),
                CpuStorage::BF16(v) => run(v, g.layout(), &idx, size, dims),
                _ => unreachable!("gradients are floating"),
            }
        },
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
        |s| {
            let CpuStorage::I64(idx) = s[0] else { unreachable!("gather checks an i64 index") };
            let idx = cpu::contiguous(idx, index.layout());
            fn run<T: Float>(g: &[T], lg: &Layout, idx: &[i64], shape: &[usize], dim: usize) -> CpuStorage {
                let g = cpu::contiguous(g, lg);
                let strides = crate::shape::contiguous_strides(shape);
                let size = shape[dim] as i64;
                // From the allocator's pool of reused buffers: a fresh `vec!` of this size (the
                // gradient of a loss's `gather` is as large as the logits) faults in new pages on
                // every step.
                // SAFETY: the closure writes every element.
                let mut out: Vec<T> = unsafe {
                    cpu::filled(shape.iter().product(), |o| {
                        o.iter_mut().for_each(|x| {
                            x.write(T::ZERO);
                        })
                    })
                };
                let index_shape = &lg.shape;
                let mut pos = vec![0usize; index_shape.len()];
                for (&i, &x) in idx.iter().zip(g.iter()) {
                    if (0..size).contains(&i) {
                        let at: usize = pos
                            .iter()
                            .zip(&strides)
                            .enumerate()
                            .map(|(k, (&p, &st))| if k == dim { i as usize } else { p } * st)
                            .sum();
                        out[at] = out[at].add(x);
                    }
                    for k in (0..pos.len()).rev() {
                        pos[k] += 1;
                        if pos[k] < index_shape[k] {
                            break;
                        }
                        pos[k] = 0;
                    }
                }
                CpuStorage::from_vec(out)
            }
            match s[1] {
                CpuStorage::F32(v) => run(v, g.layout(), &idx, shape, dim),
                CpuStorage::F64(v) => run(v, g.layout(), &idx, shape, dim),
                CpuStorage::F16(v) => run(v, g.layout(), &idx, shape, dim),
                CpuStorage::BF16(v) => run(v, g.layout(), &idx, shape, dim),
                _ => unreachable!("gradients are floating"),
            }
        },
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
        |s| {
            fn run<T: Float>(x: &[T], lx: &Layout, g: &[T], lg: &Layout, tanh: bool) -> CpuStorage {
                let half = T::from_f32(0.5);
                if tanh {
                    let k = T::from_f64((2.0 / std::f64::consts::PI).sqrt());
                    let c = T::from_f64(crate::tensor::GELU_TANH_CUBIC);
                    let (minus_two_k, three_c, two_k) =
                        (T::from_f64(-2.0).mul(k), T::from_f32(3.0).mul(c), T::from_f32(2.0).mul(k));
                    CpuStorage::from_vec(cpu::binary_map(
                        x,
                        lx,
                        g,
                        lg,
                        &lg.shape,
                        #[inline(always)]
                        move |x: T, g: T| {
                            let x2 = x.mul(x);
                            let s = T::ONE.div(T::ONE.add(minus_two_k.mul(x.add(c.mul(x2).mul(x))).exp()));
                            let du = two_k.mul(T::ONE.add(three_c.mul(x2)));
                            g.mul(s.add(x.mul(s).mul(T::ONE.sub(s)).mul(du)))
                        },
                    ))
                } else {
                    let minus_inv_sqrt2 = T::from_f64(-std::f64::consts::FRAC_1_SQRT_2);
                    let inv_sqrt_2pi = T::from_f64(1.0 / (2.0 * std::f64::consts::PI).sqrt());
                    CpuStorage::from_vec(cpu::binary_map(
                        x,
                        lx,
                        g,
                        lg,
                        &lg.shape,
                        #[inline(always)]
                        move |x: T, g: T| {
                            // Φ(x) = erfc(-x/√2) / 2 and φ(x) = e^(-(x/√2)²) / √(2π) from one evaluation.
                            let (erfc, gaussian) = x.mul(minus_inv_sqrt2).erfc_with_gaussian();
                            let (cdf, pdf) = (half.mul(erfc), inv_sqrt_2pi.mul(gaussian));
                            g.mul(cdf.add(x.mul(pdf)))
                        },
                    ))
                }
            }
            let (lx, lg) = (x.layout(), g.layout());
            match (s[0], s[1]) {
                (CpuStorage::F32(a), CpuStorage::F32(b)) => run(a, lx, b, lg, tanh),
                (CpuStorage::F64(a), CpuStorage::F64(b)) => run(a, lx, b, lg, tanh),
                (CpuStorage::F16(a), CpuStorage::F16(b)) => run(a, lx, b, lg, tanh),
                (CpuStorage::BF16(a), CpuStorage::BF16(b)) => run(a, lx, b, lg, tanh),
                _ => unreachable!("gelu's gradient is recorded for floating tensors of one dtype only"),
            }
        },
        host_only("gelu_backward"),
    );
    Some(storage.map(|s| g.derived(s, g.shape(), g.dtype(), "gelu_backward", Location::caller())))
}
