//! Where syntax trees live. syn parses, the walker visits and `Drop` frees a tree recursively,
//! one call chain per level, so every tree is handled on a stack deep enough for it. A file's
//! depth is estimated before its tree is walked (each front end estimates its own: the Rust one
//! from the text, the Python one from the parser's tokens), and
//! the analysis runs [`within`] the stack that depth needs: on the calling thread's own stack
//! when that much is left (nearly every file), else on a fresh segment. The workers of [`pool`]
//! (the command's threads) have stacks of [`STACK_BYTES`], so there it always is.

use std::cell::Cell;

/// Stack size of the linter's worker threads, and of a fresh segment when a tree needs more than
/// its thread has left. Only the pages a thread touches are backed by memory, so a large size
/// costs address space, not RAM.
pub(crate) const STACK_BYTES: usize = 64 << 20;

/// A thread pool whose workers have large stacks, for linting, inspecting and fixing files in
/// parallel.
pub(crate) fn pool() -> std::io::Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .stack_size(STACK_BYTES)
        .thread_name(|i| format!("devcheck-lint-{i}"))
        .build()
        .map_err(std::io::Error::other)
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
    #[cfg(test)]
    if REFUSE.with(Cell::get) {
        return Err(std::io::Error::other("no segment, for a test"));
    }
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
    /// Makes [`within`] fail as when the system refuses a segment.
    pub(crate) static REFUSE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on a new thread with a stack of `bytes`: for tests that hold the analysis to a given
/// stack.
#[cfg(test)]
pub(crate) fn run_with_stack<T: Send>(bytes: usize, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        let worker =
            std::thread::Builder::new().stack_size(bytes).spawn_scoped(scope, f).expect("a thread starts");
        match worker.join() {
            Ok(value) => value,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recurses `levels` deep with a frame of about a kilobyte each.
    fn deep(levels: usize) -> usize {
        let frame = std::hint::black_box([levels as u8; 1024]);
        if levels == 0 { usize::from(frame[0]) } else { deep(levels - 1) + usize::from(frame[1] & 1) }
    }

    #[test]
    fn within_stays_on_the_thread_and_grows_only_when_the_stack_is_short() {
        let (stayed, grown_then, after) = run_with_stack(4 << 20, || {
            let here = std::thread::current().id();
            let stayed = within(64 << 10, || (std::thread::current().id(), deep(16)));
            let before = GROWN.with(Cell::get);
            // Far more than the thread's 4 MiB: a fresh segment, on the same thread.
            let grown = within(32 << 20, || (std::thread::current().id(), deep(16 << 10)));
            (
                stayed.map(|(id, _)| id == here),
                (before, grown.map(|(id, _)| id == here)),
                GROWN.with(Cell::get),
            )
        });
        assert!(stayed.expect("runs"));
        assert_eq!(grown_then.0, 0);
        assert!(grown_then.1.expect("runs"));
        assert_eq!(after, 1);
    }

    #[test]
    fn a_panic_on_a_fresh_segment_reaches_the_caller() {
        let caught = run_with_stack(1 << 20, || {
            std::panic::catch_unwind(|| within(32 << 20, || -> usize { panic!("boom") }))
        });
        let payload = caught.expect_err("the panic goes on");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    }
}
