//! The fused host updates, compiled for the widest vector extension the CPU has (chosen at run
//! time, so the binary still runs on older machines).

use std::ops::{Add, Mul, Sub};

use rayon::prelude::*;

/// Parameters at least this large are updated in chunks of this size across the thread pool.
const CHUNK: usize = 1 << 15;

/// f32 or f64.
pub(super) trait Real:
    Copy
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    fn of(x: f64) -> Self;
    fn sqrt(self) -> Self;
}

impl Real for f32 {
    #[inline(always)]
    fn of(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}

impl Real for f64 {
    #[inline(always)]
    fn of(x: f64) -> Self {
        x
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

/// Defines `fn $name<T: Real>(..)` whose body is compiled three times: for AVX-512, for
/// AVX2 + FMA, and for the baseline target; each call runs the best one this CPU supports.
macro_rules! multiversioned {
    ($(#[$meta:meta])* fn $name:ident<T: Real>($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$meta])*
        pub(super) fn $name<T: Real>($($arg: $ty),*) {
            #[inline(always)]
            fn body<T: Real>($($arg: $ty),*) $body

            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512<T: Real>($($arg: $ty),*) {
                    body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn avx2<T: Real>($($arg: $ty),*) {
                    body($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU supports AVX-512F, checked on the line above.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports AVX2 and FMA, checked on the line above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

/// One Adam/AdamW step's constants, in the element type.
#[derive(Clone, Copy)]
pub(super) struct AdamConstants<T> {
    pub b1: T,
    pub b2: T,
    /// `1 - b1`, `1 - b2`
    pub c1: T,
    pub c2: T,
    pub eps: T,
    /// `lr / (1 - b1^t)`
    pub step_size: T,
    /// `1 / sqrt(1 - b2^t)`
    pub inv_bc2_sqrt: T,
    /// AdamW's `1 - lr * wd` (1 for Adam).
    pub decay: T,
    /// Adam's L2 coefficient (0 for AdamW).
    pub l2: T,
}

/// [`adam`] over the whole parameter, split across the thread pool when it is large.
pub(super) fn adam_all<T: Real>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], k: AdamConstants<T>) {
    if p.len() < 2 * CHUNK || rayon::current_num_threads() < 2 {
        return adam(p, g, m, v, k);
    }
    p.par_chunks_mut(CHUNK)
        .zip(g.par_chunks(CHUNK))
        .zip(m.par_chunks_mut(CHUNK))
        .zip(v.par_chunks_mut(CHUNK))
        .for_each(|(((p, g), m), v)| adam(p, g, m, v, k));
}

multiversioned! {
    /// `p`, `m`, `v` updated in place from `g` (all of one length).
    fn adam<T: Real>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], k: AdamConstants<T>) {
        let n = p.len().min(g.len()).min(m.len()).min(v.len());
        let (p, g, m, v) = (&mut p[..n], &g[..n], &mut m[..n], &mut v[..n]);
        for i in 0..n {
            let gi = g[i] + k.l2 * p[i];
            let mi = k.b1 * m[i] + k.c1 * gi;
            let vi = k.b2 * v[i] + k.c2 * gi * gi;
            m[i] = mi;
            v[i] = vi;
            p[i] = p[i] * k.decay - k.step_size * mi / (vi.sqrt() * k.inv_bc2_sqrt + k.eps);
        }
    }
}

/// One SGD step's constants, in the element type.
#[derive(Clone, Copy)]
pub(super) struct SgdConstants<T> {
    pub lr: T,
    pub weight_decay: T,
    pub momentum: T,
    /// `1 - dampening`
    pub keep: T,
    pub nesterov: bool,
    /// The momentum buffer is new: it starts as the gradient.
    pub first: bool,
}

multiversioned! {
    /// `p` (and the momentum buffer `b`, when given) updated in place from `g`.
    fn sgd<T: Real>(p: &mut [T], g: &[T], b: Option<&mut [T]>, k: SgdConstants<T>) {
        let n = p.len().min(g.len());
        let (p, g) = (&mut p[..n], &g[..n]);
        match b {
            None => {
                for i in 0..n {
                    p[i] = p[i] - k.lr * (g[i] + k.weight_decay * p[i]);
                }
            }
            Some(b) => {
                let b = &mut b[..n];
                for i in 0..n {
                    let gi = g[i] + k.weight_decay * p[i];
                    let bi = if k.first { gi } else { k.momentum * b[i] + k.keep * gi };
                    b[i] = bi;
                    p[i] = p[i] - k.lr * if k.nesterov { gi + k.momentum * bi } else { bi };
                }
            }
        }
    }
}
