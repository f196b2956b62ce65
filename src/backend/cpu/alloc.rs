//! Result buffers. A fresh 64 MiB buffer costs 16,384 page faults on first write with 4 KiB
//! pages, which dominates a memory-bound op; large buffers are therefore advised to use
//! transparent huge pages (one fault per 2 MiB), as numpy does for its large arrays. Results are
//! not zeroed before the kernel writes them.
//!
//! Running out of host memory is an error, not an abort: Rust aborts the process when an
//! infallible allocation (`Vec::with_capacity`, `collect`) fails, so every allocation whose size
//! a user controls is first checked with [`ensure_room`] (or made with [`try_vec`]), and fails as
//! [`HostAllocError`] instead.

use std::alloc::Layout as AllocLayout;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::error::Error;

/// Buffers at least this large get the huge-page advice.
const HUGE_PAGE_THRESHOLD_BYTES: usize = 4 << 20;

/// Buffers at least this large are kept for reuse when freed: a small transformer's step frees
/// many 1-2 MiB temporaries (activations, attention scores), and with 4 buffers of 4 MiB and up
/// the causal-attention workload paid twice the page faults (measured with `perf stat`). A small
/// CNN's step frees 0.7-1 MiB ones (`[64, 32, 11, 11]` f32 activations and their gradients): on 2
/// threads the allocator handed them back to the system and faulted them in again every step.
const POOL_MIN_BYTES: usize = 256 << 10;

/// At most this many freed buffers, and this many bytes in all, wait for reuse.
const POOL_BUFFERS: usize = 16;
const POOL_BYTES: usize = 512 << 20;

/// A freed result buffer whose pages are already faulted in: the next result of the same size
/// (a training step allocates the same temporaries every step, a benchmark loop the same result)
/// reuses it instead of paying the page faults again.
struct Pooled {
    ptr: NonNull<u8>,
    layout: AllocLayout,
}

// SAFETY: a pooled buffer is owned by the pool alone; nothing else holds its pointer.
unsafe impl Send for Pooled {}

impl Drop for Pooled {
    fn drop(&mut self) {
        // SAFETY: the buffer came from the global allocator with exactly this layout (a `Vec`'s
        // capacity and its element's alignment) and is freed once, here.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

static POOL: Mutex<Vec<Pooled>> = Mutex::new(Vec::new());

/// Requests below this size are not checked: they cannot fail on a machine that still runs, and
/// checking costs a system call. Above glibc's largest dynamic mmap threshold (32 MiB), so the
/// trial allocation of [`ensure_room`] does not change where later buffers are placed.
const CHECKED_BYTES: usize = 64 << 20;

/// Host memory could not be had for a request of `requested` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostAllocError {
    pub(crate) requested: usize,
}

impl HostAllocError {
    /// The error for `op` at the user's `location`, with the machine's memory as it is now.
    pub(crate) fn into_error(self, op: &'static str, location: &'static Location<'static>) -> Error {
        let memory = host_memory();
        Error::HostOutOfMemory {
            op,
            requested: self.requested,
            total: memory.map(|m| m.total),
            available: memory.map(|m| m.available),
            location,
        }
    }
}

/// Checks that `bytes` of host memory can be allocated now, before a kernel allocates them
/// infallibly. A request larger than the machine's memory and swap together is refused outright:
/// with Linux's overcommit it might be granted and then kill the process (the OOM killer) once
/// written. One that fits is tried with `try_reserve` and given back at once; the kernel's own
/// allocation, right after, then gets the same answer (unless another thread takes the memory
/// in between).
pub(crate) fn ensure_room(bytes: usize) -> Result<(), HostAllocError> {
    if bytes < CHECKED_BYTES {
        return Ok(());
    }
    let refused = HostAllocError { requested: bytes };
    if machine_limit().is_some_and(|limit| bytes > limit) {
        return Err(refused);
    }
    let mut trial: Vec<u8> = Vec::new();
    // The trial is never written, so its pages are never faulted in: it costs an mmap and an
    // munmap, not the memory.
    trial.try_reserve_exact(bytes).map_err(|_| refused)
}

/// An empty vector with room for exactly `n` elements, or the error when the memory cannot be had
/// (for buffers devcheck fills itself, such as tensors read from a checkpoint).
pub(crate) fn try_vec<U>(n: usize) -> Result<Vec<U>, HostAllocError> {
    let bytes = n.saturating_mul(std::mem::size_of::<U>());
    ensure_room(bytes)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| HostAllocError { requested: bytes })?;
    Ok(v)
}

