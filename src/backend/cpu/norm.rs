//! Layer normalisation over contiguous rows, forward and backward, each a pass or two over a row
//! while it sits in the L1 cache: composed of tensor ops, the same math makes about a dozen
//! passes over the whole tensor and allocates a full-size temporary for each.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::simd::{self, Kernel};
use super::{CpuStorage, Float, PARALLEL_THRESHOLD, contiguous};
use crate::shape::Layout;

/// Lanes of the row sums: independent accumulators let the compiler vectorise a reduction
/// without reordering any one lane's additions.
const LANES: usize = 16;

/// The forward result and what the backward pass needs of it.
pub(crate) struct LayerNormOutput<T> {
    pub out: Vec<T>,
    /// Per row: the mean and `1 / sqrt(var + eps)` (biased variance, as PyTorch's).
    pub mean: Vec<T>,
    pub rstd: Vec<T>,
}

/// Normalises each row of `width` elements of `x` (`width > 0`), then scales by `weight` and
/// shifts by `bias` (each `width` long) when given. The mean and variance are taken in two passes
/// (the second over `x - mean`), which stays accurate when the mean is large against the spread.
pub(crate) fn layer_norm<T: Float>(
    x: &[T],
    width: usize,
    weight: Option<&[T]>,
    bias: Option<&[T]>,
    eps: f64,
) -> LayerNormOutput<T> {
    let rows = x.len() / width;
    let mut mean = vec![T::ZERO; rows];
    let mut rstd = vec![T::ZERO; rows];
    let eps = T::from_f64(eps);
    let per = rows_per_task(x.len(), rows) * width;
    let fill = |out: &mut [MaybeUninit<T>]| {
        let tasks = out.par_chunks_mut(per).zip(x.par_chunks(per));
        let stats = mean.par_chunks_mut(per / width).zip(rstd.par_chunks_mut(per / width));
        tasks.zip(stats).for_each(|((out, x), (mean, rstd))| {
            simd::dispatch(NormRows { x, out, mean, rstd, width, weight, bias, eps })
        });
    };
    // SAFETY: the chunks cover every row, and `NormRows` writes every element of its rows.
    let out = unsafe { super::filled(x.len(), fill) };
    LayerNormOutput { out, mean, rstd }
}

/// The gradients of [`layer_norm`] from the upstream gradient `g` (laid out as `x`); each is
/// computed only when asked for (`want` = input, weight, bias).
pub(crate) struct LayerNormGrads<T> {
    pub input: Option<Vec<T>>,
    pub weight: Option<Vec<T>>,
    pub bias: Option<Vec<T>>,
}

/// With `x̂ = (x - mean) rstd` and `dy = g weight` (or `g`), per row of `n`:
/// `dx = rstd (dy - Σdy / n - x̂ Σ(dy x̂) / n)`; over rows: `dweight = Σ g x̂`, `dbias = Σ g`.
/// Rows are split into tasks, each summing `dweight` and `dbias` into its own `width`-long
/// partials, added up in task order afterwards.
pub(crate) fn layer_norm_backward<T: Float>(
    x: &[T],
    g: &[T],
    stats: (&[T], &[T]),
    width: usize,
    weight: Option<&[T]>,
    want: [bool; 3],
) -> LayerNormGrads<T> {
    let (mean, rstd) = stats;
    let rows = x.len() / width;
    let per_rows = rows_per_task(x.len(), rows);
    let per = per_rows * width;
    let [want_input, want_weight, want_bias] = want;
    let partials = |dx: Option<&mut [MaybeUninit<T>]>| -> Vec<Partials<T>> {
        let row_chunks = x.par_chunks(per).zip(g.par_chunks(per));
        let stat_chunks = mean.par_chunks(per_rows).zip(rstd.par_chunks(per_rows));
        let run = |((x, g), (mean, rstd)), dx| {
            let mut p = Partials {
                weight: if want_weight { vec![T::ZERO; width] } else { Vec::new() },
                bias: if want_bias { vec![T::ZERO; width] } else { Vec::new() },
            };
            simd::dispatch(NormGradRows { x, g, mean, rstd, dx, width, weight, partials: &mut p });
            p
        };
        match dx {
            Some(dx) => row_chunks
                .zip(stat_chunks)
                .zip(dx.par_chunks_mut(per))
                .map(|(c, d)| run(c, Some(d)))
                .collect(),
            None => row_chunks.zip(stat_chunks).map(|c| run(c, None)).collect(),
        }
    };
    let (input, partials) = if want_input {
        let mut sums = Vec::new();
        // SAFETY: the chunks cover every row, and `NormGradRows` writes every element of `dx`.
        let dx = unsafe { super::filled(x.len(), |dx| sums = partials(Some(dx))) };
        (Some(dx), sums)
    } else {
        (None, partials(None))
    };
    let total = |pick: fn(&Partials<T>) -> &Vec<T>| {
        let mut sum = vec![T::ZERO; width];
        for p in &partials {
            for (s, &v) in sum.iter_mut().zip(pick(p)) {
                *s = s.add(v);
            }
        }
        sum
    };
    LayerNormGrads {
        input,
        weight: want_weight.then(|| total(|p| &p.weight)),
        bias: want_bias.then(|| total(|p| &p.bias)),
    }
}

