//! Copies between strided views: `contiguous`, `cat`, `index_select`, `gather`, and the gradient
//! of `narrow`.
//!
//! A copy walks the dims both views share, merged where both step through them as one run. The
//! innermost run is copied whole when both views lay it out without gaps (a row of a narrowed or
//! concatenated tensor); a transposed view, read with stride 1 along a dim that is not innermost in
//! the result, is copied in small square tiles so reads and writes both stay within a few cache
//! lines; anything else (a stride-0 broadcast, a strided view) steps through the innermost dim
//! with its two strides.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::{CpuStorage, PARALLEL_THRESHOLD, dispatch_dtype, filled, with_storage};
use crate::dtype::{DType, WithDType};
use crate::shape::{Layout, contiguous_strides};

/// The elements of the view `layout` of `data`, in row-major order, as a new vector; large
/// copies are split across threads.
pub(crate) fn gather<T: Copy + Send + Sync>(data: &[T], layout: &Layout) -> Vec<T> {
    let axes = axes(layout, &Layout::contiguous(&layout.shape));
    // SAFETY: `copy_into_contiguous` writes every element of the result (its views have one shape
    // and the result is that shape, row-major).
    unsafe { filled(layout.numel(), |out| copy_into_contiguous(data, layout.offset, out, &axes)) }
}

/// [`gather`] on the calling thread, for element types that may not cross threads.
pub(crate) fn gather_here<T: Copy>(data: &[T], layout: &Layout) -> Vec<T> {
    let axes = axes(layout, &Layout::contiguous(&layout.shape));
    // SAFETY: as in `gather`: `copy_axes` writes every element of the row-major result.
    unsafe { filled(layout.numel(), |out| copy_axes(data, layout.offset, out, 0, &axes)) }
}

/// Every `pieces[i]` (data and view) written into its slot `slots[i]` of a new row-major vector of
/// `len` elements; the slots must cover it (`cat`'s pieces do).
pub(crate) fn assemble<T: Copy>(len: usize, pieces: &[(&[T], &Layout)], slots: &[Layout]) -> Vec<T> {
    // SAFETY: the caller's slots cover all `len` elements, and `copy_axes` writes every element of
    // each slot.
    unsafe {
        filled(len, |out| {
            for ((src, layout), slot) in pieces.iter().zip(slots) {
                copy_axes(src, layout.offset, out, slot.offset, &axes(layout, slot));
            }
        })
    }
}

/// One dim of a copy: its size and its strides in the source and in the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Axis {
    size: usize,
    src: usize,
    dst: usize,
}

/// The dims of a copy between two views of one shape, innermost first: size-1 dims dropped, and
/// each dim merged into the one inside it where both views step through the pair as one run. A
/// view without elements has no dims here; callers check the count first.
fn axes(src: &Layout, dst: &Layout) -> Vec<Axis> {
    let mut axes: Vec<Axis> = Vec::with_capacity(src.rank());
    for d in (0..src.rank()).rev() {
        let axis = Axis { size: src.shape[d], src: src.strides[d], dst: dst.strides[d] };
        if axis.size == 1 {
            continue;
        }
        match axes.last_mut() {
            Some(inner) if inner.size * inner.src == axis.src && inner.size * inner.dst == axis.dst => {
                inner.size *= axis.size;
            }
            _ => axes.push(axis),
        }
    }
    axes
}

/// [`copy_axes`] into a contiguous `out` (destination strides row-major from 0), split across
/// threads when large: a range of the outermost dim is a contiguous block of `out`.
fn copy_into_contiguous<T: Copy + Send + Sync>(
    src: &[T],
    offset: usize,
    out: &mut [MaybeUninit<T>],
    axes: &[Axis],
) {
    let threads = rayon::current_num_threads();
    let Some((outer, inner)) = axes.split_last() else {
        return copy_axes(src, offset, out, 0, axes);
    };
    if out.len() < PARALLEL_THRESHOLD || threads < 2 || outer.size < 2 {
        return copy_axes(src, offset, out, 0, axes);
    }
    let per = outer.size.div_ceil(threads * 4);
    out.par_chunks_mut(per * outer.dst).enumerate().for_each(|(i, chunk)| {
        let first = i * per;
        let part = Axis { size: chunk.len() / outer.dst, ..*outer };
        let mut axes = inner.to_vec();
        axes.push(part);
        copy_axes(src, offset + first * outer.src, chunk, 0, &axes);
    });
}

