//! 2-D convolution of host data as one matrix product per channel group over the whole batch:
//! the weight `[g, O/g, K]` times the column matrix `[g, K, N·L]` (K = C/g·kh·kw, L = H'·W'),
//! which [`im2col`] writes in that layout. Per-sample products (`[O/g, K] × [K, L]`, N of them)
//! are too small to keep the matrix kernel busy; one product of N·L columns is not. Each gradient
//! is one product per group as well.

use std::borrow::Cow;

use super::window::{channels_first, col2im, im2col, samples_first};
use super::{
    CpuStorage, Float, WindowGeometry, contiguous, matmul, recycle, with_float_storage, with_storage,
};
use crate::shape::Layout;

/// The sizes of one convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConvShape {
    pub(crate) geometry: WindowGeometry,
    pub(crate) groups: usize,
    pub(crate) out_channels: usize,
}

impl ConvShape {
    fn samples(&self) -> usize {
        self.geometry.input[0]
    }

    /// One group's rows of the column matrix: its input channels times the kernel offsets.
    fn depth(&self) -> usize {
        self.geometry.input[1] / self.groups * self.geometry.kernel[0] * self.geometry.kernel[1]
    }

    /// The column matrix's width: every output position of every sample.
    fn width(&self) -> usize {
        self.samples() * self.geometry.out[0] * self.geometry.out[1]
    }

    /// The weight `[O, C/g, kh, kw]` (contiguous from `offset`) as `[g, O/g, K]`, or each group's
    /// block transposed, `[g, K, O/g]`.
    fn weight_view(&self, offset: usize, transposed: bool) -> Layout {
        let (g, rows, k) = (self.groups, self.out_channels / self.groups, self.depth());
        let (shape, strides) =
            if transposed { ([g, k, rows], [rows * k, 1, k]) } else { ([g, rows, k], [rows * k, k, 1]) };
        Layout { shape: shape.to_vec(), strides: strides.to_vec(), offset }
    }

    /// The column matrix `[g, K, N·L]`, or each group's block transposed, `[g, N·L, K]`.
    fn columns_view(&self, transposed: bool) -> Layout {
        let (g, k, width) = (self.groups, self.depth(), self.width());
        if transposed {
            Layout { shape: vec![g, width, k], strides: vec![k * width, 1, width], offset: 0 }
        } else {
            Layout::contiguous(&[g, k, width])
        }
    }

    /// The result's gradient in the product's layout, `[g, O/g, N·L]`.
    fn gradient_view(&self) -> Layout {
        Layout::contiguous(&[self.groups, self.out_channels / self.groups, self.width()])
    }
}

/// `[N, O, H', W']`: the convolution of `x` (`[N, C, H, W]`, any strides) with `weight`
/// (`[O, C/g, kh, kw]`), plus `bias` (`[O]`) where given. All operands hold one floating dtype.
pub(crate) fn conv2d(
    x: &CpuStorage,
    x_layout: &Layout,
    weight: &CpuStorage,
    weight_layout: &Layout,
    bias: Option<(&CpuStorage, &Layout)>,
    conv: &ConvShape,
) -> CpuStorage {
    fn run<T: Float>(
        x: &[T],
        x_layout: &Layout,
        (weight, weight_layout): (&CpuStorage, &Layout),
        bias: Option<(&CpuStorage, &Layout)>,
        conv: &ConvShape,
    ) -> CpuStorage {
        let columns = CpuStorage::from_vec(im2col(x, x_layout, &conv.geometry));
        let (weight, offset) = contiguous_storage(weight, weight_layout);
        let product = matmul(&weight, &conv.weight_view(offset, false), &columns, &conv.columns_view(false));
        release(columns);
        let bias = bias.map(|(b, layout)| contiguous(typed::<T>(b), layout));
        let out = samples_first(typed::<T>(&product), conv.out_channels, conv.samples(), bias.as_deref());
        release(product);
        CpuStorage::from_vec(out)
    }
    with_float_storage!(x, v => run(v, x_layout, (weight, weight_layout), bias, conv),
        _ => unreachable!("the host convolution runs on floating data only"))
}

/// The gradient `g` (`[N, O, H', W']`) of a convolution's result in its product's layout
/// (`[O, N·L]`), and the bias gradient (`[O]`, the sum of each channel).
pub(crate) fn conv2d_output_grad(
    g: &CpuStorage,
    layout: &Layout,
    conv: &ConvShape,
) -> (CpuStorage, CpuStorage) {
    with_float_storage!(g, v => {
        let (by_channel, sums) = channels_first(&contiguous(v, layout), conv.out_channels, conv.samples());
        (CpuStorage::from_vec(by_channel), CpuStorage::from_vec(sums))
    }, _ => unreachable!("gradients are floating"))
}

/// The weight's gradient (`[O, C/g, kh, kw]`) from the input `x` and the result's gradient in the
/// product's layout (`[O, N·L]`, from [`conv2d_output_grad`]).
pub(crate) fn conv2d_weight_grad(
    x: &CpuStorage,
    x_layout: &Layout,
    g: &CpuStorage,
    conv: &ConvShape,
) -> CpuStorage {
    // The column matrix is rebuilt rather than kept from the forward pass: it is kh·kw times the
    // size of the input, and rebuilding it is one pass against a product of K multiply-adds each.
    let columns = with_float_storage!(x, v => CpuStorage::from_vec(im2col(v, x_layout, &conv.geometry)),
        _ => unreachable!("the host convolution runs on floating data only"));
    let grad = matmul(g, &conv.gradient_view(), &columns, &conv.columns_view(true));
    release(columns);
    grad
}

/// The input's gradient (`[N, C, H, W]`, contiguous) from the weight and the result's gradient in
/// the product's layout (`[O, N·L]`).
pub(crate) fn conv2d_input_grad(
    weight: &CpuStorage,
    weight_layout: &Layout,
    g: &CpuStorage,
    conv: &ConvShape,
) -> CpuStorage {
    let (weight, offset) = contiguous_storage(weight, weight_layout);
    let columns = matmul(&weight, &conv.weight_view(offset, true), g, &conv.gradient_view());
    let grad = with_float_storage!(&columns, v => CpuStorage::from_vec(col2im(v, &conv.geometry)),
        _ => unreachable!("gradients are floating"));
    release(columns);
    grad
}

/// The storage of a view whose elements are contiguous from the returned offset: the storage
/// itself when the view already is, else a gathered copy.
fn contiguous_storage<'a>(s: &'a CpuStorage, layout: &Layout) -> (Cow<'a, CpuStorage>, usize) {
    if layout.is_contiguous() { (Cow::Borrowed(s), layout.offset) } else { (Cow::Owned(s.gather(layout)), 0) }
}

/// The typed elements of a storage the caller knows holds `T`.
fn typed<T: Float>(s: &CpuStorage) -> &[T] {
    s.as_slice::<T>().unwrap_or_else(|| unreachable!("the operands of a convolution share one dtype"))
}

/// Hands a temporary's buffer to the reuse pool: every step of a training loop needs the same
/// column matrices and products again.
fn release(s: CpuStorage) {
    with_storage!(s, v => recycle(v))
}
