//! THE place for device, dtype and shape rules. Every op calls these before any backend runs, so a
//! rule is written once and every error names the op, each operand (name, device, dtype, shape,
//! origin) and the failing call.
//!
//! Device rule: every tensor operand of an op is on the same device, 0-dim tensors included. This
//! is stricter than PyTorch, which lets a 0-dim CPU tensor join a CUDA op: that exception hides
//! the very tensors devcheck exists to find (a CPU scalar in a GPU loop is a sync point waiting
//! to happen). Use a Rust scalar (`x.mul_scalar(2.0)`) for constants.

use std::panic::Location;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::{approx_extent, broadcast_shapes, checked_nbytes, fmt_shape};

use super::Tensor;

type Loc = &'static Location<'static>;

/// All operands on one device; returns it.
pub(crate) fn same_device(op: &'static str, operands: &[(&str, &Tensor)], location: Loc) -> Result<Device> {
    let device = operands[0].1.device();
    if operands.iter().all(|(_, t)| t.device() == device) {
        return Ok(device);
    }
    // A dry run records the mismatch and goes on, to find every problem in one run.
    if super::observe::device_mismatch(op, operands, location) {
        return Ok(device);
    }
    Err(Error::DeviceMismatch {
        op,
        operands: operands.iter().map(|(role, t)| t.operand(*role)).collect(),
        location,
    })
}

/// The operands of a composite op (a layer, a loss) on one device, checked once at the caller's
/// line so that the error names what the caller passed (`target`, `weight`) rather than a
/// temporary made from it inside the op. In a dry run the mismatch is recorded and each operand
/// off the first operand's device is replaced by a data-less stand-in on it, so the op's inner
/// steps run on one device and do not report the same problem again.
pub(crate) fn on_one_device(
    op: &'static str,
    operands: &[(&str, &Tensor)],
    location: Loc,
) -> Result<Vec<Tensor>> {
    let device = same_device(op, operands, location)?;
    Ok(operands
        .iter()
        .map(|(_, t)| if t.device() == device { (*t).clone() } else { t.stand_in_on(device) })
        .collect())
}

/// All operands of one dtype; returns it. devcheck does not promote silently: a mixed-dtype op
/// says which operand to cast.
pub(crate) fn same_dtype(op: &'static str, operands: &[(&str, &Tensor)], location: Loc) -> Result<DType> {
    let dtype = operands[0].1.dtype();
    if let Some((role, odd)) = operands.iter().find(|(_, t)| t.dtype() != dtype) {
        let (first_role, _) = operands[0];
        return Err(Error::DTypeMismatch {
            op,
            detail: format!("{first_role} is {dtype}, {role} is {}", odd.dtype()),
            help: format!(
                "devcheck does not promote dtypes implicitly: cast one side, e.g. `{role}.to_dtype({})`",
                dtype_path(dtype.promote(odd.dtype()))
            ),
            operands: operands.iter().map(|(role, t)| t.operand(*role)).collect(),
            location,
        });
    }
    Ok(dtype)
}

/// The operand must have a floating dtype.
pub(crate) fn float(op: &'static str, t: &Tensor, location: Loc) -> Result<DType> {
    if t.dtype().is_float() {
        return Ok(t.dtype());
    }
    Err(Error::DTypeMismatch {
        op,
        detail: format!("it needs a floating-point tensor, got {}", t.dtype()),
        help: "cast first: `x.to_dtype(DType::F32)`".to_string(),
        operands: vec![t.operand("input")],
        location,
    })
}

/// The operand must not be bool (arithmetic).
pub(crate) fn numeric(op: &'static str, t: &Tensor, location: Loc) -> Result<DType> {
    if t.dtype() != DType::Bool {
        return Ok(t.dtype());
    }
    Err(Error::DTypeMismatch {
        op,
        detail: "arithmetic on a bool tensor".to_string(),
        help: "cast first (`x.to_dtype(DType::F32)`), or combine masks with `logical_and`/`logical_or`"
            .to_string(),
        operands: vec![t.operand("input")],
        location,
    })
}

/// The operand must have this dtype (index tensors: i64; masks: bool).
pub(crate) fn dtype_is(op: &'static str, role: &str, t: &Tensor, want: DType, location: Loc) -> Result<()> {
    if t.dtype() == want {
        return Ok(());
    }
    Err(Error::DTypeMismatch {
        op,
        detail: format!("{role} must be {want}, got {}", t.dtype()),
        help: format!("cast it: `{role}.to_dtype({})`", dtype_path(want)),
        operands: vec![t.operand(role)],
        location,
    })
}

fn dtype_path(d: DType) -> String {
    format!("DType::{d:?}")
}

