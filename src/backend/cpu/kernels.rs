//! Element-wise, reduction and indexing kernels over strided views.

use half::{bf16, f16};
use rayon::prelude::*;

use super::{PARALLEL_THRESHOLD, contiguous};
use crate::dtype::WithDType;
use crate::shape::Layout;

/// `f(x)` for every element of the view, in row-major order.
pub(crate) fn unary_map<T, U>(data: &[T], layout: &Layout, f: impl Fn(T) -> U + Sync) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync + Default,
{
    if layout.is_contiguous() {
        let src = &data[layout.offset..layout.offset + layout.numel()];
        if src.len() >= PARALLEL_THRESHOLD {
            let mut out = super::zeroed(src.len());
            for_each_chunk(&mut out, 1, |start, o| {
                for (o, &x) in o.iter_mut().zip(&src[start..]) {
                    *o = f(x);
                }
            });
            out
        } else {
            src.iter().map(|&x| f(x)).collect()
        }
    } else {
        layout.offsets().map(|o| f(data[o])).collect()
    }
}

/// `f(a, b)` over the broadcast of two views to `out_shape` (the front end has checked it).
pub(crate) fn binary_map<T, U>(
    lhs: &[T],
    lhs_layout: &Layout,
    rhs: &[T],
    rhs_layout: &Layout,
    out_shape: &[usize],
    f: impl Fn(T, T) -> U + Sync,
) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync + Default,
{
    let mut out = super::zeroed(out_shape.iter().product());
    binary_map_into(&mut out, lhs, lhs_layout, rhs, rhs_layout, out_shape, f);
    out
}

/// [`binary_map`] writing into `out` (row-major, `out_shape`), e.g. a preallocated result.
pub(crate) fn binary_map_into<T, U>(
    out: &mut [U],
    lhs: &[T],
    lhs_layout: &Layout,
    rhs: &[T],
    rhs_layout: &Layout,
    out_shape: &[usize],
    f: impl Fn(T, T) -> U + Sync,
) where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync,
{
    let numel = out.len();
    let same_shape = lhs_layout.shape == out_shape && rhs_layout.shape == out_shape;
    if same_shape && lhs_layout.is_contiguous() && rhs_layout.is_contiguous() {
        let a = &lhs[lhs_layout.offset..lhs_layout.offset + numel];
        let b = &rhs[rhs_layout.offset..rhs_layout.offset + numel];
        return for_each_chunk(out, 1, |start, o| {
            for ((o, &x), &y) in o.iter_mut().zip(&a[start..]).zip(&b[start..]) {
                *o = f(x, y);
            }
        });
    }
    if rhs_layout.numel() == 1 && lhs_layout.shape == out_shape && lhs_layout.is_contiguous() {
        let (a, y) = (&lhs[lhs_layout.offset..lhs_layout.offset + numel], rhs[rhs_layout.offset]);
        return for_each_chunk(out, 1, |start, o| {
            for (o, &x) in o.iter_mut().zip(&a[start..]) {
                *o = f(x, y);
            }
        });
    }
    if lhs_layout.numel() == 1 && rhs_layout.shape == out_shape && rhs_layout.is_contiguous() {
        let (x, b) = (lhs[lhs_layout.offset], &rhs[rhs_layout.offset..rhs_layout.offset + numel]);
        return for_each_chunk(out, 1, |start, o| {
            for (o, &y) in o.iter_mut().zip(&b[start..]) {
                *o = f(x, y);
            }
        });
    }
    // A contiguous operand of the full shape against a contiguous one that repeats along the
    // leading dims (a bias row added to every row of a batch).
    let both_contiguous = lhs_layout.is_contiguous() && rhs_layout.is_contiguous();
    if both_contiguous
        && lhs_layout.shape == out_shape
        && let Some(n) = trailing_repeat(&rhs_layout.shape, out_shape)
    {
        let a = &lhs[lhs_layout.offset..lhs_layout.offset + numel];
        let row = &rhs[rhs_layout.offset..rhs_layout.offset + n];
        return for_each_chunk(out, n, |start, o| {
            for (o_row, a_row) in o.chunks_mut(n).zip(a[start..].chunks(n)) {
                for ((o, &x), &y) in o_row.iter_mut().zip(a_row).zip(row) {
                    *o = f(x, y);
                }
            }
        });
    }
    if both_contiguous
        && rhs_layout.shape == out_shape
        && let Some(n) = trailing_repeat(&lhs_layout.shape, out_shape)
    {
        let row = &lhs[lhs_layout.offset..lhs_layout.offset + n];
        let b = &rhs[rhs_layout.offset..rhs_layout.offset + numel];
        return for_each_chunk(out, n, |start, o| {
            for (o_row, b_row) in o.chunks_mut(n).zip(b[start..].chunks(n)) {
                for ((o, &x), &y) in o_row.iter_mut().zip(row).zip(b_row) {
                    *o = f(x, y);
                }
            }
        });
    }
    let l = lhs_layout.broadcast_to(out_shape);
    let r = rhs_layout.broadcast_to(out_shape);
    for ((o, i), j) in out.iter_mut().zip(l.offsets()).zip(r.offsets()) {
        *o = f(lhs[i], rhs[j]);
    }
}

