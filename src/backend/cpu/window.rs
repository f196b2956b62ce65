//! Sliding-window kernels over `[N, C, H, W]` data for convolution and max pooling: a
//! convolution's column matrix (im2col) read straight from the input's strides, its gradient
//! (col2im), the reorderings between a product's `[O, N·L]` and a result's `[N, O, L]`, and max
//! pooling each way. Every loop visits kernel offsets, then output positions, in the order the
//! composed gather/scatter path does.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use std::borrow::Cow;

use super::{CpuStorage, Float, PARALLEL_THRESHOLD, contiguous, filled, simd, with_float_storage};
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
    // Kernel offsets whose every output row reads one unbroken run of adjacent input columns
    // (no padding, stride 1): each row of the block is one short copy, with no bookkeeping.
    let whole: Vec<bool> = runs
        .chunks(oh.max(1))
        .map(|runs| step == 1 && runs.iter().all(|r| r.lo == 0 && r.hi == ow))
        .collect();
    let fill = |row: usize, dst: &mut [MaybeUninit<T>]| {
        let (channel, offset) = (row / geo.offsets(), row % geo.offsets());
        let runs = &runs[offset * oh..(offset + 1) * oh];
        if whole[offset] {
            let (first, bases) = (runs.first().map_or(0, |r| r.row * sh + r.col), &bases[channel..]);
            simd::dispatch(CopyWindows {
                x,
                bases,
                step: c,
                first,
                row_step: geo.stride[0] * sh,
                dst,
                out: [oh, ow],
            });
            return;
        }
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
                    copy_row(inside, &x[start..start + inside.len()]);
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

/// One row of [`im2col`] for a kernel offset whose every output row reads one unbroken run of
/// input columns: for each sample, its `[H', W']` block copied row by row from the plane at
/// `bases[sample * step] + first`, input rows `row_step` apart.
struct CopyWindows<'a, T> {
    x: &'a [T],
    bases: &'a [usize],
    step: usize,
    first: usize,
    row_step: usize,
    dst: &'a mut [MaybeUninit<T>],
    out: [usize; 2],
}

impl<T: Copy> simd::Kernel for CopyWindows<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let [oh, ow] = self.out;
        if oh * ow == 0 {
            return;
        }
        let bases = self.bases.iter().step_by(self.step);
        for (dst, &base) in self.dst.chunks_exact_mut(oh * ow).zip(bases) {
            for (oi, dst) in dst.chunks_exact_mut(ow).enumerate() {
                copy_row(dst, &self.x[base + self.first + oi * self.row_step..][..ow]);
            }
        }
    }
}

/// `dst = src` (equal lengths) for the short rows of a column matrix (a 3x3 kernel over a 13x13
/// plane gives rows of 11) as a few fixed-size block copies, the last block of each size ending
/// at the row's end and overlapping the one before (elements 0..8, then 3..11): a plain loop
/// becomes a call to `memcpy` per row (232,000 of them in one training step of a small CNN), or
/// copies its tail one element at a time. Rows of 32 and more are copied as one slice.
#[inline(always)]
fn copy_row<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T]) {
    let len = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..len], &src[..len]);
    match len {
        32.. => {
            for (d, &s) in dst.iter_mut().zip(src) {
                d.write(s);
            }
        }
        16.. => copy_ends::<T, 16>(dst, src),
        8.. => copy_ends::<T, 8>(dst, src),
        4.. => copy_ends::<T, 4>(dst, src),
        _ => {
            for (d, &s) in dst.iter_mut().zip(src) {
                d.write(s);
            }
        }
    }
}

/// The first and the last `B` elements of `src` into `dst` (equal lengths from `B` to `2B`): the
/// whole row, the middle written twice with the same values. Straight-line code, so the two
/// copies stay vector moves.
#[inline(always)]
fn copy_ends<T: Copy, const B: usize>(dst: &mut [MaybeUninit<T>], src: &[T]) {
    let copy = |dst: Option<&mut [MaybeUninit<T>; B]>, src: Option<&[T; B]>| {
        if let (Some(dst), Some(src)) = (dst, src) {
            // One array copy: an element loop here became scalar moves where AVX-512 is enabled.
            *dst = src.map(MaybeUninit::new);
        }
    };
    copy(dst.first_chunk_mut::<B>(), src.first_chunk::<B>());
    copy(dst.last_chunk_mut::<B>(), src.last_chunk::<B>());
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
    // No padding, stride 1, no dilation: each kernel offset adds a whole `[H', W']` block of the
    // matrix to the plane, shifted by the offset.
    let whole = geo.stride == [1, 1] && geo.padding == [0, 0] && geo.dilation == [1, 1];
    for_each_row(&mut out, h * w, |plane, dst| {
        let (sample, channel) = (plane / c, plane % c);
        if whole {
            let src = &cols[channel * geo.offsets() * row + sample * positions..];
            simd::dispatch(AddWindows { src, row, dst, kernel: geo.kernel, out: geo.out, width: w });
            return;
        }
        for r in runs.iter().filter(|r| r.hi > r.lo) {
            let src = &cols[(channel * geo.offsets() + r.offset) * row + sample * positions + r.oi * ow..];
            let src = &src[r.lo..r.hi];
            let dst = &mut dst[r.row * w + r.col..];
            if stride == 1 {
                add_row(&mut dst[..src.len()], src);
            } else {
                for (d, &s) in dst.iter_mut().step_by(stride).zip(src) {
                    *d = d.add(s);
                }
            }
        }
    });
    out
}