/// The broadcast shape of two operands (a valid shape for the lhs's dtype).
pub(crate) fn broadcast(op: &'static str, lhs: &Tensor, rhs: &Tensor, location: Loc) -> Result<Vec<usize>> {
    let shape = broadcast_shapes(lhs.shape(), rhs.shape()).ok_or_else(|| Error::ShapeMismatch {
        op,
        detail: format!(
            "shapes {} and {} cannot be broadcast together",
            fmt_shape(lhs.shape()),
            fmt_shape(rhs.shape())
        ),
        help: "aligned from the right, each pair of dims must be equal or one of them 1; \
               use `unsqueeze`/`reshape` to line them up"
            .to_string(),
        operands: vec![lhs.operand("lhs"), rhs.operand("rhs")],
        location,
    })?;
    // Comparisons make bool results, smaller than the operands: the lhs's dtype bounds them.
    valid_shape(op, &shape, lhs.dtype(), location)?;
    Ok(shape)
}

/// The element count of `shape`, when a tensor of `dtype` can have it (see
/// [`crate::shape::checked_nbytes`]); otherwise an error naming the op. Every op that makes a
/// shape from user input (creation, `expand`, broadcasting, `matmul`, `cat`, `index_select`)
/// checks it here, so every layout's sizes, strides and offsets are addressable.
pub(crate) fn valid_shape(op: &'static str, shape: &[usize], dtype: DType, location: Loc) -> Result<usize> {
    if let Some(bytes) = checked_nbytes(shape, dtype.size_in_bytes()) {
        return Ok(bytes / dtype.size_in_bytes());
    }
    Err(Error::InvalidArgument {
        op,
        detail: format!(
            "shape {} spans about {:.3e} elements: as {dtype} that is more than {}, beyond what any \
             process can address",
            fmt_shape(shape),
            approx_extent(shape),
            crate::units::format_bytes(crate::shape::MAX_BYTES, 0)
        ),
        help: "check the shape for a misplaced or corrupted dim (a negative size converted to `usize` \
               becomes a huge number); no machine holds a tensor this large"
            .to_string(),
        location,
    })
}

/// A dim index (negative counts from the end) normalised to `0..rank`.
pub(crate) fn dim(op: &'static str, t: &Tensor, dim: isize, location: Loc) -> Result<usize> {
    dim_in(op, t.rank(), dim, location)
}

/// A dim the op indexes the shape with: like [`dim`], except that a 0-dim tensor (a scalar) has
/// none. PyTorch lets dim 0 and -1 stand for "no dim" on a scalar only where that means
/// something (reductions, `squeeze`, `transpose`, `softmax`); `size`, `narrow`, `cat`,
/// `index_select` and `gather` need a real dim, as PyTorch's do.
pub(crate) fn shape_dim(op: &'static str, t: &Tensor, dim: isize, location: Loc) -> Result<usize> {
    if t.rank() > 0 {
        return self::dim(op, t, dim, location);
    }
    Err(Error::InvalidArgument {
        op,
        detail: format!("dim {dim} of a 0-dim tensor (a scalar): it has no dims"),
        help: "make it a 1-element tensor first: `x.reshape([1])?`".to_string(),
        location,
    })
}

/// Like [`dim`] for a rank that is not a tensor's (e.g. `unsqueeze` allows `rank + 1` positions).
pub(crate) fn dim_in(op: &'static str, rank: usize, dim: isize, location: Loc) -> Result<usize> {
    // A 0-dim tensor counts as having one dim here, so that 0 and -1 name it (PyTorch's
    // `maybe_wrap_dim` with `wrap_scalar`).
    let r = rank.max(1) as isize;
    let d = if dim < 0 { dim + r } else { dim };
    if (0..r).contains(&d) {
        return Ok(d as usize);
    }
    Err(Error::InvalidArgument {
        op,
        detail: format!("dim {dim} is out of range for a tensor of rank {rank}"),
        help: if rank == 0 {
            "a 0-dim tensor only has dim 0 (or -1)".to_string()
        } else {
            format!("valid dims are -{rank}..={}", rank - 1)
        },
        location,
    })
}

/// Distinct normalised dims.
pub(crate) fn dims(op: &'static str, t: &Tensor, dims: &[isize], location: Loc) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let n = dim(op, t, d, location)?;
        if out.contains(&n) {
            return Err(Error::InvalidArgument {
                op,
                detail: format!("dim {d} appears more than once in {dims:?}"),
                help: "list each dim once".to_string(),
                location,
            });
        }
        out.push(n);
    }
    Ok(out)
}

/// A plain argument error with help.
pub(crate) fn invalid(op: &'static str, detail: String, help: impl Into<String>, location: Loc) -> Error {
    Error::InvalidArgument { op, detail, help: help.into(), location }
}

/// A shape error on the given operands.
pub(crate) fn shape_error(
    op: &'static str,
    detail: String,
    help: impl Into<String>,
    operands: &[(&str, &Tensor)],
    location: Loc,
) -> Error {
    Error::ShapeMismatch {
        op,
        detail,
        help: help.into(),
        operands: operands.iter().map(|(r, t)| t.operand(*r)).collect(),
        location,
    }
}
