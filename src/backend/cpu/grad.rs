//! The CPU kernels of the fused backward passes autograd runs on the host (`src/autograd/fused.rs`
//! decides when), as methods of [`CpuStorage`]: each computes a gradient in one pass over the
//! data, where the same math in tensor ops would take a chain of allocating ops.

use std::ops::Range;

use super::{
    CpuStorage, Float, binary_map, binary_map_near, contiguous, embed, filled, sum_lanes, with_storage,
    zip_in_place,
};
use crate::backend::op::GELU_TANH_CUBIC;
use crate::dtype::WithDType;
use crate::shape::Layout;

impl CpuStorage {
    /// ReLU's gradient written over this gradient (contiguous): each element kept where
    /// `x[x_run]`'s is positive, else 0.
    pub(crate) fn relu_backward_in_place(&mut self, x: &CpuStorage, x_run: Range<usize>) {
        let run = x_run;
        match (x, self) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => zip_in_place(b, &a[run], relu_pass),
            (CpuStorage::F64(a), CpuStorage::F64(b)) => zip_in_place(b, &a[run], relu_pass),
            (CpuStorage::F16(a), CpuStorage::F16(b)) => zip_in_place(b, &a[run], relu_pass),
            (CpuStorage::BF16(a), CpuStorage::BF16(b)) => zip_in_place(b, &a[run], relu_pass),
            _ => unreachable!("relu's gradient is recorded for floating tensors of one dtype only"),
        }
    }

    /// ReLU's gradient from its input `x` (this storage) and the upstream gradient `g`: `g` where
    /// `x > 0`, else 0, over `g`'s shape.
    pub(crate) fn relu_backward(&self, lx: &Layout, g: &CpuStorage, lg: &Layout) -> CpuStorage {
        fn run<T: Float>(x: &[T], lx: &Layout, g: &[T], lg: &Layout) -> CpuStorage {
            CpuStorage::from_vec(binary_map(x, lx, g, lg, &lg.shape, relu_pass))
        }
        match (self, g) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => run(a, lx, b, lg),
            (CpuStorage::F64(a), CpuStorage::F64(b)) => run(a, lx, b, lg),
            (CpuStorage::F16(a), CpuStorage::F16(b)) => run(a, lx, b, lg),
            (CpuStorage::BF16(a), CpuStorage::BF16(b)) => run(a, lx, b, lg),
            _ => unreachable!("relu's gradient is recorded for floating tensors of one dtype only"),
        }
    }

    /// The sums of a contiguous f32/f64 view seen as `[outer, kept, inner]` over its first and
    /// last dims: `kept` values (a bias gradient).
    pub(crate) fn sum_outer_inner(
        &self,
        layout: &Layout,
        (outer, kept, inner): (usize, usize, usize),
    ) -> CpuStorage {
        let l = layout;
        match self {
            CpuStorage::F32(v) => sum_blocks(&v[l.offset..l.offset + l.numel()], outer, kept, inner),
            CpuStorage::F64(v) => sum_blocks(&v[l.offset..l.offset + l.numel()], outer, kept, inner),
            _ => unreachable!("fast path taken for f32/f64 only"),
        }
    }

    /// Zeros of `shape` with this view at `start` along `dim` (the gradient of `narrow`).
    pub(crate) fn narrow_backward(
        &self,
        layout: &Layout,
        shape: &[usize],
        dim: usize,
        start: usize,
    ) -> CpuStorage {
        with_storage!(self, v => {
            let zero = WithDType::from_f64(0.0);
            CpuStorage::from_vec(embed(v, layout, shape, dim, start, zero))
        })
    }

    /// Zeros of `shape` with this gradient added at `index` (i64, 1-D) along `dim` (the gradient
    /// of `index_select`).
    pub(crate) fn index_add(
        &self,
        lg: &Layout,
        index: &CpuStorage,
        index_layout: &Layout,
        shape: &[usize],
        dim: usize,
    ) -> CpuStorage {
        let CpuStorage::I64(idx) = index else { unreachable!("index_select checks an i64 index") };
        let idx = contiguous(idx, index_layout);
        let size = shape[dim] as i64;
        let outer: usize = shape[..dim].iter().product();
        let inner: usize = shape[dim + 1..].iter().product();
        let n = idx.len();
        let dims = (outer, n, inner);
        match self {
            CpuStorage::F32(v) => index_add_rows(v, lg, &idx, size, dims),
            CpuStorage::F64(v) => index_add_rows(v, lg, &idx, size, dims),
            CpuStorage::F16(v) => index_add_rows(v, lg, &idx, size, dims),
            CpuStorage::BF16(v) => index_add_rows(v, lg, &idx, size, dims),
            _ => unreachable!("gradients are floating"),
        }
    }

    /// Zeros of `shape` with this gradient's element at `pos` added at `pos` with its `dim`
    /// coordinate replaced by `index[pos]` (the gradient of `gather`).
    pub(crate) fn scatter_add(
        &self,
        lg: &Layout,
        index: &CpuStorage,
        index_layout: &Layout,
        shape: &[usize],
        dim: usize,
    ) -> CpuStorage {
        let CpuStorage::I64(idx) = index else { unreachable!("gather checks an i64 index") };
        let idx = contiguous(idx, index_layout);
        match self {
            CpuStorage::F32(v) => scatter_add_into(v, lg, &idx, shape, dim),
            CpuStorage::F64(v) => scatter_add_into(v, lg, &idx, shape, dim),
            CpuStorage::F16(v) => scatter_add_into(v, lg, &idx, shape, dim),
            CpuStorage::BF16(v) => scatter_add_into(v, lg, &idx, shape, dim),
            _ => unreachable!("gradients are floating"),
        }
    }

    /// GELU's gradient from its input `x` (this storage) and the upstream gradient `g`, exact
    /// or (`tanh`) of the tanh approximation (see `gelu_backward_map`).
    pub(crate) fn gelu_backward(&self, lx: &Layout, g: &CpuStorage, lg: &Layout, tanh: bool) -> CpuStorage {
        match (self, g) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => gelu_backward_map(a, lx, b, lg, tanh),
            (CpuStorage::F64(a), CpuStorage::F64(b)) => gelu_backward_map(a, lx, b, lg, tanh),
            (CpuStorage::F16(a), CpuStorage::F16(b)) => gelu_backward_map(a, lx, b, lg, tanh),
            (CpuStorage::BF16(a), CpuStorage::BF16(b)) => gelu_backward_map(a, lx, b, lg, tanh),
            _ => unreachable!("gelu's gradient is recorded for floating tensors of one dtype only"),
        }
    }
}