/// One plane of [`col2im`] with no padding, stride 1 and no dilation: kernel offset `(ki, kj)`
/// adds its `[H', W']` block of the matrix (`src` from offset `(0, 0)`'s block, the offsets' rows
/// `row` elements apart) to the plane `dst` (rows of `width`) from row `ki`, column `kj` on. The
/// offsets go in order, so each element's sum runs in the same order as in the general path.
struct AddWindows<'a, T> {
    src: &'a [T],
    row: usize,
    dst: &'a mut [T],
    kernel: [usize; 2],
    out: [usize; 2],
    width: usize,
}

impl<T: Float> simd::Kernel for AddWindows<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let ([kh, kw], [oh, ow]) = (self.kernel, self.out);
        if ow == 0 {
            return;
        }
        for ki in 0..kh {
            for kj in 0..kw {
                let block = &self.src[(ki * kw + kj) * self.row..][..oh * ow];
                for (oi, src) in block.chunks_exact(ow).enumerate() {
                    add_row(&mut self.dst[(ki + oi) * self.width + kj..][..ow], src);
                }
            }
        }
    }
}

/// `dst += src` (equal lengths) for the short rows of a column matrix's gradient (rows of 11
/// for a 3x3 kernel over a 13x13 plane). Rows of 4 to 31 are two fixed-size blocks, the first
/// and the last `B` elements, both summed before either is stored: where they overlap both hold
/// the same sums, so storing the second over the first changes nothing. Straight-line code, so
/// the blocks stay vector adds (a plain loop of unknown length runs element by element). Longer
/// rows go eight at a time, then the rest one by one.
#[inline(always)]
fn add_row<T: Float>(dst: &mut [T], src: &[T]) {
    let len = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..len], &src[..len]);
    match len {
        16..32 => add_ends::<T, 16>(dst, src),
        8..16 => add_ends::<T, 8>(dst, src),
        4..8 => add_ends::<T, 4>(dst, src),
        _ => {
            let (dst8, dst_rest) = dst.as_chunks_mut::<8>();
            let (src8, src_rest) = src.as_chunks::<8>();
            for (d, s) in dst8.iter_mut().zip(src8) {
                for k in 0..8 {
                    d[k] = d[k].add(s[k]);
                }
            }
            for (d, &s) in dst_rest.iter_mut().zip(src_rest) {
                *d = d.add(s);
            }
        }
    }
}

/// `dst += src` for rows of `B` to `2B` elements (see [`add_row`]).
#[inline(always)]
fn add_ends<T: Float, const B: usize>(dst: &mut [T], src: &[T]) {
    let sum = |d: Option<&[T; B]>, s: Option<&[T; B]>| -> Option<[T; B]> {
        let (d, s) = (d?, s?);
        Some(std::array::from_fn(|k| d[k].add(s[k])))
    };
    let first = sum(dst.first_chunk::<B>(), src.first_chunk::<B>());
    let last = sum(dst.last_chunk::<B>(), src.last_chunk::<B>());
    if let (Some(first), Some(d)) = (first, dst.first_chunk_mut::<B>()) {
        *d = first;
    }
    if let (Some(last), Some(d)) = (last, dst.last_chunk_mut::<B>()) {
        *d = last;
    }
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
        *sum = simd::dispatch(ChannelRows { g, channel, channels, positions, dst });
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

/// One channel's row of [`channels_first`]: each sample's `positions` values of channel
/// `channel` copied from `g` (`[N, O, L]`) into `dst` in turn, and the channel's sum — each
/// sample's part summed as `sum_lanes` does (eight interleaved partial sums, then the tail) and
/// the parts added in sample order — in one pass. (Copying first and then calling `sum_lanes`
/// on the row, the same additions, measured 45 and 131 µs on the small CNN's two convolutions
/// against 31 and 70 for the one pass.)
struct ChannelRows<'a, T> {
    g: &'a [T],
    channel: usize,
    channels: usize,
    positions: usize,
    dst: &'a mut [MaybeUninit<T>],
}

