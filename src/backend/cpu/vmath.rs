//! Special functions written without branches or libm calls, so that a loop over them (a `Map`
//! or `Zip` kernel of [`super::simd`], compiled per vector extension and chosen at run time)
//! vectorises. libm's `erfcf`/`erfc` are one scalar call per element.
//!
//! `erfc` follows the form of Schonfelder's Chebyshev expansions ("Chebyshev expansions for the
//! error and related functions", Math. Comp. 32 (1978) 1232–1240): for `z >= 0`,
//!
//! ```text
//! erfc(z) = t · R(u) · e^(-z²),   t = 2 / (2 + z),   u = 2t - 1 = (2 - z) / (2 + z)
//! ```
//!
//! where `R(u) = erfc(z) e^(z²) / t` is a smooth function of `u` on `(-1, 1]`, falling from 1 at
//! `z = 0` to `1/(2√π)` as `z → ∞`, and `erfc(-z) = 2 - erfc(z)`. The coefficients of `R` are our
//! own: Chebyshev interpolants of it at `n + 1` Chebyshev nodes computed with mpmath at 50 digits,
//! converted to powers of `u` (their absolute values sum to 1.03, so Horner's rule loses nothing
//! to cancellation). Relative interpolation error: 1.6e-9 for the degree-12 f32 polynomial, 5e-16
//! for the degree-25 f64 one. `e^(-z²)` comes out on the way, which GELU's gradient needs too.
//!
//! `-z²` is carried as an exact `-hi²` (`hi` is `z` with the low half of its significand
//! cleared) plus a small correction, and the exponential reduces that pair without rounding
//! `-z²` first: rounding it would cost `z² · ε` of relative accuracy, 2e-5 at `z = 9` in f32.
//!
//! Error bounds, checked by the tests below against mpmath values and against f64 libm: f32
//! within 6 ulp of the exact value over the whole range (4.8 at worst in a sweep of every 13th
//! bit pattern with |x| < 11, about 3e-7 relative), f64 within 1e-14 relative (9.3e-16 at worst
//! in a sweep of 2e7 points over [-7, 28]).

use std::ops::{Add, Mul, Neg, Sub};

/// The float types with a vectorisable `erfc`: the generic algorithm above, with each type's
/// constants and bit manipulation.
pub(crate) trait VFloat:
    Copy + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const TWO: Self;
    /// `erfc(z)` is 0 in this type (it underflows past the smallest subnormal) for `z` at or
    /// beyond this, so larger inputs (and ∞) are clamped here, where `z²` cannot overflow.
    const ERFC_ZERO_FROM: Self;
    const LOG2E: Self;
    /// ln 2 split in two: `LN2_HI` has trailing zero bits, so `n · LN2_HI` is exact for every
    /// exponent `n` the type has.
    const LN2_HI: Self;
    const LN2_LO: Self;
    /// 1.5 · 2^(significand bits): adding it rounds to an integer held in the low bits.
    const ROUNDER: Self;

    fn abs(self) -> Self;
    fn div(self, o: Self) -> Self;
    /// `self * a + b` rounded once: one instruction in the versions [`super::simd::dispatch`]
    /// compiles with FMA, a (correct, slow) libm call in the baseline one.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// `(hi, lo)` with `hi + lo == self`, `hi` holding at most half the significand's bits, so
    /// `hi * hi` is exact.
    fn split(self) -> (Self, Self);
    /// `self · 2^n` where `n` is the integer `ROUNDER` was added to in `shifted`, applied in two
    /// halves so that a subnormal result is rounded once and an overflow still gives ∞.
    fn mul_pow2(self, shifted: Self) -> Self;
    /// The polynomial `2 R(u)` (`R` of the module docs; doubled, which is exact, so that
    /// `erfc = d · 2R(u) · e^(-z²)` with `d = 1 / (2 + z)` takes one multiplication fewer).
    fn erfc_poly(u: Self) -> Self;
    /// `(e^r - 1 - r) / r²` for `|r| <= ln(2)/2`.
    fn exp_poly(r: Self) -> Self;
    /// Arguments of `erfc` up to this size in magnitude may take [`erfc_with_gaussian_near`]
    /// (0 where the type has no such path: only `erfc(±0)` takes it, with the same result).
    const NEAR: Self;
    /// `2 R(u)` for `u` of the near range only, `[u(NEAR), 1]`: a lower degree than
    /// [`VFloat::erfc_poly`] for the same accuracy.
    fn erfc_near_poly(u: Self) -> Self;
    /// `self · 2^n` for an `n` (as in [`VFloat::mul_pow2`]) whose result is a normal number.
    fn mul_pow2_normal(self, shifted: Self) -> Self;
}

