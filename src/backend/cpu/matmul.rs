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

trait GemmElem: WithDType + Send + Sync {}
impl GemmElem for f32 {}
impl GemmElem for f64 {}
impl GemmElem for f16 {}

fn gemm_batched<T: GemmElem>(a: &[T], la: &Layout, b: &[T], lb: &Layout) -> Vec<T> {
    let Dims { batch, m, k, n } = dims(la, lb);
    let count: usize = batch.iter().product();
    let mut out = vec![T::ZERO; count * m * n];
    if m * n == 0 {
        return out;
    }
    let r = la.rank();
    let (a_rs, a_cs) = (la.strides[r - 2] as isize, la.strides[r - 1] as isize);
    let (b_rs, b_cs) = (lb.strides[r - 2] as isize, lb.strides[r - 1] as isize);
    let a_starts = batch_offsets(la, &batch);
    let b_starts = batch_offsets(lb, &batch);
    let flops = m * n * k;
    let run = |(dst, (&ao, &bo)): (&mut [T], (&usize, &usize)), parallelism: Parallelism| {
        // SAFETY: `dst` holds exactly m*n elements written with row stride n, column stride 1.
        // The front end built `la`/`lb` from the operands' real layouts, so every index
        // `ao + i*a_rs + p*a_cs` (i < m, p < k) and `bo + p*b_rs + j*b_cs` (p < k, j < n) lies
        // inside `a`/`b`. With read_dst = false the destination's prior contents are ignored.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.as_ptr().add(ao),
                a_cs,
                a_rs,
                b.as_ptr().add(bo),
                b_cs,
                b_rs,
                T::ZERO,
                T::ONE,
                false,
                false,
                false,
                parallelism,
            );
        }
    };
    let pairs = a_starts.iter().zip(&b_starts);
    if count > 1 && flops < GEMM_PARALLEL_FLOPS {
        out.par_chunks_mut(m * n).zip(pairs.collect::<Vec<_>>()).for_each(|job| run(job, Parallelism::None));
    } else {
        let parallelism =
            if flops >= GEMM_PARALLEL_FLOPS { Parallelism::Rayon(0) } else { Parallelism::None };
        for job in out.chunks_mut(m * n).zip(pairs) {
            run(job, parallelism);
        }
    }
    out
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
