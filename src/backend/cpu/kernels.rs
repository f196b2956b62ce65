//! Element-wise, reduction and indexing kernels over strided views.

use std::mem::MaybeUninit;

use half::{bf16, f16};
use rayon::prelude::*;

use super::simd::{self, Map, RowGeometry, StridedRows, Zip, ZipRows};
use super::{PARALLEL_THRESHOLD, contiguous, vmath};
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
        // SAFETY: the chunks cover the whole buffer and `Map` writes each of its elements.
        unsafe {
            super::filled(src.len(), |out| {
                for_each_chunk(out, 1, |start, o| simd::dispatch(Map { src: &src[start..], out: o, f: &f }))
            })
        }
    } else {
        simd::dispatch(simd::StridedMap { src: data, offsets: layout.offsets(), f: &f })
    }
}

/// [`unary_map`] with two versions of `f`: `near`, for blocks of [`simd::BLOCK`] elements that all
/// satisfy `is_near`, and `far`, for the others (and for a strided view). Both must give the
/// element's value within its type's bounds; `near` is the cheaper one. The two may round an
/// element differently, so its bits can depend on its block's other elements (and a strided view,
/// which takes `far`, can differ from its contiguous copy in the last bits); they never depend on
/// the number of threads (chunks are whole blocks from the buffer's start).
pub(crate) fn unary_map_near<T, U>(
    data: &[T],
    layout: &Layout,
    is_near: impl Fn(T) -> bool + Sync,
    near: impl Fn(T) -> U + Sync,
    far: impl Fn(T) -> U + Sync,
) -> Vec<U>
where
    T: Copy + Send + Sync,
    U: Copy + Send + Sync + Default,
{
    if !layout.is_contiguous() {
        return unary_map(data, layout, far);
    }
    let src = &data[layout.offset..layout.offset + layout.numel()];
    let (is_near, near, far) = (&is_near, &near, &far);
    // SAFETY: the chunks cover the whole buffer and `MapNear` writes each of its elements.
    unsafe {
        super::filled(src.len(), |out| {
            for_each_chunk(out, simd::BLOCK, |start, o| {
                simd::dispatch(simd::MapNear { src: &src[start..], out: o, is_near, near, far })
            })
        })
    }
}

/// [`binary_map`] to the right operand's shape with two versions of `f`, as in
/// [`unary_map_near`]: `near` for blocks whose left operands all satisfy `is_near`.
pub(crate) fn binary_map_near<T>(
    lhs: &[T],
    lhs_layout: &Layout,
    rhs: &[T],
    rhs_layout: &Layout,
    is_near: impl Fn(T) -> bool + Sync,
    near: impl Fn(T, T) -> T + Sync,
    far: impl Fn(T, T) -> T + Sync,
) -> Vec<T>
where
    T: Copy + Send + Sync + Default,
{
    let out_shape = &rhs_layout.shape;
    let whole = |l: &Layout| l.is_contiguous() && l.shape == *out_shape;
    if !whole(lhs_layout) || !whole(rhs_layout) {
        return binary_map(lhs, lhs_layout, rhs, rhs_layout, out_shape, far);
    }
    let len = lhs_layout.numel();
    let a = &lhs[lhs_layout.offset..lhs_layout.offset + len];
    let b = &rhs[rhs_layout.offset..rhs_layout.offset + len];
    let (is_near, near, far) = (&is_near, &near, &far);
    // SAFETY: the chunks cover the whole buffer and `ZipNear` writes each of its elements.
    unsafe {
        super::filled(len, |out| {
            for_each_chunk(out, simd::BLOCK, |start, o| {
                simd::dispatch(simd::ZipNear { a: &a[start..], b: &b[start..], out: o, is_near, near, far })
            })
        })
    }
}

/// `out[i] = f(a[i], out[i])` for two contiguous buffers of one length: a result written over an
/// operand the caller owns (a gradient the autograd engine handed over).
pub(crate) fn zip_in_place<A, U>(out: &mut [U], a: &[A], f: impl Fn(A, U) -> U + Sync)
where
    A: Copy + Send + Sync,
    U: Copy + Send + Sync,
{
    debug_assert_eq!(out.len(), a.len());
    for_each_chunk(out, 1, |start, o| simd::dispatch(simd::ZipInPlace { a: &a[start..], out: o, f: &f }))
}

