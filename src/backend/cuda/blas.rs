//! Matrix multiplication with cuBLAS: batched, strided, and without copies for row-major,
//! transposed or batch-broadcast operands.

use std::panic::Location;

use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};

use super::error::{CudaError, CudaResult};
use super::storage::CudaStorage;
use crate::dtype::DType;
use crate::error::Error;
use crate::shape::Layout;

/// How a `[batch..., rows, cols]` operand looks to cuBLAS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MatrixView {
    /// Row-major storage (`cols` stride 1) needs no transpose in the swapped product; a
    /// transposed view (`rows` stride 1) does.
    pub transpose: bool,
    pub ld: usize,
    pub batch_stride: usize,
}

/// The cuBLAS view of `layout`, or `None` when it needs a contiguous copy first.
///
/// cuBLAS reads a matrix as columns `ld` elements apart with unit stride inside a column, and
/// wants `ld` at least the column's length. So one matrix dim of size > 1 must have stride 1 and
/// the other, if its size is > 1, a stride of at least the first one's size (its dense extent).
/// Anything else is copied: a stride-0 (expanded) dim, as the gradient of `sum` is, would
/// otherwise be read as dense rows (wrong values, and reads past the buffer); so are batch dims
/// that do not collapse to one stride. A stride-0 batch dim is fine: cuBLAS reads the same matrix
/// for every batch.
pub(crate) fn matrix_view(layout: &Layout) -> Option<MatrixView> {
    let r = layout.rank();
    if r < 2 {
        return None;
    }
    let (rows, cols) = (layout.shape[r - 2], layout.shape[r - 1]);
    let (rs, cs) = (layout.strides[r - 2], layout.strides[r - 1]);
    // Row-major: rows `rs` apart, each dense. Column-major (a transposed view): the reverse.
    let row_major = (cols == 1 || cs == 1) && (rows == 1 || rs >= cols);
    let column_major = (rows == 1 || rs == 1) && (cols == 1 || cs >= rows);
    let (transpose, ld) = if row_major {
        (false, if rows == 1 { cols } else { rs.max(cols) })
    } else if column_major {
        (true, if cols == 1 { rows } else { cs.max(rows) })
    } else {
        return None;
    };
    // Batch dims must be one arithmetic progression (or all broadcast, stride 0).
    let batch_dims = &layout.shape[..r - 2];
    let batch_strides = &layout.strides[..r - 2];
    let mut batch_stride = None;
    for i in (0..batch_dims.len()).rev() {
        if batch_dims[i] == 1 {
            continue;
        }
        match batch_stride {
            None => batch_stride = Some((batch_strides[i], batch_dims[i])),
            Some((inner, span)) => {
                if batch_strides[i] != inner * span {
                    return None;
                }
                batch_stride = Some((inner, span * batch_dims[i]));
            }
        }
    }
    Some(MatrixView { transpose, ld, batch_stride: batch_stride.map_or(0, |(s, _)| s) })
}

