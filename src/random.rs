//! Seeded random numbers for `rand`/`randn`/dropout/shuffling.
//!
//! Each thread has its own generator, seeded from 0 until [`manual_seed`] is called on it, so a
//! program (or a test, which runs on its own thread) draws the same numbers on every run.

use std::cell::RefCell;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

thread_local! {
    static RNG: RefCell<StdRng> = RefCell::new(StdRng::seed_from_u64(0));
}

/// Reseeds this thread's generator (`torch.manual_seed`).
pub fn manual_seed(seed: u64) {
    RNG.with(|r| *r.borrow_mut() = StdRng::seed_from_u64(seed));
}

/// Runs `f` with this thread's generator, to draw samples one at a time (straight into a
/// tensor's elements, with no buffer of samples in between).
pub(crate) fn with_rng<R>(f: impl FnOnce(&mut StdRng) -> R) -> R {
    RNG.with(|r| f(&mut r.borrow_mut()))
}

/// One sample uniform in [0, 1).
pub(crate) fn sample_uniform(rng: &mut StdRng) -> f64 {
    rng.random::<f64>()
}

/// One sample from the standard normal distribution.
pub(crate) fn sample_normal(rng: &mut StdRng) -> f64 {
    StandardNormal.sample(rng)
}

/// `n` samples uniform in [0, 1).
pub(crate) fn uniform(n: usize) -> Vec<f64> {
    with_rng(|r| (0..n).map(|_| sample_uniform(r)).collect())
}

/// `n` samples from the standard normal distribution.
pub(crate) fn normal(n: usize) -> Vec<f64> {
    with_rng(|r| (0..n).map(|_| sample_normal(r)).collect())
}

/// A random `u64`, e.g. to seed a data loader's shuffling.
pub fn next_u64() -> u64 {
    RNG.with(|r| r.borrow_mut().random())
}