impl<T: Float> simd::Kernel for ChannelRows<'_, T> {
    type Output = T;
    #[inline(always)]
    fn run(self) -> T {
        let mut total = T::ZERO;
        if self.positions == 0 {
            return total;
        }
        for (sample, dst) in self.dst.chunks_exact_mut(self.positions).enumerate() {
            let src = &self.g[(sample * self.channels + self.channel) * self.positions..][..self.positions];
            let mut lanes = [T::ZERO; 8];
            let (src8, tail) = src.as_chunks::<8>();
            let (dst8, dst_tail) = dst.as_chunks_mut::<8>();
            for (d, s) in dst8.iter_mut().zip(src8) {
                *d = s.map(MaybeUninit::new);
                for (l, &x) in lanes.iter_mut().zip(s) {
                    *l = l.add(x);
                }
            }
            for (d, &x) in dst_tail.iter_mut().zip(tail) {
                d.write(x);
            }
            let part = lanes.iter().fold(T::ZERO, |a, &b| a.add(b));
            total = total.add(tail.iter().fold(part, |a, &b| a.add(b)));
        }
        total
    }
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
    if geo.tiles() {
        let (x, layout) = unit_columns(x, layout);
        return max_pool_tiles(&x, &layout, geo);
    }
    let (x, layout) = stepping(x, layout);
    max_pool_windows(&x, &layout, geo)
}

/// [`max_pool`] for any geometry: each kernel offset in turn, over all output positions.
fn max_pool_windows<T: Float>(x: &[T], layout: &Layout, geo: &WindowGeometry) -> Vec<T> {
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
    if geo.tiles() {
        let (x, layout) = unit_columns(x, layout);
        return max_pool_tiles_backward(&x, &layout, y, g, geo);
    }
    let (x, layout) = stepping(x, layout);
    max_pool_windows_backward(&x, &layout, y, g, geo)
}

/// [`max_pool_backward`] for any geometry.
fn max_pool_windows_backward<T: Float>(
    x: &[T],
    layout: &Layout,
    y: &[T],
    g: &[T],
    geo: &WindowGeometry,
) -> Vec<T> {
    let [_, _, h, w] = geo.input;
    let [sh, sw] = [layout.strides[2], layout.strides[3]];
    let (positions, ow, step, stride) = (geo.positions(), geo.out[1], geo.stride[1] * sw, geo.stride[1]);
    let neg_inf = T::from_f32(f32::NEG_INFINITY);
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

/// 1 where `v` is the window's maximum `best`, else 0 (never where `best` is NaN).
#[inline(always)]
fn hit<T: Float>(v: T, best: T) -> T {
    if v == best { T::ONE } else { T::ZERO }
}

/// `x` with a layout whose columns are adjacent (a W stride of 1), gathered when they are not.
fn unit_columns<'a, T: Copy>(x: &'a [T], layout: &Layout) -> (Cow<'a, [T]>, Layout) {
    if layout.strides[3] == 1 {
        (Cow::Borrowed(x), layout.clone())
    } else {
        (contiguous(x, layout), Layout::contiguous(&layout.shape))
    }
}

/// [`max_pool`] where the windows tile the input ([`WindowGeometry::tiles`]) and its columns are
/// adjacent: output row by output row, each window's elements in the general path's order (its
/// rows, then its columns), planes spread over threads.
fn max_pool_tiles<T: Float>(x: &[T], layout: &Layout, geo: &WindowGeometry) -> Vec<T> {
    let bases: Vec<usize> = plane_bases(layout, geo).collect();
    let fill = |plane: usize, out: &mut [MaybeUninit<T>]| {
        let tiles = Tiles { x: &x[bases[plane]..], row_stride: layout.strides[2], geo };
        simd::dispatch(PoolTiles { tiles, out });
    };
    // SAFETY: `PoolTiles` writes every element of its plane.
    unsafe { filled(geo.planes() * geo.positions(), |out| for_each_row(out, geo.positions(), fill)) }
}

/// [`max_pool_backward`] where the windows tile the input and its columns are adjacent: each
/// input element lies in at most one window, so each output row's windows are counted and
/// shared out on their own, planes spread over threads. The arithmetic is the general path's,
/// element for element (`0 + hit · share`).
fn max_pool_tiles_backward<T: Float>(
    x: &[T],
    layout: &Layout,
    y: &[T],
    g: &[T],
    geo: &WindowGeometry,
) -> Vec<T> {
    const SHARE_ON_STACK: usize = 64;
    let ([_, _, h, w], ow) = (geo.input, geo.out[1]);
    let positions = geo.positions();
    let bases: Vec<usize> = plane_bases(layout, geo).collect();
    let fill = |plane: usize, dst: &mut [MaybeUninit<T>]| {
        let tiles = Tiles { x: &x[bases[plane]..], row_stride: layout.strides[2], geo };
        let (y, g) = (&y[plane * positions..][..positions], &g[plane * positions..][..positions]);
        // The row of shares lives on the stack where it fits: planes are small and many (3,072
        // in one step of a small CNN), and each would otherwise allocate and free it.
        let (mut stack, mut heap) = ([T::ZERO; SHARE_ON_STACK], Vec::new());
        let share = if ow <= SHARE_ON_STACK {
            &mut stack[..ow]
        } else {
            heap.resize(ow, T::ZERO);
            &mut heap[..]
        };
        simd::dispatch(PoolTilesBackward { tiles, y, g, share, dst });
    };
    // SAFETY: `PoolTilesBackward` writes every element of its plane.
    unsafe { filled(geo.planes() * h * w, |out| for_each_row(out, h * w, fill)) }
}

