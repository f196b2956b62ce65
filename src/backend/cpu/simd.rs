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

/// The block of [`MapNear`] and [`ZipNear`]: one AVX-512 vector of f32.
pub(crate) const BLOCK: usize = 16;

/// `out[i] = near(src[i])` over each block of [`BLOCK`] elements that all satisfy `is_near`,
/// `far(src[i])` over the other blocks and the tail: a function with a cheap form for the common
/// range of its inputs and a general one, chosen per block so that each stays one vector loop.
pub(crate) struct MapNear<'a, T, U, P, F, G> {
    pub src: &'a [T],
    pub out: &'a mut [MaybeUninit<U>],
    pub is_near: &'a P,
    pub near: &'a F,
    pub far: &'a G,
}

impl<T: Copy, U, P: Fn(T) -> bool, F: Fn(T) -> U, G: Fn(T) -> U> Kernel for MapNear<'_, T, U, P, F, G> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        debug_assert!(self.src.len() >= self.out.len(), "an input for every output");
        let blocks = self.out.len().min(self.src.len()) / BLOCK * BLOCK;
        let (out, out_tail) = self.out.split_at_mut(blocks);
        let (src, src_tail) = self.src.split_at(blocks);
        for (o, x) in out.chunks_exact_mut(BLOCK).zip(src.chunks_exact(BLOCK)) {
            if x.iter().fold(true, |all, &v| all & (self.is_near)(v)) {
                for (o, &x) in o.iter_mut().zip(x) {
                    o.write((self.near)(x));
                }
            } else {
                for (o, &x) in o.iter_mut().zip(x) {
                    o.write((self.far)(x));
                }
            }
        }
        for (o, &x) in out_tail.iter_mut().zip(src_tail) {
            o.write((self.far)(x));
        }
    }
}

/// `out[i] = near(a[i], b[i])` over each block of [`BLOCK`] elements whose `a`s all satisfy
/// `is_near`, `far(a[i], b[i])` elsewhere (see [`MapNear`]).
pub(crate) struct ZipNear<'a, T, P, F, G> {
    pub a: &'a [T],
    pub b: &'a [T],
    pub out: &'a mut [MaybeUninit<T>],
    pub is_near: &'a P,
    pub near: &'a F,
    pub far: &'a G,
}

impl<T: Copy, P: Fn(T) -> bool, F: Fn(T, T) -> T, G: Fn(T, T) -> T> Kernel for ZipNear<'_, T, P, F, G> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        debug_assert!(self.a.len().min(self.b.len()) >= self.out.len(), "inputs for every output");
        let blocks = self.out.len().min(self.a.len()).min(self.b.len()) / BLOCK * BLOCK;
        let (out, out_tail) = self.out.split_at_mut(blocks);
        let ((a, a_tail), (b, b_tail)) = (self.a.split_at(blocks), self.b.split_at(blocks));
        let rows = out.chunks_exact_mut(BLOCK).zip(a.chunks_exact(BLOCK)).zip(b.chunks_exact(BLOCK));
        for ((o, x), y) in rows {
            if x.iter().fold(true, |all, &v| all & (self.is_near)(v)) {
                for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                    o.write((self.near)(x, y));
                }
            } else {
                for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                    o.write((self.far)(x, y));
                }
            }
        }
        for ((o, &x), &y) in out_tail.iter_mut().zip(a_tail).zip(b_tail) {
            o.write((self.far)(x, y));
        }
    }
}

/// `f` of each element of a strided view, in the order its offsets come: no vectors, but the
/// element functions' fused multiply-adds (`exp`, `erfc`) are single instructions here, where
/// the baseline build calls libm's `fmaf` for each.
pub(crate) struct StridedMap<'a, T, F, I> {
    pub src: &'a [T],
    pub offsets: I,
    pub f: &'a F,
}

impl<T: Copy, U, F: Fn(T) -> U, I: Iterator<Item = usize>> Kernel for StridedMap<'_, T, F, I> {
    type Output = Vec<U>;
    #[inline(always)]
    fn run(self) -> Vec<U> {
        self.offsets.map(|o| (self.f)(self.src[o])).collect()
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

/// `out[i] = f(a[i], b[i])`; the operands may be of different types (a value and a bool mask).
/// With `stream`, the output is written with non-temporal stores (see [`stream_block`]).
pub(crate) struct Zip<'a, A, B, U, F> {
    pub a: &'a [A],
    pub b: &'a [B],
    pub out: &'a mut [MaybeUninit<U>],
    pub f: &'a F,
    pub stream: bool,
}

