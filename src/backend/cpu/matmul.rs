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

impl CpuStorage {
    /// `self @ rhs`: see [`matmul`].
    pub(crate) fn matmul(&self, layout: &Layout, rhs: &CpuStorage, rhs_layout: &Layout) -> CpuStorage {
        matmul(self, layout, rhs, rhs_layout)
    }
}

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
    let depth_split = m * n <= DEPTH_SPLIT_MAX_RESULT && k >= 2 * DEPTH_CHUNK;
    // A batch of products (below gemm's own threading) is split across threads by whole products,
    // each on one thread, on any number of threads: the result then does not depend on the thread
    // count (gemm blocks the depth of a band of rows differently from the whole product's when
    // k > 512, and a one-row band takes its matrix-vector path). Splitting each product into bands
    // made a batch of 32 attention products of 128x64x128 into 32 fork-joins of about 10 µs each
    // (1.45x at 2 threads against PyTorch's 2.06x). A product alone is still split into bands.
    let fill = |spare: &mut [std::mem::MaybeUninit<T>]| {
        if count > 1 && (flops < GEMM_PARALLEL_FLOPS || (!depth_split && flops < GEMM_BAND_SPLIT_FLOPS)) {
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
            if depth_split {
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
    let (rows, cols, depth) = (block.rows.len(), block.cols.len(), block.depth.len());
    // SAFETY: the caller's guarantee (see above) places both operands' blocks inside `a` and `b`.
    let (lhs, rhs) = unsafe {
        (
            a.as_ptr().add(ao).offset(i0 * s.a_rs + p0 * s.a_cs),
            b.as_ptr().add(bo).offset(j0 * s.b_cs + p0 * s.b_rs),
        )
    };
    // SAFETY: the caller's `dst` holds the product's whole result, so the block's corner is in it.
    let dst = unsafe { dst.offset(i0 * s.dst_rs + j0) };
    let sizes = (rows, cols, depth);
    if transposed_result_is_cheaper(s, rows, cols, depth) {
        let mut by_columns: Vec<T> = Vec::with_capacity(rows * cols);
        // SAFETY: `by_columns` has room for the rows x cols block, written column-major (column
        // stride `rows`), and gemm writes every element of it, so `set_len` follows a full
        // write. The operands are the caller's, as below.
        unsafe {
            gemm_block(by_columns.as_mut_ptr(), (rows as isize, 1), sizes, lhs, rhs, s, parallelism);
            by_columns.set_len(rows * cols);
        }
        // SAFETY: the caller's `dst` holds `rows` rows of `dst_rs` elements from this block's
        // corner, at least `cols` of them each, and no other thread writes them.
        unsafe { write_rows(&by_columns, rows, cols, dst, s.dst_rs) };
        return;
    }
    // SAFETY: as above.
    unsafe { gemm_block(dst, (1, s.dst_rs), sizes, lhs, rhs, s, parallelism) }
}

/// `dst = lhs @ rhs` for one block of `(rows, cols, depth)`, the destination's column and row
/// strides given; gemm writes every element of the block and reads none (read_dst = false).
///
/// # Safety
/// `dst` with those strides holds the whole block and no other thread writes it; `lhs` and `rhs`
/// with the strides of `s` hold the block's operands.
unsafe fn gemm_block<T: GemmElem>(
    dst: *mut T,
    (dst_cs, dst_rs): (isize, isize),
    (rows, cols, depth): (usize, usize, usize),
    lhs: *const T,
    rhs: *const T,
    s: &Strides,
    parallelism: Parallelism,
) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        gemm::gemm(
            rows,
            cols,
            depth,
            dst,
            dst_cs,
            dst_rs,
            false,
            lhs,
            s.a_cs,
            s.a_rs,
            rhs,
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

/// Is computing the block column-major and copying it into the row-major result cheaper than
/// writing it row-major? gemm copies ("packs") its left operand into panels unless that operand
/// is column-major, and for a row-major result it solves the transposed problem, whose left
/// operand is `b` transposed. A weight used as `x @ w.T` (`b` with unit row stride: `nn.Linear`)
/// is then packed whole for every product — `cols x depth` elements — while the column-major
/// result packs `a`, `rows x depth`, and adds one copy of the `rows x cols` result. Measured with
/// gemm 0.19 on AVX-512, one thread: 64x784 @ (256x784).T 282 -> 248 us, 8x512 @ (4096x512).T
/// 4.5 ms -> 0.64 ms, 32x1024 @ (1024x1024).T 3.5 ms -> 0.66 ms; left alone where rows >= cols.
fn transposed_result_is_cheaper(s: &Strides, rows: usize, cols: usize, depth: usize) -> bool {
    s.b_rs == 1
        && s.b_cs != 1
        && rows < cols
        && (cols - rows).saturating_mul(depth) > rows.saturating_mul(cols)
}

/// Copies a column-major `rows x cols` block into the row-major result at `dst` (row stride
/// `dst_rs`), eight rows at a time: each column's eight elements are read together and the eight
/// rows' cache lines are written across consecutive columns (more rows at a time would map them
/// to the same cache set when the row stride is a multiple of 4 KiB).
///
/// # Safety
/// `dst` points at `rows` rows of at least `cols` elements each, `dst_rs` apart, that no other
/// thread writes meanwhile.
unsafe fn write_rows<T: Copy>(by_columns: &[T], rows: usize, cols: usize, dst: *mut T, dst_rs: isize) {
    const ROWS: usize = 8;
    for top in (0..rows).step_by(ROWS) {
        let height = ROWS.min(rows - top);
        for (j, column) in by_columns.chunks_exact(rows).enumerate().take(cols) {
            for (r, &v) in column[top..top + height].iter().enumerate() {
                // SAFETY: row `top + r` < rows and column `j` < cols lie in the caller's block.
                unsafe { *dst.offset((top + r) as isize * dst_rs + j as isize) = v };
            }
        }
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

    /// The column-major result is chosen for a transposed right operand wider than the left one
    /// is tall (`nn.Linear` on a small batch), and only there; every element type takes it.
    #[test]
    fn wide_products_with_a_transposed_weight_write_their_result_by_columns() {
        let transposed =
            |k: usize| Strides { a_rs: k as isize, a_cs: 1, b_rs: 1, b_cs: k as isize, dst_rs: 0 };
        let plain = |n: usize| Strides { a_rs: 784, a_cs: 1, b_rs: n as isize, b_cs: 1, dst_rs: 0 };
        assert!(transposed_result_is_cheaper(&transposed(784), 64, 256, 784));
        assert!(transposed_result_is_cheaper(&transposed(512), 8, 4096, 512));
        assert!(!transposed_result_is_cheaper(&transposed(256), 256, 256, 256));
        assert!(!transposed_result_is_cheaper(&transposed(256), 1024, 768, 256));
        assert!(!transposed_result_is_cheaper(&transposed(256), 64, 10, 256));
        // Shallow: the copy of the result would cost more than the packing it saves.
        assert!(!transposed_result_is_cheaper(&transposed(64), 64, 256, 64));
        assert!(!transposed_result_is_cheaper(&plain(256), 64, 256, 784));
        // Rows not a multiple of eight, in f64 and f16 too.
        let (m, k, n) = (13, 70, 300);
        let la = Layout::contiguous(&[1, m, k]);
        let lb = Layout { shape: vec![1, k, n], strides: vec![n * k, 1, k], offset: 0 };
        let (a, b) = (values(m * k, 3), values(n * k, 4));
        let want = naive_batched(&a, &la, &b, &lb);
        let a64: Vec<f64> = a.iter().map(|&v| f64::from(v)).collect();
        let b64: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
        for (g, w) in gemm_batched(&a64, &la, &b64, &lb).iter().zip(&want) {
            assert!((*g as f32 - w).abs() <= 1e-4 * (1.0 + w.abs()), "f64: {g} vs {w}");
        }
        let a16: Vec<f16> = a.iter().map(|&v| f16::from_f32(v)).collect();
        let b16: Vec<f16> = b.iter().map(|&v| f16::from_f32(v)).collect();
        let want16 = naive_batched(
            &a16.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            &la,
            &b16.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            &lb,
        );
        for (g, w) in gemm_batched(&a16, &la, &b16, &lb).iter().zip(&want16) {
            assert!((g.to_f32() - w).abs() <= 0.05 * (1.0 + w.abs()), "f16: {g} vs {w}");
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
    /// A batch of products is split by whole products on any number of threads: the naive
    /// values, and the same bits on 1 to 4 threads, also where gemm would block a band's depth
    /// differently from the whole product's (k > 512) or take its matrix-vector path for a band
    /// of one row.
    #[test]
    fn batches_are_split_by_whole_products_and_agree_bit_for_bit_on_any_thread_count() {
        let shapes =
            [(32, 128, 64, 128), (3, 96, 50, 130), (6, 64, 300, 40), (9, 70, 2000, 3), (7, 33, 1000, 17)];
        for (batch, m, k, n) in shapes {
            let a = values(batch * m * k, 5);
            let b = values(batch * n * k, 6);
            let la = Layout::contiguous(&[batch, m, k]);
            let lb = Layout { shape: vec![batch, k, n], strides: vec![n * k, 1, k], offset: 0 };
            let want = naive_batched(&a, &la, &b, &lb);
            let mut results = Vec::new();
            for threads in [1, 2, 3, 4] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let got = pool.install(|| gemm_batched(&a, &la, &b, &lb));
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (g - w).abs() <= 1e-3 * (1.0 + w.abs()),
                        "{threads} threads, element {i}: {g} vs {w}"
                    );
                }
                results.push(got);
            }
            assert!(results.windows(2).all(|w| w[0] == w[1]), "{batch}x{m}x{k}x{n}: thread counts differ");
        }
    }
}