/// `f(a, b)` over the broadcast of two views to `out_shape` (the front end has checked it). The
/// operands may hold different types (`masked_fill`'s values and bool mask).
pub(crate) fn binary_map<A, B, U>(
    lhs: &[A],
    lhs_layout: &Layout,
    rhs: &[B],
    rhs_layout: &Layout,
    out_shape: &[usize],
    f: impl Fn(A, B) -> U + Sync,
) -> Vec<U>
where
    A: Copy + Send + Sync,
    B: Copy + Send + Sync,
    U: Copy + Send + Sync + Default,
{
    // SAFETY: `binary_map_uninit` writes every element of `out`.
    unsafe {
        super::filled(out_shape.iter().product(), |out| {
            binary_map_uninit(out, lhs, lhs_layout, rhs, rhs_layout, out_shape, f)
        })
    }
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
    binary_map_uninit(super::as_uninit(out), lhs, lhs_layout, rhs, rhs_layout, out_shape, f)
}

/// `on_true` where `condition` holds, else `on_false`, over the broadcast of the three views to
/// `out_shape`. With a single element on one side (the zeros of `where`'s gradient) it is a
/// binary op of the condition and the other side, walked as [`binary_map`] walks rows.
pub(crate) fn select<T>(
    condition: &[bool],
    condition_layout: &Layout,
    on_true: (&[T], &Layout),
    on_false: (&[T], &Layout),
    out_shape: &[usize],
) -> Vec<T>
where
    T: Copy + Send + Sync + Default,
{
    let ((a, al), (b, bl)) = (on_true, on_false);
    let cl = condition_layout;
    if bl.numel() == 1 {
        let y = b[bl.offset];
        return binary_map(condition, cl, a, al, out_shape, move |c, x| if c { x } else { y });
    }
    if al.numel() == 1 {
        let x = a[al.offset];
        return binary_map(condition, cl, b, bl, out_shape, move |c, y| if c { x } else { y });
    }
    let (cl, al, bl) = (cl.broadcast_to(out_shape), al.broadcast_to(out_shape), bl.broadcast_to(out_shape));
    cl.offsets()
        .zip(al.offsets())
        .zip(bl.offsets())
        .map(|((ci, ti), fi)| if condition[ci] { a[ti] } else { b[fi] })
        .collect()
}