impl CudaStorage {
    /// `[b, m, k] @ [b, k, n] -> [b, m, n]` (contiguous out) for f32, f64, f16 and bf16 (the
    /// half types accumulate in f32). Either side may be transposed or have batch stride 0.
    #[track_caller]
    pub fn matmul(
        &self,
        layout: &Layout,
        rhs: &CudaStorage,
        rhs_layout: &Layout,
        (b, m, n, k): (usize, usize, usize, usize),
    ) -> CudaResult<CudaStorage> {
        let location = Location::caller();
        let device = self.device();
        if self.dtype() != rhs.dtype() || !self.dtype().is_float() {
            return Err(Error::Unsupported {
                op: "matmul",
                device: device.device(),
                help: format!(
                    "cuBLAS multiplies f32, f64, f16 and bf16 operands of one dtype (got {} and {}); cast first",
                    self.dtype(),
                    rhs.dtype()
                ),
                location,
            }
            .into());
        }
        let out = CudaStorage::alloc(device, self.dtype(), b * m * n)?;
        if b * m * n == 0 {
            return Ok(out);
        }
        if k == 0 {
            out.fill(0.0)?;
            return Ok(out);
        }
        let (lhs, lhs_layout, a) = viewable(self, layout, location)?;
        let (rhs, rhs_layout, bm) = viewable(rhs, rhs_layout, location)?;
        let to_int = |v: usize| i32::try_from(v).map_err(|_| too_big(device.device(), v, location));
        let elem = self.dtype().size_in_bytes() as u64;
        let lhs_ptr = lhs.ptr() + lhs_layout.offset as u64 * elem;
        let rhs_ptr = rhs.ptr() + rhs_layout.offset as u64 * elem;
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: pass B first, with n and m swapped.
        let op = |t: bool| if t { cublasOperation_t::CUBLAS_OP_T } else { cublasOperation_t::CUBLAS_OP_N };
        let (data_type, compute) = match self.dtype() {
            DType::F32 => (cudaDataType::CUDA_R_32F, cublasComputeType_t::CUBLAS_COMPUTE_32F),
            DType::F64 => (cudaDataType::CUDA_R_64F, cublasComputeType_t::CUBLAS_COMPUTE_64F),
            DType::F16 => (cudaDataType::CUDA_R_16F, cublasComputeType_t::CUBLAS_COMPUTE_32F),
            _ => (cudaDataType::CUDA_R_16BF, cublasComputeType_t::CUBLAS_COMPUTE_32F),
        };
        let (alpha64, beta64) = (1.0f64, 0.0f64);
        let (alpha32, beta32) = (1.0f32, 0.0f32);
        let (alpha, beta): (*const std::ffi::c_void, *const std::ffi::c_void) = if self.dtype() == DType::F64
        {
            ((&alpha64 as *const f64).cast(), (&beta64 as *const f64).cast())
        } else {
            ((&alpha32 as *const f32).cast(), (&beta32 as *const f32).cast())
        };
        let blas = device.blas()?;
        // cuBLAS launches in the thread's current context: make it this device's.
        device.bind()?;
        // SAFETY: the pointers are live device allocations laid out as the views describe (ld,
        // batch stride, transposition checked by `matrix_view`); alpha and beta point at host
        // values of the compute type that outlive the call; the handle's stream is the device's.
        unsafe {
            cudarc::cublas::result::gemm_strided_batched_ex(
                *blas.handle(),
                op(bm.transpose),
                op(a.transpose),
                to_int(n)?,
                to_int(m)?,
                to_int(k)?,
                alpha,
                rhs_ptr as *const std::ffi::c_void,
                data_type,
                to_int(bm.ld)?,
                bm.batch_stride as i64,
                lhs_ptr as *const std::ffi::c_void,
                data_type,
                to_int(a.ld)?,
                a.batch_stride as i64,
                beta,
                out.ptr() as *mut std::ffi::c_void,
                data_type,
                to_int(n)?,
                (m * n) as i64,
                to_int(b)?,
                compute,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| CudaError::Cublas {
            device: device.device(),
            call: "cublasGemmStridedBatchedEx",
            message: e.to_string(),
        })?;
        Ok(out)
    }
}

/// The operand itself when cuBLAS can read it in place, else a contiguous copy; with its view.
fn viewable(
    s: &CudaStorage,
    layout: &Layout,
    location: &'static Location<'static>,
) -> CudaResult<(CudaStorage, Layout, MatrixView)> {
    if let Some(view) = matrix_view(layout) {
        return Ok((s.clone(), layout.clone(), view));
    }
    let dense = Layout::contiguous(&layout.shape);
    match matrix_view(&dense) {
        Some(view) => Ok((s.contiguous(layout)?, dense, view)),
        None => Err(Error::Unsupported {
            op: "matmul",
            device: s.device().device(),
            help: format!("cuBLAS multiplies operands of at least 2 dims, got shape {:?}", layout.shape),
            location,
        }
        .into()),
    }
}

fn too_big(device: crate::Device, v: usize, location: &'static Location<'static>) -> CudaError {
    Error::Unsupported {
        op: "matmul",
        device,
        help: format!("a matrix dimension of {v} exceeds cuBLAS's 32-bit sizes; split the product"),
        location,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(shape: &[usize], strides: &[usize]) -> Layout {
        Layout { shape: shape.to_vec(), strides: strides.to_vec(), offset: 0 }
    }

    #[test]
    fn cublas_reads_row_major_transposed_and_broadcast_operands_in_place() {
        assert_eq!(
            matrix_view(&layout(&[4, 3], &[3, 1])),
            Some(MatrixView { transpose: false, ld: 3, batch_stride: 0 })
        );
        // The transpose of a contiguous [3, 4].
        assert_eq!(
            matrix_view(&layout(&[4, 3], &[1, 4])),
            Some(MatrixView { transpose: true, ld: 4, batch_stride: 0 })
        );
        assert_eq!(
            matrix_view(&layout(&[2, 5, 4, 3], &[60, 12, 3, 1])),
            Some(MatrixView { transpose: false, ld: 3, batch_stride: 12 })
        );
        // A weight broadcast over the batch.
        assert_eq!(
            matrix_view(&layout(&[8, 4, 3], &[0, 3, 1])),
            Some(MatrixView { transpose: false, ld: 3, batch_stride: 0 })
        );
        // Batch dims that do not collapse, and a matrix with no unit stride, need a copy.
        assert_eq!(matrix_view(&layout(&[2, 5, 4, 3], &[100, 12, 3, 1])), None);
        assert_eq!(matrix_view(&layout(&[4, 3], &[6, 2])), None);
        assert_eq!(matrix_view(&layout(&[3], &[1])), None);
        // A single row or column may have any stride along its one dim of size 1.
        assert_eq!(
            matrix_view(&layout(&[1, 5], &[0, 3])),
            Some(MatrixView { transpose: true, ld: 3, batch_stride: 0 })
        );
        assert_eq!(
            matrix_view(&layout(&[5, 1], &[1, 0])),
            Some(MatrixView { transpose: false, ld: 1, batch_stride: 0 })
        );
    }

    #[test]
    fn expanded_matrix_dims_are_copied_never_read_as_dense() {
        // The gradient of `sum` for Linear(k, 1): a [batch, 1] of ones expanded from one element.
        assert_eq!(matrix_view(&layout(&[8, 1], &[0, 0])), None);
        // A row broadcast down the rows, a column broadcast across the columns.
        assert_eq!(matrix_view(&layout(&[4, 3], &[0, 1])), None);
        assert_eq!(matrix_view(&layout(&[4, 3], &[1, 0])), None);
        assert_eq!(matrix_view(&layout(&[2, 4, 3], &[12, 0, 1])), None);
        // Rows that overlap (stride below the row length) cannot be a leading dimension either.
        assert_eq!(matrix_view(&layout(&[4, 3], &[2, 1])), None);
        assert_eq!(matrix_view(&layout(&[3, 4], &[1, 2])), None);
    }

    /// Every (batch, row, column) element, as the layout places it.
    fn layout_offsets(l: &Layout) -> Vec<usize> {
        (0..l.numel())
            .map(|mut i| {
                let mut offset = 0;
                for d in (0..l.rank()).rev() {
                    offset += (i % l.shape[d]) * l.strides[d];
                    i /= l.shape[d];
                }
                offset
            })
            .collect()
    }

    /// The same elements as cuBLAS addresses them through `view`.
    fn cublas_offsets(l: &Layout, v: &MatrixView) -> Vec<usize> {
        let r = l.rank();
        let (rows, cols) = (l.shape[r - 2], l.shape[r - 1]);
        let batch: usize = l.shape[..r - 2].iter().product();
        let mut out = Vec::new();
        for b in 0..batch {
            for i in 0..rows {
                for j in 0..cols {
                    let inside = if v.transpose { i + j * v.ld } else { i * v.ld + j };
                    out.push(b * v.batch_stride + inside);
                }
            }
        }
        out
    }

    fn any_layout() -> impl proptest::strategy::Strategy<Value = Layout> {
        use proptest::prelude::*;
        (2usize..=4)
            .prop_flat_map(|rank| {
                (proptest::collection::vec(1usize..=4, rank), proptest::collection::vec(0usize..=13, rank))
            })
            .prop_map(|(shape, strides)| Layout { shape, strides, offset: 0 })
    }

    proptest::proptest! {
        #[test]
        fn a_view_cublas_accepts_reads_exactly_the_layouts_elements(l in any_layout()) {
            let r = l.rank();
            let dense = Layout::contiguous(&l.shape);
            proptest::prop_assert!(matrix_view(&dense).is_some(), "a contiguous operand needs no copy");
            if let Some(v) = matrix_view(&l) {
                proptest::prop_assert_eq!(cublas_offsets(&l, &v), layout_offsets(&l));
                // cuBLAS's own argument check: ld at least the length of a column.
                let column = if v.transpose { l.shape[r - 2] } else { l.shape[r - 1] };
                proptest::prop_assert!(v.ld >= column.max(1));
            }
        }
    }
}