/// Runs `body(start, chunk)` over `out` in chunks whose length is a multiple of `align`, on
/// rayon's threads when `out` is large.
fn for_each_chunk<U: Send>(out: &mut [U], align: usize, body: impl Fn(usize, &mut [U]) + Sync) {
    if out.len() < PARALLEL_THRESHOLD {
        return body(0, out);
    }
    let threads = rayon::current_num_threads().max(1);
    let per = out.len().div_ceil(threads * 4).next_multiple_of(align.max(1)).max(align.max(1));
    out.par_chunks_mut(per).enumerate().for_each(|(i, chunk)| body(i * per, chunk));
}

/// `Some(n)` when `shape`, aligned right, equals the trailing dims of `out` after its leading 1s
/// are dropped, so the operand's `n` contiguous elements repeat every `n` outputs.
fn trailing_repeat(shape: &[usize], out: &[usize]) -> Option<usize> {
    let first = shape.iter().position(|&d| d != 1).unwrap_or(shape.len());
    let tail = &shape[first..];
    if tail.len() > out.len() || out[out.len() - tail.len()..] != *tail {
        return None;
    }
    let n: usize = tail.iter().product();
    (n > 0).then_some(n)
}

/// Arithmetic every numeric element type supports. Integer arithmetic wraps, as PyTorch's does.
pub(crate) trait Arith: WithDType {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn pow(self, o: Self) -> Self;
    /// NaN-propagating maximum and minimum (PyTorch's `maximum`/`minimum`).
    fn maximum(self, o: Self) -> Self;
    fn minimum(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! arith_int {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)] fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)] fn pow(self, o: Self) -> Self {
                // A negative integer exponent is 0 for |base| > 1, as in PyTorch.
                match u32::try_from(o) {
                    Ok(e) => self.wrapping_pow(e),
                    Err(_) => match self as i64 { 1 => 1 as $t, -1 => if (o as i64) % 2 == 0 { 1 as $t } else { self }, _ => 0 as $t },
                }
            }
            #[inline(always)] fn maximum(self, o: Self) -> Self { if o > self { o } else { self } }
            #[inline(always)] fn minimum(self, o: Self) -> Self { if o < self { o } else { self } }
            #[inline(always)] fn neg(self) -> Self { (0 as $t).wrapping_sub(self) }
            #[inline(always)] fn abs(self) -> Self { if self < (0 as $t) { self.neg() } else { self } }
            #[inline(always)] fn is_nan(self) -> bool { false }
        }
    )*};
}
arith_int!(i64, i32, u8);

macro_rules! arith_float {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)] fn add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)] fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn pow(self, o: Self) -> Self { <$t>::from_f32(self.to_f32().powf(o.to_f32())) }
            #[inline(always)] fn maximum(self, o: Self) -> Self { if self.is_nan() || self >= o { self } else { o } }
            #[inline(always)] fn minimum(self, o: Self) -> Self { if self.is_nan() || self <= o { self } else { o } }
            #[inline(always)] fn neg(self) -> Self { -self }
            #[inline(always)] fn abs(self) -> Self { if self < <$t>::ZERO { -self } else { self } }
            #[inline(always)] fn is_nan(self) -> bool { self.is_nan() }
        }
    )*};
}
arith_float!(f16, bf16);

