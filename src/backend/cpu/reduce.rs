//! The CPU kernels of reductions and softmax, as methods of [`CpuStorage`]: the op front end
//! (`src/tensor/ops/`) calls them with a view it has checked. The per-group loops
//! ([`reduce_groups`], the sums, extremes and variance, [`softmax_rows`]) are in `kernels.rs`.

use super::{
    Arith, CpuStorage, Float, argmax_of, argmin_of, contiguous, max_of, min_of, reduce_groups,
    reduction_input, softmax_backward_rows, softmax_rows, sum_f64, var_of, with_float_storage,
};
use crate::backend::op::ReduceOp;
use crate::shape::Layout;

impl CpuStorage {
    /// `op` over the dims `dims` of the view (distinct, ascending), contiguous over the kept
    /// dims. Integer and bool sums and arg-reductions give i64.
    pub(crate) fn reduce(&self, op: ReduceOp, layout: &Layout, dims: &[usize]) -> CpuStorage {
        reduce_kernel(op, self, layout, dims)
    }

    /// Softmax (or log-softmax) along the view's last dim, in rows of its contiguous copy.
    pub(crate) fn softmax(&self, layout: &Layout, log: bool) -> CpuStorage {
        let row = layout.shape[layout.rank() - 1];
        let l = layout;
        with_float_storage!(self, v => CpuStorage::from_vec(softmax_rows(&contiguous(v, l), row, log)),
            _ => unreachable!("dtype checked"))
    }

    /// The gradient of [`CpuStorage::softmax`] along rows of `row` elements, from its output `y`
    /// (this storage) and the upstream gradient `g`, both contiguous views of one dtype.
    pub(crate) fn softmax_backward(
        &self,
        ly: &Layout,
        g: &CpuStorage,
        lg: &Layout,
        row: usize,
        log: bool,
    ) -> CpuStorage {
        macro_rules! arm {
            ($a:expr, $b:expr) => {{
                let y = &$a[ly.offset..ly.offset + ly.numel()];
                let g = &$b[lg.offset..lg.offset + lg.numel()];
                CpuStorage::from_vec(softmax_backward_rows(y, g, row, log))
            }};
        }
        match (self, g) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => arm!(a, b),
            (CpuStorage::F64(a), CpuStorage::F64(b)) => arm!(a, b),
            (CpuStorage::F16(a), CpuStorage::F16(b)) => arm!(a, b),
            (CpuStorage::BF16(a), CpuStorage::BF16(b)) => arm!(a, b),
            _ => unreachable!("softmax's gradient is recorded for floating tensors of one dtype only"),
        }
    }
}

fn reduce_kernel(kind: ReduceOp, s: &CpuStorage, layout: &Layout, dims: &[usize]) -> CpuStorage {
    fn float<T: Float>(kind: ReduceOp, v: &[T], layout: &Layout, dims: &[usize]) -> CpuStorage {
        let (data, group) = reduction_input(v, layout, dims);
        let out_len = data.len().checked_div(group).unwrap_or_else(|| layout.numel_without(dims));
        match kind {
            ReduceOp::Sum if group == 0 => CpuStorage::from_vec(vec![T::ZERO; out_len]),
            ReduceOp::Mean if group == 0 => CpuStorage::from_vec(vec![T::from_f64(f64::NAN); out_len]),
            ReduceOp::Var(_) if group == 0 => CpuStorage::from_vec(vec![T::from_f64(f64::NAN); out_len]),
            ReduceOp::Sum => CpuStorage::from_vec(reduce_groups(&data, group, |g| T::from_f64(sum_f64(g)))),
            ReduceOp::Mean => {
                CpuStorage::from_vec(reduce_groups(&data, group, |g| T::from_f64(sum_f64(g) / group as f64)))
            }
            ReduceOp::Var(c) => {
                CpuStorage::from_vec(reduce_groups(&data, group, |g| T::from_f64(var_of(g, c))))
            }
            ReduceOp::Max => CpuStorage::from_vec(reduce_groups(&data, group, max_of)),
            ReduceOp::Min => CpuStorage::from_vec(reduce_groups(&data, group, min_of)),
            ReduceOp::ArgMax => CpuStorage::I64(reduce_groups(&data, group, argmax_of)),
            ReduceOp::ArgMin => CpuStorage::I64(reduce_groups(&data, group, argmin_of)),
        }
    }
    fn int<T: Arith>(kind: ReduceOp, v: &[T], layout: &Layout, dims: &[usize]) -> CpuStorage {
        let (data, group) = reduction_input(v, layout, dims);
        match kind {
            ReduceOp::Sum if group == 0 => CpuStorage::I64(vec![0; layout.numel_without(dims)]),
            ReduceOp::Sum => CpuStorage::I64(reduce_groups(&data, group, |g| {
                g.iter().fold(0i64, |acc, x| acc.wrapping_add(x.to_f64() as i64))
            })),
            ReduceOp::Max => CpuStorage::from_vec(reduce_groups(&data, group, max_of)),
            ReduceOp::Min => CpuStorage::from_vec(reduce_groups(&data, group, min_of)),
            ReduceOp::ArgMax => CpuStorage::I64(reduce_groups(&data, group, argmax_of)),
            ReduceOp::ArgMin => CpuStorage::I64(reduce_groups(&data, group, argmin_of)),
            ReduceOp::Mean | ReduceOp::Var(_) => unreachable!("float-only reductions checked"),
        }
    }
    match s {
        CpuStorage::F32(v) => float(kind, v, layout, dims),
        CpuStorage::F64(v) => float(kind, v, layout, dims),
        CpuStorage::F16(v) => float(kind, v, layout, dims),
        CpuStorage::BF16(v) => float(kind, v, layout, dims),
        CpuStorage::I64(v) => {
            // i64 sums stay exact beyond 2^53.
            if kind == ReduceOp::Sum {
                let (data, group) = reduction_input(v, layout, dims);
                if group == 0 {
                    return CpuStorage::I64(vec![0; layout.numel_without(dims)]);
                }
                return CpuStorage::I64(reduce_groups(&data, group, |g| {
                    g.iter().fold(0i64, |a, &x| a.wrapping_add(x))
                }));
            }
            int(kind, v, layout, dims)
        }
        CpuStorage::I32(v) => int(kind, v, layout, dims),
        CpuStorage::U8(v) => int(kind, v, layout, dims),
        CpuStorage::Bool(v) => {
            let as_u8: Vec<u8> = v.iter().map(|&b| b as u8).collect();
            int(kind, &as_u8, layout, dims)
        }
    }
}