impl<A: Copy, B: Copy, U, F: Fn(A, B) -> U> Kernel for Zip<'_, A, B, U, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let head = cache_line_head(self.out);
        let (out_head, mut out) = self.out.split_at_mut(head);
        let (a_head, mut a) = self.a.split_at(head.min(self.a.len()));
        let (b_head, mut b) = self.b.split_at(head.min(self.b.len()));
        for ((o, &x), &y) in out_head.iter_mut().zip(a_head).zip(b_head) {
            o.write((self.f)(x, y));
        }
        if self.stream && streamable(out) {
            let blocks = out.len().min(a.len()).min(b.len()) / STREAM_BLOCK;
            let (out_blocks, out_rest) = out.split_at_mut(blocks * STREAM_BLOCK);
            for (k, o) in out_blocks.chunks_exact_mut(STREAM_BLOCK).enumerate() {
                let at = k * STREAM_BLOCK;
                let mut block = [const { MaybeUninit::<U>::uninit() }; STREAM_BLOCK];
                for ((v, &x), &y) in
                    block.iter_mut().zip(&a[at..at + STREAM_BLOCK]).zip(&b[at..at + STREAM_BLOCK])
                {
                    v.write((self.f)(x, y));
                }
                stream_block(&block, o);
            }
            stream_fence();
            (out, a, b) = (out_rest, &a[blocks * STREAM_BLOCK..], &b[blocks * STREAM_BLOCK..]);
        }
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            o.write((self.f)(x, y));
        }
    }
}

/// Outputs of at least this many bytes are written with non-temporal stores by the kernels that
/// take a `stream` flag: far larger than any cache, they would only evict what the next op
/// reads, and a normal store first reads each output line from memory (a third more traffic for
/// `out = a + b`). Smaller outputs stay in cache for the op that reads them next.
pub(crate) const STREAM_BYTES: usize = 32 << 20;

/// Elements computed per non-temporal block: 16 to 128 bytes for elements of 1 to 8 bytes, a
/// whole number of 16-byte stores.
const STREAM_BLOCK: usize = 16;

/// Can `out` (already past its cache-line head) take [`stream_block`]'s stores?
fn streamable<U>(out: &[MaybeUninit<U>]) -> bool {
    cfg!(target_arch = "x86_64")
        && matches!(std::mem::size_of::<U>(), 1 | 2 | 4 | 8)
        && (out.as_ptr() as usize).is_multiple_of(16)
}

/// Writes `block` to `out` (16-byte aligned, [`STREAM_BLOCK`] elements) with non-temporal
/// stores, which go to memory without reading the lines first or keeping them in cache.
#[inline(always)]
fn stream_block<U>(block: &[MaybeUninit<U>; STREAM_BLOCK], out: &mut [MaybeUninit<U>]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let bytes = std::mem::size_of_val(block);
        debug_assert!(out.len() == STREAM_BLOCK && bytes.is_multiple_of(16));
        debug_assert!((out.as_ptr() as usize).is_multiple_of(16));
        let src = block.as_ptr().cast::<__m128i>();
        let dst = out.as_mut_ptr().cast::<__m128i>();
        for i in 0..bytes / 16 {
            // SAFETY: `block` and `out` both hold `STREAM_BLOCK` elements of `U`, so `bytes / 16`
            // 16-byte pieces lie in each (`streamable` admits only sizes that make `bytes` a
            // multiple of 16); `out` is 16-byte aligned (`streamable`), as `_mm_stream_si128`
            // requires; the unaligned load reads initialised elements (every one was written);
            // SSE2 is part of the x86-64 baseline.
            unsafe { _mm_stream_si128(dst.add(i), _mm_loadu_si128(src.add(i))) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (o, v) in out.iter_mut().zip(block) {
        // SAFETY: every element of `block` was written before the call.
        o.write(unsafe { v.assume_init_read() });
    }
}

/// Orders the non-temporal stores before the stores that follow (the thread pool's hand-back):
/// they are weakly ordered otherwise.
#[inline(always)]
fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no preconditions; SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// `out[i] = f(a[i], out[i])`: a buffer updated in place from an operand of its length.
pub(crate) struct ZipInPlace<'a, A, U, F> {
    pub a: &'a [A],
    pub out: &'a mut [U],
    pub f: &'a F,
}

impl<A: Copy, U: Copy, F: Fn(A, U) -> U> Kernel for ZipInPlace<'_, A, U, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        for (o, &x) in self.out.iter_mut().zip(self.a) {
            *o = (self.f)(x, *o);
        }
    }
}

