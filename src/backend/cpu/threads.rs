//! Which threads run host kernels. A kernel's parallel parts (rayon's `par_*` iterators, `join`,
//! gemm's threads) run on the rayon pool of the thread that calls it. Called from a thread outside
//! any rayon pool — a user's `main` and training loop — rayon hands every parallel op to its
//! global pool and puts the caller to sleep until it is done: two thread wake-ups per op, about a
//! fifth of a small CNN's training step at 1 and 2 threads on a 2-core VM (8.1 vs 6.5 ms and
//! 4.2–5.0 vs 3.5–4.0 ms a step). PyTorch's OpenMP threads work the other way: the calling
//! thread is the first of the team.
//!
//! [`enter`] does that here: the first host kernel on a thread outside any pool makes that thread
//! the first worker of a pool of its own (rayon's `use_current_thread`), as many threads as rayon's
//! global pool has (`RAYON_NUM_THREADS`, the cores, or what the program gave `build_global`). Its
//! ops then run on it directly and its helpers steal the other halves, with no hand-off. A thread
//! already inside a rayon pool (`pool.install`, a rayon worker) keeps using that pool.
//!
//! [`keep_helpers_awake`] keeps the pool's other threads from falling asleep between the ops of a
//! step. A rayon worker with nothing to do sleeps within microseconds, and waking it again takes
//! 60-80 µs on some virtual machines (measured on a 2-vCPU Xeon: a `join` of two 40 µs halves took
//! 72 µs after 20 µs of serial work and 118 µs after 1 ms, against 50 µs back to back), longer
//! than the parallel half of most of a small model's ops. PyTorch's OpenMP threads spin for a
//! while before they sleep; here each helper runs a job that takes any pending work for as long
//! as it keeps coming and returns after [`LINGER`] without any.

