//! Reductions on the GPU (`kernels/reduce.cu`) and their launch plan.
//!
//! One kernel reduces one dimension for every output; the plan decides how the work is spread:
//! - when the reduced dimension is the contiguous one, each block takes one output and its
//!   threads walk the row side by side; when it is not (a sum over the batch of `[batch,
//!   features]`) but neighbouring outputs are neighbours in memory, each block takes 32
//!   outputs, one per thread of a warp, so a warp still reads 32 neighbouring elements;
//! - when there are too few outputs to fill the GPU (`sum_all` has one), each row is cut into
//!   pieces, one block per piece, and a second kernel combines the pieces' partial states.
//!
//! The plan depends on the sizes alone, never on the device, so a result is the same on every
//! GPU. The arithmetic lives in pure functions below, tested without a GPU.

use cudarc::driver::LaunchConfig;

use super::device::{Arg, DeviceBuffer};
use super::error::CudaResult;
use super::storage::{CudaStorage, invalid};
use crate::backend::op::ReduceOp;
use crate::dtype::DType;
use crate::shape::Layout;

/// Blocks a reduction aims for before it cuts rows into pieces: a few per SM on any current
/// GPU (an H100 has 132 SMs).
pub(crate) const TARGET_BLOCKS: usize = 1024;
/// A piece gives every thread at least this many elements, so cutting never makes work
/// smaller than the cost of the second pass.
pub(crate) const MIN_ELEMENTS_PER_THREAD: usize = 16;
/// At most this many pieces per row: the second pass combines them with one block of at most
/// 1024 threads per output.
pub(crate) const MAX_SPLITS: usize = 1024;
/// The driver's limit on the x and y grid sizes used here; a grid-stride loop covers the rest.
const MAX_GRID: usize = 65_535;

/// How one reduction is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReducePlan {
    /// Threads per block: outputs (x) by threads along the reduced dimension (y, a power of two).
    pub block: (u32, u32),
    /// Blocks over groups of `block.0` outputs (x), and over the pieces of each row (y).
    pub grid: (u32, u32),
    /// The pieces each row is cut into, `chunk` elements each (the last may be shorter; none is
    /// empty). With more than one, the first pass writes partial states and a second combines.
    pub splits: usize,
    pub chunk: usize,
}

impl ReducePlan {
    pub(crate) fn config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.grid.0, self.grid.1, 1),
            block_dim: (self.block.0, self.block.1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// The plan for `n_out` outputs of `reduce_size` elements each, `reduce_stride` apart;
/// `outputs_adjacent` when output `o + 1`'s elements sit right after output `o`'s (the innermost
/// kept dimension has stride 1). Both sizes are at least 1.
pub(crate) fn reduce_plan(
    n_out: usize,
    reduce_size: usize,
    reduce_stride: usize,
    outputs_adjacent: bool,
) -> ReducePlan {
    let (n_out, reduce_size) = (n_out.max(1), reduce_size.max(1));
    let columns = reduce_stride != 1 && outputs_adjacent && n_out > 1;
    let (outputs_per_block, threads_per_row) = if columns {
        (32, reduce_size.div_ceil(MIN_ELEMENTS_PER_THREAD).next_power_of_two().min(32))
    } else {
        (1, reduce_size.next_power_of_two().clamp(32, 1024))
    };
    let groups = n_out.div_ceil(outputs_per_block);
    let splits = if groups >= TARGET_BLOCKS {
        1
    } else {
        let wanted = TARGET_BLOCKS.div_ceil(groups);
        let most = (reduce_size / (threads_per_row * MIN_ELEMENTS_PER_THREAD)).max(1);
        wanted.min(most).min(MAX_SPLITS)
    };
    let chunk = reduce_size.div_ceil(splits);
    let splits = reduce_size.div_ceil(chunk);
    ReducePlan {
        block: (outputs_per_block as u32, threads_per_row as u32),
        grid: (groups.min(MAX_GRID) as u32, splits as u32),
        splits,
        chunk,
    }
}

/// The second pass: one block per output, its threads over the output's `splits` pieces.
pub(crate) fn finish_config(n_out: usize, splits: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n_out.clamp(1, MAX_GRID) as u32, 1, 1),
        block_dim: (1, splits.next_power_of_two().clamp(32, 1024) as u32, 1),
        shared_mem_bytes: 0,
    }
}