/// Each row of `out` (rows of `row.len()`) is `f(a_row[j], row[j])`: an operand broadcast along
/// the leading dims, e.g. a bias (a caller with the row on the left swaps `f`'s arguments).
pub(crate) struct ZipRows<'a, A, B, U, F> {
    pub a: &'a [A],
    pub row: &'a [B],
    pub out: &'a mut [MaybeUninit<U>],
    pub f: &'a F,
}

impl<A: Copy, B: Copy, U, F: Fn(A, B) -> U> Kernel for ZipRows<'_, A, B, U, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let n = self.row.len();
        for (o_row, a_row) in self.out.chunks_mut(n).zip(self.a.chunks(n)) {
            for ((o, &x), &y) in o_row.iter_mut().zip(a_row).zip(self.row) {
                o.write((self.f)(x, y));
            }
        }
    }
}

/// Where the rows of a strided (or broadcast) pair of operands lie: `out` is read as rows of
/// `inner` elements; row `r`'s operands start at `offsets[k] + Σ index_d(r) * outer_strides[k][d]`
/// (the row-major index of `r` in `outer_shape`) and step by `inner_strides[k]` within it.
pub(crate) struct RowGeometry {
    pub inner: usize,
    pub inner_strides: [usize; 2],
    pub outer_shape: Vec<usize>,
    pub outer_strides: [Vec<usize>; 2],
    pub offsets: [usize; 2],
}

impl RowGeometry {
    /// The storage offsets of both operands' row `row`.
    fn row_start(&self, row: usize) -> [usize; 2] {
        let mut rest = row;
        let mut at = self.offsets;
        for d in (0..self.outer_shape.len()).rev() {
            let i = rest % self.outer_shape[d];
            rest /= self.outer_shape[d];
            at[0] += i * self.outer_strides[0][d];
            at[1] += i * self.outer_strides[1][d];
        }
        at
    }
}

/// `out` (whole rows of `geometry.inner`, the first being row `first_row`) as `f(a, b)` of the
/// strided operands. A row whose operands step by 1 or 0 (a broadcast value) is a plain loop
/// that vectorises; other steps are gathered.
pub(crate) struct StridedRows<'a, A, B, U, F> {
    pub a: &'a [A],
    pub b: &'a [B],
    pub out: &'a mut [MaybeUninit<U>],
    pub first_row: usize,
    pub geometry: &'a RowGeometry,
    pub f: &'a F,
}

impl<A: Copy, B: Copy, U, F: Fn(A, B) -> U> Kernel for StridedRows<'_, A, B, U, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let g = self.geometry;
        let n = g.inner;
        if n == 0 {
            return;
        }
        let mut index = vec![0usize; g.outer_shape.len()];
        let mut rest = self.first_row;
        for d in (0..index.len()).rev() {
            index[d] = rest % g.outer_shape[d];
            rest /= g.outer_shape[d];
        }
        let [mut ia, mut ib] = g.row_start(self.first_row);
        let f = self.f;
        for o in self.out.chunks_mut(n) {
            match g.inner_strides {
                [1, 1] => {
                    for ((o, &x), &y) in o.iter_mut().zip(&self.a[ia..ia + n]).zip(&self.b[ib..ib + n]) {
                        o.write(f(x, y));
                    }
                }
                [1, 0] => {
                    let y = self.b[ib];
                    for (o, &x) in o.iter_mut().zip(&self.a[ia..ia + n]) {
                        o.write(f(x, y));
                    }
                }
                [0, 1] => {
                    let x = self.a[ia];
                    for (o, &y) in o.iter_mut().zip(&self.b[ib..ib + n]) {
                        o.write(f(x, y));
                    }
                }
                [sa, sb] => {
                    for (j, o) in o.iter_mut().enumerate() {
                        o.write(f(self.a[ia + j * sa], self.b[ib + j * sb]));
                    }
                }
            }
            // The next row: an odometer over the outer dims.
            for d in (0..index.len()).rev() {
                index[d] += 1;
                ia += g.outer_strides[0][d];
                ib += g.outer_strides[1][d];
                if index[d] < g.outer_shape[d] {
                    break;
                }
                ia -= index[d] * g.outer_strides[0][d];
                ib -= index[d] * g.outer_strides[1][d];
                index[d] = 0;
            }
        }
    }
}