/// `c[0] x^(N-1) + ... + c[N-1]`. A fixed length, so the loop unrolls into straight-line code.
#[inline(always)]
fn horner<T: VFloat, const N: usize>(c: &[T; N], x: T) -> T {
    let mut p = c[0];
    for &k in &c[1..] {
        p = p.mul_add(x, k);
    }
    p
}

/// `e^(a + b)` without rounding `a + b`: `a` is exact and may be large, `b` is small. The
/// caller keeps `a + b` within the range where each half of `2^n` is a normal number (or NaN).
#[inline(always)]
fn exp_sum<T: VFloat>(a: T, b: T) -> T {
    let shifted = (a + b).mul_add(T::LOG2E, T::ROUNDER);
    let n = shifted - T::ROUNDER;
    // `a - n·LN2_HI` is exact (both lie on a grid the difference fits in), so `b` joins a small
    // number and keeps its own precision. Fused, as the multiplications and additions of a
    // vector loop here are what limits its speed (the exact step gives the same bits).
    let r = n.mul_add(-T::LN2_LO, n.mul_add(-T::LN2_HI, a) + b);
    let e = T::ONE + r.mul_add(r * T::exp_poly(r), r);
    e.mul_pow2(shifted)
}

/// The complementary error function `1 - erf(x)`, without the cancellation of computing it so:
/// relative accuracy holds out to where it underflows. NaN gives NaN, -∞ gives 2, ∞ gives 0.
#[inline(always)]
pub(crate) fn erfc<T: VFloat>(x: T) -> T {
    erfc_with_gaussian(x).0
}

/// `(erfc(x), e^(-x²))`, the second a step of the first.
#[inline(always)]
pub(crate) fn erfc_with_gaussian<T: VFloat>(x: T) -> (T, T) {
    // `x < 0` is false for NaN, and every step below keeps a NaN a NaN.
    let z = x.abs();
    let z = if z > T::ERFC_ZERO_FROM { T::ERFC_ZERO_FROM } else { z };
    let d = T::ONE.div(T::TWO + z);
    let u = (T::TWO - z) * d;
    let (hi, lo) = z.split();
    // -z² = -hi² - lo·(z + hi), the first term exact.
    let gaussian = exp_sum(-(hi * hi), -lo * (z + hi));
    let tail = d * T::erfc_poly(u) * gaussian;
    (if x < T::ZERO { T::TWO - tail } else { tail }, gaussian)
}

/// [`erfc_with_gaussian`] for `|x| <= T::NEAR` only, with fewer steps: no clamp, `-x²` rounded
/// (at most `x² / 2` ulp more, 4 at the end of the range, where GELU's bound is 48 ε),
/// the power of two applied at once (the result is normal), and the shorter polynomial. A block
/// of inputs all in this range (nearly every block of a layer's activations) takes it.
#[inline(always)]
pub(crate) fn erfc_with_gaussian_near<T: VFloat>(x: T) -> (T, T) {
    let z = x.abs();
    let d = T::ONE.div(T::TWO + z);
    let u = (T::TWO - z) * d;
    let a = -(z * z);
    let shifted = a.mul_add(T::LOG2E, T::ROUNDER);
    let n = shifted - T::ROUNDER;
    let r = n.mul_add(-T::LN2_LO, n.mul_add(-T::LN2_HI, a));
    let gaussian = (T::ONE + r.mul_add(r * T::exp_poly(r), r)).mul_pow2_normal(shifted);
    let tail = d * T::erfc_near_poly(u) * gaussian;
    (if x < T::ZERO { T::TWO - tail } else { tail }, gaussian)
}

