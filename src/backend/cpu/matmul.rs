//! Batched matrix multiplication through the `gemm` crate (which picks AVX2/AVX-512/NEON kernels at
//! run time), with broadcast batch dims as zero strides.

use gemm::Parallelism;
use half::{bf16, f16};
use rayon::prelude::*;

use super::{CpuStorage, contiguous};
use crate::dtype::WithDType;
use crate::shape::Layout;

/// Products smaller than this many multiply-adds run on one thread.
const GEMM_PARALLEL_FLOPS: usize = 1 << 18;

/// Products up to this many multiply-adds are split into one band of rows (or columns) per
/// thread; larger ones use gemm's own threading, which packs shared panels once.
const GEMM_BAND_SPLIT_FLOPS: usize = (1 << 27) + 1;

/// A product whose result has at most this many elements and whose inner dimension is at least
/// twice [`DEPTH_CHUNK`] is split along that dimension instead: a 16x9 result is a single band of
/// 16 rows, so a convolution's weight gradient (16 x 9 x 43,264 for 64 images of 26x26) ran on one
/// thread.
const DEPTH_SPLIT_MAX_RESULT: usize = 64 * 64;

/// About how deep each part of a product split along its inner dimension is.
const DEPTH_CHUNK: usize = 8192;

/// `lhs @ rhs` where `lhs` is viewed as `[batch.., m, k]` and `rhs` as `[batch.., k, n]` (broadcast
/// batch dims already expanded with zero strides by the front end). Returns `[batch.., m, n]`
/// contiguous.
pub(crate) fn matmul(
    lhs: &CpuStorage,
    lhs_layout: &Layout,
    rhs: &CpuStorage,
    rhs_layout: &Layout,
) -> CpuStorage {
    match (lhs, rhs) {
        (CpuStorage::F32(a), CpuStorage::F32(b)) => {
            CpuStorage::F32(gemm_batched(a, lhs_layout, b, rhs_layout))
        }
        (CpuStorage::F64(a), CpuStorage::F64(b)) => {
            CpuStorage::F64(gemm_batched(a, lhs_layout, b, rhs_layout))
        }
        (CpuStorage::F16(a), CpuStorage::F16(b)) => {
            CpuStorage::F16(gemm_batched(a, lhs_layout, b, rhs_layout))
        }
        (CpuStorage::BF16(a), CpuStorage::BF16(b)) => {
            // gemm has no bf16 kernel: compute in f32 and round once at the end.
            let up = |v: &[bf16], l: &Layout| {
                let data: Vec<f32> = contiguous(v, l).iter().map(|x| x.to_f32()).collect();
                (data, Layout::contiguous(&l.shape))
            };
            let (a, la) = up(a, lhs_layout);
            let (b, lb) = up(b, rhs_layout);
            let out = gemm_batched(&a, &la, &b, &lb);
            CpuStorage::BF16(out.into_iter().map(bf16::from_f32).collect())
        }
        (CpuStorage::I64(a), CpuStorage::I64(b)) => {
            CpuStorage::I64(naive_batched(a, lhs_layout, b, rhs_layout))
        }
        (CpuStorage::I32(a), CpuStorage::I32(b)) => {
            CpuStorage::I32(naive_batched(a, lhs_layout, b, rhs_layout))
        }
        (CpuStorage::U8(a), CpuStorage::U8(b)) => CpuStorage::U8(naive_batched(a, lhs_layout, b, rhs_layout)),
        // The front end rejects bool and mixed dtypes before dispatch.
        _ => unreachable!("matmul dispatched with dtypes the front end rejects"),
    }
}

struct Dims {
    batch: Vec<usize>,
    m: usize,
    k: usize,
    n: usize,
}

fn dims(lhs: &Layout, rhs: &Layout) -> Dims {
    let r = lhs.rank();
    Dims { batch: lhs.shape[..r - 2].to_vec(), m: lhs.shape[r - 2], k: lhs.shape[r - 1], n: rhs.shape[r - 1] }
}