/// The machine's memory as the kernel reports it (`/proc/meminfo`), in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostMemory {
    pub(crate) total: usize,
    /// What can be allocated without swapping (`MemAvailable`).
    pub(crate) available: usize,
    pub(crate) swap_total: usize,
}

/// The machine's memory now; `None` where `/proc/meminfo` cannot be read (not Linux).
pub(crate) fn host_memory() -> Option<HostMemory> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

fn parse_meminfo(text: &str) -> Option<HostMemory> {
    let field = |name: &str| -> Option<usize> {
        let line = text.lines().find(|l| l.split(':').next() == Some(name))?;
        let kib: usize = line.split(':').nth(1)?.trim().trim_end_matches("kB").trim().parse().ok()?;
        kib.checked_mul(1024)
    };
    Some(HostMemory {
        total: field("MemTotal")?,
        available: field("MemAvailable")?,
        swap_total: field("SwapTotal").unwrap_or(0),
    })
}

/// More than this many bytes can never be backed: the machine's memory plus swap. Read once (it
/// changes only when swap is added); `None` where unknown, and then only the allocator decides.
fn machine_limit() -> Option<usize> {
    static LIMIT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| host_memory().map(|m| m.total.saturating_add(m.swap_total)))
}

/// Takes back the allocation of a result being freed, if it is large; small ones are freed.
pub(crate) fn recycle<T>(v: Vec<T>) {
    let Ok(layout) = AllocLayout::array::<T>(v.capacity()) else { return };
    if layout.size() < POOL_MIN_BYTES || std::mem::needs_drop::<T>() {
        return;
    }
    let mut v = ManuallyDrop::new(v);
    let Some(ptr) = NonNull::new(v.as_mut_ptr().cast::<u8>()) else { return };
    let buffer = Pooled { ptr, layout };
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    pool.push(buffer);
    // Oldest first out: drop (free) until within the limits.
    while pool.len() > POOL_BUFFERS || pool.iter().map(|b| b.layout.size()).sum::<usize>() > POOL_BYTES {
        pool.remove(0);
    }
}

/// Room for exactly `n` elements of `U`: a pooled buffer of that size if there is one.
fn reserve<U>(n: usize) -> (Vec<U>, bool) {
    if let Ok(layout) = AllocLayout::array::<U>(n)
        && layout.size() >= POOL_MIN_BYTES
    {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = pool.iter().position(|b| b.layout == layout) {
            let buffer = ManuallyDrop::new(pool.swap_remove(i));
            // SAFETY: the allocation has exactly the layout `Vec<U>` with capacity `n` frees
            // with (same size and alignment), and ownership moves from the pool to the Vec.
            let v = unsafe { Vec::from_raw_parts(buffer.ptr.as_ptr().cast::<U>(), 0, n) };
            return (v, true);
        }
    }
    (Vec::with_capacity(n), false)
}

/// A result of `n` elements written by `fill`, without zeroing them first: a buffer the allocator
/// reuses from its heap would otherwise be cleared once by `calloc` and once more by the kernel
/// that writes it.
///
/// # Safety
/// `fill` must write every element of the slice it is given.
pub(crate) unsafe fn filled<U: Copy>(n: usize, fill: impl FnOnce(&mut [MaybeUninit<U>])) -> Vec<U> {
    let kernel = super::threads::begin_kernel(n);
    let mut v = room_for(n);
    fill(&mut v.spare_capacity_mut()[..n]);
    drop(kernel);
    // SAFETY: `fill` wrote all `n` elements (the caller's promise) into the reserved capacity.
    unsafe { v.set_len(n) };
    v
}

/// An empty vector with room for exactly `n` elements: a pooled buffer of that size if there is
/// one, else a fresh one advised to use huge pages. For values made one by one (a tensor's
/// initial contents), which then read and write as fast as any result: a preallocated 64 MiB
/// output on 4 KiB pages took an add 20% longer than one on huge pages.
pub(crate) fn room_for<U>(n: usize) -> Vec<U> {
    let (mut v, reused) = reserve::<U>(n);
    if !reused {
        advise_huge_pages(&v.spare_capacity_mut()[..n]);
    }
    v
}