/// Rows per parallel task: all of them below the parallel threshold, else about four tasks per
/// thread.
fn rows_per_task(len: usize, rows: usize) -> usize {
    if len < PARALLEL_THRESHOLD || rows < 2 {
        return rows.max(1);
    }
    rows.div_ceil(rayon::current_num_threads().max(1) * 4).max(1)
}

/// One task's sums of `g x̂` and `g` over its rows (empty when not wanted).
struct Partials<T> {
    weight: Vec<T>,
    bias: Vec<T>,
}

/// `Σ f(x)` over a row, in [`LANES`] independent sums.
#[inline(always)]
fn row_sum<T: Float>(row: &[T], f: impl Fn(T) -> T) -> T {
    let mut lanes = [T::ZERO; LANES];
    let (body, tail) = row.split_at(row.len() - row.len() % LANES);
    for chunk in body.chunks_exact(LANES) {
        for (s, &v) in lanes.iter_mut().zip(chunk) {
            *s = s.add(f(v));
        }
    }
    let sum = lanes.iter().fold(T::ZERO, |a, &b| a.add(b));
    tail.iter().fold(sum, |a, &v| a.add(f(v)))
}

/// `Σ f(a, b)` over two rows of one length, in [`LANES`] independent sums.
#[inline(always)]
fn row_dot<T: Float>(a: &[T], b: &[T], f: impl Fn(T, T) -> T) -> T {
    let mut lanes = [T::ZERO; LANES];
    let split = a.len() - a.len() % LANES;
    for (ca, cb) in a[..split].chunks_exact(LANES).zip(b[..split].chunks_exact(LANES)) {
        for ((s, &x), &y) in lanes.iter_mut().zip(ca).zip(cb) {
            *s = s.add(f(x, y));
        }
    }
    let sum = lanes.iter().fold(T::ZERO, |a, &b| a.add(b));
    a[split..].iter().zip(&b[split..]).fold(sum, |s, (&x, &y)| s.add(f(x, y)))
}

struct NormRows<'a, T> {
    x: &'a [T],
    out: &'a mut [MaybeUninit<T>],
    mean: &'a mut [T],
    rstd: &'a mut [T],
    width: usize,
    weight: Option<&'a [T]>,
    bias: Option<&'a [T]>,
    eps: T,
}