/// Elements per side of a transposing tile: a 64-byte cache line of the element type.
fn tile<T>() -> usize {
    (64 / std::mem::size_of::<T>().max(1)).clamp(8, 64)
}

/// Copies the elements that `axes` (innermost first) reach from `src_offset` in `src` to the
/// places they reach from `dst_offset` in `out`. An empty view keeps its size-0 dim and copies
/// nothing, so no axes means exactly one element (a scalar, or a view whose dims are all 1).
fn copy_axes<T: Copy>(
    src: &[T],
    src_offset: usize,
    out: &mut [MaybeUninit<T>],
    dst_offset: usize,
    axes: &[Axis],
) {
    if axes.iter().any(|a| a.size == 0) {
        return;
    }
    let Some((&first, outer)) = axes.split_first() else {
        out[dst_offset].write(src[src_offset]);
        return;
    };
    let n = first.size;
    if first.src == 1 && first.dst == 1 {
        return for_each_offset(outer, src_offset, dst_offset, &mut |s, d| {
            out[d..d + n].write_copy_of_slice(&src[s..s + n]);
        });
    }
    if first.dst == 1
        && let Some(k) = outer.iter().position(|a| a.src == 1)
    {
        let across = outer[k];
        let rest: Vec<Axis> = outer.iter().enumerate().filter(|&(i, _)| i != k).map(|(_, a)| *a).collect();
        let t = tile::<T>();
        return for_each_offset(&rest, src_offset, dst_offset, &mut |s, d| {
            for j0 in (0..across.size).step_by(t) {
                let j1 = (j0 + t).min(across.size);
                for i0 in (0..n).step_by(t) {
                    let i1 = (i0 + t).min(n);
                    for j in j0..j1 {
                        let (s, d) = (s + j, d + j * across.dst);
                        for (i, o) in out[d + i0..d + i1].iter_mut().enumerate() {
                            o.write(src[s + (i0 + i) * first.src]);
                        }
                    }
                }
            }
        });
    }
    for_each_offset(outer, src_offset, dst_offset, &mut |s, d| match (first.src, first.dst) {
        (0, 1) => {
            out[d..d + n].fill(MaybeUninit::new(src[s]));
        }
        (step, 1) => {
            for (i, o) in out[d..d + n].iter_mut().enumerate() {
                o.write(src[s + i * step]);
            }
        }
        (step, dst) => {
            for i in 0..n {
                out[d + i * dst].write(src[s + i * step]);
            }
        }
    });
}

/// Calls `f(source offset, destination offset)` for every index of `axes` (innermost first),
/// outermost dim slowest.
fn for_each_offset(axes: &[Axis], src: usize, dst: usize, f: &mut impl FnMut(usize, usize)) {
    match axes.split_last() {
        None => f(src, dst),
        Some((outer, rest)) => {
            for i in 0..outer.size {
                for_each_offset(rest, src + i * outer.src, dst + i * outer.dst, f);
            }
        }
    }
}

/// A new row-major vector of `shape` holding the view `layout` of `src` at `start` along `dim`
/// (where `narrow(dim, start, ..)` would take it from) and `zero` everywhere else: the gradient of
/// `narrow`, each element written once.
pub(crate) fn embed<T: Copy>(
    src: &[T],
    layout: &Layout,
    shape: &[usize],
    dim: usize,
    start: usize,
    zero: T,
) -> Vec<T> {
    let outer: usize = shape[..dim].iter().product();
    let row: usize = shape[dim..].iter().product();
    let inner: usize = shape[dim + 1..].iter().product();
    let slot =
        Layout { shape: layout.shape.clone(), strides: contiguous_strides(shape), offset: start * inner };
    let (before, taken) = (start * inner, layout.shape[dim] * inner);
    // SAFETY: each row of `dim` and the dims inside it gets its zeros before and after the slot,
    // and `copy_axes` writes every element of the slot.
    unsafe {
        filled(outer * row, |out| {
            for r in out.chunks_exact_mut(row.max(1)) {
                r[..before].fill(MaybeUninit::new(zero));
                r[before + taken..].fill(MaybeUninit::new(zero));
            }
            copy_axes(src, layout.offset, out, slot.offset, &axes(layout, &slot));
        })
    }
}