fn relu_pass<T: Float>(x: T, g: T) -> T {
    if x > T::ZERO { g } else { T::ZERO }
}

fn sum_blocks<T: Float>(v: &[T], outer: usize, kept: usize, inner: usize) -> CpuStorage {
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

fn index_add_rows<T: Float>(
    g: &[T],
    lg: &Layout,
    idx: &[i64],
    size: i64,
    (outer, n, inner): (usize, usize, usize),
) -> CpuStorage {
    let g = contiguous(g, lg);
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

fn scatter_add_into<T: Float>(g: &[T], lg: &Layout, idx: &[i64], shape: &[usize], dim: usize) -> CpuStorage {
    let g = contiguous(g, lg);
    let strides = crate::shape::contiguous_strides(shape);
    let size = shape[dim] as i64;
    // From the allocator's pool of reused buffers: a fresh `vec!` of this size (the
    // gradient of a loss's `gather` is as large as the logits) faults in new pages on
    // every step.
    // SAFETY: the closure writes every element.
    let mut out: Vec<T> = unsafe {
        filled(shape.iter().product(), |o| {
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

/// `g (Φ(x) + x φ(x))` for the exact form, `g (s + 2 x s (1 - s) k (1 + 3 c x²))` with
/// `s = sigmoid(2u)`, `u = k (x + c x³)`, `k = √(2/π)` for the tanh form, in one pass.
fn gelu_backward_map<T: Float>(x: &[T], lx: &Layout, g: &[T], lg: &Layout, tanh: bool) -> CpuStorage {
    let half = T::from_f32(0.5);
    if tanh {
        let k = T::from_f64((2.0 / std::f64::consts::PI).sqrt());
        let c = T::from_f64(GELU_TANH_CUBIC);
        let (minus_two_k, three_c, two_k) =
            (T::from_f64(-2.0).mul(k), T::from_f32(3.0).mul(c), T::from_f32(2.0).mul(k));
        CpuStorage::from_vec(binary_map(
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
        // Φ(x) = erfc(-x/√2) / 2 and φ(x) = e^(-(x/√2)²) / √(2π) from one evaluation, in its
        // shorter form for blocks of inputs all within erfc's near range.
        let grad = move |x: T, g: T, (erfc, gaussian): (T, T)| {
            let (cdf, pdf) = (half.mul(erfc), inv_sqrt_2pi.mul(gaussian));
            g.mul(cdf.add(x.mul(pdf)))
        };
        CpuStorage::from_vec(binary_map_near(
            x,
            lx,
            g,
            lg,
            #[inline(always)]
            move |x: T| x.mul(minus_inv_sqrt2).erfc_is_near(),
            #[inline(always)]
            move |x: T, g: T| grad(x, g, x.mul(minus_inv_sqrt2).erfc_with_gaussian_near()),
            #[inline(always)]
            move |x: T, g: T| grad(x, g, x.mul(minus_inv_sqrt2).erfc_with_gaussian()),
        ))
    }
}