impl<T: Float> Kernel for NormRows<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let n = T::from_f64(self.width as f64);
        let rows = self.out.chunks_mut(self.width).zip(self.x.chunks(self.width));
        for ((o, x), (mean, rstd)) in rows.zip(self.mean.iter_mut().zip(self.rstd.iter_mut())) {
            let m = row_sum(x, |v| v).div(n);
            let var = row_sum(x, |v| {
                let d = v.sub(m);
                d.mul(d)
            })
            .div(n);
            let r = T::ONE.div(var.add(self.eps).sqrt());
            (*mean, *rstd) = (m, r);
            // The composed form's order of operations: ((x - mean) rstd) weight + bias.
            match (self.weight, self.bias) {
                (Some(w), Some(b)) => {
                    for (((o, &x), &w), &b) in o.iter_mut().zip(x).zip(w).zip(b) {
                        o.write(x.sub(m).mul(r).mul(w).add(b));
                    }
                }
                (Some(w), None) => {
                    for ((o, &x), &w) in o.iter_mut().zip(x).zip(w) {
                        o.write(x.sub(m).mul(r).mul(w));
                    }
                }
                (None, Some(b)) => {
                    for ((o, &x), &b) in o.iter_mut().zip(x).zip(b) {
                        o.write(x.sub(m).mul(r).add(b));
                    }
                }
                (None, None) => {
                    for (o, &x) in o.iter_mut().zip(x) {
                        o.write(x.sub(m).mul(r));
                    }
                }
            }
        }
    }
}

struct NormGradRows<'a, T> {
    x: &'a [T],
    g: &'a [T],
    mean: &'a [T],
    rstd: &'a [T],
    /// Written in full when given.
    dx: Option<&'a mut [MaybeUninit<T>]>,
    width: usize,
    weight: Option<&'a [T]>,
    partials: &'a mut Partials<T>,
}

impl<T: Float> Kernel for NormGradRows<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let width = self.width;
        let inv_n = T::ONE.div(T::from_f64(width as f64));
        let mut dx = self.dx.map(|d| d.chunks_mut(width));
        let rows = self.x.chunks(width).zip(self.g.chunks(width));
        for ((x, g), (&m, &r)) in rows.zip(self.mean.iter().zip(self.rstd)) {
            if !self.partials.weight.is_empty() {
                for ((s, &x), &g) in self.partials.weight.iter_mut().zip(x).zip(g) {
                    *s = s.add(g.mul(x.sub(m).mul(r)));
                }
            }
            if !self.partials.bias.is_empty() {
                for (s, &g) in self.partials.bias.iter_mut().zip(g) {
                    *s = s.add(g);
                }
            }
            let Some(dx) = dx.as_mut().and_then(|d| d.next()) else { continue };
            match self.weight {
                Some(w) => write_dx(dx, x, g, Some(w), m, r, inv_n),
                None => write_dx(dx, x, g, None, m, r, inv_n),
            }
        }
    }
}

/// One row of the input's gradient; `weight` is matched on by the caller so that each form is
/// a loop of its own.
#[inline(always)]
fn write_dx<T: Float>(
    dx: &mut [MaybeUninit<T>],
    x: &[T],
    g: &[T],
    weight: Option<&[T]>,
    m: T,
    r: T,
    inv_n: T,
) {
    let xhat = |x: T| x.sub(m).mul(r);
    let (sum_dy, sum_dy_xhat) = match weight {
        Some(w) => {
            let dy: T = row_dot(g, w, |g, w| g.mul(w));
            // Σ g w x̂ as one more pass over the row (it is in L1).
            let mut lanes = [T::ZERO; LANES];
            let split = x.len() - x.len() % LANES;
            for ((cx, cg), cw) in x[..split]
                .chunks_exact(LANES)
                .zip(g[..split].chunks_exact(LANES))
                .zip(w[..split].chunks_exact(LANES))
            {
                for (((s, &x), &g), &w) in lanes.iter_mut().zip(cx).zip(cg).zip(cw) {
                    *s = s.add(g.mul(w).mul(xhat(x)));
                }
            }
            let sum = lanes.iter().fold(T::ZERO, |a, &b| a.add(b));
            let tail = x[split..].iter().zip(&g[split..]).zip(&w[split..]);
            (dy, tail.fold(sum, |s, ((&x, &g), &w)| s.add(g.mul(w).mul(xhat(x)))))
        }
        None => (row_sum(g, |g| g), row_dot(x, g, |x, g| g.mul(xhat(x)))),
    };
    let (a, b) = (sum_dy.mul(inv_n), sum_dy_xhat.mul(inv_n));
    match weight {
        Some(w) => {
            for (((d, &x), &g), &w) in dx.iter_mut().zip(x).zip(g).zip(w) {
                d.write(r.mul(g.mul(w).sub(a).sub(xhat(x).mul(b))));
            }
        }
        None => {
            for ((d, &x), &g) in dx.iter_mut().zip(x).zip(g) {
                d.write(r.mul(g.sub(a).sub(xhat(x).mul(b))));
            }
        }
    }
}

