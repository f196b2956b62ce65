//! Result buffers. A fresh 64 MiB buffer costs 16,384 page faults on first write with 4 KiB
//! pages, which dominates a memory-bound op; large buffers are therefore advised to use
//! transparent huge pages (one fault per 2 MiB), as numpy does for its large arrays.

/// Buffers at least this large get the huge-page advice.
const HUGE_PAGE_THRESHOLD_BYTES: usize = 4 << 20;

/// `n` elements of `U::default()`. For the numeric types that is all-zero bits, which the
/// allocator provides from fresh (untouched) pages for large sizes.
pub(crate) fn zeroed<U: Copy + Default>(n: usize) -> Vec<U> {
    let v = vec![U::default(); n];
    advise_huge_pages(&v);
    v
}

#[cfg(target_os = "linux")]
fn advise_huge_pages<U>(v: &[U]) {
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
    // never their contents, which stay zero or as written.
    unsafe {
        libc::madvise(aligned as *mut libc::c_void, end - aligned, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages<U>(_v: &[U]) {}
