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

use std::cell::OnceCell;

thread_local! {
    /// The pool this thread is the first worker of, once a host kernel has run on it; `None` when
    /// it could not be built (the kernels then use rayon's global pool, as before).
    static POOL: OnceCell<Option<rayon::ThreadPool>> = const { OnceCell::new() };
}

/// Makes the calling thread a worker of a pool before a host kernel runs, unless it already is
/// one. Cheap after the first call on a thread (a thread-local read).
#[inline]
pub(crate) fn enter() {
    if rayon::current_thread_index().is_none() {
        join_pool();
    }
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
}