impl CpuStorage {
    /// Layer norm of `inputs[0]` over rows of `width` elements, with the weight and bias that
    /// `affine` says are present (in that order after the input), all of one dtype (f32 or f64):
    /// the result, and per row the mean and `1 / sqrt(var + eps)` the backward pass needs.
    pub(crate) fn layer_norm(
        inputs: &[&CpuStorage],
        layouts: &[&Layout],
        affine: (bool, bool),
        width: usize,
        eps: f64,
    ) -> (CpuStorage, CpuStorage, CpuStorage) {
        match inputs[0] {
            CpuStorage::F32(_) => layer_norm_typed(&typed::<f32>(inputs), layouts, affine, width, eps),
            CpuStorage::F64(_) => layer_norm_typed(&typed::<f64>(inputs), layouts, affine, width, eps),
            _ => unreachable!("the fused layer norm is taken for f32 and f64 only"),
        }
    }

    /// The gradients of [`CpuStorage::layer_norm`] from `inputs` = input, upstream gradient,
    /// mean, rstd and the weight when there is one: the input's, the weight's and the bias's,
    /// each empty unless `want` asks for it.
    pub(crate) fn layer_norm_backward(
        inputs: &[&CpuStorage],
        layouts: &[&Layout],
        width: usize,
        want: [bool; 3],
    ) -> [CpuStorage; 3] {
        match inputs[0] {
            CpuStorage::F32(_) => layer_norm_backward_typed(&typed::<f32>(inputs), layouts, width, want),
            CpuStorage::F64(_) => layer_norm_backward_typed(&typed::<f64>(inputs), layouts, width, want),
            _ => unreachable!("the fused layer norm is taken for f32 and f64 only"),
        }
    }
}

fn layer_norm_typed<T: Float>(
    s: &[&[T]],
    layouts: &[&Layout],
    affine: (bool, bool),
    width: usize,
    eps: f64,
) -> (CpuStorage, CpuStorage, CpuStorage) {
    let x = contiguous(s[0], layouts[0]);
    let params: Vec<_> = s[1..].iter().zip(&layouts[1..]).map(|(v, l)| contiguous(v, l)).collect();
    let weight = if affine.0 { params.first().map(|w| &w[..]) } else { None };
    let bias = if affine.1 { params.last().map(|b| &b[..]) } else { None };
    let r = layer_norm(&x, width, weight, bias, eps);
    (CpuStorage::from_vec(r.out), CpuStorage::from_vec(r.mean), CpuStorage::from_vec(r.rstd))
}

fn layer_norm_backward_typed<T: Float>(
    s: &[&[T]],
    layouts: &[&Layout],
    width: usize,
    want: [bool; 3],
) -> [CpuStorage; 3] {
    let [x, g, mean, rstd] = [0, 1, 2, 3].map(|i| contiguous(s[i], layouts[i]));
    let weight = s.get(4).map(|w| contiguous(w, layouts[4]));
    let grads = layer_norm_backward(&x, &g, (&mean, &rstd), width, weight.as_deref(), want);
    [grads.input, grads.weight, grads.bias].map(|v| CpuStorage::from_vec(v.unwrap_or_default()))
}

/// The typed slices of storages that all hold `T` (the caller checked one dtype).
fn typed<'a, T: crate::dtype::WithDType>(s: &[&'a CpuStorage]) -> Vec<&'a [T]> {
    s.iter().map(|s| s.as_slice::<T>().unwrap_or_else(|| unreachable!("operands of one dtype"))).collect()
}