macro_rules! arith_native_float {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)] fn add(self, o: Self) -> Self { self + o }
            #[inline(always)] fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)] fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)] fn pow(self, o: Self) -> Self { self.powf(o) }
            #[inline(always)] fn maximum(self, o: Self) -> Self { if self.is_nan() || self >= o { self } else { o } }
            #[inline(always)] fn minimum(self, o: Self) -> Self { if self.is_nan() || self <= o { self } else { o } }
            #[inline(always)] fn neg(self) -> Self { -self }
            #[inline(always)] fn abs(self) -> Self { self.abs() }
            #[inline(always)] fn is_nan(self) -> bool { self.is_nan() }
        }
    )*};
}
arith_native_float!(f32, f64);

/// Floating-point element types: f32 and f64 natively, f16 and bf16 through f32.
pub(crate) trait Float: Arith {
    fn from_f32(v: f32) -> Self;
    fn div(self, o: Self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn erf(self) -> Self;
}

macro_rules! float_native {
    ($t:ty, $erf:path, $exp:path) => {
        impl Float for $t {
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                self.ln()
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                self.sqrt()
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                self.tanh()
            }
            #[inline(always)]
            fn sin(self) -> Self {
                self.sin()
            }
            #[inline(always)]
            fn cos(self) -> Self {
                self.cos()
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
        }
    };
}
float_native!(f32, libm::erff, exp_f32);
float_native!(f64, libm::erf, f64::exp);

/// e^x for f32 without branches, so loops over it vectorise (std's `expf` is a libm call per
/// element). Cephes' range reduction and degree-6 polynomial: within 2 ulp of the exact value
/// over the whole range; 2^n is applied in two halves so subnormal results stay exact, and the
/// ends overflow to inf / underflow to 0 on their own. NaN stays NaN.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-104.0, 89.0);
    // Round to nearest by adding and removing 1.5 * 2^23: plain SSE2 arithmetic, where `round()`
    // would be a libm call per element on the baseline x86-64 target.
    const ROUNDER: f32 = 12_582_912.0;
    let n = (x * LOG2E + ROUNDER) - ROUNDER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let e = 1.0 + r + r * r * p;
    // n lies in [-150, 129]: each half is a normal power of two.
    let n = n as i32;
    let half = n / 2;
    let pow2 = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    e * pow2(half) * pow2(n - half)
}

macro_rules! float_half {
    ($($t:ty),*) => {$(
        impl Float for $t {
            #[inline(always)] fn from_f32(v: f32) -> Self { <$t>::from_f32(v) }
            #[inline(always)] fn div(self, o: Self) -> Self { self / o }
            #[inline(always)] fn exp(self) -> Self { Self::from_f32(self.to_f32().exp()) }
            #[inline(always)] fn ln(self) -> Self { Self::from_f32(self.to_f32().ln()) }
            #[inline(always)] fn sqrt(self) -> Self { Self::from_f32(self.to_f32().sqrt()) }
            #[inline(always)] fn tanh(self) -> Self { Self::from_f32(self.to_f32().tanh()) }
            #[inline(always)] fn sin(self) -> Self { Self::from_f32(self.to_f32().sin()) }
            #[inline(always)] fn cos(self) -> Self { Self::from_f32(self.to_f32().cos()) }
            #[inline(always)] fn erf(self) -> Self { Self::from_f32(libm::erff(self.to_f32())) }
        }
    )*};
}
float_half!(f16, bf16);

/// Reduces each run of `group` consecutive elements of `data` with `f`, in parallel when large.
pub(crate) fn reduce_groups<T, U>(data: &[T], group: usize, f: impl Fn(&[T]) -> U + Sync + Send) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Send,
{
    if group == 0 {
        return Vec::new();
    }
    if data.len() >= PARALLEL_THRESHOLD && data.len() / group > 1 {
        data.par_chunks(group).map(f).collect()
    } else {
        data.chunks(group).map(f).collect()
    }
}

/// The elements of the view with the dims in `reduce` moved last (in order), contiguous, and the
/// number of elements in each reduced group.
pub(crate) fn reduction_input<'a, T: Copy>(
    data: &'a [T],
    layout: &Layout,
    reduce: &[usize],
) -> (std::borrow::Cow<'a, [T]>, usize) {
    let kept: Vec<usize> = (0..layout.rank()).filter(|d| !reduce.contains(d)).collect();
    let order: Vec<usize> = kept.iter().chain(reduce).copied().collect();
    let permuted = Layout {
        shape: order.iter().map(|&d| layout.shape[d]).collect(),
        strides: order.iter().map(|&d| layout.strides[d]).collect(),
        offset: layout.offset,
    };
    let group = reduce.iter().map(|&d| layout.shape[d]).product();
    (contiguous(data, &permuted), group)
}

