//! Shapes, strides and broadcasting.

/// `[2, 3]`, `[]` for a scalar.
pub fn fmt_shape(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

/// Number of elements of a shape (1 for a scalar). `None` if it overflows `usize`.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// The most bytes one allocation may take (Rust's limit, `isize::MAX`).
pub const MAX_BYTES: usize = isize::MAX as usize;

/// The bytes a tensor of `shape` with `element_size`-byte elements takes, when the shape is one a
/// tensor can have; `None` when it is not.
///
/// A shape is valid when its elements, *with every dim of 0 counted as 1*, fit in [`MAX_BYTES`]:
/// then its element count, byte size, contiguous strides and every offset into it are
/// addressable, so no size computation on a valid layout overflows. (Counting 0 as 1 keeps an
/// empty `[0, 2^62, 2^62]` out: it holds no elements, but its strides would overflow.) Every
/// op that makes a shape from user input checks it with `check::valid_shape`.
pub fn checked_nbytes(shape: &[usize], element_size: usize) -> Option<usize> {
    let extent = shape.iter().try_fold(element_size, |acc, &d| acc.checked_mul(d.max(1)))?;
    if extent > MAX_BYTES {
        return None;
    }
    checked_numel(shape).map(|n| n * element_size)
}

/// The elements `shape` spans with dims of 0 counted as 1 (what [`checked_nbytes`] bounds), as a
/// float: for messages about shapes too large to count in `usize`.
pub fn approx_extent(shape: &[usize]) -> f64 {
    shape.iter().map(|&d| d.max(1) as f64).product()
}

/// Row-major (C-contiguous) strides of a shape, in elements.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1usize;
    for (stride, &dim) in strides.iter_mut().zip(shape).rev() {
        *stride = acc;
        acc = acc.saturating_mul(dim.max(1));
    }
    strides
}

/// The broadcast shape of two shapes under NumPy/PyTorch rules (align right; a dim of 1 stretches),
/// or `None` when they are incompatible.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() { 1 } else { a[i - (rank - a.len())] };
        let db = if i < rank - b.len() { 1 } else { b[i - (rank - b.len())] };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// A shape with its strides (in elements) and starting offset into storage: a view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub offset: usize,
}

impl Layout {
    /// The row-major layout of `shape` starting at element 0.
    pub fn contiguous(shape: &[usize]) -> Layout {
        Layout { shape: shape.to_vec(), strides: contiguous_strides(shape), offset: 0 }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The element count. Layouts are made from valid shapes (see [`checked_nbytes`]), whose
    /// count fits; should one slip through, the count saturates rather than wrapping to a small
    /// number that a loop would silently run short of.
    pub fn numel(&self) -> usize {
        checked_numel(&self.shape).unwrap_or(usize::MAX)
    }

    /// Elements left after removing `dims`.
    pub fn numel_without(&self, dims: &[usize]) -> usize {
        self.shape
            .iter()
            .enumerate()
            .filter(|(d, _)| !dims.contains(d))
            .try_fold(1usize, |acc, (_, &n)| acc.checked_mul(n))
            .unwrap_or(usize::MAX)
    }

    /// True when elements are laid out row-major without gaps (from `offset`). Dims of size 1 may
    /// have any stride.
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for (&dim, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if dim != 1 && stride != expected {
                return false;
            }
            expected = expected.saturating_mul(dim);
        }
        true
    }

    /// The same data seen with `shape`, where every dim that is 1 in `self` (or missing on the
    /// left) is stretched with stride 0. The caller has checked that `shape` is a broadcast of it.
    pub fn broadcast_to(&self, shape: &[usize]) -> Layout {
        let extra = shape.len() - self.rank();
        let mut strides = vec![0; shape.len()];
        for i in 0..self.rank() {
            strides[i + extra] =
                if self.shape[i] == 1 && shape[i + extra] != 1 { 0 } else { self.strides[i] };
        }
        Layout { shape: shape.to_vec(), strides, offset: self.offset }
    }

    /// Storage offsets of every element, in row-major order of the view.
    pub fn offsets(&self) -> StridedOffsets<'_> {
        StridedOffsets::new(self)
    }
}

/// Iterator over the storage offsets of a strided view in row-major order. The innermost dim is
/// stepped without index bookkeeping; outer dims carry like an odometer.
pub struct StridedOffsets<'a> {
    layout: &'a Layout,
    index: Vec<usize>,
    next: usize,
    remaining: usize,
}

impl<'a> StridedOffsets<'a> {
    fn new(layout: &'a Layout) -> Self {
        StridedOffsets {
            layout,
            index: vec![0; layout.rank()],
            next: layout.offset,
            remaining: layout.numel(),
        }
    }
}

impl Iterator for StridedOffsets<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.next;
        // Advance the odometer.
        let shape = &self.layout.shape;
        let strides = &self.layout.strides;
        for d in (0..shape.len()).rev() {
            self.index[d] += 1;
            if self.index[d] < shape[d] {
                self.next += strides[d];
                return Some(current);
            }
            self.next -= strides[d] * (shape[d] - 1);
            self.index[d] = 0;
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for StridedOffsets<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_shapes(&[2, 1, 3], &[4, 1]), Some(vec![2, 4, 3]));
        assert_eq!(broadcast_shapes(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_shapes(&[2, 3], &[3, 2]), None);
    }

    #[test]
    fn strided_offsets_walk_a_transposed_view() {
        let l = Layout { shape: vec![3, 2], strides: vec![1, 3], offset: 1 };
        assert_eq!(l.offsets().collect::<Vec<_>>(), vec![1, 4, 2, 5, 3, 6]);
        let scalar = Layout::contiguous(&[]);
        assert_eq!(scalar.offsets().collect::<Vec<_>>(), vec![0]);
        let empty = Layout::contiguous(&[2, 0]);
        assert_eq!(empty.offsets().count(), 0);
    }
}