use std::cell::{Cell, OnceCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// How long a helper thread stays awake, taking any work the pool has, after the last work it
/// found. A training step's serial stretches between parallel ops (autograd's bookkeeping, small
/// ops) are far shorter; a program that stops computing leaves its helpers spinning this long,
/// and a wait of the program's own (`rayon::join`, `scope`) whose thread picks up a helper job
/// may end this much later. 0.2, 0.5 and 1 ms measured alike on the 2-thread steps (MLP, GPT,
/// CNN, attention; alternating runs on the Xeon kind).
const LINGER: Duration = Duration::from_micros(500);

thread_local! {
    /// The pool this thread is the first worker of, once a host kernel has run on it; `None` when
    /// it could not be built (the kernels then use rayon's global pool, as before).
    static POOL: OnceCell<Option<rayon::ThreadPool>> = const { OnceCell::new() };
    /// How many of the helper jobs this thread started are still running.
    static AWAKE: Arc<AtomicUsize> = Arc::new(AtomicUsize::new(0));
    /// Whether this thread is running a helper job now.
    static LINGERING: Cell<bool> = const { Cell::new(false) };
    /// How many host kernels this thread is inside (more than one when a kernel's wait for its
    /// parallel part runs another's).
    static IN_KERNEL: Cell<u32> = const { Cell::new(0) };
}

/// Marks the calling thread as inside a host kernel until dropped: a helper job it picks up
/// while it waits for the kernel's parallel part returns at once (see [`linger`]).
pub(crate) struct InKernel(());

impl InKernel {
    #[inline]
    pub(crate) fn enter() -> InKernel {
        let _ = IN_KERNEL.try_with(|n| n.set(n.get().saturating_add(1)));
        InKernel(())
    }
}

impl Drop for InKernel {
    #[inline]
    fn drop(&mut self) {
        let _ = IN_KERNEL.try_with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// Makes the calling thread a worker of a pool before a host kernel runs, unless it already is
/// one. Cheap after the first call on a thread (a thread-local read).
#[inline]
pub(crate) fn enter() {
    if rayon::current_thread_index().is_none() {
        join_pool();
    }
}

/// What every host kernel does before it runs, over `elements` (its largest operand or result):
/// joins a pool ([`enter`]), keeps the pool's helpers awake if it is large enough to be split
/// across threads ([`keep_helpers_awake`]), and marks the thread as inside a kernel until the
/// returned guard is dropped. The op front end (`tensor::compute`) and the result allocator
/// (`alloc::filled`, which kernels run outside the front end also use) both call it; nested calls
/// only count the mark up and down.
pub(crate) fn begin_kernel(elements: usize) -> InKernel {
    enter();
    if elements >= super::PARALLEL_THRESHOLD {
        keep_helpers_awake();
    }
    InKernel::enter()
}

/// Keeps the other threads of the calling thread's pool awake for the parallel parts of the next
/// ops: starts a [`linger`] job for each helper that is not already running one this thread
/// started. Called before a host op large enough to be split across threads; nothing happens on a
/// pool of one thread.
pub(crate) fn keep_helpers_awake() {
    let helpers = rayon::current_num_threads().saturating_sub(1);
    if helpers == 0 || rayon::current_thread_index().is_none() {
        return;
    }
    let Ok(awake) = AWAKE.try_with(Arc::clone) else { return };
    let owner = std::thread::current().id();
    while awake.load(Ordering::Acquire) < helpers {
        awake.fetch_add(1, Ordering::AcqRel);
        let awake = Arc::clone(&awake);
        rayon::spawn(move || linger(owner, awake));
    }
}

/// A helper's job: runs the pool's pending work as it comes, and returns after [`LINGER`] without
/// any. It returns at once where spinning would hold up the thread's own work: on the thread that
/// started it and on any thread inside a host kernel (either may pick it up while it waits for a
/// kernel's parallel part), and on a thread that already runs one.
fn linger(owner: ThreadId, awake: Arc<AtomicUsize>) {
    /// Counts the job out, and clears the thread's mark, however the job ends.
    struct Running(Arc<AtomicUsize>, bool);
    impl Drop for Running {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::AcqRel);
            if self.1 {
                let _ = LINGERING.try_with(|l| l.set(false));
            }
        }
    }
    let mut running = Running(awake, false);
    if !may_linger(owner) {
        return;
    }
    LINGERING.with(|l| l.set(true));
    running.1 = true;
    let mut idle_since = Instant::now();
    loop {
        match rayon::yield_now() {
            Some(rayon::Yield::Executed) => idle_since = Instant::now(),
            Some(rayon::Yield::Idle) if idle_since.elapsed() < LINGER => std::hint::spin_loop(),
            _ => break,
        }
    }
}

/// Whether a helper job started by `owner` may spin on this thread (see [`linger`]).
fn may_linger(owner: ThreadId) -> bool {
    std::thread::current().id() != owner && !LINGERING.with(Cell::get) && IN_KERNEL.with(Cell::get) == 0
}

#[cold]
fn join_pool() {
    // `try_with`: during the thread's exit, after its pool was dropped, kernels fall back to the
    // global pool instead of panicking.
    let _ = POOL.try_with(|pool| {
        pool.get_or_init(|| {
            let threads = rayon::current_num_threads();
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .use_current_thread()
                .thread_name(|i| format!("devcheck-worker-{i}"))
                .build()
                .ok()
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn a_plain_thread_becomes_the_first_worker_of_a_pool_of_the_global_pools_size() {
        let global = rayon::current_num_threads();
        std::thread::spawn(move || {
            assert_eq!(rayon::current_thread_index(), None);
            enter();
            assert_eq!(rayon::current_thread_index(), Some(0));
            assert_eq!(rayon::current_num_threads(), global);
            // A second call changes nothing.
            enter();
            assert_eq!(rayon::current_thread_index(), Some(0));
        })
        .join()
        .expect("the thread finishes");
    }

    #[test]
    fn host_ops_from_several_plain_threads_at_once_run_there_and_agree() {
        use crate::{Device, Tensor};
        // Large enough to be split across threads (a sum, an add, a matrix product).
        let n = 1 << 20;
        let want_sum = (0..n).map(|i| (i % 7) as f64).sum::<f64>() * 2.0;
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    let x: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
                    let x = Tensor::from_vec(x, [n], &Device::Cpu).expect("a tensor");
                    let sum = (&x + &x).sum_all().expect("sum");
                    let got = sum.to_scalar::<f32>().expect("a value") as f64;
                    assert!((got - want_sum).abs() <= want_sum * 1e-6, "{got} vs {want_sum}");
                    let a = Tensor::ones([256, 256], &Device::Cpu).expect("ones");
                    let p = a.matmul(&a).expect("matmul").to_vec::<f32>().expect("values");
                    assert!(p.iter().all(|&v| v == 256.0));
                    // The ops made this thread the first worker of its own pool.
                    assert_eq!(rayon::current_thread_index(), Some(0));
                })
            })
            .collect();
        for t in threads {
            t.join().expect("each thread finishes");
        }
    }

    #[test]
    fn a_thread_inside_a_pool_keeps_its_pool() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().expect("a pool");
        pool.install(|| {
            let index = rayon::current_thread_index();
            enter();
            assert_eq!(rayon::current_thread_index(), index);
            assert_eq!(rayon::current_num_threads(), 3);
        });
    }
    #[test]
    fn helpers_stay_awake_after_a_large_op_and_return_when_idle() {
        let awake = || AWAKE.with(|a| a.load(Ordering::Acquire));
        let single = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a pool");
        single.install(|| {
            keep_helpers_awake();
            assert_eq!(awake(), 0, "a pool of one thread has no helper to keep awake");
        });
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().expect("a pool");
        pool.install(|| {
            keep_helpers_awake();
            assert!(awake() <= 2, "one job per helper at most");
            // Parallel work still runs, on every thread, while the helpers linger.
            let sum: u64 = (0..1_000_000u64).into_par_iter().map(|i| i % 3).sum();
            assert_eq!(sum, (0..1_000_000u64).map(|i| i % 3).sum::<u64>());
            // Calling again does not start more than the helpers.
            keep_helpers_awake();
            assert!(awake() <= 2);
            let start = Instant::now();
            while awake() > 0 {
                assert!(start.elapsed() < Duration::from_secs(10), "helpers return once idle");
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    }
    #[test]
    fn a_helper_job_does_not_spin_where_it_would_hold_up_the_threads_own_work() {
        let other = std::thread::spawn(|| std::thread::current().id()).join().expect("an id");
        assert!(may_linger(other), "an idle thread of the pool");
        assert!(!may_linger(std::thread::current().id()), "the thread that started it");
        {
            let _outer = InKernel::enter();
            let _nested = InKernel::enter();
            assert!(!may_linger(other), "a thread waiting inside a kernel");
        }
        assert!(may_linger(other), "out of the kernel again");
        LINGERING.with(|l| l.set(true));
        assert!(!may_linger(other), "a thread already spinning");
        LINGERING.with(|l| l.set(false));
    }
}