/// [`binary_map_into`] over a buffer that may not be initialised yet: writes every element.
fn binary_map_uninit<A, B, U>(
    out: &mut [MaybeUninit<U>],
    lhs: &[A],
    lhs_layout: &Layout,
    rhs: &[B],
    rhs_layout: &Layout,
    out_shape: &[usize],
    f: impl Fn(A, B) -> U + Sync,
) where
    A: Copy + Send + Sync,
    B: Copy + Send + Sync,
    U: Copy + Send + Sync,
{
    let numel = out.len();
    let same_shape = lhs_layout.shape == out_shape && rhs_layout.shape == out_shape;
    if same_shape && lhs_layout.is_contiguous() && rhs_layout.is_contiguous() {
        let a = &lhs[lhs_layout.offset..lhs_layout.offset + numel];
        let b = &rhs[rhs_layout.offset..rhs_layout.offset + numel];
        let stream = std::mem::size_of_val(out) >= simd::STREAM_BYTES;
        return for_each_chunk(out, 1, |start, o| {
            simd::dispatch(Zip { a: &a[start..], b: &b[start..], out: o, f: &f, stream })
        });
    }
    if rhs_layout.numel() == 1 && lhs_layout.shape == out_shape && lhs_layout.is_contiguous() {
        let (a, y) = (&lhs[lhs_layout.offset..lhs_layout.offset + numel], rhs[rhs_layout.offset]);
        return for_each_chunk(out, 1, |start, o| {
            simd::dispatch(Map { src: &a[start..], out: o, f: &|x| f(x, y) })
        });
    }
    if lhs_layout.numel() == 1 && rhs_layout.shape == out_shape && rhs_layout.is_contiguous() {
        let (x, b) = (lhs[lhs_layout.offset], &rhs[rhs_layout.offset..rhs_layout.offset + numel]);
        return for_each_chunk(out, 1, |start, o| {
            simd::dispatch(Map { src: &b[start..], out: o, f: &|y| f(x, y) })
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
            simd::dispatch(ZipRows { a: &a[start..], row, out: o, f: &f })
        });
    }
    if both_contiguous
        && rhs_layout.shape == out_shape
        && let Some(n) = trailing_repeat(&lhs_layout.shape, out_shape)
    {
        let row = &lhs[lhs_layout.offset..lhs_layout.offset + n];
        let b = &rhs[rhs_layout.offset..rhs_layout.offset + numel];
        return for_each_chunk(out, n, |start, o| {
            simd::dispatch(ZipRows { a: &b[start..], row, out: o, f: &|y, x| f(x, y) })
        });
    }
    // Anything else (a per-row value such as a mean kept with keepdim, a transposed view): rows
    // of the innermost dims, each a loop over a stride of 1 or 0 where it can be.
    let geometry = row_geometry(&lhs_layout.broadcast_to(out_shape), &rhs_layout.broadcast_to(out_shape));
    let n = geometry.inner;
    if numel == 0 || n == 0 {
        return;
    }
    for_each_chunk(out, n, |start, o| {
        simd::dispatch(StridedRows {
            a: lhs,
            b: rhs,
            out: o,
            first_row: start / n,
            geometry: &geometry,
            f: &f,
        })
    });
}

/// The rows [`StridedRows`] walks for two layouts of one shape: adjacent dims along which both
/// operands are laid out alike (each stride the next one's times its size, 0 for 0) merge into
/// one, so the innermost dim is as long as it can be.
fn row_geometry(a: &Layout, b: &Layout) -> RowGeometry {
    // (size, stride in a, stride in b), innermost first; dims of size 1 carry nothing.
    let mut dims: Vec<(usize, usize, usize)> = Vec::with_capacity(a.rank());
    for d in (0..a.rank()).rev() {
        let (size, sa, sb) = (a.shape[d], a.strides[d], b.strides[d]);
        if size == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(last) if last.1 * last.0 == sa && last.2 * last.0 == sb => last.0 *= size,
            _ => dims.push((size, sa, sb)),
        }
    }
    let (inner, sa, sb) = dims.first().copied().unwrap_or((1, 1, 1));
    let outer = dims.get(1..).unwrap_or_default();
    RowGeometry {
        inner,
        inner_strides: [sa, sb],
        outer_shape: outer.iter().rev().map(|d| d.0).collect(),
        outer_strides: [outer.iter().rev().map(|d| d.1).collect(), outer.iter().rev().map(|d| d.2).collect()],
        offsets: [a.offset, b.offset],
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

/// The sum of `v` in 8 interleaved partial sums, which the compiler keeps in vector registers.
pub(crate) fn sum_lanes<T: Float>(v: &[T]) -> T {
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
    /// `1 - erf(x)` without the cancellation of computing it so: accurate in the far tail.
    fn erfc(self) -> Self;
    /// `(erfc(x), e^(-x²))`: the second comes out of computing the first.
    fn erfc_with_gaussian(self) -> (Self, Self);
    /// Whether `x` may take [`Float::erfc_with_gaussian_near`].
    fn erfc_is_near(self) -> bool;
    /// [`Float::erfc_with_gaussian`] for an `x` that [`Float::erfc_is_near`], in fewer steps.
    fn erfc_with_gaussian_near(self) -> (Self, Self);
}

macro_rules! float_native {
    ($t:ty, $exp:path) => {
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
            fn erfc(self) -> Self {
                vmath::erfc(self)
            }
            #[inline(always)]
            fn erfc_with_gaussian(self) -> (Self, Self) {
                vmath::erfc_with_gaussian(self)
            }
            #[inline(always)]
            fn erfc_is_near(self) -> bool {
                self.abs() <= <$t as vmath::VFloat>::NEAR
            }
            #[inline(always)]
            fn erfc_with_gaussian_near(self) -> (Self, Self) {
                vmath::erfc_with_gaussian_near(self)
            }
        }
    };
}
float_native!(f32, exp_f32);
float_native!(f64, f64::exp);