/// Bytes of one partial state of reduction `op` over `dtype`: what `kernels/reduce.cu` writes
/// between the passes (its `static_assert`s pin the struct sizes to these numbers).
pub(crate) fn partial_state_bytes(op: ReduceOp, dtype: DType) -> usize {
    let wide = match dtype {
        DType::F16 | DType::BF16 => 4,
        d => d.size_in_bytes(),
    };
    match op {
        // (value, i64 index)
        ReduceOp::ArgMax | ReduceOp::ArgMin => 16,
        // (mean, m2, i64 count)
        ReduceOp::Var(_) if dtype == DType::F64 => 24,
        ReduceOp::Var(_) => 16,
        ReduceOp::Sum if !dtype.is_float() => 8,
        _ => wide,
    }
}

/// The layout seen with dimensions `dims` (distinct, ascending) merged into one, when they are
/// neighbours whose strides collapse (size-1 dims are dropped first): then a single reduction
/// reads them in place, without moving them last first. Returns the layout and the merged
/// dimension's index.
pub(crate) fn merge_reduced_dims(layout: &Layout, dims: &[usize]) -> Option<(Layout, usize)> {
    let keep = |d: usize| !dims.contains(&d) || layout.shape[d] != 1;
    let mut shape = Vec::new();
    let mut strides = Vec::new();
    let mut reduced = Vec::new();
    for d in (0..layout.rank()).filter(|&d| keep(d)) {
        if dims.contains(&d) {
            reduced.push(shape.len());
        }
        shape.push(layout.shape[d]);
        strides.push(layout.strides[d]);
    }
    let (&first, &last) = (reduced.first()?, reduced.last()?);
    if last - first + 1 != reduced.len() {
        return None;
    }
    for d in first..last {
        if strides[d] != strides[d + 1] * shape[d + 1] {
            return None;
        }
    }
    let size: usize = shape[first..=last].iter().product();
    shape.splice(first..=last, [size]);
    let inner = strides[last];
    strides.splice(first..=last, [inner]);
    Some((Layout { shape, strides, offset: layout.offset }, first))
}