/// One `[H, W]` plane whose columns are adjacent, read as the windows that tile it.
#[derive(Clone, Copy)]
struct Tiles<'a, T> {
    /// The plane from its first element.
    x: &'a [T],
    row_stride: usize,
    geo: &'a WindowGeometry,
}

impl<'a, T> Tiles<'a, T> {
    /// Input row `ki` of the windows of output row `oi`: `ow` windows of `kw` elements.
    #[inline(always)]
    fn row(&self, oi: usize, ki: usize) -> &'a [T] {
        let ([kh, kw], ow) = (self.geo.kernel, self.geo.out[1]);
        &self.x[(oi * kh + ki) * self.row_stride..][..ow * kw]
    }
}

/// One plane of [`max_pool_tiles`]: `out` is its `[H', W']` result.
struct PoolTiles<'a, T> {
    tiles: Tiles<'a, T>,
    out: &'a mut [MaybeUninit<T>],
}

impl<T: Float> simd::Kernel for PoolTiles<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        match self.tiles.geo.kernel {
            [2, 2] => self.blocks::<2, 2>(),
            [3, 3] => self.blocks::<3, 3>(),
            [_, 2] => self.rows::<2>(),
            [_, 3] => self.rows::<3>(),
            _ => self.rows::<0>(),
        }
    }
}

impl<T: Float> PoolTiles<'_, T> {
    /// The plane for windows `H` by `W` in blocks of windows, as [`PoolTilesBackward::blocks`]
    /// does it (a window's maximum depends on its inputs alone).
    #[inline(always)]
    fn blocks<const H: usize, const W: usize>(self) {
        let PoolTiles { tiles, out } = self;
        let ow = tiles.geo.out[1];
        for (oi, out) in out.chunks_exact_mut(ow).enumerate() {
            let rows: [&[T]; H] = std::array::from_fn(|ki| tiles.row(oi, ki));
            match ow {
                8.. => max_blocks::<T, H, W, 8>(&rows, out),
                4.. => max_blocks::<T, H, W, 4>(&rows, out),
                _ => max_blocks::<T, H, W, 1>(&rows, out),
            }
        }
    }

    /// The plane for windows `W` wide, or of the geometry's width where `W` is 0: a width known
    /// at compile time unrolls the loops over each window and lets them vectorise.
    #[inline(always)]
    fn rows<const W: usize>(self) {
        let PoolTiles { tiles, out } = self;
        let ([kh, kw], ow) = (tiles.geo.kernel, tiles.geo.out[1]);
        let kw = if W == 0 { kw } else { W };
        let neg_inf = T::from_f32(f32::NEG_INFINITY);
        for (oi, out) in out.chunks_exact_mut(ow).enumerate() {
            for (o, window) in out.iter_mut().zip(tiles.row(oi, 0).chunks_exact(kw)) {
                o.write(window.iter().fold(neg_inf, |best, &v| best.maximum(v)));
            }
            // SAFETY: every element of `out` was written by the loop above.
            let out = unsafe { &mut *(out as *mut [MaybeUninit<T>] as *mut [T]) };
            for ki in 1..kh {
                for (o, window) in out.iter_mut().zip(tiles.row(oi, ki).chunks_exact(kw)) {
                    *o = window.iter().fold(*o, |best, &v| best.maximum(v));
                }
            }
        }
    }
}

/// One plane of [`max_pool_tiles_backward`]: `y` and `g` are its `[H', W']` result and that
/// result's gradient, `dst` its `[H, W]` input gradient; `share` holds one output row.
struct PoolTilesBackward<'a, T> {
    tiles: Tiles<'a, T>,
    y: &'a [T],
    g: &'a [T],
    share: &'a mut [T],
    dst: &'a mut [MaybeUninit<T>],
}

impl<T: Float> simd::Kernel for PoolTilesBackward<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        match self.tiles.geo.kernel {
            [2, 2] => self.blocks::<2, 2>(),
            [3, 3] => self.blocks::<3, 3>(),
            [_, 2] => self.rows::<2>(),
            [_, 3] => self.rows::<3>(),
            _ => self.rows::<0>(),
        }
    }
}