/// Sum in f64 (exact for every integer up to 2^53, and stable for floats).
pub(crate) fn sum_f64<T: WithDType>(xs: &[T]) -> f64 {
    xs.iter().map(|x| x.to_f64()).sum()
}

/// NaN-propagating max of a non-empty group; the front end rejects empty groups.
pub(crate) fn max_of<T: Arith>(xs: &[T]) -> T {
    xs.iter().copied().fold(xs[0], |a, b| if a.is_nan() { a } else { a.maximum(b) })
}

pub(crate) fn min_of<T: Arith>(xs: &[T]) -> T {
    xs.iter().copied().fold(xs[0], |a, b| if a.is_nan() { a } else { a.minimum(b) })
}

/// Index of the first maximum; a NaN counts as the maximum (as in PyTorch).
pub(crate) fn argmax_of<T: Arith>(xs: &[T]) -> i64 {
    let mut best = 0;
    for (i, &x) in xs.iter().enumerate() {
        if xs[best].is_nan() {
            break;
        }
        if x.is_nan() || x > xs[best] {
            best = i;
        }
    }
    best as i64
}

pub(crate) fn argmin_of<T: Arith>(xs: &[T]) -> i64 {
    let mut best = 0;
    for (i, &x) in xs.iter().enumerate() {
        if xs[best].is_nan() {
            break;
        }
        if x.is_nan() || x < xs[best] {
            best = i;
        }
    }
    best as i64
}

/// Variance with `correction` (1 = unbiased) by a two-pass algorithm in f64.
pub(crate) fn var_of<T: WithDType>(xs: &[T], correction: usize) -> f64 {
    let n = xs.len() as f64;
    let mean = sum_f64(xs) / n;
    let ss: f64 = xs.iter().map(|x| (x.to_f64() - mean).powi(2)).sum();
    ss / (n - correction as f64)
}

/// Softmax (or log-softmax) of every row of `row` contiguous elements, max-subtracted, computed
/// in the element type (f16/bf16 element-wise through f32).
pub(crate) fn softmax_rows<T: Float>(data: &[T], row: usize, log: bool) -> Vec<T> {
    let mut out = vec![T::ZERO; data.len()];
    if row == 0 {
        return out;
    }
    let body = |(o, x): (&mut [T], &[T])| {
        let max = max_of(x);
        let mut sum = T::ZERO;
        for (o, &v) in o.iter_mut().zip(x) {
            let e = v.sub(max).exp();
            sum = sum.add(e);
            *o = e;
        }
        if log {
            // (x - max) - ln(sum) keeps the precision that x - (max + ln(sum)) loses for large x.
            let ln_sum = sum.ln();
            for (o, &v) in o.iter_mut().zip(x) {
                *o = v.sub(max).sub(ln_sum);
            }
        } else {
            let inv = T::ONE.div(sum);
            for o in o.iter_mut() {
                *o = o.mul(inv);
            }
        }
    };
    if data.len() >= PARALLEL_THRESHOLD {
        out.par_chunks_mut(row).zip(data.par_chunks(row)).for_each(body);
    } else {
        out.chunks_mut(row).zip(data.chunks(row)).for_each(body);
    }
    out
}

/// Copies the view's elements into `out` (contiguous) starting at `out_offset`, laid out with
/// `out_layout`'s strides: used by `cat` to write each piece into its slot of the result.
pub(crate) fn copy_strided<T: Copy>(src: &[T], src_layout: &Layout, out: &mut [T], out_layout: &Layout) {
    for (s, d) in src_layout.offsets().zip(out_layout.offsets()) {
        out[d] = src[s];
    }
}

#[cfg(test)]
mod tests {
    use super::exp_f32;

    #[test]
    fn fast_exp_stays_within_two_ulp_of_the_exact_value() {
        let mut worst = 0.0f64;
        let mut x = -103.9f32;
        while x < 88.7 {
            let exact = (x as f64).exp();
            let got = exp_f32(x) as f64;
            let ulp = (exact as f32).abs().max(f32::MIN_POSITIVE) as f64 * f32::EPSILON as f64;
            let ulp = if exact < f32::MIN_POSITIVE as f64 { 2f64.powi(-149) } else { ulp };
            worst = worst.max((got - exact).abs() / ulp);
            x += 0.0137;
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(100.0), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(-200.0), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
    }
}