impl CudaStorage {
    /// Reduces dimension `dim`. The output is contiguous over the kept dimensions (the front end
    /// decides about keepdim). Integer and bool sums and arg-reductions give i64.
    pub fn reduce(&self, op: ReduceOp, layout: &Layout, dim: usize) -> CudaResult<CudaStorage> {
        let correction = if let ReduceOp::Var(c) = op { c as f64 } else { 0.0 };
        if dim >= layout.rank() {
            return Err(invalid(
                "reduce",
                format!(
                    "`{}` over dimension {dim}: out of range for a tensor of rank {}",
                    op.name(),
                    layout.rank()
                ),
                "pass a dimension below the tensor's rank",
            ));
        }
        let dtype = self.dtype();
        let out_dtype = match op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => DType::I64,
            ReduceOp::Sum if !dtype.is_float() => DType::I64,
            _ => dtype,
        };
        let mut kept = layout.clone();
        let reduce_size = kept.shape.remove(dim);
        let reduce_stride = kept.strides.remove(dim);
        let n_out = kept.numel();
        let device = self.device();
        let out = Self::alloc(device, out_dtype, n_out)?;
        if n_out == 0 || reduce_size == 0 {
            // PyTorch: the sum of nothing is 0, its mean and variance NaN; max of nothing is an
            // error the front end raises.
            out.fill(if matches!(op, ReduceOp::Mean | ReduceOp::Var(_)) { f64::NAN } else { 0.0 })?;
            return Ok(out);
        }
        let outputs_adjacent = kept
            .shape
            .iter()
            .zip(&kept.strides)
            .rev()
            .find(|(size, _)| **size > 1)
            .is_some_and(|(_, &s)| s == 1);
        let plan = reduce_plan(n_out, reduce_size, reduce_stride, outputs_adjacent);
        let partials = if plan.splits > 1 {
            let bytes = n_out
                .checked_mul(plan.splits)
                .and_then(|n| n.checked_mul(partial_state_bytes(op, dtype)))
                .ok_or_else(|| {
                    invalid(
                        "reduce",
                        format!("{n_out} outputs do not fit in memory"),
                        "reduce fewer elements",
                    )
                })?;
            Some(device.alloc(bytes)?)
        } else {
            None
        };
        let info = self.upload_info(&kept.shape, &[&kept.strides])?;
        let partials_ptr = partials.as_ref().map_or(0, DeviceBuffer::ptr);
        device.launch(
            &op.kernel(dtype),
            plan.config(),
            &[
                Arg::U64(n_out as u64),
                Arg::U64(reduce_size as u64),
                Arg::U64(reduce_stride as u64),
                Arg::U64(kept.rank() as u64),
                Arg::U64(info.ptr()),
                Arg::U64(self.ptr_at(layout)),
                Arg::U64(plan.splits as u64),
                Arg::U64(partials_ptr),
                Arg::U64(out.ptr()),
                Arg::F64(correction),
            ],
        )?;
        if partials.is_some() {
            device.launch(
                &op.finish_kernel(dtype),
                finish_config(n_out, plan.splits),
                &[
                    Arg::U64(n_out as u64),
                    Arg::U64(plan.splits as u64),
                    Arg::U64(reduce_size as u64),
                    Arg::U64(partials_ptr),
                    Arg::U64(out.ptr()),
                    Arg::F64(correction),
                ],
            )?;
        }
        Ok(out)
    }

    /// Reduces every dimension in `dims` (distinct, ascending) with one reduction: in place when
    /// they merge into one dimension ([`merge_reduced_dims`]), else moved last and flattened into
    /// one by a copy. The output is contiguous over the kept dimensions, in order.
    pub fn reduce_dims(&self, op: ReduceOp, layout: &Layout, dims: &[usize]) -> CudaResult<CudaStorage> {
        if let [dim] = dims {
            return self.reduce(op, layout, *dim);
        }
        if let Some((merged, dim)) = merge_reduced_dims(layout, dims) {
            return self.reduce(op, &merged, dim);
        }
        let kept: Vec<usize> = (0..layout.rank()).filter(|d| !dims.contains(d)).collect();
        let order: Vec<usize> = kept.iter().chain(dims).copied().collect();
        let permuted = Layout {
            shape: order.iter().map(|&d| layout.shape[d]).collect(),
            strides: order.iter().map(|&d| layout.strides[d]).collect(),
            offset: layout.offset,
        };
        let x = self.contiguous(&permuted)?;
        let mut shape: Vec<usize> = kept.iter().map(|&d| layout.shape[d]).collect();
        shape.push(dims.iter().map(|&d| layout.shape[d]).product());
        x.reduce(op, &Layout::contiguous(&shape), kept.len())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_sum_of_everything_is_cut_into_pieces_that_fill_the_gpu() {
        // sum_all of 2^24 elements: one output, 1024 pieces of 16384 (16 per thread).
        let plan = reduce_plan(1, 1 << 24, 1, false);
        assert_eq!(plan, ReducePlan { block: (1, 1024), grid: (1, 1024), splits: 1024, chunk: 1 << 14 });
        let finish = finish_config(1, plan.splits);
        assert_eq!((finish.grid_dim, finish.block_dim), ((1, 1, 1), (1, 1024, 1)));
        // Each piece keeps 1024 threads busy with at least 16 elements each.
        assert_eq!(reduce_plan(1, 100_000, 1, false).splits, 6);
        // A row too short to share: one piece, one pass.
        assert_eq!(reduce_plan(1, 5000, 1, false).splits, 1);
        assert_eq!(
            reduce_plan(1, 300, 1, false),
            ReducePlan { block: (1, 512), grid: (1, 1), splits: 1, chunk: 300 }
        );
    }

    #[test]
    fn many_short_rows_take_one_block_each_and_the_grid_loops_past_its_limit() {
        let plan = reduce_plan(1 << 20, 5, 1, true);
        assert_eq!(plan, ReducePlan { block: (1, 32), grid: (65_535, 1), splits: 1, chunk: 5 });
        // Rows past 1024 elements: 1024 threads walk each row.
        assert_eq!(reduce_plan(4096, 3000, 1, true).block, (1, 1024));
    }

    #[test]
    fn reductions_over_a_leading_dim_map_a_warp_to_neighbouring_outputs() {
        // [4096, 1024].sum(0): outputs are columns, 1024 apart along the reduced dim.
        let plan = reduce_plan(1024, 4096, 1024, true);
        assert_eq!(plan, ReducePlan { block: (32, 32), grid: (32, 8), splits: 8, chunk: 512 });
        // Few rows: fewer threads along them.
        assert_eq!(reduce_plan(1024, 3, 1024, true).block, (32, 1));
        // Outputs that are not neighbours (a transposed input) gain nothing from it.
        assert_eq!(reduce_plan(1024, 4096, 1024, false).block.0, 1);
        // Neither is one output.
        assert_eq!(reduce_plan(1, 4096, 7, true).block.0, 1);
    }

    #[test]
    fn partial_states_have_the_sizes_the_kernels_assert() {
        assert_eq!(partial_state_bytes(ReduceOp::Sum, DType::F16), 4);
        assert_eq!(partial_state_bytes(ReduceOp::Sum, DType::F64), 8);
        assert_eq!(partial_state_bytes(ReduceOp::Sum, DType::U8), 8);
        assert_eq!(partial_state_bytes(ReduceOp::Sum, DType::Bool), 8);
        assert_eq!(partial_state_bytes(ReduceOp::Mean, DType::BF16), 4);
        assert_eq!(partial_state_bytes(ReduceOp::Max, DType::U8), 1);
        assert_eq!(partial_state_bytes(ReduceOp::Min, DType::I32), 4);
        assert_eq!(partial_state_bytes(ReduceOp::ArgMax, DType::U8), 16);
        assert_eq!(partial_state_bytes(ReduceOp::Var(1), DType::F32), 16);
        assert_eq!(partial_state_bytes(ReduceOp::Var(1), DType::F64), 24);
    }

    fn layout(shape: &[usize], strides: &[usize]) -> Layout {
        Layout { shape: shape.to_vec(), strides: strides.to_vec(), offset: 3 }
    }

    #[test]
    fn neighbouring_reduced_dims_that_collapse_are_read_in_place() {
        // [B, T, C].sum((0, 1)): one dim of B*T, stride C.
        assert_eq!(
            merge_reduced_dims(&layout(&[4, 5, 6], &[30, 6, 1]), &[0, 1]),
            Some((layout(&[20, 6], &[6, 1]), 0))
        );
        assert_eq!(
            merge_reduced_dims(&layout(&[4, 5, 6], &[30, 6, 1]), &[1, 2]),
            Some((layout(&[4, 30], &[30, 1]), 1))
        );
        // A size-1 dim between them does not count.
        assert_eq!(
            merge_reduced_dims(&layout(&[4, 1, 6], &[6, 99, 1]), &[0, 1, 2]),
            Some((layout(&[24], &[1]), 0))
        );
        // Not neighbours, or strides that do not collapse (a transposed view): moved and copied.
        assert_eq!(merge_reduced_dims(&layout(&[4, 5, 6], &[30, 6, 1]), &[0, 2]), None);
        assert_eq!(merge_reduced_dims(&layout(&[4, 5], &[1, 4]), &[0, 1]), None);
    }

    proptest! {
        #[test]
        fn every_plan_covers_each_row_with_nonempty_pieces_within_the_launch_limits(
            n_out in 1usize..1 << 22,
            reduce_size in 1usize..1 << 26,
            stride in 0usize..3,
            adjacent: bool,
        ) {
            let p = reduce_plan(n_out, reduce_size, stride, adjacent);
            let (bx, by) = (p.block.0 as usize, p.block.1 as usize);
            prop_assert!(by.is_power_of_two() && bx * by <= 1024 && bx * by >= 32);
            prop_assert!(p.grid.0 >= 1 && p.grid.0 as usize <= MAX_GRID && p.grid.1 as usize <= MAX_SPLITS);
            prop_assert_eq!(p.grid.1 as usize, p.splits);
            prop_assert!(p.splits >= 1 && p.splits <= MAX_SPLITS);
            // The kernel cuts at ceil(reduce_size / splits): that must be `chunk`, and the last
            // piece must start before the end.
            prop_assert_eq!(p.chunk, reduce_size.div_ceil(p.splits));
            prop_assert!(p.chunk * (p.splits - 1) < reduce_size && p.chunk * p.splits >= reduce_size);
            if p.splits > 1 {
                prop_assert!(p.chunk >= by * MIN_ELEMENTS_PER_THREAD, "pieces are worth a block");
            }
            let f = finish_config(n_out, p.splits);
            prop_assert!(f.block_dim.1 as usize >= p.splits.min(1024) && f.block_dim.1 <= 1024);
        }
    }
}