impl<T: Float> PoolTilesBackward<'_, T> {
    /// The plane for windows `H` by `W`, in blocks of 8 windows of an output row (4 or 1 where
    /// the row is shorter), the last block of a row ending at its end and overlapping the one
    /// before. A block is counted, shared out and written from its own inputs alone, so a window
    /// done twice gets the same values twice; rows of 13 or 5 windows (the planes of a small
    /// CNN) then run as two blocks of fixed size, which vectorise, instead of a vector loop that
    /// never runs and a scalar tail.
    #[inline(always)]
    fn blocks<const H: usize, const W: usize>(self) {
        let PoolTilesBackward { tiles, y, g, dst, .. } = self;
        let (w, [oh, ow]) = (tiles.geo.input[3], tiles.geo.out);
        // Rows below the last window are read by none: their gradient is 0.
        let (windows, below) = dst.split_at_mut(oh * H * w);
        for d in below {
            d.write(T::ZERO);
        }
        let rows = windows.chunks_exact_mut(H * w).zip(y.chunks_exact(ow)).zip(g.chunks_exact(ow));
        for (oi, ((dst, y), g)) in rows.enumerate() {
            // Columns right of the last window are read by none.
            for dst in dst.chunks_exact_mut(w) {
                for d in &mut dst[ow * W..] {
                    d.write(T::ZERO);
                }
            }
            let rows: [&[T]; H] = std::array::from_fn(|ki| tiles.row(oi, ki));
            match ow {
                8.. => window_blocks::<T, H, W, 8>(&rows, y, g, dst, w),
                4.. => window_blocks::<T, H, W, 4>(&rows, y, g, dst, w),
                _ => window_blocks::<T, H, W, 1>(&rows, y, g, dst, w),
            }
        }
    }

    /// The plane for windows `W` wide, or of the geometry's width where `W` is 0 (see
    /// [`PoolTiles::rows`]).
    #[inline(always)]
    fn rows<const W: usize>(self) {
        let PoolTilesBackward { tiles, y, g, share, dst } = self;
        let ([kh, kw], w, ow) = (tiles.geo.kernel, tiles.geo.input[3], tiles.geo.out[1]);
        let kw = if W == 0 { kw } else { W };
        // Rows below the last window are read by none: their gradient is 0.
        let (windows, below) = dst.split_at_mut(tiles.geo.out[0] * kh * w);
        for d in below {
            d.write(T::ZERO);
        }
        let rows = windows.chunks_exact_mut(kh * w).zip(y.chunks_exact(ow)).zip(g.chunks_exact(ow));
        for (oi, ((dst, y), g)) in rows.enumerate() {
            // How many elements of each window equal its maximum, then each one's share. The
            // first row of windows starts the counts (from 0, as the general path does) rather
            // than clearing the row first: a `memset` call per output row of 5 or 13 windows.
            let windows = tiles.row(oi, 0).chunks_exact(kw);
            for ((count, window), &best) in share.iter_mut().zip(windows).zip(y) {
                *count = window.iter().fold(T::ZERO, |c, &v| c.add(hit(v, best)));
            }
            for ki in 1..kh {
                let windows = tiles.row(oi, ki).chunks_exact(kw);
                for ((count, window), &best) in share.iter_mut().zip(windows).zip(y) {
                    *count = window.iter().fold(*count, |c, &v| c.add(hit(v, best)));
                }
            }
            for (s, &g) in share.iter_mut().zip(g) {
                *s = g.div(*s);
            }
            for (ki, dst) in dst.chunks_exact_mut(w).enumerate() {
                // Columns right of the last window are read by none.
                let (inside, right) = dst.split_at_mut(ow * kw);
                let windows = inside.chunks_exact_mut(kw).zip(tiles.row(oi, ki).chunks_exact(kw));
                for ((d, window), (&best, &s)) in windows.zip(y.iter().zip(&*share)) {
                    for (d, &v) in d.iter_mut().zip(window) {
                        d.write(T::ZERO.add(hit(v, best).mul(s)));
                    }
                }
                for d in right {
                    d.write(T::ZERO);
                }
            }
        }
    }
}

/// The block starts of a row of `len` windows in blocks of `b` (at most `len`): every `b`-th
/// window, then the last block, which ends at the row's end.
fn block_starts(len: usize, b: usize) -> impl Iterator<Item = usize> {
    let last = len.saturating_sub(b);
    (0..last).step_by(b).chain(std::iter::once(last))
}

/// One output row of [`PoolTiles::blocks`] in blocks of `B` windows (`B` at most the row's
/// length): `rows` are the row's `H` input rows (`W` elements a window), `out` its maxima, each
/// over its window's rows, then columns, in order (NaN-propagating; the first of equal values).
#[inline(always)]
fn max_blocks<T: Float, const H: usize, const W: usize, const B: usize>(
    rows: &[&[T]; H],
    out: &mut [MaybeUninit<T>],
) {
    let neg_inf = T::from_f32(f32::NEG_INFINITY);
    for j in block_starts(out.len(), B) {
        let mut best = [neg_inf; B];
        for row in rows {
            let row = &row[j * W..][..B * W];
            for (b, best) in best.iter_mut().enumerate() {
                for kj in 0..W {
                    *best = best.maximum(row[b * W + kj]);
                }
            }
        }
        for (o, &best) in out[j..][..B].iter_mut().zip(&best) {
            o.write(best);
        }
    }
}

