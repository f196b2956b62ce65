//! Shape ops: views that share storage where possible (reshape of contiguous data, transpose,
//! permute, narrow, squeeze, unsqueeze, expand) and copies (contiguous, cat, stack, index_select,
//! gather).

use std::panic::Location;

use super::{Tensor, check, compute};
use crate::autograd::{GradFn, record};
use crate::backend::CpuStorage;
use crate::backend::cuda::CudaStorage;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::{Layout, checked_numel, contiguous_strides, fmt_shape};

type Loc = &'static Location<'static>;

impl Tensor {
    /// The same elements with a new shape (a view when contiguous, else a copy).
    #[track_caller]
    pub fn reshape(&self, shape: impl AsRef<[usize]>) -> Result<Tensor> {
        self.reshape_at(shape, Location::caller())
    }

    pub(crate) fn reshape_at(&self, shape: impl AsRef<[usize]>, location: Loc) -> Result<Tensor> {
        let shape = shape.as_ref();
        if checked_numel(shape) != Some(self.numel()) {
            return Err(check::shape_error(
                "reshape",
                format!(
                    "cannot reshape {} ({} elements) into {}",
                    fmt_shape(self.shape()),
                    self.numel(),
                    fmt_shape(shape)
                ),
                "the new shape must hold the same number of elements",
                &[("input", self)],
                location,
            ));
        }
        // An empty tensor reshapes to any shape with a 0, also to one whose strides overflow.
        check::valid_shape("reshape", shape, self.dtype(), location)?;
        let base = if self.is_contiguous() { self.clone() } else { self.contiguous_at(location)? };
        let layout = Layout {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            offset: base.layout().offset,
        };
        let out = base.shape_view(layout);
        Ok(record(out, &[&base], |_| GradFn::Reshape { shape: base.shape().to_vec() }))
    }

    /// Flattens dims `start..` into one (`flatten(1)` turns `[B, C, H, W]` into `[B, C*H*W]`).
    #[track_caller]
    pub fn flatten_from(&self, start: isize) -> Result<Tensor> {
        let location = Location::caller();
        let d = check::dim("flatten", self, start, location)?;
        if self.rank() == 0 {
            return self.reshape_at([1], location);
        }
        let mut shape = self.shape()[..d].to_vec();
        shape.push(self.shape()[d..].iter().product());
        self.reshape_at(shape, location)
    }

    /// Swaps two dims (a view).
    #[track_caller]
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Tensor> {
        let location = Location::caller();
        let a = check::dim("transpose", self, dim0, location)?;
        let b = check::dim("transpose", self, dim1, location)?;
        self.transpose_at(a, b)
    }

    pub(crate) fn transpose_at(&self, a: usize, b: usize) -> Result<Tensor> {
        if self.rank() == 0 {
            // A scalar's dim 0 (or -1) stands for no dim: nothing to swap, as in PyTorch.
            return Ok(self.clone());
        }
        let mut layout = self.layout().clone();
        layout.shape.swap(a, b);
        layout.strides.swap(a, b);
        let out = self.shape_view(layout);
        Ok(record(out, &[self], |_| GradFn::Transpose { dim0: a, dim1: b }))
    }

    /// The transpose of a matrix (`x.t()`); 0-D and 1-D tensors are returned as they are.
    #[track_caller]
    pub fn t(&self) -> Result<Tensor> {
        let location = Location::caller();
        match self.rank() {
            0 | 1 => Ok(self.clone()),
            2 => self.transpose_at(0, 1),
            _ => Err(check::shape_error(
                "t",
                format!("`t` expects at most 2 dims, got shape {}", fmt_shape(self.shape())),
                "use `transpose(-2, -1)` to swap the last two dims of a batch",
                &[("input", self)],
                location,
            )),
        }
    }

    /// Reorders the dims (a view): `dims[i]` is the input dim that becomes dim `i`.
    #[track_caller]
    pub fn permute(&self, dims: impl AsRef<[usize]>) -> Result<Tensor> {
        let location = Location::caller();
        let dims = dims.as_ref();
        let mut seen = vec![false; self.rank()];
        let valid = dims.len() == self.rank()
            && dims.iter().all(|&d| d < self.rank() && !std::mem::replace(&mut seen[d], true));
        if !valid {
            return Err(check::invalid(
                "permute",
                format!(
                    "{dims:?} is not a permutation of the {} dims of {}",
                    self.rank(),
                    fmt_shape(self.shape())
                ),
                format!("list each of 0..{} exactly once", self.rank()),
                location,
            ));
        }
        let l = self.layout();
        let layout = Layout {
            shape: dims.iter().map(|&d| l.shape[d]).collect(),
            strides: dims.iter().map(|&d| l.strides[d]).collect(),
            offset: l.offset,
        };
        let out = self.shape_view(layout);
        Ok(record(out, &[self], |_| GradFn::Permute { dims: dims.to_vec() }))
    }

