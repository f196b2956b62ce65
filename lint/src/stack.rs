//! Where syntax trees live. syn parses, the walker visits and `Drop` frees a tree recursively,
//! so every parse, visit and drop of a Rust tree runs on a thread with a stack of
//! [`STACK_BYTES`]: a worker of [`pool`], or one of the shared pool [`run`] hands the call to.
//! [`crate::depth`] keeps every file it lets through within that stack. A Python tree's depth is
//! known after the parse (which grows its own stack), so its walk runs [`within`] the stack it
//! needs on the calling thread.

use std::cell::Cell;

/// Stack size of the threads that hold syntax trees. Only the pages a thread touches are
/// backed by memory, so a large size costs address space, not RAM.
pub(crate) const STACK_BYTES: usize = 64 << 20;

thread_local! {
    /// Is this thread one with a stack of `STACK_BYTES`?
    static LARGE: Cell<bool> = const { Cell::new(false) };
}

/// A thread pool whose workers have large stacks, for linting, inspecting and fixing files in
/// parallel.
pub(crate) fn pool() -> std::io::Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .stack_size(STACK_BYTES)
        .thread_name(|i| format!("devcheck-lint-{i}"))
        .start_handler(|_| LARGE.with(|l| l.set(true)))
        .build()
        .map_err(std::io::Error::other)
}

/// Runs `f` on a thread with a large stack: this one if it is such a thread, else a worker of
/// one pool shared by every caller, started on first use and kept for the process. Starting a
/// thread (and warming its allocator arena) per call cost more than analysing a small file.
/// A panic in `f` goes on in the caller. `Err` only when the pool could not be started.
pub(crate) fn run<T: Send>(f: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    if LARGE.with(Cell::get) {
        return Ok(f());
    }
    static SHARED: std::sync::OnceLock<Result<rayon::ThreadPool, String>> = std::sync::OnceLock::new();
    match SHARED.get_or_init(|| pool().map_err(|e| e.to_string())) {
        Ok(pool) => Ok(pool.install(f)),
        Err(e) => Err(std::io::Error::other(e.clone())),
    }
}

/// Runs `f`, which takes at most `need` bytes of stack, on this thread: on its own stack when that
/// much is left, else on a fresh segment of [`STACK_BYTES`] mapped for the call (stacker, which
/// ruff's parser uses the same way). For trees whose depth is known before they are walked.
/// `Err` only when the system refused the segment; a panic in `f` goes on in the caller.
pub(crate) fn within<T>(need: usize, f: impl FnOnce() -> T) -> std::io::Result<T> {
    if stacker::remaining_stack().is_some_and(|left| left >= need) {
        return Ok(f());
    }
    #[cfg(test)]
    GROWN.with(|g| g.set(g.get() + 1));
    // stacker panics when the mapping fails, before `f` starts.
    let started = Cell::new(false);
    let grown = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        stacker::grow(STACK_BYTES, || {
            started.set(true);
            f()
        })
    }));
    match grown {
        Ok(value) => Ok(value),
        Err(payload) if started.get() => std::panic::resume_unwind(payload),
        Err(payload) => {
            let why = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a stack could not be mapped".to_string());
            Err(std::io::Error::other(why))
        }
    }
}

#[cfg(test)]
thread_local! {
    /// How many times [`within`] moved to a fresh segment on this thread.
    pub(crate) static GROWN: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f` on a new thread with a stack of `bytes`, counted as large: for tests that hold the
/// depth limit to a smaller stack than the real one.
#[cfg(test)]
pub(crate) fn run_with_stack<T: Send>(bytes: usize, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .stack_size(bytes)
            .spawn_scoped(scope, || {
                LARGE.with(|l| l.set(true));
                f()
            })
            .expect("a thread starts");
        match worker.join() {
            Ok(value) => value,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_moves_to_a_large_stack_once() {
        let outer = std::thread::current().id();
        let (inner, nested) = run(|| {
            let inner = std::thread::current().id();
            // Already on a large stack: no second thread.
            let nested = run(|| std::thread::current().id()).expect("runs");
            (inner, nested)
        })
        .expect("a thread starts");
        assert_ne!(outer, inner);
        assert_eq!(inner, nested);
    }

    #[test]
    fn calls_from_other_threads_share_the_workers_and_panics_reach_the_caller() {
        let from_elsewhere =
            std::thread::spawn(|| run(|| LARGE.with(Cell::get)).expect("runs")).join().expect("joins");
        assert!(from_elsewhere);
        // Not a thread per call: 64 calls are served by the pool's few workers.
        let ids: std::collections::HashSet<_> =
            (0..64).map(|_| run(|| std::thread::current().id()).expect("runs")).collect();
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(ids.len() <= workers, "{} threads for 64 calls", ids.len());
        let caught = std::panic::catch_unwind(|| run(|| panic!("boom")));
        assert!(caught.is_err());
        // The pool survives a panic in one call.
        assert!(run(|| 1 + 1).is_ok());
    }

    #[test]
    fn pool_workers_count_as_large() {
        let pool = pool().expect("a pool");
        let same = pool.install(|| {
            let worker = std::thread::current().id();
            run(|| std::thread::current().id()).expect("runs") == worker
        });
        assert!(same);
    }
}
