//! The checker's dry-run backend: a fake tensor has a device label, dtype, shape and origin, but
//! no element data. Ops on fake tensors compute only result shapes (in the front end, which does so
//! for every backend) and the device checks; nothing here allocates element data.
//!
//! While a [`FakeScope`] (from [`enter`]) is alive on a thread, every tensor created or moved on
//! that thread is fake, whatever its device: `model.to(&Device::Cuda(1))` inside a scope gives a
//! model on a fake `cuda:1`, on a machine with no GPU.

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Keeps fake mode on for the current thread until dropped. Scopes nest.
#[must_use = "fake mode ends when the scope is dropped"]
pub struct FakeScope {
    // Fake mode is per thread: the guard must be dropped on the thread that made it.
    _not_send: PhantomData<*const ()>,
}

/// Turns fake mode on for this thread until the returned scope is dropped.
pub fn enter() -> FakeScope {
    DEPTH.with(|d| d.set(d.get() + 1));
    FakeScope { _not_send: PhantomData }
}

impl Drop for FakeScope {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Is fake mode on for this thread?
pub fn is_active() -> bool {
    DEPTH.with(|d| d.get() > 0)
}