    /// A contiguous copy (or this tensor, when already contiguous).
    #[track_caller]
    pub fn contiguous(&self) -> Result<Tensor> {
        self.contiguous_at(Location::caller())
    }

    fn contiguous_at(&self, location: Loc) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let storage = compute(
            "contiguous",
            location,
            &[self],
            (self.shape(), self.dtype()),
            |s| s[0].gather(self.layout()),
            |s| s[0].contiguous(self.layout()),
        )?;
        let out = self.derived(storage, self.shape(), self.dtype(), "contiguous", location);
        Ok(record(out, &[self], |_| GradFn::Identity))
    }

    /// `len` elements of `dim` starting at `start` (a view).
    #[track_caller]
    pub fn narrow(&self, dim: isize, start: usize, len: usize) -> Result<Tensor> {
        let location = Location::caller();
        let d = check::shape_dim("narrow", self, dim, location)?;
        let size = self.shape()[d];
        if start.checked_add(len).is_none_or(|end| end > size) {
            return Err(check::shape_error(
                "narrow",
                format!("start {start} + length {len} exceeds dim {d} of size {size}"),
                format!("keep start + length <= {size}"),
                &[("input", self)],
                location,
            ));
        }
        let mut layout = self.layout().clone();
        layout.offset += start * layout.strides[d];
        layout.shape[d] = len;
        let out = self.shape_view(layout);
        Ok(record(out, &[self], |_| GradFn::Narrow { shape: self.shape().to_vec(), dim: d, start }))
    }

    /// Removes `dim` if it has size 1 (otherwise returns the tensor unchanged, as PyTorch does).
    #[track_caller]
    pub fn squeeze(&self, dim: isize) -> Result<Tensor> {
        let location = Location::caller();
        let d = check::dim("squeeze", self, dim, location)?;
        if self.rank() == 0 || self.shape()[d] != 1 {
            return Ok(self.clone());
        }
        let mut layout = self.layout().clone();
        layout.shape.remove(d);
        layout.strides.remove(d);
        let out = self.shape_view(layout);
        Ok(record(out, &[self], |_| GradFn::Squeeze { dim: d }))
    }

    /// Inserts a dim of size 1 at `dim` (`-1` appends).
    #[track_caller]
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let location = Location::caller();
        let d = check::dim_in("unsqueeze", self.rank() + 1, dim, location)?;
        let mut layout = self.layout().clone();
        let stride = if d < self.rank() { layout.strides[d] * layout.shape[d] } else { 1 };
        layout.shape.insert(d, 1);
        layout.strides.insert(d, stride);
        let out = self.shape_view(layout);
        Ok(record(out, &[self], |_| GradFn::Unsqueeze { dim: d }))
    }

    /// Broadcasts to `shape` without copying (stride 0 on stretched dims).
    #[track_caller]
    pub fn expand(&self, shape: impl AsRef<[usize]>) -> Result<Tensor> {
        let location = Location::caller();
        let shape = shape.as_ref();
        let ok = crate::shape::broadcast_shapes(self.shape(), shape).is_some_and(|s| s == shape);
        if !ok {
            return Err(check::shape_error(
                "expand",
                format!("cannot expand {} to {}", fmt_shape(self.shape()), fmt_shape(shape)),
                "only dims of size 1 can be stretched, and new dims go on the left",
                &[("input", self)],
                location,
            ));
        }
        // A view of stride 0 takes no memory, but its element count must still be countable.
        check::valid_shape("expand", shape, self.dtype(), location)?;
        let out = self.shape_view(self.layout().broadcast_to(shape));
        Ok(record(out, &[self], |_| GradFn::Expand { shape: self.shape().to_vec() }))
    }

    /// Concatenates along `dim`; all tensors on one device with one dtype.
    #[track_caller]
    pub fn cat(tensors: &[&Tensor], dim: isize) -> Result<Tensor> {
        Self::cat_at(tensors, dim, "cat", Location::caller())
    }

    /// Stacks along a new `dim`; all tensors of one shape.
    #[track_caller]
    pub fn stack(tensors: &[&Tensor], dim: isize) -> Result<Tensor> {
        let location = Location::caller();
        let first = first_of("stack", tensors, location)?;
        let d = check::dim_in("stack", first.rank() + 1, dim, location)?;
        for (i, t) in tensors.iter().enumerate() {
            if t.shape() != first.shape() {
                return Err(check::shape_error(
                    "stack",
                    format!(
                        "tensors[{i}] has shape {}, tensors[0] has {}",
                        fmt_shape(t.shape()),
                        fmt_shape(first.shape())
                    ),
                    "`stack` needs tensors of one shape; `cat` joins along an existing dim",
                    &[("tensors[0]", first), (&format!("tensors[{i}]"), t)],
                    location,
                ));
            }
        }
        let unsqueezed = tensors.iter().map(|t| t.unsqueeze(d as isize)).collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = unsqueezed.iter().collect();
        Self::cat_at(&refs, d as isize, "stack", location)
    }

    fn cat_at(tensors: &[&Tensor], dim: isize, op: &'static str, location: Loc) -> Result<Tensor> {
        let first = first_of(op, tensors, location)?;
        let roles: Vec<String> = (0..tensors.len()).map(|i| format!("tensors[{i}]")).collect();
        let operands: Vec<(&str, &Tensor)> =
            roles.iter().map(String::as_str).zip(tensors.iter().copied()).collect();
        check::same_device(op, &operands, location)?;
        let dtype = check::same_dtype(op, &operands, location)?;
        let d = check::shape_dim(op, first, dim, location)?;
        for (role, t) in &operands {
            let same_rest = t.rank() == first.rank()
                && t.shape().iter().zip(first.shape()).enumerate().all(|(i, (a, b))| i == d || a == b);
            if !same_rest {
                return Err(check::shape_error(
                    op,
                    format!(
                        "{role} has shape {}, tensors[0] has {}: they may differ only in dim {d}",
                        fmt_shape(t.shape()),
                        fmt_shape(first.shape())
                    ),
                    "make every other dim agree (`reshape`, `expand`), or pick another dim",
                    &[operands[0], (role, t)],
                    location,
                ));
            }
        }
        let mut shape = first.shape().to_vec();
        shape[d] =
            tensors.iter().try_fold(0usize, |sum, t| sum.checked_add(t.shape()[d])).unwrap_or(usize::MAX);
        check::valid_shape(op, &shape, dtype, location)?;
        // Each input's place in the output: its shape, the output's strides, offset along `d`.
        let strides = contiguous_strides(&shape);
        let mut start = 0;
        let slots: Vec<Layout> = tensors
            .iter()
            .map(|t| {
                let slot = Layout {
                    shape: t.shape().to_vec(),
                    strides: strides.clone(),
                    offset: start * strides[d],
                };
                start += t.shape()[d];
                slot
            })
            .collect();
        let cpu = |s: &[&CpuStorage]| {
            let pieces: Vec<(&CpuStorage, &Layout)> =
                s.iter().zip(tensors).map(|(src, t)| (*src, t.layout())).collect();
            CpuStorage::cat(shape.iter().product(), &pieces, &slots, dtype)
        };
        let storage = compute(op, location, tensors, (&shape, dtype), cpu, |s| {
            let out = CudaStorage::alloc(s[0].device(), dtype, shape.iter().product())?;
            for ((t, src), slot) in tensors.iter().zip(s).zip(&slots) {
                out.copy_from(src, t.layout(), slot)?;
            }
            Ok(out)
        })?;
        let out = first.derived(storage, &shape, dtype, op, location);
        Ok(record(out, tensors, |_| GradFn::Cat {
            dim: d,
            sizes: tensors.iter().map(|t| t.shape()[d]).collect(),
        }))
    }

    /// Picks the entries `index` (1-D, i64) along `dim`. Every index lies in `0..size` of that dim;
    /// as in PyTorch, a negative index is an error (it does not count from the end). On a GPU the
    /// kernel checks the range, and in a dry run (fake tensors) the values are not known.
    #[track_caller]
    pub fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        let location = Location::caller();
        let op = "index_select";
        let operands = [("input", self), ("index", index)];
        check::same_device(op, &operands, location)?;
        check::dtype_is(op, "index", index, DType::I64, location)?;
        let d = check::shape_dim(op, self, dim, location)?;
        if index.rank() != 1 {
            return Err(check::shape_error(
                op,
                format!("index must be 1-D, got shape {}", fmt_shape(index.shape())),
                "flatten the index, select, then reshape the result",
                &operands,
                location,
            ));
        }
        let mut shape = self.shape().to_vec();
        shape[d] = index.numel();
        check::valid_shape(op, &shape, self.dtype(), location)?;
        let size = self.shape()[d];
        let indices = read_indices(op, index, d, size, location)?;
        // The index is an input too: a fake index makes a fake result.
        let cpu = |s: &[&CpuStorage]| {
            let indices = indices.as_deref().unwrap_or_default();
            s[0].index_select(self.layout(), d, indices, shape.iter().product())
        };
        let storage = compute(op, location, &[self, index], (&shape, self.dtype()), cpu, |s| {
            s[0].index_select(self.layout(), d, s[1], index.layout())
        })?;
        let out = self.derived(storage, &shape, self.dtype(), op, location);
        Ok(record(out, &[self], |_| GradFn::IndexSelect {
            shape: self.shape().to_vec(),
            dim: d,
            index: index.clone(),
        }))
    }

    /// `out[i][j] = self[i][index[i][j]]` along `dim` (PyTorch's `gather`); every index lies in
    /// `0..size` of `dim` (negative ones are an error, as in PyTorch); `index` is i64 with
    /// this tensor's rank and no dim larger than this tensor's, except along `dim`.
    #[track_caller]
    pub fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        let location = Location::caller();
        let op = "gather";
        let operands = [("input", self), ("index", index)];
        check::same_device(op, &operands, location)?;
        check::dtype_is(op, "index", index, DType::I64, location)?;
        let d = check::shape_dim(op, self, dim, location)?;
        let fits = index.rank() == self.rank()
            && index.shape().iter().zip(self.shape()).enumerate().all(|(i, (a, b))| i == d || a <= b);
        if !fits {
            return Err(check::shape_error(
                op,
                format!(
                    "index shape {} does not fit input {} (dim {d})",
                    fmt_shape(index.shape()),
                    fmt_shape(self.shape())
                ),
                "index needs the input's rank, and no dim larger than the input's except along `dim`",
                &operands,
                location,
            ));
        }
        let size = self.shape()[d];
        let indices = read_indices(op, index, d, size, location)?;
        let out_shape = index.shape().to_vec();
        let cpu = |s: &[&CpuStorage]| {
            let indices = indices.as_deref().unwrap_or_default();
            s[0].gather_dim(self.layout(), d, indices, &out_shape)
        };
        let storage = compute(op, location, &[self, index], (&out_shape, self.dtype()), cpu, |s| {
            s[0].gather(self.layout(), d, s[1], index.layout())
        })?;
        let out = self.derived(storage, &out_shape, self.dtype(), op, location);
        Ok(record(out, &[self], |_| GradFn::Gather {
            shape: self.shape().to_vec(),
            dim: d,
            index: index.clone(),
        }))
    }
}