impl VFloat for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const TWO: f32 = 2.0;
    // erfc(10.06) is below half the smallest subnormal.
    const ERFC_ZERO_FROM: f32 = 10.5;
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // 355/512: 9 significant bits.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUNDER: f32 = 12_582_912.0;

    #[inline(always)]
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    #[inline(always)]
    fn div(self, o: f32) -> f32 {
        self / o
    }
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32) -> f32 {
        f32::mul_add(self, a, b)
    }
    #[inline(always)]
    fn split(self) -> (f32, f32) {
        let hi = f32::from_bits(self.to_bits() & 0xffff_f000);
        (hi, self - hi)
    }
    #[inline(always)]
    fn mul_pow2(self, shifted: f32) -> f32 {
        let n = (shifted.to_bits() as i32).wrapping_sub(Self::ROUNDER.to_bits() as i32);
        let half = n >> 1;
        let pow2 = |k: i32| f32::from_bits((k.wrapping_add(127) as u32) << 23);
        self * pow2(half) * pow2(n.wrapping_sub(half))
    }
    #[inline(always)]
    fn erfc_poly(u: f32) -> f32 {
        horner(
            &[
                -1.7604321e-5,
                -2.5286263e-6,
                0.00013713325,
                -6.625186e-5,
                -0.0006581745,
                0.0008543914,
                0.003089117,
                -0.0064838645,
                -0.02151047,
                0.036442798,
                0.27947208,
                0.6871607,
                1.0215827,
            ],
            u,
        )
    }
    #[inline(always)]
    fn exp_poly(r: f32) -> f32 {
        // Taylor's 1/k! for k = 7..2: the remainder is below 5.3e-9 for |r| <= ln(2)/2.
        horner(&[1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5], r)
    }
    // 4 / √2 and a little: GELU's inputs up to 4 in magnitude.
    const NEAR: f32 = 2.875;
    #[inline(always)]
    fn erfc_near_poly(u: f32) -> f32 {
        // Least squares weighted by 1/R over u in [-0.1795, 1] (z up to 2.875), each coefficient
        // rounded to f32 in turn and the rest refitted: 9.7e-8 relative in f32 arithmetic (a
        // degree more gains nothing that f32 keeps).
        horner(
            &[
                -0.00061560207,
                0.004437212,
                -0.007058067,
                -0.021433372,
                0.036458366,
                0.2794682,
                0.6871606,
                1.0215827,
            ],
            u,
        )
    }
    #[inline(always)]
    fn mul_pow2_normal(self, shifted: f32) -> f32 {
        let n = (shifted.to_bits() as i32).wrapping_sub(Self::ROUNDER.to_bits() as i32);
        self * f32::from_bits((n.wrapping_add(127) as u32) << 23)
    }
}

