//! Sliding-window kernels over `[N, C, H, W]` data for convolution and max pooling: a
//! convolution's column matrix (im2col) read straight from the input's strides, its gradient
//! (col2im), the reorderings between a product's `[O, N·L]` and a result's `[N, O, L]`, and max
//! pooling each way. Every loop visits kernel offsets, then output positions, in the order the
//! composed gather/scatter path does.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use std::borrow::Cow;

use super::{Float, PARALLEL_THRESHOLD, contiguous, filled, sum_lanes};
use crate::shape::Layout;

/// Where each output position of a window reads its (N, C, H, W) input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowGeometry {
    /// Input `[N, C, H, W]`.
    pub(crate) input: [usize; 4],
    pub(crate) kernel: [usize; 2],
    pub(crate) stride: [usize; 2],
    pub(crate) padding: [usize; 2],
    pub(crate) dilation: [usize; 2],
    /// Output rows and columns.
    pub(crate) out: [usize; 2],
}

/// One kernel offset on one output row: output columns `lo..hi` read input row `row` from column
/// `col` on, one input column per `stride`; the others read padding (all of them where the row
/// itself is padding: then `lo == hi == 0`).
#[derive(Clone, Copy, Debug)]
struct Run {
    /// The kernel offset, `ki * kw + kj`.
    offset: usize,
    /// The output row.
    oi: usize,
    row: usize,
    col: usize,
    lo: usize,
    hi: usize,
}

impl WindowGeometry {
    fn planes(&self) -> usize {
        self.input[0] * self.input[1]
    }

    fn positions(&self) -> usize {
        self.out[0] * self.out[1]
    }

    fn offsets(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }

    /// Do the windows tile the input: side by side (stride = kernel), no padding, no dilation?
    /// (Max pooling's usual form: every input element is read by at most one window.)
    fn tiles(&self) -> bool {
        self.stride == self.kernel && self.padding == [0, 0] && self.dilation == [1, 1]
    }

    /// The input row (`axis` 0) or column (1) read by kernel offset `k` at output position `o`,
    /// or `None` where it falls into the padding.
    fn source(&self, axis: usize, k: usize, o: usize) -> Option<usize> {
        (o * self.stride[axis] + k * self.dilation[axis])
            .checked_sub(self.padding[axis])
            .filter(|&i| i < self.input[2 + axis])
    }

    /// Every (kernel offset, output row) pair in the composed path's order: kernel rows, kernel
    /// columns, output rows.
    fn runs(&self) -> Vec<Run> {
        let ow = self.out[1];
        let mut runs = Vec::with_capacity(self.offsets() * self.out[0]);
        for ki in 0..self.kernel[0] {
            for kj in 0..self.kernel[1] {
                let lo = (0..ow).find(|&oj| self.source(1, kj, oj).is_some()).unwrap_or(ow);
                let hi = (lo..ow).find(|&oj| self.source(1, kj, oj).is_none()).unwrap_or(ow);
                let col = self.source(1, kj, lo).unwrap_or(0);
                for oi in 0..self.out[0] {
                    let offset = ki * self.kernel[1] + kj;
                    runs.push(match self.source(0, ki, oi) {
                        Some(row) if hi > lo => Run { offset, oi, row, col, lo, hi },
                        _ => Run { offset, oi, row: 0, col: 0, lo: 0, hi: 0 },
                    });
                }
            }
        }
        runs
    }
}

/// The storage offset of each `[H, W]` plane of a strided `[N, C, H, W]` layout.
fn plane_bases(layout: &Layout, geo: &WindowGeometry) -> impl Iterator<Item = usize> {
    let [sn, sc] = [layout.strides[0], layout.strides[1]];
    let (c, offset) = (geo.input[1], layout.offset);
    (0..geo.planes()).map(move |p| offset + (p / c) * sn + (p % c) * sc)
}

/// `x[start]`, `x[start + step]`, ... (`step` at least 1: see [`stepping`]).
fn strided<T: Copy>(x: &[T], start: usize, step: usize) -> impl Iterator<Item = T> + '_ {
    x[start..].iter().step_by(step).copied()
}

/// `x` with a layout whose columns are at least one element apart: a view broadcast along W
/// (a zero stride) is gathered, so every row reads through [`strided`]'s slice walk.
fn stepping<'a, T: Copy>(x: &'a [T], layout: &Layout) -> (Cow<'a, [T]>, Layout) {
    if layout.strides[3] == 0 {
        (contiguous(x, layout), Layout::contiguous(&layout.shape))
    } else {
        (Cow::Borrowed(x), layout.clone())
    }
}