#[cfg(test)]
mod tests {
    use super::{layer_norm, layer_norm_backward};

    /// PyTorch's layer norm and its gradients, in f64, one row at a time.
    fn reference(
        x: &[f64],
        g: &[f64],
        width: usize,
        w: &[f64],
        b: &[f64],
        eps: f64,
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let n = width as f64;
        let (mut out, mut dx) = (Vec::new(), Vec::new());
        let (mut dw, mut db) = (vec![0.0; width], vec![0.0; width]);
        for (x, g) in x.chunks(width).zip(g.chunks(width)) {
            let mean = x.iter().sum::<f64>() / n;
            let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
            let rstd = 1.0 / (var + eps).sqrt();
            let xhat: Vec<f64> = x.iter().map(|v| (v - mean) * rstd).collect();
            let dy: Vec<f64> = g.iter().zip(w).map(|(g, w)| g * w).collect();
            let sum_dy: f64 = dy.iter().sum();
            let sum_dy_xhat: f64 = dy.iter().zip(&xhat).map(|(d, h)| d * h).sum();
            for j in 0..width {
                out.push(xhat[j] * w[j] + b[j]);
                dx.push(rstd / n * (n * dy[j] - sum_dy - xhat[j] * sum_dy_xhat));
                dw[j] += g[j] * xhat[j];
                db[j] += g[j];
            }
        }
        (out, dx, dw, db)
    }

    fn close(got: &[f32], want: &[f64], tol: f64, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!((g as f64 - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: {g} vs {w}");
        }
    }

    /// Every width (multiples of the lane count and not), one row or many, split across threads
    /// or not, with and without weight and bias, against the f64 formula.
    #[test]
    fn rows_match_the_f64_formula() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for (rows, width) in [(1, 1), (3, 1), (1, 17), (5, 16), (7, 33), (70, 1024), (300, 129)] {
            let x: Vec<f32> = (0..rows * width)
                .map(|i| ((i * 7919) % 1013) as f32 / 50.0 - 9.0 + 300.0 * (i % 3) as f32)
                .collect();
            let g: Vec<f32> = (0..rows * width).map(|i| ((i * 104_729) % 997) as f32 / 300.0 - 1.5).collect();
            let w: Vec<f32> = (0..width).map(|j| 0.5 + j as f32 / 7.0).collect();
            let b: Vec<f32> = (0..width).map(|j| j as f32 / 3.0 - 2.0).collect();
            let f = |v: &[f32]| v.iter().map(|&v| v as f64).collect::<Vec<_>>();
            for affine in [true, false] {
                let (wr, br) = if affine { (f(&w), f(&b)) } else { (vec![1.0; width], vec![0.0; width]) };
                let (out, dx, dw, db) = reference(&f(&x), &f(&g), width, &wr, &br, 1e-5);
                let (wo, bo) = if affine { (Some(&w[..]), Some(&b[..])) } else { (None, None) };
                let fwd = pool.install(|| layer_norm(&x, width, wo, bo, 1e-5));
                let what = format!("{rows}x{width} affine {affine}");
                close(&fwd.out, &out, 2e-5, &format!("out {what}"));
                let grads = pool.install(|| {
                    layer_norm_backward(&x, &g, (&fwd.mean, &fwd.rstd), width, wo, [true, true, true])
                });
                // A width-1 row normalises to 0 whatever the input: its gradient is (almost) 0.
                let tol = if width == 1 { 1e-2 } else { 1e-4 };
                close(grads.input.as_deref().unwrap(), &dx, tol, &format!("dx {what}"));
                close(grads.weight.as_deref().unwrap(), &dw, 1e-4, &format!("dw {what}"));
                close(grads.bias.as_deref().unwrap(), &db, 1e-4, &format!("db {what}"));
                let only_bias =
                    layer_norm_backward(&x, &g, (&fwd.mean, &fwd.rstd), width, wo, [false, false, true]);
                assert!(only_bias.input.is_none() && only_bias.weight.is_none());
                assert_eq!(only_bias.bias, grads.bias);
            }
        }
    }
}