/// One output row of [`PoolTilesBackward::blocks`] in blocks of `B` windows (`B` at most the
/// row's length): `rows` are the row's `H` input rows (`W` elements a window), `y` and `g` its
/// maxima and their gradients, `dst` its `H` rows of `w` input gradients.
#[inline(always)]
fn window_blocks<T: Float, const H: usize, const W: usize, const B: usize>(
    rows: &[&[T]; H],
    y: &[T],
    g: &[T],
    dst: &mut [MaybeUninit<T>],
    w: usize,
) {
    for j in block_starts(y.len(), B) {
        let (Some(best), Some(grad)) = (y[j..].first_chunk::<B>(), g[j..].first_chunk::<B>()) else {
            return;
        };
        // How many elements of each window equal its maximum (counted from 0 in the window's
        // order, as the general path does), then each one's share.
        let mut count = [T::ZERO; B];
        for row in rows {
            let row = &row[j * W..][..B * W];
            for (b, count) in count.iter_mut().enumerate() {
                for kj in 0..W {
                    *count = count.add(hit(row[b * W + kj], best[b]));
                }
            }
        }
        let share: [T; B] = std::array::from_fn(|b| grad[b].div(count[b]));
        for (ki, row) in rows.iter().enumerate() {
            let row = &row[j * W..][..B * W];
            let dst = &mut dst[ki * w + j * W..][..B * W];
            for b in 0..B {
                for kj in 0..W {
                    dst[b * W + kj].write(T::ZERO.add(hit(row[b * W + kj], best[b]).mul(share[b])));
                }
            }
        }
    }
}

impl CpuStorage {
    /// `[N, C, H', W']`: the maximum of each window of this `[N, C, H, W]` view, padding counting
    /// as -inf.
    pub(crate) fn max_pool(&self, layout: &Layout, geometry: &WindowGeometry) -> CpuStorage {
        with_float_storage!(self, v => {
            CpuStorage::from_vec(max_pool(v, layout, geometry))
        }, _ => unreachable!("max_pool2d runs on floating data only"))
    }

    /// The gradient of [`CpuStorage::max_pool`] from its input `x` (this storage), its output `y`
    /// and the upstream gradient `g`, all of one dtype.
    pub(crate) fn max_pool_backward(
        &self,
        lx: &Layout,
        (y, ly): (&CpuStorage, &Layout),
        (g, lg): (&CpuStorage, &Layout),
        geometry: &WindowGeometry,
    ) -> CpuStorage {
        macro_rules! arm {
            ($x:expr, $y:expr, $g:expr) => {{
                let (y, g) = (contiguous($y, ly), contiguous($g, lg));
                CpuStorage::from_vec(max_pool_backward($x, lx, &y, &g, geometry))
            }};
        }
        match (self, y, g) {
            (CpuStorage::F32(x), CpuStorage::F32(y), CpuStorage::F32(g)) => arm!(x, y, g),
            (CpuStorage::F64(x), CpuStorage::F64(y), CpuStorage::F64(g)) => arm!(x, y, g),
            (CpuStorage::F16(x), CpuStorage::F16(y), CpuStorage::F16(g)) => arm!(x, y, g),
            (CpuStorage::BF16(x), CpuStorage::BF16(y), CpuStorage::BF16(g)) => arm!(x, y, g),
            _ => unreachable!("max_pool2d's gradient is recorded for floating tensors of one dtype only"),
        }
    }
}

#[cfg(test)]
mod tests {
    use half::bf16;
    use proptest::prelude::*;

    use super::{
        Float, WindowGeometry, col2im, im2col, max_pool_tiles, max_pool_tiles_backward, max_pool_windows,
    };
    use super::{max_pool_windows_backward, unit_columns};
    use crate::shape::Layout;

    /// Values where windows tie, hold NaN, both zeros or -inf: what decides which element is a
    /// window's maximum and which share its gradient.
    const AWKWARD: [f32; 9] = [1.0, 1.0, -2.0, 0.0, -0.0, f32::NAN, f32::NEG_INFINITY, 3.5, -1.0];

    /// A tiling geometry over `[n, c, h, w]`.
    fn tiling(input: [usize; 4], kernel: [usize; 2]) -> WindowGeometry {
        let out = [input[2] / kernel[0], input[3] / kernel[1]];
        WindowGeometry { input, kernel, stride: kernel, padding: [0, 0], dilation: [1, 1], out }
    }