/// `out` as a slice to write through: every value written is a valid `U`, so the slice stays
/// initialised.
pub(crate) fn as_uninit<U: Copy>(out: &mut [U]) -> &mut [MaybeUninit<U>] {
    // SAFETY: `MaybeUninit<U>` has the layout of `U`, and the slice is only written with
    // initialised values of `U` (`MaybeUninit::write`), never de-initialised.
    unsafe { &mut *(out as *mut [U] as *mut [MaybeUninit<U>]) }
}

#[cfg(target_os = "linux")]
fn advise_huge_pages<U>(v: &[MaybeUninit<U>]) {
    let bytes = std::mem::size_of_val(v);
    if bytes < HUGE_PAGE_THRESHOLD_BYTES {
        return;
    }
    const PAGE: usize = 4096;
    let start = v.as_ptr() as usize;
    let aligned = start.next_multiple_of(PAGE);
    let end = start + bytes;
    if end <= aligned {
        return;
    }
    // SAFETY: [aligned, end) lies inside the live allocation backing `v`; madvise only changes
    // how the kernel backs those pages (the advice is a hint; failure is harmless and ignored),
    // never their contents.
    unsafe {
        libc::madvise(aligned as *mut libc::c_void, end - aligned, libc::MADV_HUGEPAGE);
    }
    // Threads that fault huge pages of one buffer in at once contend in the kernel: a 64 MiB
    // add on 2 threads ran slower than on 1. Faulting the pages in from this thread first (one
    // write per 2 MiB) and then filling them in parallel is up to twice as fast.
    if rayon::current_num_threads() > 1 {
        const HUGE_PAGE: usize = 2 << 20;
        for page in (aligned..end).step_by(HUGE_PAGE) {
            // SAFETY: `page` lies inside the allocation; a byte may be written to memory that is
            // not initialised yet, and the caller writes every element afterwards anyway.
            unsafe { std::ptr::write_volatile(page as *mut u8, 0) };
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages<U>(_v: &[MaybeUninit<U>]) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result of `n` f32s, each set to `value`.
    fn result(n: usize, value: f32) -> Vec<f32> {
        // SAFETY: the closure writes every element.
        unsafe {
            filled(n, |out| {
                for o in out {
                    o.write(value);
                }
            })
        }
    }

    #[test]
    fn meminfo_is_read_in_bytes_and_swap_may_be_missing() {
        let text = "MemTotal:       24684096 kB\nMemFree:  1 kB\nMemAvailable:   22470372 kB\n";
        assert_eq!(
            parse_meminfo(text),
            Some(HostMemory { total: 24684096 * 1024, available: 22470372 * 1024, swap_total: 0 })
        );
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None, "no MemAvailable: unknown, not zero");
    }

    #[test]
    fn requests_beyond_memory_and_swap_fail_and_small_ones_are_not_checked() {
        let huge = 1usize << 62;
        assert_eq!(ensure_room(huge), Err(HostAllocError { requested: huge }));
        assert_eq!(try_vec::<f32>(1 << 61).unwrap_err(), HostAllocError { requested: 1 << 63 });
        assert!(ensure_room(CHECKED_BYTES - 1).is_ok());
        assert_eq!(try_vec::<u8>(100).unwrap().capacity(), 100);
    }

    #[test]
    fn freed_large_results_are_reused_for_their_size_only_and_the_pool_is_bounded() {
        // Sizes no other test uses, so the shared pool holds nothing else of them.
        let n = (HUGE_PAGE_THRESHOLD_BYTES + 7 * 4096) / 4;
        let first = result(n, 1.0);
        let address = first.as_ptr();
        recycle(first);
        let other_size = result(n + 1024, 2.0);
        assert_ne!(other_size.as_ptr(), address, "another size gets its own buffer");
        let second = result(n, 3.0);
        assert_eq!(second.as_ptr(), address, "the same size reuses the freed buffer");
        assert!(second.iter().all(|&x| x == 3.0), "and every element is written anew");
        let small = result(1000, 4.0);
        recycle(small);
        assert!(POOL.lock().unwrap().iter().all(|b| b.layout.size() >= POOL_MIN_BYTES));

        // (In the same test: the pool is shared, and this fills it past its limits.)
        let n = (HUGE_PAGE_THRESHOLD_BYTES + 13 * 4096) / 4;
        for i in 0..(POOL_BUFFERS + 3) {
            recycle(result(n + i * 1024, 0.0));
        }
        let pool = POOL.lock().unwrap();
        assert!(pool.len() <= POOL_BUFFERS);
        assert!(pool.iter().map(|b| b.layout.size()).sum::<usize>() <= POOL_BYTES);
    }
}