/// Storage offsets of the start of each batch matrix, in row-major batch order.
fn batch_offsets(layout: &Layout, batch: &[usize]) -> Vec<usize> {
    let b = Layout {
        shape: batch.to_vec(),
        strides: layout.strides[..batch.len()].to_vec(),
        offset: layout.offset,
    };
    b.offsets().collect()
}

trait GemmElem: WithDType + super::Arith + Send + Sync {}
impl GemmElem for f32 {}
impl GemmElem for f64 {}
impl GemmElem for f16 {}

fn gemm_batched<T: GemmElem>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> Vec<T> {
    let Dims { batch, m, k, n } = dims(la, lb);
    let count: usize = batch.iter().product();
    let len = count * m * n;
    if len == 0 || k == 0 {
        return vec![T::ZERO; len];
    }
    let r = la.rank();
    let strides = Strides {
        a_rs: la.strides[r - 2] as isize,
        a_cs: la.strides[r - 1] as isize,
        b_rs: lb.strides[r - 2] as isize,
        b_cs: lb.strides[r - 1] as isize,
        dst_rs: n as isize,
    };
    let a_starts = batch_offsets(la, &batch);
    let b_starts = batch_offsets(lb, &batch);
    let flops = m * n * k;
    let threads = rayon::current_num_threads();
    let whole = Block { rows: 0..m, cols: 0..n, depth: 0..k };
    // gemm overwrites every element (read_dst = false), so the result is not zeroed first; it
    // comes from the reuse pool when it can (a training step's products have the same sizes every
    // step, and a fresh buffer pays its page faults again).
    let fill = |spare: &mut [std::mem::MaybeUninit<T>]| {
        if count > 1 && flops < GEMM_PARALLEL_FLOPS {
            let pairs: Vec<(usize, usize)> = a_starts.into_iter().zip(b_starts).collect();
            spare.par_chunks_mut(m * n).zip(pairs).for_each(|(dst, (ao, bo))| {
                // SAFETY: `dst` is this product's own m*n elements; the offsets come from the
                // operands' layouts (see `product`).
                unsafe { product(dst.as_mut_ptr().cast(), a, ao, b, bo, &strides, &whole, Parallelism::None) }
            });
            return;
        }
        for (dst, (&ao, &bo)) in spare.chunks_mut(m * n).zip(a_starts.iter().zip(&b_starts)) {
            // gemm only writes through the pointer (read_dst = false); nothing reads the
            // uninitialised elements.
            if m * n <= DEPTH_SPLIT_MAX_RESULT && k >= 2 * DEPTH_CHUNK {
                split_depth(dst, a, ao, b, bo, &strides, m, n, k);
                continue;
            }
            let dst = dst.as_mut_ptr().cast::<T>();
            if flops < GEMM_PARALLEL_FLOPS || threads < 2 {
                // SAFETY: as above, for one product of the batch.
                unsafe { product(dst, a, ao, b, bo, &strides, &whole, Parallelism::None) }
            } else if flops < GEMM_BAND_SPLIT_FLOPS {
                // Each thread computes one band of the result with a single-threaded gemm: up to
                // 512^3 this is as fast as gemm's own threading or faster (a batch of 64 rows times
                // a transposed 256x784 weight: 1.6x at 2 threads).
                let bands = threads;
                let by_rows = m >= n;
                let len = if by_rows { m } else { n };
                let per = len.div_ceil(bands).next_multiple_of(16);
                let dst = SendPtr(dst);
                (0..len.div_ceil(per)).into_par_iter().for_each(|i| {
                    let span = i * per..((i + 1) * per).min(len);
                    let block = if by_rows {
                        Block { rows: span, cols: 0..n, depth: 0..k }
                    } else {
                        Block { rows: 0..m, cols: span, depth: 0..k }
                    };
                    let dst = &dst;
                    // SAFETY: the bands are disjoint blocks of this product's m*n result, so no two
                    // threads write the same element; the block's rows/cols lie within m/n.
                    unsafe { product(dst.0, a, ao, b, bo, &strides, &block, Parallelism::None) }
                });
            } else {
                // SAFETY: as above, for one product of the batch.
                unsafe { product(dst, a, ao, b, bo, &strides, &whole, Parallelism::Rayon(0)) }
            }
        }
    };
    // SAFETY: every product writes all of its m*n elements, so all `len` are initialised.
    unsafe { super::filled(len, fill) }
}