impl CpuStorage {
    /// `len` elements made of `pieces` (views of one dtype `dtype`), each written to its `slot`
    /// of the result (`cat`).
    pub(crate) fn cat(
        len: usize,
        pieces: &[(&CpuStorage, &Layout)],
        slots: &[Layout],
        dtype: DType,
    ) -> CpuStorage {
        fn join<T: WithDType>(len: usize, pieces: &[(&CpuStorage, &Layout)], slots: &[Layout]) -> CpuStorage {
            let pieces: Vec<(&[T], &Layout)> = pieces
                .iter()
                .map(|(src, l)| (src.as_slice().unwrap_or_else(|| unreachable!("same_dtype checked")), *l))
                .collect();
            CpuStorage::from_vec(assemble(len, &pieces, slots))
        }
        dispatch_dtype!(dtype, T => join::<T>(len, pieces, slots))
    }

    /// The entries `indices` along dim `d` of the view, in order (`index_select`); `len` elements.
    pub(crate) fn index_select(&self, l: &Layout, d: usize, indices: &[usize], len: usize) -> CpuStorage {
        with_storage!(self, v => {
            let mut out = Vec::with_capacity(len);
            let inner = Layout { shape: l.shape[d + 1..].to_vec(), strides: l.strides[d + 1..].to_vec(), offset: 0 };
            let outer_layout = Layout { shape: l.shape[..d].to_vec(), strides: l.strides[..d].to_vec(), offset: l.offset };
            for base in outer_layout.offsets() {
                for &i in indices {
                    let start = base + i * l.strides[d];
                    out.extend(inner.offsets().map(|o| v[start + o]));
                }
            }
            CpuStorage::from_vec(out)
        })
    }