impl VFloat for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const TWO: f64 = 2.0;
    // erfc(27.3) is below half the smallest subnormal.
    const ERFC_ZERO_FROM: f64 = 28.0;
    const LOG2E: f64 = std::f64::consts::LOG2_E;
    // 32 significant bits.
    const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const ROUNDER: f64 = 6_755_399_441_055_744.0;

    #[inline(always)]
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    #[inline(always)]
    fn div(self, o: f64) -> f64 {
        self / o
    }
    #[inline(always)]
    fn mul_add(self, a: f64, b: f64) -> f64 {
        f64::mul_add(self, a, b)
    }
    #[inline(always)]
    fn split(self) -> (f64, f64) {
        let hi = f64::from_bits(self.to_bits() & 0xffff_ffff_f800_0000);
        (hi, self - hi)
    }
    #[inline(always)]
    fn mul_pow2(self, shifted: f64) -> f64 {
        let n = (shifted.to_bits() as i64).wrapping_sub(Self::ROUNDER.to_bits() as i64);
        let half = n >> 1;
        let pow2 = |k: i64| f64::from_bits((k.wrapping_add(1023) as u64) << 52);
        self * pow2(half) * pow2(n.wrapping_sub(half))
    }
    #[inline(always)]
    fn erfc_poly(u: f64) -> f64 {
        horner(
            &[
                -1.9486231509828163e-09,
                -3.79663714358016e-09,
                2.536616063209135e-08,
                1.2887195850093306e-08,
                -1.3636153198131137e-07,
                7.240336652187759e-08,
                3.5260363034210973e-07,
                -6.530949958400772e-07,
                -2.2639227019042784e-08,
                2.0617131676192303e-06,
                -3.6334158049582373e-06,
                -1.155644596359756e-06,
                1.611730922827786e-05,
                -2.1685820116790884e-05,
                -3.414805030341696e-05,
                0.00014446833518478778,
                -3.4371563704623534e-05,
                -0.0006630731461719652,
                0.0008372960738586381,
                0.0030906120274636685,
                -0.006479185068259557,
                -0.02151066188803402,
                0.03644223150688812,
                0.2794720925560287,
                0.6871606844138106,
                1.021582705242023,
            ],
            u,
        )
    }
    #[inline(always)]
    fn exp_poly(r: f64) -> f64 {
        // Taylor's 1/k! for k = 13..2: the remainder is below 4.3e-18 for |r| <= ln(2)/2.
        horner(
            &[
                1.0 / 6_227_020_800.0,
                1.0 / 479_001_600.0,
                1.0 / 39_916_800.0,
                1.0 / 3_628_800.0,
                1.0 / 362_880.0,
                1.0 / 40_320.0,
                1.0 / 5040.0,
                1.0 / 720.0,
                1.0 / 120.0,
                1.0 / 24.0,
                1.0 / 6.0,
                0.5,
            ],
            r,
        )
    }
    // No near path: only ±0 takes it (see `VFloat::NEAR`).
    const NEAR: f64 = 0.0;
    #[inline(always)]
    fn erfc_near_poly(u: f64) -> f64 {
        Self::erfc_poly(u)
    }
    #[inline(always)]
    fn mul_pow2_normal(self, shifted: f64) -> f64 {
        self.mul_pow2(shifted)
    }
}

#[cfg(test)]
#[path = "vmath_reference.rs"]
mod reference;

#[cfg(test)]
mod tests {
    use super::erfc;
    use super::reference::{ERFC_F32, ERFC_F64};
    use proptest::prelude::*;

    /// The error bound for f32, in units in the last place of the exact value.
    const F32_ULPS: f64 = 6.0;
    /// The error bound for f64, relative.
    const F64_RELATIVE: f64 = 1e-14;

    /// The spacing of f32 values at `exact` (the subnormal spacing below the normal range).
    fn ulp_f32(exact: f64) -> f64 {
        let a = exact.abs() as f32;
        if a < f32::MIN_POSITIVE {
            f64::from(f32::from_bits(1))
        } else {
            2f64.powi(a.log2().floor() as i32 - 23)
        }
    }

    /// How many f32 ulps `got` lies from `exact`.
    fn ulps_f32(got: f32, exact: f64) -> f64 {
        (f64::from(got) - exact).abs() / ulp_f32(exact)
    }

    /// Whether `got` is within the f64 bound of `exact`: relative, plus two of the smallest
    /// subnormals where the result has left the normal range.
    fn close_f64(got: f64, exact: f64) -> bool {
        (got - exact).abs() <= F64_RELATIVE * exact.abs() + 2.0 * f64::from_bits(1)
    }

    #[test]
    fn erfc_f64_matches_mpmath() {
        for &(x, want) in ERFC_F64 {
            let got = erfc(x);
            assert!(close_f64(got, want), "erfc({x:e}) = {got:e}, want {want:e}");
        }
    }

    #[test]
    fn erfc_f32_matches_mpmath() {
        for &(x, want) in ERFC_F32 {
            let got = erfc(x);
            assert!(ulps_f32(got, want) <= F32_ULPS, "erfc({x:e}) = {got:e}, want {want:e}");
        }
    }