/// A convolution's column matrix, `[C·kh·kw, N·H'·W']`: row `(c, offset)` holds, for every sample
/// and output position, the value of channel `c` under kernel offset `offset` (row-major over the
/// kernel), 0 in the padding. The rows of a channel group are one contiguous block, so each
/// group's weight multiplies the whole batch in one product.
pub(crate) fn im2col<T: Float>(x: &[T], layout: &Layout, geo: &WindowGeometry) -> Vec<T> {
    let (x, layout) = stepping(x, layout);
    let (x, layout) = (&x[..], &layout);
    let [n, c, _, _] = geo.input;
    let [sh, sw] = [layout.strides[2], layout.strides[3]];
    let (oh, ow, positions, step) = (geo.out[0], geo.out[1], geo.positions(), geo.stride[1] * sw);
    let runs = geo.runs();
    let bases: Vec<usize> = plane_bases(layout, geo).collect();
    let fill = |row: usize, dst: &mut [MaybeUninit<T>]| {
        let (channel, offset) = (row / geo.offsets(), row % geo.offsets());
        let runs = &runs[offset * oh..(offset + 1) * oh];
        for (sample, dst) in dst.chunks_exact_mut(positions).enumerate() {
            let base = bases[sample * c + channel];
            for (r, dst) in runs.iter().zip(dst.chunks_exact_mut(ow)) {
                let (before, rest) = dst.split_at_mut(r.lo);
                let (inside, after) = rest.split_at_mut(r.hi - r.lo);
                for d in before.iter_mut().chain(after) {
                    d.write(T::ZERO);
                }
                let start = base + r.row * sh + r.col * sw;
                if step == 1 {
                    let len = inside.len();
                    for (d, &v) in inside.iter_mut().zip(&x[start..start + len]) {
                        d.write(v);
                    }
                } else {
                    for (d, v) in inside.iter_mut().zip(strided(x, start, step)) {
                        d.write(v);
                    }
                }
            }
        }
    };
    let row = n * positions;
    // SAFETY: every row is split into one chunk per sample and output row, and each chunk is
    // written whole (padding before `lo`, input values up to `hi`, padding after).
    unsafe { filled(c * geo.offsets() * row, |out| for_each_row(out, row, fill)) }
}

/// The gradient of [`im2col`]: `[N, C, H, W]` (contiguous) with each entry of the column matrix
/// `cols` (`[C·kh·kw, N·H'·W']`, contiguous) added where it was read; padding takes nothing.
pub(crate) fn col2im<T: Float>(cols: &[T], geo: &WindowGeometry) -> Vec<T> {
    let [n, c, h, w] = geo.input;
    let (positions, ow, stride) = (geo.positions(), geo.out[1], geo.stride[1]);
    let runs = geo.runs();
    let row = n * positions;
    // SAFETY: every element is written (zeroed) before anything is added to it.
    let mut out = unsafe { filled(geo.planes() * h * w, |out| out.fill(MaybeUninit::new(T::ZERO))) };
    for_each_row(&mut out, h * w, |plane, dst| {
        let (sample, channel) = (plane / c, plane % c);
        for r in runs.iter().filter(|r| r.hi > r.lo) {
            let src = &cols[(channel * geo.offsets() + r.offset) * row + sample * positions + r.oi * ow..];
            let src = &src[r.lo..r.hi];
            let dst = &mut dst[r.row * w + r.col..];
            if stride == 1 {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = d.add(s);
                }
            } else {
                for (d, &s) in dst.iter_mut().step_by(stride).zip(src) {
                    *d = d.add(s);
                }
            }
        }
    });
    out
}

/// A convolution's result `[N, O, L]` from the product `[O, N·L]` of its weight and column
/// matrix, with `bias[o]` added to every value of channel `o`.
pub(crate) fn samples_first<T: Float>(
    product: &[T],
    channels: usize,
    samples: usize,
    bias: Option<&[T]>,
) -> Vec<T> {
    let positions = product.len() / (channels * samples).max(1);
    let fill = |sample: usize, dst: &mut [MaybeUninit<T>]| {
        for (channel, dst) in dst.chunks_exact_mut(positions).enumerate() {
            let src = &product[(channel * samples + sample) * positions..][..positions];
            let shift = bias.map_or(T::ZERO, |b| b[channel]);
            for (d, &v) in dst.iter_mut().zip(src) {
                d.write(if bias.is_some() { v.add(shift) } else { v });
            }
        }
    };
    // SAFETY: each sample's `[O, L]` block is split into one chunk per channel, written whole.
    unsafe { filled(product.len(), |out| for_each_row(out, channels * positions, fill)) }
}

