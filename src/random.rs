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

/// `n` samples uniform in [0, 1).
pub(crate) fn uniform(n: usize) -> Vec<f64> {
    RNG.with(|r| {
        let mut r = r.borrow_mut();
        (0..n).map(|_| r.random::<f64>()).collect()
    })
}

/// `n` samples from the standard normal distribution.
pub(crate) fn normal(n: usize) -> Vec<f64> {
    RNG.with(|r| {
        let mut r = r.borrow_mut();
        (0..n).map(|_| StandardNormal.sample(&mut *r)).collect()
    })
}

/// A random `u64`, e.g. to seed a data loader's shuffling.
pub fn next_u64() -> u64 {
    RNG.with(|r| r.borrow_mut().random())
}