    /// `out[pos] = self[pos with its dim `d` coordinate replaced by indices[pos]]` over
    /// `out_shape`, the indices in row-major order (`gather`).
    pub(crate) fn gather_dim(
        &self,
        l: &Layout,
        d: usize,
        indices: &[usize],
        out_shape: &[usize],
    ) -> CpuStorage {
        let out_layout = Layout::contiguous(out_shape);
        with_storage!(self, v => {
            let mut pos = vec![0usize; out_shape.len()];
            let mut out = Vec::with_capacity(out_layout.numel());
            for &i in indices {
                let mut o = l.offset;
                for (k, &p) in pos.iter().enumerate() {
                    o += if k == d { i } else { p } * l.strides[k];
                }
                out.push(v[o]);
                for k in (0..pos.len()).rev() {
                    pos[k] += 1;
                    if pos[k] < out_shape[k] { break; }
                    pos[k] = 0;
                }
            }
            CpuStorage::from_vec(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use half::{bf16, f16};
    use proptest::prelude::*;

    use super::{assemble, embed, gather, gather_here};
    use crate::dtype::WithDType;
    use crate::shape::{Layout, contiguous_strides};

    /// A view into a buffer: a shape, and how it sits in a larger base array. Each dim has its
    /// size in the base (`extent`, at least the view's), where the view starts along it, whether
    /// it is broadcast (stride 0), and the base's dims come in `order` (a permutation: transposed
    /// views), each stride times `step` (gaps between elements).
    #[derive(Clone, Debug)]
    struct View {
        shape: Vec<usize>,
        extra: Vec<usize>,
        start: Vec<usize>,
        broadcast: Vec<bool>,
        order: Vec<usize>,
        step: usize,
    }

    impl View {
        /// The view's layout and the length of the buffer it needs.
        fn layout(&self) -> (Layout, usize) {
            let extents: Vec<usize> = self.shape.iter().zip(&self.extra).map(|(s, e)| s + e).collect();
            let ordered: Vec<usize> = self.order.iter().map(|&d| extents[d]).collect();
            let base = contiguous_strides(&ordered);
            let mut strides = vec![0; self.shape.len()];
            for (i, &d) in self.order.iter().enumerate() {
                strides[d] = base[i] * self.step;
            }
            for (s, &b) in strides.iter_mut().zip(&self.broadcast) {
                if b {
                    *s = 0;
                }
            }
            let offset = self.start.iter().zip(&strides).map(|(a, s)| a * s).sum::<usize>() + 1;
            let len = extents.iter().product::<usize>() * self.step + offset + 1;
            (Layout { shape: self.shape.clone(), strides, offset }, len)
        }
    }

    fn view_of(shape: Vec<usize>) -> impl Strategy<Value = View> {
        let rank = shape.len();
        (
            prop::collection::vec(0usize..3, rank),
            prop::collection::vec(any::<prop::sample::Index>(), rank),
            prop::collection::vec(prop::bool::weighted(0.15), rank),
            Just((0..rank).collect::<Vec<_>>()).prop_shuffle(),
            1usize..3,
        )
            .prop_map(move |(extra, start, broadcast, order, step)| {
                let start = start.iter().zip(&extra).map(|(i, &e)| i.index(e + 1)).collect();
                View { shape: shape.clone(), extra, start, broadcast, order, step }
            })
    }

    fn view() -> impl Strategy<Value = View> {
        prop::collection::vec(prop_oneof![4 => 1usize..6, 1 => Just(0usize), 1 => 8usize..20], 0..5)
            .prop_flat_map(view_of)
    }

    /// A buffer whose elements tell their places apart (as far as the type can).
    fn buffer<T: WithDType>(len: usize) -> Vec<T> {
        (0..len).map(|i| T::from_f64(((i * 7) % 97 + 1) as f64)).collect()
    }

    /// The view's elements in row-major order, one at a time.
    fn reference<T: Copy>(data: &[T], layout: &Layout) -> Vec<T> {
        layout.offsets().map(|o| data[o]).collect()
    }

    fn check_gather<T: WithDType>(view: &View) {
        let (layout, len) = view.layout();
        let data = buffer::<T>(len);
        let want = reference(&data, &layout);
        assert_eq!(gather(&data, &layout), want, "{} {view:?}", T::DTYPE);
        assert_eq!(gather_here(&data, &layout), want, "{} {view:?} on one thread", T::DTYPE);
    }

    /// `cat` along `dim`: every piece in its slot of the result.
    fn check_assemble<T: WithDType>(pieces: &[View], dim: usize) {
        let mut shape = pieces[0].shape.clone();
        shape[dim] = pieces.iter().map(|p| p.shape[dim]).sum();
        let strides = contiguous_strides(&shape);
        let mut start = 0;
        let mut slots = Vec::new();
        let mut want = vec![T::default(); shape.iter().product()];
        let buffers: Vec<(Vec<T>, Layout)> = pieces
            .iter()
            .map(|p| {
                let (layout, len) = p.layout();
                (buffer::<T>(len), layout)
            })
            .collect();
        for (data, layout) in &buffers {
            let slot = Layout {
                shape: layout.shape.clone(),
                strides: strides.clone(),
                offset: start * strides[dim],
            };
            for (s, d) in layout.offsets().zip(slot.offsets()) {
                want[d] = data[s];
            }
            start += layout.shape[dim];
            slots.push(slot);
        }
        let refs: Vec<(&[T], &Layout)> = buffers.iter().map(|(d, l)| (d.as_slice(), l)).collect();
        assert_eq!(assemble(want.len(), &refs, &slots), want, "{} {pieces:?}", T::DTYPE);
    }

    /// The gradient of `narrow`: zeros with the view at `before` along `dim`.
    fn check_embed<T: WithDType>(view: &View, dim: usize, before: usize, after: usize) {
        let (layout, len) = view.layout();
        let data = buffer::<T>(len);
        let mut shape = view.shape.clone();
        shape[dim] += before + after;
        let strides = contiguous_strides(&shape);
        let slot = Layout {
            shape: view.shape.clone(),
            strides,
            offset: before * shape[dim + 1..].iter().product::<usize>(),
        };
        let zero = T::from_f64(0.0);
        let mut want = vec![zero; shape.iter().product()];
        for (s, d) in layout.offsets().zip(slot.offsets()) {
            want[d] = data[s];
        }
        assert_eq!(embed(&data, &layout, &shape, dim, before, zero), want, "{} {view:?}", T::DTYPE);
    }

    macro_rules! every_dtype {
        ($check:ident($($arg:expr),*)) => {{
            $check::<f32>($($arg),*);
            $check::<f64>($($arg),*);
            $check::<f16>($($arg),*);
            $check::<bf16>($($arg),*);
            $check::<i64>($($arg),*);
            $check::<i32>($($arg),*);
            $check::<u8>($($arg),*);
            $check::<bool>($($arg),*);
        }};
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Transposed, narrowed, strided and broadcast views, of every dtype, gather to the
        /// elements a one-at-a-time walk reads.
        #[test]
        fn gather_matches_an_element_walk(view in view()) {
            every_dtype!(check_gather(&view));
        }

        /// Pieces of any layout, joined along any dim, each land in their slot.
        #[test]
        fn assemble_matches_an_element_walk(
            (pieces, dim) in prop::collection::vec(1usize..5, 1..4).prop_flat_map(|shape| {
                let rank = shape.len();
                (0..rank).prop_flat_map(move |dim| {
                    let shape = shape.clone();
                    let piece = prop::collection::vec(0usize..4, 1).prop_flat_map(move |n| {
                        let mut s = shape.clone();
                        s[dim] = n[0];
                        view_of(s)
                    });
                    (prop::collection::vec(piece, 1..4), Just(dim))
                })
            })
        ) {
            every_dtype!(check_assemble(&pieces, dim));
        }

        /// Any view placed anywhere along any dim of zeros.
        #[test]
        fn embed_matches_an_element_walk(
            (view, dim) in prop::collection::vec(0usize..5, 1..5).prop_flat_map(|shape| {
                let rank = shape.len();
                (view_of(shape), 0..rank)
            }),
            before in 0usize..3,
            after in 0usize..3,
        ) {
            every_dtype!(check_embed(&view, dim, before, after));
        }
    }

    /// Copies large enough to split across threads agree with the walk on every split.
    #[test]
    fn threaded_gathers_match_an_element_walk() {
        let views = [
            // A transposed matrix, a permuted 4-d attention tensor, a narrowed row block, a
            // broadcast column, and a long strided vector.
            View {
                shape: vec![300, 200],
                extra: vec![0, 0],
                start: vec![0, 0],
                broadcast: vec![false; 2],
                order: vec![1, 0],
                step: 1,
            },
            View {
                shape: vec![4, 64, 5, 32],
                extra: vec![0; 4],
                start: vec![0; 4],
                broadcast: vec![false; 4],
                order: vec![0, 2, 1, 3],
                step: 1,
            },
            View {
                shape: vec![70, 600],
                extra: vec![0, 1200],
                start: vec![0, 600],
                broadcast: vec![false; 2],
                order: vec![0, 1],
                step: 1,
            },
            View {
                shape: vec![500, 130],
                extra: vec![0, 0],
                start: vec![0, 0],
                broadcast: vec![false, true],
                order: vec![0, 1],
                step: 1,
            },
            View {
                shape: vec![70_000],
                extra: vec![3],
                start: vec![2],
                broadcast: vec![false],
                order: vec![0],
                step: 2,
            },
        ];
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().expect("a thread pool");
        pool.install(|| {
            for view in &views {
                every_dtype!(check_gather(view));
            }
        });
    }
}
