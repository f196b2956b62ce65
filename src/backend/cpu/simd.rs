//! Kernels compiled for the widest vector extension the CPU has, chosen at run time, so the
//! binary still runs on machines without AVX2 or AVX-512. The baseline x86-64 target has only
//! SSE2 (4 f32 lanes, no FMA); AVX-512 has 16 lanes.

use std::mem::MaybeUninit;

/// A loop to compile once per vector extension. `run` must be `#[inline(always)]`, so that its
/// body (and the small closures it calls) is compiled inside each of [`dispatch`]'s versions.
/// The loops here write through `MaybeUninit`: they fill fresh buffers that were never zeroed
/// (see `alloc::filled`).
pub(crate) trait Kernel {
    type Output;
    fn run(self) -> Self::Output;
}

/// Runs `kernel` in the version built for the best extension this CPU supports.
#[inline]
pub(crate) fn dispatch<K: Kernel>(kernel: K) -> K::Output {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        fn avx512<K: Kernel>(kernel: K) -> K::Output {
            kernel.run()
        }
        #[target_feature(enable = "avx2,fma")]
        fn avx2<K: Kernel>(kernel: K) -> K::Output {
            kernel.run()
        }
        if has_avx512() {
            // SAFETY: the CPU supports every feature `avx512` is compiled for, checked just now.
            return unsafe { avx512(kernel) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA, checked on the line above.
            return unsafe { avx2(kernel) };
        }
    }
    kernel.run()
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn has_avx512() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("avx512f") && has!("avx2") && has!("fma")
}

/// `out[i] = f(src[i])`.
pub(crate) struct Map<'a, T, U, F> {
    pub src: &'a [T],
    pub out: &'a mut [MaybeUninit<U>],
    pub f: &'a F,
}

impl<T: Copy, U, F: Fn(T) -> U> Kernel for Map<'_, T, U, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let head = cache_line_head(self.out);
        let (out_head, out) = self.out.split_at_mut(head);
        let (src_head, src) = self.src.split_at(head.min(self.src.len()));
        for (o, &x) in out_head.iter_mut().zip(src_head) {
            o.write((self.f)(x));
        }
        for (o, &x) in out.iter_mut().zip(src) {
            o.write((self.f)(x));
        }
    }
}

/// How many leading elements of `out` come before its first 64-byte boundary. Large buffers all
/// start 16 bytes past a page boundary (the allocator's header), so every 64-byte vector access
/// would straddle two cache lines; starting the main loop at the output's boundary aligns the
/// operands too, which makes a memory-bound loop about 7% faster.
#[inline(always)]
fn cache_line_head<U>(out: &[MaybeUninit<U>]) -> usize {
    let size = std::mem::size_of::<U>().max(1);
    let bytes = (out.as_ptr() as *const u8).align_offset(64);
    if bytes.is_multiple_of(size) { (bytes / size).min(out.len()) } else { 0 }
}

/// `out[i] = f(a[i], b[i])`.
pub(crate) struct Zip<'a, T, U, F> {
    pub a: &'a [T],
    pub b: &'a [T],
    pub out: &'a mut [MaybeUninit<U>],
    pub f: &'a F,
}

impl<T: Copy, U, F: Fn(T, T) -> U> Kernel for Zip<'_, T, U, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let head = cache_line_head(self.out);
        let (out_head, out) = self.out.split_at_mut(head);
        let (a_head, a) = self.a.split_at(head.min(self.a.len()));
        let (b_head, b) = self.b.split_at(head.min(self.b.len()));
        for ((o, &x), &y) in out_head.iter_mut().zip(a_head).zip(b_head) {
            o.write((self.f)(x, y));
        }
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            o.write((self.f)(x, y));
        }
    }
}

/// Each row of `out` (rows of `row.len()`) is `f(a_row[j], row[j])`, or `f(row[j], a_row[j])`
/// when `row_first`: an operand broadcast along the leading dims, e.g. a bias.
pub(crate) struct ZipRows<'a, T, U, F> {
    pub a: &'a [T],
    pub row: &'a [T],
    pub out: &'a mut [MaybeUninit<U>],
    pub row_first: bool,
    pub f: &'a F,
}

impl<T: Copy, U, F: Fn(T, T) -> U> Kernel for ZipRows<'_, T, U, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let n = self.row.len();
        for (o_row, a_row) in self.out.chunks_mut(n).zip(self.a.chunks(n)) {
            if self.row_first {
                for ((o, &x), &y) in o_row.iter_mut().zip(self.row).zip(a_row) {
                    o.write((self.f)(x, y));
                }
            } else {
                for ((o, &x), &y) in o_row.iter_mut().zip(a_row).zip(self.row) {
                    o.write((self.f)(x, y));
                }
            }
        }
    }
}