struct Strides {
    a_rs: isize,
    a_cs: isize,
    b_rs: isize,
    b_cs: isize,
    dst_rs: isize,
}

/// Rows and columns of one product's result, and the part of its inner dimension summed.
struct Block {
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    depth: std::ops::Range<usize>,
}

/// One product (`[m, k] @ [k, n]`, operands at `ao` and `bo`) into `dst` as the sum of products
/// over equal parts of its inner dimension, computed in parallel and added in order. The parts
/// depend on `k` alone, so the result is the same on any number of threads.
#[allow(clippy::too_many_arguments)]
fn split_depth<T: GemmElem>(
    dst: &mut [std::mem::MaybeUninit<T>],
    a: &[T],
    ao: usize,
    b: &[T],
    bo: usize,
    strides: &Strides,
    m: usize,
    n: usize,
    k: usize,
) {
    // At least one part (k > 0): the first one initialises `dst`.
    let parts = k.div_ceil(DEPTH_CHUNK).max(1);
    let per = k.div_ceil(parts);
    let mut partials = vec![T::ZERO; parts * m * n];
    partials.par_chunks_mut(m * n).enumerate().for_each(|(i, part)| {
        let block = Block { rows: 0..m, cols: 0..n, depth: i * per..((i + 1) * per).min(k) };
        // SAFETY: `part` is this part's own m*n result; the offsets and strides are the
        // product's (see `product`), and the depth range lies within k.
        unsafe { product(part.as_mut_ptr(), a, ao, b, bo, strides, &block, Parallelism::None) }
    });
    let mut parts = partials.chunks_exact(m * n);
    if let Some(first) = parts.next() {
        for (d, &v) in dst.iter_mut().zip(first) {
            d.write(v);
        }
    }
    // SAFETY: every element of `dst` (m*n of them) was written from the first part just now.
    let dst = unsafe { &mut *(dst as *mut [std::mem::MaybeUninit<T>] as *mut [T]) };
    for part in parts {
        for (d, &v) in dst.iter_mut().zip(part) {
            *d = d.add(v);
        }
    }
}

struct SendPtr<T>(*mut T);
// SAFETY: the pointer is only used to write disjoint blocks of one result, one block per task.
unsafe impl<T: Send> Sync for SendPtr<T> {}

/// `dst[block] = a[block.rows, :] @ b[:, block.cols]` for the product whose operands start at `ao`
/// and `bo`, written row-major with row stride `strides.dst_rs`.
///
/// # Safety
/// `dst` points at the product's full result (`dst_rs` columns, enough rows for `block.rows`),
/// and no other thread writes `block` meanwhile. The front end built the strides from the
/// operands' real layouts, so `ao + i*a_rs + p*a_cs` (i in rows, p in depth) and
/// `bo + p*b_rs + j*b_cs` (p in depth, j in cols) lie inside `a`/`b`.
#[allow(clippy::too_many_arguments)]
unsafe fn product<T: GemmElem>(
    dst: *mut T,
    a: &[T],
    ao: usize,
    b: &[T],
    bo: usize,
    s: &Strides,
    block: &Block,
    parallelism: Parallelism,
) {
    let (i0, j0, p0) = (block.rows.start as isize, block.cols.start as isize, block.depth.start as isize);
    // SAFETY: guaranteed by the caller (see above); with read_dst = false the destination's
    // prior contents are ignored.
    unsafe {
        gemm::gemm(
            block.rows.len(),
            block.cols.len(),
            block.depth.len(),
            dst.offset(i0 * s.dst_rs + j0),
            1,
            s.dst_rs,
            false,
            a.as_ptr().add(ao).offset(i0 * s.a_rs + p0 * s.a_cs),
            s.a_cs,
            s.a_rs,
            b.as_ptr().add(bo).offset(j0 * s.b_cs + p0 * s.b_rs),
            s.b_cs,
            s.b_rs,
            T::ZERO,
            T::ONE,
            false,
            false,
            false,
            parallelism,
        );
    }
}