/// The gradient `g` (`[N, O, L]`, contiguous) of a convolution's result as `[O, N·L]`, the layout
/// of its product, and the sum of each channel (the bias gradient).
pub(crate) fn channels_first<T: Float>(g: &[T], channels: usize, samples: usize) -> (Vec<T>, Vec<T>) {
    let positions = g.len() / (channels * samples).max(1);
    let mut sums = vec![T::ZERO; channels];
    let fill = |(channel, (dst, sum)): (usize, (&mut [MaybeUninit<T>], &mut T))| {
        for (sample, dst) in dst.chunks_exact_mut(positions).enumerate() {
            let src = &g[(sample * channels + channel) * positions..][..positions];
            for (d, &v) in dst.iter_mut().zip(src) {
                d.write(v);
            }
            *sum = sum.add(sum_lanes(src));
        }
    };
    let row = samples * positions;
    let fill_all = |out: &mut [MaybeUninit<T>]| {
        if row == 0 {
            return;
        }
        if out.len() >= PARALLEL_THRESHOLD && channels > 1 {
            out.par_chunks_mut(row).zip(sums.par_iter_mut()).enumerate().for_each(fill);
        } else {
            out.chunks_mut(row).zip(sums.iter_mut()).enumerate().for_each(fill);
        }
    };
    // SAFETY: each channel's row is split into one chunk per sample, each written whole.
    let out = unsafe { filled(g.len(), fill_all) };
    (out, sums)
}

/// Runs `fill(i, row)` on each `row`-element row of `out`, spread over the pool's threads when
/// there is enough work.
fn for_each_row<U: Send>(out: &mut [U], row: usize, fill: impl Fn(usize, &mut [U]) + Sync) {
    if row == 0 {
        return;
    }
    if out.len() >= PARALLEL_THRESHOLD && out.len() > row {
        out.par_chunks_mut(row).enumerate().for_each(|(i, r)| fill(i, r));
    } else {
        out.chunks_mut(row).enumerate().for_each(|(i, r)| fill(i, r));
    }
}

/// Max pooling: `[N, C, H', W']`, each the maximum (NaN-propagating) of its window, padding
/// counting as -inf.
pub(crate) fn max_pool<T: Float>(x: &[T], layout: &Layout, geo: &WindowGeometry) -> Vec<T> {
    let (x, layout) = stepping(x, layout);
    let (x, layout) = (&x[..], &layout);
    if geo.tiles() {
        return max_pool_tiles(x, layout, geo);
    }
    let [sh, sw] = [layout.strides[2], layout.strides[3]];
    let (positions, ow, step) = (geo.positions(), geo.out[1], geo.stride[1] * sw);
    let runs = geo.runs();
    // Reading padding (-inf) changes no maximum, NaN-propagating or not, so runs skip it.
    let mut out = vec![T::from_f32(f32::NEG_INFINITY); geo.planes() * positions];
    for (best, base) in out.chunks_exact_mut(positions).zip(plane_bases(layout, geo)) {
        for r in runs.iter().filter(|r| r.hi > r.lo) {
            let best = &mut best[r.oi * ow..][r.lo..r.hi];
            for (b, v) in best.iter_mut().zip(strided(x, base + r.row * sh + r.col * sw, step)) {
                *b = b.maximum(v);
            }
        }
    }
    out
}

/// The gradient of [`max_pool`] from its input `x`, its output `y` and the output's gradient `g`
/// (both contiguous): each window's gradient is shared evenly among the elements equal to its
/// maximum (padding included, where it is the maximum), as for `max` over a dim.
pub(crate) fn max_pool_backward<T: Float>(
    x: &[T],
    layout: &Layout,
    y: &[T],
    g: &[T],
    geo: &WindowGeometry,
) -> Vec<T> {
    let (x, layout) = stepping(x, layout);
    let (x, layout) = (&x[..], &layout);
    if geo.tiles() {
        return max_pool_tiles_backward(x, layout, y, g, geo);
    }
    let [_, _, h, w] = geo.input;
    let [sh, sw] = [layout.strides[2], layout.strides[3]];
    let (positions, ow, step, stride) = (geo.positions(), geo.out[1], geo.stride[1] * sw, geo.stride[1]);
    let neg_inf = T::from_f32(f32::NEG_INFINITY);
    let hit = |v: T, best: T| if v == best { T::ONE } else { T::ZERO };
    let runs = geo.runs();
    // How many reads of each window fall into the padding: the same on every plane.
    let mut padding_reads = vec![T::ZERO; positions];
    for r in &runs {
        let (before, rest) = padding_reads[r.oi * ow..][..ow].split_at_mut(r.lo);
        for c in before.iter_mut().chain(&mut rest[r.hi - r.lo..]) {
            *c = c.add(T::ONE);
        }
    }
    let mut out = vec![T::ZERO; geo.planes() * h * w];
    let mut share = vec![T::ZERO; positions];
    let planes = out.chunks_exact_mut(h * w).zip(y.chunks_exact(positions)).zip(g.chunks_exact(positions));
    for (((dst, y), g), base) in planes.zip(plane_bases(layout, geo)) {
        // How many elements of each window equal its maximum (padding is -inf, and counts only
        // where the maximum is -inf), then each one's share of the window's gradient. The counts
        // are small whole numbers, exact in any order.
        for ((c, &pad), &best) in share.iter_mut().zip(&padding_reads).zip(y) {
            *c = hit(neg_inf, best).mul(pad);
        }
        for r in runs.iter().filter(|r| r.hi > r.lo) {
            let at = r.oi * ow + r.lo;
            let (count, y) = (&mut share[at..at + r.hi - r.lo], &y[at..at + r.hi - r.lo]);
            let x = strided(x, base + r.row * sh + r.col * sw, step);
            for ((c, &best), v) in count.iter_mut().zip(y).zip(x) {
                *c = c.add(hit(v, best));
            }
        }
        for (s, &g) in share.iter_mut().zip(g) {
            *s = g.div(*s);
        }
        for r in runs.iter().filter(|r| r.hi > r.lo) {
            let at = r.oi * ow + r.lo;
            let (share, y) = (&share[at..at + r.hi - r.lo], &y[at..at + r.hi - r.lo]);
            let x = strided(x, base + r.row * sh + r.col * sw, step);
            let dst = dst[r.row * w + r.col..].iter_mut().step_by(stride);
            for (((d, &s), &best), v) in dst.zip(share).zip(y).zip(x) {
                *d = d.add(hit(v, best).mul(s));
            }
        }
    }
    out
}