    /// The tiled path against the general one, bit for bit, forward and backward: the first NaN
    /// or the first of equal maxima (`-0` before `0`) in the window's order, and the same share
    /// of the gradient for each tied element.
    fn tiles_same_as_windows<T: Float + std::fmt::Debug>(
        picks: &[usize],
        grads: &[f32],
        geo: &WindowGeometry,
        layout: &Layout,
        bits: impl Fn(T) -> u64,
    ) {
        let x: Vec<T> = picks.iter().map(|&p| T::from_f32(AWKWARD[p % AWKWARD.len()])).collect();
        let (tiled_x, tiled_layout) = unit_columns(&x, layout);
        let y = max_pool_tiles(&tiled_x, &tiled_layout, geo);
        let want = max_pool_windows(&x, layout, geo);
        let same = |a: &[T], b: &[T]| a.iter().map(|&v| bits(v)).eq(b.iter().map(|&v| bits(v)));
        assert!(same(&y, &want), "forward of {geo:?} {layout:?}: {y:?} vs {want:?}");
        let g: Vec<T> = (0..y.len()).map(|i| T::from_f32(grads[i % grads.len()])).collect();
        let dx = max_pool_tiles_backward(&tiled_x, &tiled_layout, &y, &g, geo);
        let want = max_pool_windows_backward(&x, layout, &y, &g, geo);
        assert!(same(&dx, &want), "backward of {geo:?} {layout:?}: {dx:?} vs {want:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn tiled_max_pool_matches_the_general_path(
            n in 1usize..3, c in 1usize..3, kernel in [1usize..5, 1usize..5],
            extra in [0usize..4, 0usize..4], windows in [1usize..6, 1usize..20],
            row_pad in 0usize..3, transposed in any::<bool>(),
            picks in proptest::collection::vec(0usize..9, 1..64),
            grads in proptest::collection::vec(-4.0f32..4.0, 1..16),
        ) {
            let [h, w] = [0, 1].map(|i| windows[i] * kernel[i] + extra[i]);
            let geo = tiling([n, c, h, w], kernel);
            // Rows `row_pad` elements longer than the plane is wide (a view of a wider tensor), or
            // the plane stored transposed (columns not adjacent: gathered first).
            let layout = if transposed {
                Layout { shape: vec![n, c, h, w], strides: vec![c * h * w, h * w, 1, h], offset: 0 }
            } else {
                let row = w + row_pad;
                Layout { shape: vec![n, c, h, w], strides: vec![c * h * row, h * row, row, 1], offset: row_pad }
            };
            let len = layout.offset + n * layout.strides[0];
            let picks: Vec<usize> = (0..len).map(|i| picks[i % picks.len()] + i / picks.len()).collect();
            tiles_same_as_windows::<f32>(&picks, &grads, &geo, &layout, |v| u64::from(v.to_bits()));
            tiles_same_as_windows::<f64>(&picks, &grads, &geo, &layout, f64::to_bits);
            tiles_same_as_windows::<bf16>(&picks, &grads, &geo, &layout, |v| u64::from(v.to_bits()));
        }
    }