    /// Every 4099th f32 bit pattern: both signs, every binade, subnormals, ±∞ and NaNs, against
    /// f64 libm (accurate to well under an f32 ulp).
    #[test]
    fn erfc_f32_bound_holds_across_bit_patterns() {
        let mut worst = (0.0, 0.0f32);
        for bits in (0..=u32::MAX).step_by(4099).chain([0x7f80_0000, 0xff80_0000, 0x8000_0000]) {
            let x = f32::from_bits(bits);
            let got = erfc(x);
            if x.is_nan() {
                assert!(got.is_nan(), "erfc({x}) = {got}");
                continue;
            }
            let u = ulps_f32(got, libm::erfc(f64::from(x)));
            if u > worst.0 {
                worst = (u, x);
            }
        }
        assert!(worst.0 <= F32_ULPS, "{} ulps at x = {:e}", worst.0, worst.1);
    }

    /// The near path over its whole range (every 97th f32 bit pattern of magnitude up to `NEAR`,
    /// both signs): erfc and e^(-z²) within the general bound plus what rounding `-z²` costs
    /// (`z² / 2` ulp: 9.5 ulp at worst, near the end of the range), against f64 libm.
    #[test]
    fn erfc_near_path_holds_the_f32_bound_over_its_range() {
        use super::{VFloat, erfc_with_gaussian_near};
        let near = <f32 as VFloat>::NEAR;
        for bits in (0..=near.to_bits()).step_by(97).chain([near.to_bits()]) {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                let (got, gaussian) = erfc_with_gaussian_near(x);
                let z = f64::from(x);
                let bound = F32_ULPS + z * z / 2.0;
                let u = ulps_f32(got, libm::erfc(z));
                assert!(u <= bound, "erfc({x:e}) = {got:e}: {u} ulps");
                let g = ulps_f32(gaussian, (-z * z).exp());
                assert!(g <= bound, "e^-x² at {x:e} = {gaussian:e}: {g} ulps");
            }
        }
        // f64 has no near range: only ±0, where the result is exact.
        assert_eq!(erfc_with_gaussian_near(0.0f64), (1.0, 1.0));
        assert_eq!(erfc_with_gaussian_near(-0.0f64), (1.0, 1.0));
    }

    #[test]
    fn erfc_edge_cases() {
        for (x, want) in [(0.0, 1.0), (-0.0, 1.0), (f32::INFINITY, 0.0), (f32::NEG_INFINITY, 2.0)] {
            assert_eq!(erfc(x), want, "erfc({x})");
            assert_eq!(erfc(f64::from(x)), f64::from(want), "erfc({x}) in f64");
        }
        for (x, want) in
            [(1e30, 0.0), (-1e30, 2.0), (f32::MAX, 0.0), (f32::MIN, 2.0), (1e-40, 1.0), (-1e-40, 1.0)]
        {
            assert_eq!(erfc(x), want, "erfc({x:e})");
        }
        for (x, want) in [(1e300, 0.0), (-1e300, 2.0), (f64::MAX, 0.0), (5e-324, 1.0), (-5e-324, 1.0)] {
            assert_eq!(erfc(x), want, "erfc({x:e})");
        }
        assert!(erfc(f32::NAN).is_nan() && erfc(-f32::NAN).is_nan());
        assert!(erfc(f64::NAN).is_nan() && erfc(-f64::NAN).is_nan());
    }

    proptest! {
        #[test]
        fn erfc_f32_within_bound(x in -11.0f32..11.0) {
            let got = erfc(x);
            let want = libm::erfc(f64::from(x));
            prop_assert!(ulps_f32(got, want) <= F32_ULPS, "erfc({:e}) = {:e}, want {:e}", x, got, want);
        }

        #[test]
        fn erfc_f64_within_bound(x in -7.0f64..28.0) {
            let got = erfc(x);
            let want = libm::erfc(x);
            prop_assert!(close_f64(got, want), "erfc({:e}) = {:e}, want {:e}", x, got, want);
        }
    }
}
