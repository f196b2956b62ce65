//! The fused host updates, compiled for the widest vector extension the CPU has (chosen at run
//! time, so the binary still runs on older machines) through the CPU backend's `simd::dispatch`.

use std::ops::{Add, Mul, Sub};

use rayon::prelude::*;

use crate::backend::cpu::simd::{self, Kernel};

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
    crate::backend::cpu::threads::enter();
    if p.len() < 2 * CHUNK || rayon::current_num_threads() < 2 {
        return adam(p, g, m, v, k);
    }
    p.par_chunks_mut(CHUNK)
        .zip(g.par_chunks(CHUNK))
        .zip(m.par_chunks_mut(CHUNK))
        .zip(v.par_chunks_mut(CHUNK))
        .for_each(|(((p, g), m), v)| adam(p, g, m, v, k));
}

/// `p`, `m`, `v` updated in place from `g` (all of one length).
pub(super) fn adam<T: Real>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], k: AdamConstants<T>) {
    simd::dispatch(Adam { p, g, m, v, k })
}

struct Adam<'a, T> {
    p: &'a mut [T],
    g: &'a [T],
    m: &'a mut [T],
    v: &'a mut [T],
    k: AdamConstants<T>,
}

impl<T: Real> Kernel for Adam<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Adam { p, g, m, v, k } = self;
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

/// `p` (and the momentum buffer `b`, when given) updated in place from `g`.
pub(super) fn sgd<T: Real>(p: &mut [T], g: &[T], b: Option<&mut [T]>, k: SgdConstants<T>) {
    simd::dispatch(Sgd { p, g, b, k })
}

struct Sgd<'a, T> {
    p: &'a mut [T],
    g: &'a [T],
    b: Option<&'a mut [T]>,
    k: SgdConstants<T>,
}

impl<T: Real> Kernel for Sgd<'_, T> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Sgd { p, g, b, k } = self;
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