fn first_of<'a>(op: &'static str, tensors: &[&'a Tensor], location: Loc) -> Result<&'a Tensor> {
    tensors.first().copied().ok_or_else(|| {
        check::invalid(op, "no tensors given".to_string(), "pass at least one tensor", location)
    })
}

/// The index values, each checked against `size` of dim `dim`. `None` for a fake index (no data
/// to check; the dry run needs only shapes).
fn read_indices(
    op: &'static str,
    index: &Tensor,
    dim: usize,
    size: usize,
    location: Loc,
) -> Result<Option<Vec<usize>>> {
    if size == 0 && index.numel() > 0 {
        // Known without reading a value, so also on a GPU and in a dry run (and a GPU kernel
        // over an empty dim would have no in-range index to start its error word at).
        return Err(check::invalid(
            op,
            format!("dim {dim} has size 0, so none of the {} indices is in range", index.numel()),
            "select from a tensor that has elements along this dim, or pass an empty index",
            location,
        ));
    }
    // On a GPU the kernels check the range themselves: reading the index to the host here would
    // be a host round trip in every embedding lookup.
    if index.is_fake() || crate::backend::fake::is_active() || !index.device().is_cpu() {
        return Ok(None);
    }
    let raw: Vec<i64> = index.to_vec()?;
    raw.iter()
        .enumerate()
        .map(|(at, &i)| {
            usize::try_from(i).ok().filter(|&i| i < size).ok_or_else(|| {
                check::invalid(
                    op,
                    format!("index[{at}] = {i} is out of range for dim {dim} of size {size}"),
                    format!(
                        "indices must lie in 0..{size}; unlike Python indexing, `{op}` does not count \
                         negative indices from the end (nor does PyTorch's)"
                    ),
                    location,
                )
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}