/// e^x for f32 without branches, so loops over it vectorise (std's `expf` is a libm call per
/// element). Cephes' range reduction and degree-6 polynomial, every step a fused multiply-add:
/// one instruction in the loops [`simd::dispatch`] compiles with FMA, which are bound by their
/// count (fused: exp over 16M elements 6.6 -> 4.8 ms, softmax 2.4 -> 1.8 ms at 1
/// thread), and a (correct, slow) libm call in the baseline build. Within 1.01 ulp of the exact
/// value over the whole normal range (every 7th bit pattern; 1.28 before fusing), within 2 ulp
/// everywhere; 2^n is applied in two halves so subnormal results stay exact, and the ends
/// overflow to inf / underflow to 0 on their own. NaN stays NaN.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Round to nearest by adding 1.5 * 2^23: the sum's low mantissa bits then hold n as an
    // integer, read with integer arithmetic; `round()` would be a libm call on the baseline x86-64
    // target and a float-to-int `as` cast saturates with branches, and either stops vectorising.
    const ROUNDER: f32 = 12_582_912.0;
    let x = x.clamp(-104.0, 89.0);
    let shifted = x.mul_add(LOG2E, ROUNDER);
    let n = shifted - ROUNDER;
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, x));
    let p = 1.987_569_1e-4_f32;
    let p = p.mul_add(r, 1.398_199_9e-3);
    let p = p.mul_add(r, 8.333_452e-3);
    let p = p.mul_add(r, 4.166_579_6e-2);
    let p = p.mul_add(r, 1.666_666_5e-1);
    let p = p.mul_add(r, 0.5);
    let e = 1.0 + (r * r).mul_add(p, r);
    // n lies in [-150, 129] (for NaN it is garbage, and e is NaN): each half is a normal power of
    // two.
    let n = (shifted.to_bits() as i32).wrapping_sub(ROUNDER.to_bits() as i32);
    let half = n >> 1;
    let pow2 = |k: i32| f32::from_bits((k.wrapping_add(127) as u32) << 23);
    e * pow2(half) * pow2(n.wrapping_sub(half))
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
            #[inline(always)] fn erfc(self) -> Self { Self::from_f32(vmath::erfc(self.to_f32())) }
            #[inline(always)] fn erfc_with_gaussian(self) -> (Self, Self) {
                let (c, g) = vmath::erfc_with_gaussian(self.to_f32());
                (Self::from_f32(c), Self::from_f32(g))
            }
            #[inline(always)] fn erfc_is_near(self) -> bool {
                self.to_f32().abs() <= <f32 as vmath::VFloat>::NEAR
            }
            #[inline(always)] fn erfc_with_gaussian_near(self) -> (Self, Self) {
                let (c, g) = vmath::erfc_with_gaussian_near(self.to_f32());
                (Self::from_f32(c), Self::from_f32(g))
            }
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
    let group = reduce.iter().map(|&d| layout.shape[d]).product();
    (contiguous(data, &reduction_layout(layout, reduce)), group)
}