    /// The column matrix by its definition: row `(c, ki, kj)`, column `(sample, oi, oj)` holds
    /// `x[sample, c, oi·sh + ki·dh - ph, oj·sw + kj·dw - pw]`, 0 where that falls into the padding.
    fn columns_by_definition(x: &[f32], layout: &Layout, geo: &WindowGeometry) -> Vec<f32> {
        let [n, c, h, w] = geo.input;
        let ([kh, kw], [oh, ow]) = (geo.kernel, geo.out);
        let mut out = Vec::with_capacity(c * kh * kw * n * oh * ow);
        for (ch, ki, kj) in
            (0..c).flat_map(|ch| (0..kh).flat_map(move |ki| (0..kw).map(move |kj| (ch, ki, kj))))
        {
            for (s, oi, oj) in
                (0..n).flat_map(|s| (0..oh).flat_map(move |oi| (0..ow).map(move |oj| (s, oi, oj))))
            {
                let i = (oi * geo.stride[0] + ki * geo.dilation[0]).checked_sub(geo.padding[0]);
                let j = (oj * geo.stride[1] + kj * geo.dilation[1]).checked_sub(geo.padding[1]);
                out.push(match (i, j) {
                    (Some(i), Some(j)) if i < h && j < w => {
                        let st = &layout.strides;
                        x[layout.offset + s * st[0] + ch * st[1] + i * st[2] + j * st[3]]
                    }
                    _ => 0.0,
                });
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn im2col_matches_the_definition(
            n in 1usize..3, c in 1usize..3, kh in 1usize..4, kw in prop::sample::select(vec![1usize, 2, 3, 5, 7]),
            stride in [1usize..3, 1usize..3], padding in [0usize..3, 0usize..3], dilation in [1usize..3, 1usize..3],
            h in 1usize..8, w in 1usize..80, row_pad in 0usize..3,
        ) {
            // Widths up to 80: short and long output rows, copied whole or in pieces.
            let geo = geometry([n, c, h, w], [kh, kw], stride, padding, dilation);
            prop_assume!(geo.is_some());
            let geo = geo.expect("assumed");
            // Rows `row_pad` elements longer than the plane is wide, as in a view of a wider tensor.
            let row = w + row_pad;
            let layout = Layout { shape: vec![n, c, h, w], strides: vec![c * h * row, h * row, row, 1], offset: row_pad };
            let x: Vec<f32> = (0..row_pad + n * c * h * row).map(|i| i as f32 + 0.25).collect();
            let got = im2col(&x, &layout, &geo);
            let want = columns_by_definition(&x, &layout, &geo);
            prop_assert!(got.iter().map(|v| v.to_bits()).eq(want.iter().map(|v| v.to_bits())), "{geo:?}");
        }
    }

    /// The geometry of a convolution window over `input`, `None` when the window does not fit.
    fn geometry(
        input: [usize; 4],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
    ) -> Option<WindowGeometry> {
        let reach = |axis: usize| dilation[axis] * (kernel[axis] - 1) + 1;
        let size = [input[2], input[3]];
        if (0..2).any(|axis| size[axis] + 2 * padding[axis] < reach(axis)) {
            return None;
        }
        let out = [0, 1].map(|axis| (size[axis] + 2 * padding[axis] - reach(axis)) / stride[axis] + 1);
        Some(WindowGeometry { input, kernel, stride, padding, dilation, out })
    }

    /// The gradient of the column matrix by its definition: each entry added to the input element
    /// it was read from, entries in the column matrix's order (so each element's sum runs over the
    /// kernel offsets in order, as in [`col2im`]).
    fn col2im_by_definition(cols: &[f32], geo: &WindowGeometry) -> Vec<f32> {
        let [n, c, h, w] = geo.input;
        let ([kh, kw], [oh, ow]) = (geo.kernel, geo.out);
        let mut out = vec![0.0f32; n * c * h * w];
        let mut entries = cols.iter();
        for (ch, ki, kj) in
            (0..c).flat_map(|ch| (0..kh).flat_map(move |ki| (0..kw).map(move |kj| (ch, ki, kj))))
        {
            for (s, oi, oj) in
                (0..n).flat_map(|s| (0..oh).flat_map(move |oi| (0..ow).map(move |oj| (s, oi, oj))))
            {
                let value = *entries.next().expect("one entry per row and column");
                let i = (oi * geo.stride[0] + ki * geo.dilation[0]).checked_sub(geo.padding[0]);
                let j = (oj * geo.stride[1] + kj * geo.dilation[1]).checked_sub(geo.padding[1]);
                if let (Some(i), Some(j)) = (i, j)
                    && i < h
                    && j < w
                {
                    out[((s * c + ch) * h + i) * w + j] += value;
                }
            }
        }
        out
    }

    /// [`col2im`] against its definition, bit for bit, where `geo` is a window that fits.
    fn col2im_agrees(geo: Option<WindowGeometry>) -> Result<(), TestCaseError> {
        prop_assume!(geo.is_some());
        let geo = geo.expect("assumed");
        let [n, c, _, _] = geo.input;
        let len = c * geo.offsets() * n * geo.positions();
        // Values whose sums round, so that a different order of the additions shows.
        let cols: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin() * 1e3 + 0.1).collect();
        let got = col2im(&cols, &geo);
        let want = col2im_by_definition(&cols, &geo);
        prop_assert!(got.iter().map(|v| v.to_bits()).eq(want.iter().map(|v| v.to_bits())), "{geo:?}");
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn col2im_matches_the_definition(
            n in 1usize..3, c in 1usize..3, kh in 1usize..4, kw in prop::sample::select(vec![1usize, 2, 3, 5]),
            stride in [1usize..3, 1usize..3], padding in [0usize..3, 0usize..3], dilation in [1usize..3, 1usize..3],
            h in 1usize..8, w in 1usize..60,
        ) {
            // Widths up to 60: rows of every block size and of none, and longer ones.
            col2im_agrees(geometry([n, c, h, w], [kh, kw], stride, padding, dilation))?;
        }

        #[test]
        fn col2im_without_padding_or_stride_matches_the_definition(
            n in 1usize..3, c in 1usize..3, kh in 1usize..4, kw in prop::sample::select(vec![1usize, 2, 3, 5]),
            h in 1usize..9, w in 1usize..60,
        ) {
            // The whole-block path (stride 1, no padding, no dilation), rows of 1 to 59.
            col2im_agrees(geometry([n, c, h, w], [kh, kw], [1, 1], [0, 0], [1, 1]))?;
        }
    }

    #[test]
    fn a_nan_window_takes_the_first_nan_and_ties_share_the_gradient() {
        // One 2x2 window per case, in window order (row by row).
        let geo = tiling([1, 4, 2, 2], [2, 2]);
        let x = [
            [1.0, 2.0, 2.0, 0.5],
            [f32::NAN, 5.0, 1.0, 2.0],
            [-0.0, 0.0, -1.0, -3.0],
            [f32::NEG_INFINITY; 4],
        ]
        .concat();
        let layout = Layout::contiguous(&geo.input);
        let y = max_pool_tiles(&x, &layout, &geo);
        assert_eq!(y[0], 2.0);
        assert!(y[1].is_nan());
        assert_eq!((y[2], y[2].is_sign_negative()), (0.0, true), "-0 comes first in its window");
        assert_eq!(y[3], f32::NEG_INFINITY);
        let dx = max_pool_tiles_backward(&x, &layout, &y, &[4.0, 1.0, 6.0, 8.0], &geo);
        assert_eq!(dx[..4], [0.0, 2.0, 2.0, 0.0], "a tie shares the gradient evenly");
        assert!(dx[4..8].iter().all(|v| v.is_nan()), "nothing equals NaN: 1 / 0 counts, 0 · inf");
        assert_eq!(dx[8..], [3.0, 3.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0]);
    }
}