fn naive_batched<T: super::Arith>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> Vec<T> {
    let Dims { batch, m, k, n } = dims(la, lb);
    let r = la.rank();
    let (a_rs, a_cs) = (la.strides[r - 2], la.strides[r - 1]);
    let (b_rs, b_cs) = (lb.strides[r - 2], lb.strides[r - 1]);
    let mut out = Vec::with_capacity(batch.iter().product::<usize>() * m * n);
    for (ao, bo) in batch_offsets(la, &batch).into_iter().zip(batch_offsets(lb, &batch)) {
        for i in 0..m {
            for j in 0..n {
                let mut acc = T::ZERO;
                for p in 0..k {
                    acc = acc.add(a[ao + i * a_rs + p * a_cs].mul(b[bo + p * b_rs + j * b_cs]));
                }
                out.push(acc);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.0 - 1.0).collect()
    }

    /// Every path (one thread, bands of rows, bands of columns, gemm's own threading, a batch)
    /// against the naive product, with a transposed right operand as `linear` passes it.
    #[test]
    fn threaded_products_match_the_naive_product() {
        let shapes = [
            (64, 784, 256),
            (256, 64, 784),
            (300, 70, 40),
            (20, 3000, 30),
            (48, 96, 1000),
            (1, 50, 300),
            (300, 50, 1),
        ];
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            for &(m, k, n) in &shapes {
                for batch in [1, 2] {
                    let a = values(batch * m * k, 1);
                    let b = values(batch * n * k, 2);
                    let la = Layout::contiguous(&[batch, m, k]);
                    // `b` holds [batch, n, k]; viewed as its transpose [batch, k, n].
                    let lb = Layout { shape: vec![batch, k, n], strides: vec![n * k, 1, k], offset: 0 };
                    let got = pool.install(|| gemm_batched(&a, &la, &b, &lb));
                    let want = naive_batched(&a, &la, &b, &lb);
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (g - w).abs() <= 1e-3 * (1.0 + w.abs()),
                            "{threads} threads, {batch}x{m}x{k}x{n}, element {i}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    /// A small result over a deep inner dimension (a convolution's weight gradient) is summed in
    /// parts: the naive product's values, and the same bits on any number of threads.
    #[test]
    fn deep_products_are_split_along_their_depth() {
        for (m, k, n) in [(16, 43_264, 9), (3, 2 * DEPTH_CHUNK, 5), (1, 3 * DEPTH_CHUNK + 7, 1)] {
            let a: Vec<f64> = values(m * k, 1).iter().map(|&v| f64::from(v)).collect();
            let b: Vec<f64> = values(n * k, 2).iter().map(|&v| f64::from(v)).collect();
            let la = Layout::contiguous(&[1, m, k]);
            let lb = Layout { shape: vec![1, k, n], strides: vec![n * k, 1, k], offset: 0 };
            let want = naive_batched(&a, &la, &b, &lb);
            let (a32, b32): (Vec<f32>, Vec<f32>) = (values(m * k, 1), values(n * k, 2));
            let mut f32_results = Vec::new();
            for threads in [1, 2, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let got = pool.install(|| gemm_batched(&a, &la, &b, &lb));
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!((g - w).abs() <= 1e-10 * (1.0 + w.abs()), "{m}x{k}x{n}, element {i}: {g} vs {w}");
                }
                f32_results.push(pool.install(|| gemm_batched(&a32, &la, &b32, &lb)));
            }
            assert!(f32_results.windows(2).all(|w| w[0] == w[1]), "{m}x{k}x{n}: thread counts differ");
        }
    }
}