/// The view a reduction reads: `layout` with the dims in `reduce` moved last. When it is not
/// contiguous, the kernel copies the elements first.
pub(crate) fn reduction_layout(layout: &Layout, reduce: &[usize]) -> Layout {
    let kept: Vec<usize> = (0..layout.rank()).filter(|d| !reduce.contains(d)).collect();
    let order: Vec<usize> = kept.iter().chain(reduce).copied().collect();
    Layout {
        shape: order.iter().map(|&d| layout.shape[d]).collect(),
        strides: order.iter().map(|&d| layout.strides[d]).collect(),
        offset: layout.offset,
    }
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
/// in the element type (f16/bf16 element-wise through f32). Per row: one pass for the max, one
/// for exp and its sum (written to the result), one scaling the result in place.
pub(crate) fn softmax_rows<T: Float>(data: &[T], row: usize, log: bool) -> Vec<T> {
    by_rows(data.len(), row, |first, o| {
        let x = &data[first..first + o.len()];
        simd::dispatch(SoftmaxRows { x, out: o, row, log })
    })
}

/// The gradient of [`softmax_rows`] from its output `y` and the upstream gradient `g` (both
/// contiguous rows of `row`): softmax `y (g - Σ g y)`, log-softmax `g - e^y Σ g`. Per row one
/// pass for the sum, one for the result.
pub(crate) fn softmax_backward_rows<T: Float>(y: &[T], g: &[T], row: usize, log: bool) -> Vec<T> {
    by_rows(y.len(), row, |first, o| {
        let (y, g) = (&y[first..first + o.len()], &g[first..first + o.len()]);
        simd::dispatch(SoftmaxBackwardRows { y, g, out: o, row, log })
    })
}

/// A fresh buffer of `len` elements (rows of `row`) filled by `fill(first, out)`, which must
/// write every element of `out`, the whole rows starting at element `first`; split across
/// threads by rows when large.
fn by_rows<T: Send + Copy + Default>(
    len: usize,
    row: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<T>]) + Sync,
) -> Vec<T> {
    if row == 0 {
        return Vec::new();
    }
    let all = |out: &mut [MaybeUninit<T>]| {
        if len >= PARALLEL_THRESHOLD && len > row {
            let threads = rayon::current_num_threads().max(1);
            let rows_per_task = (len / row).div_ceil(threads * 4).max(1);
            let per = rows_per_task * row;
            out.par_chunks_mut(per).enumerate().for_each(|(i, o)| fill(i * per, o));
        } else {
            fill(0, out);
        }
    };
    // SAFETY: the chunks cover every row and `fill` writes each element of its rows.
    unsafe { super::filled(len, all) }
}

/// Lanes of the max and sum accumulators: independent lanes let the compiler vectorise the
/// reductions without reordering any one lane's arithmetic.
const LANES: usize = 16;

struct SoftmaxRows<'a, T> {
    x: &'a [T],
    out: &'a mut [MaybeUninit<T>],
    row: usize,
    log: bool,
}

impl<T: Float> simd::Kernel for SoftmaxRows<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        for (o, x) in self.out.chunks_mut(self.row).zip(self.x.chunks(self.row)) {
            softmax_row(x, o, self.log);
        }
    }
}

/// Writes every element of `o`.
#[inline(always)]
fn softmax_row<T: Float>(x: &[T], o: &mut [MaybeUninit<T>], log: bool) {
    // A NaN is skipped by the max but makes the sum NaN, so the whole row is NaN either way.
    let mut lanes = [x[0]; LANES];
    let (body, tail) = x.split_at(x.len() - x.len() % LANES);
    for chunk in body.chunks_exact(LANES) {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            *m = if v > *m { v } else { *m };
        }
    }
    let max = lanes.iter().chain(tail).fold(x[0], |m, &v| if v > m { v } else { m });

    let mut sums = [T::ZERO; LANES];
    let (o_body, o_tail) = o.split_at_mut(body.len());
    for (o_chunk, chunk) in o_body.chunks_exact_mut(LANES).zip(body.chunks_exact(LANES)) {
        // The block's exponentials first, then written and summed: written as one loop over
        // (sum, output, input), the sums stayed on the stack and each block waited for the
        // previous block's store of them (softmax 13.4 -> 14.2 GB/s at 1 thread, same bits).
        let e: [T; LANES] = std::array::from_fn(|i| chunk[i].sub(max).exp());
        for (o, &e) in o_chunk.iter_mut().zip(&e) {
            o.write(e);
        }
        sums = std::array::from_fn(|i| sums[i].add(e[i]));
    }
    let mut sum = sums.iter().fold(T::ZERO, |a, &b| a.add(b));
    for (o, &v) in o_tail.iter_mut().zip(tail) {
        let e = v.sub(max).exp();
        o.write(e);
        sum = sum.add(e);
    }
    // SAFETY: the two loops above wrote every element of the row (body and tail).
    let o = unsafe { &mut *(o as *mut [MaybeUninit<T>] as *mut [T]) };

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
}

