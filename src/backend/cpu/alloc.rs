//! Result buffers. A fresh 64 MiB buffer costs 16,384 page faults on first write with 4 KiB
//! pages, which dominates a memory-bound op; large buffers are therefore advised to use
//! transparent huge pages (one fault per 2 MiB), as numpy does for its large arrays. Results are
//! not zeroed before the kernel writes them.

use std::mem::MaybeUninit;

/// Buffers at least this large get the huge-page advice.
const HUGE_PAGE_THRESHOLD_BYTES: usize = 4 << 20;

/// A result of `n` elements written by `fill`, without zeroing them first: a buffer the allocator
/// reuses from its heap would otherwise be cleared once by `calloc` and once more by the kernel
/// that writes it.
///
/// # Safety
/// `fill` must write every element of the slice it is given.
pub(crate) unsafe fn filled<U: Copy>(n: usize, fill: impl FnOnce(&mut [MaybeUninit<U>])) -> Vec<U> {
    let mut v = Vec::with_capacity(n);
    let spare = &mut v.spare_capacity_mut()[..n];
    advise_huge_pages(spare);
    fill(spare);
    // SAFETY: `fill` wrote all `n` elements (the caller's promise) into the reserved capacity.
    unsafe { v.set_len(n) };
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