/// [`max_pool`] where the windows tile the input ([`WindowGeometry::tiles`]): one window at a
/// time, its elements in the order the general path visits them, planes spread over threads.
fn max_pool_tiles<T: Float>(x: &[T], layout: &Layout, geo: &WindowGeometry) -> Vec<T> {
    let [sh, sw] = [layout.strides[2], layout.strides[3]];
    let ([kh, kw], ow) = (geo.kernel, geo.out[1]);
    let bases: Vec<usize> = plane_bases(layout, geo).collect();
    let fill = |plane: usize, out: &mut [MaybeUninit<T>]| {
        for (oi, out) in out.chunks_exact_mut(ow).enumerate() {
            for (oj, o) in out.iter_mut().enumerate() {
                let corner = bases[plane] + oi * kh * sh + oj * kw * sw;
                let mut best = T::from_f32(f32::NEG_INFINITY);
                for ki in 0..kh {
                    for kj in 0..kw {
                        best = best.maximum(x[corner + ki * sh + kj * sw]);
                    }
                }
                o.write(best);
            }
        }
    };
    // SAFETY: each plane's row is split into one chunk per output row, every element written.
    unsafe { filled(geo.planes() * geo.positions(), |out| for_each_row(out, geo.positions(), fill)) }
}

/// [`max_pool_backward`] where the windows tile the input: each input element lies in at most
/// one window, so each window is counted and shared out on its own, planes spread over threads.
/// The arithmetic is the general path's, element for element (`0 + hit · share`).
fn max_pool_tiles_backward<T: Float>(
    x: &[T],
    layout: &Layout,
    y: &[T],
    g: &[T],
    geo: &WindowGeometry,
) -> Vec<T> {
    let [_, _, h, w] = geo.input;
    let [sh, sw] = [layout.strides[2], layout.strides[3]];
    let ([kh, kw], ow, positions) = (geo.kernel, geo.out[1], geo.positions());
    let hit = |v: T, best: T| if v == best { T::ONE } else { T::ZERO };
    let bases: Vec<usize> = plane_bases(layout, geo).collect();
    // SAFETY: every element is written (zeroed) before the windows add to it.
    let mut out = unsafe { filled(geo.planes() * h * w, |out| out.fill(MaybeUninit::new(T::ZERO))) };
    for_each_row(&mut out, h * w, |plane, dst| {
        let (y, g) = (&y[plane * positions..][..positions], &g[plane * positions..][..positions]);
        for (at, (&best, &g)) in y.iter().zip(g).enumerate() {
            let (oi, oj) = (at / ow, at % ow);
            let corner = bases[plane] + oi * kh * sh + oj * kw * sw;
            let mut count = T::ZERO;
            for ki in 0..kh {
                for kj in 0..kw {
                    count = count.add(hit(x[corner + ki * sh + kj * sw], best));
                }
            }
            let share = g.div(count);
            for ki in 0..kh {
                let row = &mut dst[(oi * kh + ki) * w + oj * kw..][..kw];
                for (kj, d) in row.iter_mut().enumerate() {
                    *d = d.add(hit(x[corner + ki * sh + kj * sw], best).mul(share));
                }
            }
        }
    });
    out
}
