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
    U: Copy + Send + Sync,
{
    if layout.is_contiguous() {
        let src = &data[layout.offset..layout.offset + layout.numel()];
        if src.len() >= PARALLEL_THRESHOLD {
            let mut out = Vec::with_capacity(src.len());
            src.par_iter().map(|&x| f(x)).collect_into_vec(&mut out);
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
    let numel: usize = out_shape.iter().product();
    let same_shape = lhs_layout.shape == out_shape && rhs_layout.shape == out_shape;
    if same_shape && lhs_layout.is_contiguous() && rhs_layout.is_contiguous() {
        let a = &lhs[lhs_layout.offset..lhs_layout.offset + numel];
        let b = &rhs[rhs_layout.offset..rhs_layout.offset + numel];
        return zip_map(a, b, &f);
    }
    if rhs_layout.numel() == 1 && lhs_layout.shape == out_shape {
        let b = rhs[rhs_layout.offset];
        return unary_map(lhs, lhs_layout, |a| f(a, b));
    }
    if lhs_layout.numel() == 1 && rhs_layout.shape == out_shape {
        let a = lhs[lhs_layout.offset];
        return unary_map(rhs, rhs_layout, |b| f(a, b));
    }
    // A contiguous operand of the full shape against a contiguous one that repeats along the
    // leading dims (a bias row added to every row of a batch).
    let both_contiguous = lhs_layout.is_contiguous() && rhs_layout.is_contiguous();
    if both_contiguous
        && lhs_layout.shape == out_shape
        && let Some(n) = trailing_repeat(&rhs_layout.shape, out_shape)
    {
        let a = &lhs[lhs_layout.offset..lhs_layout.offset + numel];
        let b = &rhs[rhs_layout.offset..rhs_layout.offset + n];
        return repeat_map(a, b, &f);
    }
    if both_contiguous
        && rhs_layout.shape == out_shape
        && let Some(n) = trailing_repeat(&lhs_layout.shape, out_shape)
    {
        let a = &lhs[lhs_layout.offset..lhs_layout.offset + n];
        let b = &rhs[rhs_layout.offset..rhs_layout.offset + numel];
        return repeat_map(b, a, |y, x| f(x, y));
    }
    let l = lhs_layout.broadcast_to(out_shape);
    let r = rhs_layout.broadcast_to(out_shape);
    l.offsets().zip(r.offsets()).map(|(i, j)| f(lhs[i], rhs[j])).collect()
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

fn zip_map<T, U>(a: &[T], b: &[T], f: &(impl Fn(T, T) -> U + Sync)) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync,
{
    if a.len() >= PARALLEL_THRESHOLD {
        let mut out = Vec::with_capacity(a.len());
        a.par_iter().zip(b.par_iter()).map(|(&x, &y)| f(x, y)).collect_into_vec(&mut out);
        out
    } else {
        a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
    }
}

/// `f(full[i], row[i % row.len()])`.
fn repeat_map<T, U>(full: &[T], row: &[T], f: impl Fn(T, T) -> U + Sync) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync + Default,
{
    let n = row.len();
    let mut out = vec![U::default(); full.len()];
    let body = |(o, a): (&mut [U], &[T])| {
        for ((o, &x), &y) in o.iter_mut().zip(a).zip(row) {
            *o = f(x, y);
        }
    };
    if full.len() >= PARALLEL_THRESHOLD {
        out.par_chunks_mut(n).zip(full.par_chunks(n)).for_each(body);
    } else {
        out.chunks_mut(n).zip(full.chunks(n)).for_each(body);
    }
    out
}

/// Arithmetic every numeric element type supports. Integer arithmetic wraps, as PyTorch's does.
pub(crate) trait Arith: WithDType + Default {
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
    ($t:ty, $erf:path) => {
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
                self.exp()
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
float_native!(f32, libm::erff);
float_native!(f64, libm::erf);

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
