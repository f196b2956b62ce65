//! The optimizers' fused host updates (`src/optim/`), compiled for the widest vector extension
//! the CPU has (chosen at run time, so the binary still runs on older machines) through
//! `simd::dispatch`. The optimizer computes one step's numbers in f64 ([`AdamStep`],
//! [`SgdStep`]); [`CpuStorage::adam_step`] and [`CpuStorage::sgd_step`] update a parameter and
//! its state in place.

use std::ops::{Add, Mul, Range, Sub};

use rayon::prelude::*;

use super::CpuStorage;
use super::simd::{self, Kernel};

/// Parameters at least this large are updated in chunks of this size across the thread pool.
const CHUNK: usize = 1 << 15;

/// f32 or f64.
trait Real:
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

/// One Adam/AdamW step's numbers, in f64.
#[derive(Clone, Copy)]
pub(crate) struct AdamStep {
    pub lr: f64,
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// AdamW: the decay scales the parameter instead of joining the gradient.
    pub decoupled: bool,
    /// `lr / (1 - b1^t)`
    pub step_size: f64,
    /// `sqrt(1 - b2^t)`
    pub bc2_sqrt: f64,
}

/// One SGD step's numbers, in f64.
#[derive(Clone, Copy)]
pub(crate) struct SgdStep {
    pub lr: f64,
    pub weight_decay: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub nesterov: bool,
    /// The momentum buffer is new: it starts as the gradient.
    pub first: bool,
}

impl CpuStorage {
    /// One Adam/AdamW step over this parameter's elements `span`, with its gradient and its two
    /// moments (`exp_avg`, `exp_avg_sq`, updated in place), each a storage and the span of its
    /// elements; f32 or f64, all of one dtype (anything else is left alone: the optimizer
    /// admits only these).
    pub(crate) fn adam_step(
        &mut self,
        span: Range<usize>,
        (g, sg): (&CpuStorage, Range<usize>),
        (m, sm): (&mut CpuStorage, Range<usize>),
        (v, sv): (&mut CpuStorage, Range<usize>),
        h: &AdamStep,
    ) {
        let sp = span;
        match (self, g, m, v) {
            (CpuStorage::F32(p), CpuStorage::F32(g), CpuStorage::F32(m), CpuStorage::F32(v)) => {
                adam_all(&mut p[sp], &g[sg], &mut m[sm], &mut v[sv], AdamConstants::of(h))
            }
            (CpuStorage::F64(p), CpuStorage::F64(g), CpuStorage::F64(m), CpuStorage::F64(v)) => {
                adam_all(&mut p[sp], &g[sg], &mut m[sm], &mut v[sv], AdamConstants::of(h))
            }
            _ => {}
        }
    }

    /// One SGD step over this parameter's elements `span`, with its gradient and, with
    /// momentum, its momentum buffer (updated in place); f32 or f64 of one dtype (anything else
    /// is left alone: the optimizer admits only these).
    pub(crate) fn sgd_step(
        &mut self,
        span: Range<usize>,
        (g, sg): (&CpuStorage, Range<usize>),
        buffer: Option<(&mut CpuStorage, Range<usize>)>,
        h: &SgdStep,
    ) {
        let sp = span;
        match (self, g) {
            (CpuStorage::F32(p), CpuStorage::F32(g)) => {
                let b = match buffer {
                    Some((CpuStorage::F32(b), s)) => Some(&mut b[s]),
                    _ => None,
                };
                sgd(&mut p[sp], &g[sg], b, SgdConstants::of(h));
            }
            (CpuStorage::F64(p), CpuStorage::F64(g)) => {
                let b = match buffer {
                    Some((CpuStorage::F64(b), s)) => Some(&mut b[s]),
                    _ => None,
                };
                sgd(&mut p[sp], &g[sg], b, SgdConstants::of(h));
            }
            _ => {}
        }
    }
}

/// One Adam/AdamW step's constants, in the element type.
#[derive(Clone, Copy)]
struct AdamConstants<T> {
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

impl<T: Real> AdamConstants<T> {
    fn of(h: &AdamStep) -> AdamConstants<T> {
        AdamConstants {
            b1: T::of(h.b1),
            b2: T::of(h.b2),
            c1: T::of(1.0 - h.b1),
            c2: T::of(1.0 - h.b2),
            eps: T::of(h.eps),
            step_size: T::of(h.step_size),
            inv_bc2_sqrt: T::of(1.0 / h.bc2_sqrt),
            decay: T::of(if h.decoupled { 1.0 - h.lr * h.weight_decay } else { 1.0 }),
            l2: T::of(if h.decoupled { 0.0 } else { h.weight_decay }),
        }
    }
}

/// [`adam`] over the whole parameter, split across the thread pool when it is large.
fn adam_all<T: Real>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], k: AdamConstants<T>) {
    super::threads::enter();
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
fn adam<T: Real>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], k: AdamConstants<T>) {
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
struct SgdConstants<T> {
    pub lr: T,
    pub weight_decay: T,
    pub momentum: T,
    /// `1 - dampening`
    pub keep: T,
    pub nesterov: bool,
    /// The momentum buffer is new: it starts as the gradient.
    pub first: bool,
}

impl<T: Real> SgdConstants<T> {
    fn of(h: &SgdStep) -> SgdConstants<T> {
        SgdConstants {
            lr: T::of(h.lr),
            weight_decay: T::of(h.weight_decay),
            momentum: T::of(h.momentum),
            keep: T::of(1.0 - h.dampening),
            nesterov: h.nesterov,
            first: h.first,
        }
    }
}

/// `p` (and the momentum buffer `b`, when given) updated in place from `g`.
fn sgd<T: Real>(p: &mut [T], g: &[T], b: Option<&mut [T]>, k: SgdConstants<T>) {
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
