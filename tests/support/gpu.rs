//! What the GPU suites share: whether a test can run (it says so on stderr when it cannot, never a
//! silent pass), and one lock per test binary. The caching allocators' statistics are
//! process-wide, so a test that asserts them exactly must not run beside tests that allocate:
//! every GPU test holds the lock shared, and a test that reads the statistics holds it alone.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static GPU: RwLock<()> = RwLock::new(());

/// Written to stderr directly, past the test harness's output capture, so a skip is always seen.
/// One write, so the line is not cut by the harness's lines from other threads.
pub fn skip_note(message: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("{message}\n").as_bytes());
}

/// `Some` (holding the lock shared, beside other GPU tests) when a CUDA device is present.
pub fn shared(test: &str) -> Option<RwLockReadGuard<'static, ()>> {
    if !present(test) {
        return None;
    }
    Some(GPU.read().unwrap_or_else(|e| e.into_inner()))
}

/// `Some` (holding the lock alone: no other GPU test of this binary runs meanwhile) when a CUDA
/// device is present; for tests that assert the allocators' statistics.
pub fn exclusive(test: &str) -> Option<RwLockWriteGuard<'static, ()>> {
    if !present(test) {
        return None;
    }
    Some(GPU.write().unwrap_or_else(|e| e.into_inner()))
}

/// Are there at least two CUDA devices? Says it skipped when not.
pub fn two_devices(test: &str) -> bool {
    if devcheck::cuda::device_count() >= 2 {
        return true;
    }
    skip_note(&format!("skipped: needs two CUDA devices ({test})"));
    false
}

fn present(test: &str) -> bool {
    if devcheck::cuda::is_available() {
        return true;
    }
    skip_note(&format!("skipped: no CUDA device ({test})"));
    false
}