struct SoftmaxBackwardRows<'a, T> {
    y: &'a [T],
    g: &'a [T],
    out: &'a mut [MaybeUninit<T>],
    row: usize,
    log: bool,
}

impl<T: Float> simd::Kernel for SoftmaxBackwardRows<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let rows = self.out.chunks_mut(self.row).zip(self.y.chunks(self.row)).zip(self.g.chunks(self.row));
        for ((o, y), g) in rows {
            if self.log {
                let sum = lane_sum(g, g, |g, _| g);
                for ((o, &y), &g) in o.iter_mut().zip(y).zip(g) {
                    o.write(g.sub(y.exp().mul(sum)));
                }
            } else {
                let dot = lane_sum(g, y, |g, y| g.mul(y));
                for ((o, &y), &g) in o.iter_mut().zip(y).zip(g) {
                    o.write(y.mul(g.sub(dot)));
                }
            }
        }
    }
}

/// `Σ f(a[i], b[i])` over [`LANES`] independent accumulators, so the loop vectorises.
#[inline(always)]
fn lane_sum<T: Float>(a: &[T], b: &[T], f: impl Fn(T, T) -> T) -> T {
    let mut lanes = [T::ZERO; LANES];
    let body = a.len().min(b.len()) / LANES * LANES;
    for (ca, cb) in a[..body].chunks_exact(LANES).zip(b[..body].chunks_exact(LANES)) {
        for ((s, &x), &y) in lanes.iter_mut().zip(ca).zip(cb) {
            *s = s.add(f(x, y));
        }
    }
    let tail = a[body..].iter().zip(&b[body..]).fold(T::ZERO, |s, (&x, &y)| s.add(f(x, y)));
    lanes.iter().fold(T::ZERO, |s, &x| s.add(x)).add(tail)
}

#[cfg(test)]
mod tests {
    use super::{binary_map, exp_f32, simd, softmax_rows, unary_map};
    use crate::shape::Layout;

    /// Left operand and shape, right operand and shape.
    type Case<'a> = (&'a [f32], Vec<usize>, &'a [f32], Vec<usize>);

    /// Every path of `binary_map` (same shapes, a scalar on either side, a row repeated on either
    /// side, a general broadcast), small and split across threads, writes every element right.
    #[test]
    fn binary_map_fills_every_element_on_every_path() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for rows in [3, 300] {
            let cols = 129;
            let full = [rows, cols];
            let a: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let row: Vec<f32> = (0..cols).map(|j| 1000.0 * j as f32).collect();
            let col: Vec<f32> = (0..rows).map(|i| 0.5 * i as f32).collect();
            let cases: [Case; 6] = [
                (&a, vec![rows, cols], &a, vec![rows, cols]),
                (&a, vec![rows, cols], &[7.0], vec![1]),
                (&[7.0], vec![1], &a, vec![rows, cols]),
                (&a, vec![rows, cols], &row, vec![cols]),
                (&row, vec![1, cols], &a, vec![rows, cols]),
                (&col, vec![rows, 1], &row, vec![1, cols]),
            ];
            for (case, (l, ls, r, rs)) in cases.iter().enumerate() {
                let (ll, rl) = (Layout::contiguous(ls), Layout::contiguous(rs));
                let got = pool.install(|| binary_map(l, &ll, r, &rl, &full, |x: f32, y: f32| x - 2.0 * y));
                let (lb, rb) = (ll.broadcast_to(&full), rl.broadcast_to(&full));
                let want: Vec<f32> = lb.offsets().zip(rb.offsets()).map(|(i, j)| l[i] - 2.0 * r[j]).collect();
                assert_eq!(got, want, "case {case}, {rows} rows");
            }
        }
    }

    /// Outputs past `STREAM_BYTES` are written with non-temporal stores: every element, through
    /// the cache-line head, the streamed blocks and the tail, for element sizes 1 to 8 and
    /// operands that start anywhere (views at an offset), on one thread and on two.
    #[test]
    fn streamed_outputs_hold_every_element() {
        fn check<T: Copy + Default + PartialEq + std::fmt::Debug + Send + Sync>(
            n: usize,
            from: impl Fn(usize) -> T,
            f: impl Fn(T, T) -> T + Sync,
        ) {
            assert!(n * std::mem::size_of::<T>() >= simd::STREAM_BYTES);
            let a: Vec<T> = (0..n + 3).map(&from).collect();
            let b: Vec<T> = (0..n + 3).map(|i| from(i * 7 + 1)).collect();
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                for (skip_a, skip_b) in [(0, 0), (1, 3), (3, 2)] {
                    let la = Layout { shape: vec![n], strides: vec![1], offset: skip_a };
                    let lb = Layout { shape: vec![n], strides: vec![1], offset: skip_b };
                    let got = pool.install(|| binary_map(&a, &la, &b, &lb, &[n], &f));
                    let bad = (0..n).find(|&i| got[i] != f(a[skip_a + i], b[skip_b + i]));
                    assert_eq!(bad, None, "{threads} threads, offsets {skip_a}/{skip_b}");
                }
            }
        }
        let n = (simd::STREAM_BYTES >> 2) + 37;
        check(n, |i| i as f32 * 0.5, |x, y| x + y);
        check((simd::STREAM_BYTES >> 3) + 5, |i| i as f64, |x, y| x * 2.0 - y);
        check((simd::STREAM_BYTES >> 1) + 11, |i| (i % 65_521) as u16, |x: u16, y: u16| x.wrapping_add(y));
        check(simd::STREAM_BYTES + 9, |i| i % 3 == 0, |x: bool, y: bool| x ^ y);
    }

    /// The error of `got` against the exact `exact`, in units of the f32 spacing at `exact`
    /// (subnormal spacing below the normal range).
    fn ulps(got: f32, exact: f64) -> f64 {
        let spacing = if exact.abs() < f32::MIN_POSITIVE as f64 {
            2f64.powi(-149)
        } else {
            (exact as f32).abs() as f64 * f32::EPSILON as f64
        };
        (got as f64 - exact).abs() / spacing
    }

    #[test]
    fn fast_exp_stays_within_two_ulp_of_the_exact_value() {
        let mut worst = 0.0f64;
        let mut x = -103.9f32;
        while x < 88.7 {
            worst = worst.max(ulps(exp_f32(x), (x as f64).exp()));
            x += 0.0137;
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(100.0), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(-200.0), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
    }

    /// Every 9973rd bit pattern: all magnitudes of both signs, subnormal inputs, the overflow
    /// and underflow edges, infinities and NaNs.
    #[test]
    fn fast_exp_matches_f64_over_every_range_of_f32() {
        let overflow = (f32::MAX as f64).ln();
        let mut worst = (0.0f64, 0.0f32);
        for bits in (0..=u32::MAX).step_by(9973).chain([0x7f80_0000, 0xff80_0000, 0x7fc0_0000]) {
            let x = f32::from_bits(bits);
            let got = exp_f32(x);
            if x.is_nan() {
                assert!(got.is_nan(), "exp({x}) = {got}");
                continue;
            }
            let exact = (x as f64).exp();
            if (x as f64) > overflow {
                assert_eq!(got, f32::INFINITY, "exp({x})");
            } else if exact < 2f64.powi(-150) {
                assert_eq!(got, 0.0, "exp({x})");
            } else {
                let e = ulps(got, exact);
                if e > worst.0 {
                    worst = (e, x);
                }
            }
        }
        assert!(worst.0 <= 2.0, "worst error {} ulp at x = {}", worst.0, worst.1);
        for x in [88.72, -87.3, -103.0, -1e-30, 1e-30, f32::MIN_POSITIVE, -f32::MIN_POSITIVE] {
            assert!(ulps(exp_f32(x), (x as f64).exp()) <= 2.0, "exp({x}) = {}", exp_f32(x));
        }
        assert_eq!(exp_f32(89.0), f32::INFINITY);
    }

    /// The vectorised loop (every lane and the remainder) computes what the scalar function does.
    #[test]
    fn exp_over_a_tensor_matches_the_scalar_function() {
        let data: Vec<f32> = (0..100_003).map(|i| (i as f32 * 0.618_034).sin() * 120.0 - 20.0).collect();
        let mut data = data;
        data[7] = f32::NAN;
        data[8] = f32::INFINITY;
        data[9] = f32::NEG_INFINITY;
        for len in [1, 15, 17, 1000, data.len()] {
            let got = unary_map(&data[..len], &Layout::contiguous(&[len]), exp_f32);
            for (i, (&g, &x)) in got.iter().zip(&data).enumerate() {
                let want = exp_f32(x);
                assert!(
                    g == want || (g.is_nan() && want.is_nan()),
                    "element {i}: exp({x}) = {g}, want {want}"
                );
            }
        }
    }

    /// A strided view's elements go through the same (dispatched) function as a contiguous
    /// buffer's, in the view's order.
    #[test]
    fn exp_over_a_transposed_view_matches_the_scalar_function() {
        let data: Vec<f32> = (0..600).map(|i| (i as f32 * 0.618_034).sin() * 90.0 - 10.0).collect();
        let (rows, cols) = (20, 30);
        let view = Layout { shape: vec![cols, rows], strides: vec![1, cols], offset: 0 };
        assert!(!view.is_contiguous());
        let got = unary_map(&data, &view, exp_f32);
        for (k, (&g, o)) in got.iter().zip(view.offsets()).enumerate() {
            assert_eq!(g, exp_f32(data[o]), "element {k} (offset {o})");
        }
        assert_eq!(got[1], exp_f32(data[cols]), "the view's second element is the second row's first");
    }

    fn softmax_reference(x: &[f32], log: bool) -> Vec<f64> {
        let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = x.iter().map(|&v| (v as f64 - max).exp()).sum();
        x.iter()
            .map(|&v| if log { v as f64 - max - sum.ln() } else { (v as f64 - max).exp() / sum })
            .collect()
    }

    #[test]
    fn softmax_rows_match_an_f64_reference() {
        for row in [1, 3, 16, 17, 100, 1024] {
            for rows in [1, 5, 70] {
                let x: Vec<f32> = (0..row * rows).map(|i| ((i * 7919) % 1000) as f32 / 40.0 - 12.0).collect();
                for log in [false, true] {
                    let got = softmax_rows(&x, row, log);
                    for (r, (g, xr)) in got.chunks(row).zip(x.chunks(row)).enumerate() {
                        for (j, (&g, w)) in g.iter().zip(softmax_reference(xr, log)).enumerate() {
                            let tol = 1e-6 + 2e-6 * w.abs();
                            assert!((g as f64 - w).abs() <= tol, "row {r} col {j} (len {row}): {g} vs {w}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn softmax_rows_with_nan_or_masked_entries() {
        let row = 20;
        let mut x = vec![0.5f32; row * 3];
        x[3] = f32::NAN; // row 0: NaN everywhere, as in PyTorch
        for v in &mut x[row..row + 19] {
            *v = f32::NEG_INFINITY; // row 1: one unmasked entry takes all the mass
        }
        for log in [false, true] {
            let got = softmax_rows(&x, row, log);
            assert!(got[..row].iter().all(|v| v.is_nan()), "{:?}", &got[..row]);
            let masked = &got[row..2 * row];
            if log {
                assert!(masked[..19].iter().all(|&v| v == f32::NEG_INFINITY));
                assert_eq!(masked[19], 0.0);
            } else {
                assert!(masked[..19].iter().all(|&v| v == 0.0));
                assert_eq!(masked[19], 1.0);
            }
            let uniform = if log { -(row as f32).ln() } else { 1.0 / row as f32 };
            assert!(got[2 * row..].iter().all(|&v| (v - uniform).abs() < 1e-6));
        }
    }
}
