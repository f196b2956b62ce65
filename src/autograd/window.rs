//! Sliding windows (convolution, max pooling) as host kernels with fused backward nodes. Each forward returns `None` unless the data is floating and on the host: the
//! caller then composes the same math from `index_select` and `max`, which runs on every device
//! and in dry runs (fake tensors), where only shapes and devices matter.

use std::panic::Location;

use crate::backend::fake;
use crate::backend::{self, ConvShape, CpuStorage, WindowGeometry};
use crate::error::Result;
use crate::shape::Layout;
use crate::tensor::{Storage, Tensor, compute, host_only};

use super::{GradFn, record};

/// Is `x` floating data on the host, outside a dry run?
fn on_host(x: &Tensor) -> bool {
    x.device().is_cpu() && x.dtype().is_float() && !fake::is_active() && !x.is_fake()
}

/// What a host convolution keeps for its backward pass: the column matrix is rebuilt from the
/// input there rather than kept (it is kh·kw times the input's size).
pub(crate) struct Conv2dSaved {
    input: Tensor,
    weight: Tensor,
    has_bias: bool,
    shape: ConvShape,
}

/// `[N, O, H', W']`: the convolution of `x` (`[N, C, H, W]`) with `weight` (`[O, C/groups, kh,
/// kw]`) plus `bias` (`[O]`), as one matrix product per channel group over the whole batch, with
/// one backward node. `None` unless every operand is floating host data of one dtype, none of them
/// empty, and `bias` is `[O]`: the caller then composes the same math from tensor ops, which also
/// report any operand that does not fit.
#[track_caller]
pub(crate) fn conv2d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    geometry: &WindowGeometry,
    groups: usize,
) -> Option<Result<Tensor>> {
    let out_channels = weight.shape()[0];
    let mut operands = vec![x, weight];
    operands.extend(bias);
    let fits = operands.iter().all(|t| on_host(t) && t.dtype() == x.dtype() && t.numel() > 0)
        && bias.is_none_or(|b| b.shape() == [out_channels]);
    if !fits {
        return None;
    }
    let location = Location::caller();
    let shape = ConvShape { geometry: *geometry, groups, out_channels };
    let [n, _, _, _] = geometry.input;
    let out_shape = [n, out_channels, geometry.out[0], geometry.out[1]];
    let storage = compute(
        "conv2d",
        location,
        &operands,
        (&out_shape, x.dtype()),
        |s| {
            let bias = bias.map(|b| (s[2], b.layout()));
            backend::conv2d(s[0], x.layout(), s[1], weight.layout(), bias, &shape)
        },
        host_only("conv2d"),
    );
    Some(storage.map(|storage| {
        let out = x.derived(storage, &out_shape, x.dtype(), "conv2d", location);
        record(out, &operands, |_| {
            GradFn::Conv2d(Conv2dSaved {
                input: x.clone(),
                weight: weight.clone(),
                has_bias: bias.is_some(),
                shape,
            })
        })
    }))
}

/// The gradients of a host convolution, in the order of its edges (input, weight, bias where
/// given), each computed only where `want` asks for it.
pub(crate) fn conv2d_backward(
    saved: &Conv2dSaved,
    g: &Tensor,
    want: impl Fn(usize) -> bool,
) -> Result<Vec<Option<Tensor>>> {
    let Conv2dSaved { input: x, weight, has_bias, shape } = saved;
    let location = Location::caller();
    let [n, _, _, _] = shape.geometry.input;
    let by_channel_shape = [shape.out_channels, n * shape.geometry.out[0] * shape.geometry.out[1]];
    let mut sums = None;
    let by_channel = compute(
        "conv2d_backward",
        location,
        &[g],
        (&by_channel_shape, g.dtype()),
        |s| {
            let (by_channel, bias) = backend::conv2d_output_grad(s[0], g.layout(), shape);
            sums = Some(bias);
            by_channel
        },
        host_only("conv2d_backward"),
    )?;
    let by_channel = g.derived(by_channel, &by_channel_shape, g.dtype(), "conv2d_backward", location);
    let grad = |operand: &Tensor,
                result: &[usize],
                kernel: fn(&CpuStorage, &Layout, &CpuStorage, &ConvShape) -> CpuStorage| {
        let storage = compute(
            "conv2d_backward",
            location,
            &[operand, &by_channel],
            (result, g.dtype()),
            |s| kernel(s[0], operand.layout(), s[1], shape),
            host_only("conv2d_backward"),
        )?;
        Ok::<_, crate::error::Error>(g.derived(storage, result, g.dtype(), "conv2d_backward", location))
    };
    let mut grads = vec![
        if want(0) { Some(grad(weight, x.shape(), backend::conv2d_input_grad)?) } else { None },
        if want(1) { Some(grad(x, weight.shape(), backend::conv2d_weight_grad)?) } else { None },
    ];
    if *has_bias {
        grads.push(want(2).then(|| {
            // Without the CPU kernel having run (a fake scope around `backward`), it is fake too.
            let storage = sums.map_or(Storage::Fake, Storage::Cpu);
            g.derived(storage, &[shape.out_channels], g.dtype(), "conv2d_backward", location)
        }));
    }
    Ok(grads)
}

/// `[N, C, H', W']`: the maximum of each window of `x` (`[N, C, H, W]`), padding counting as -inf.
#[track_caller]
pub(crate) fn max_pool2d(x: &Tensor, geometry: &WindowGeometry) -> Option<Result<Tensor>> {
    if !on_host(x) {
        return None;
    }
    let location = Location::caller();
    let [n, c, _, _] = geometry.input;
    let shape = [n, c, geometry.out[0], geometry.out[1]];
    let storage = compute(
        "max_pool2d",
        location,
        &[x],
        (&shape, x.dtype()),
        |s| s[0].max_pool(x.layout(), geometry),
        host_only("max_pool2d"),
    );
    Some(storage.map(|storage| {
        let out = x.derived(storage, &shape, x.dtype(), "max_pool2d", location);
        record(out, &[x], |out| GradFn::MaxPool2d {
            input: x.clone(),
            out: out.detach(),
            geometry: *geometry,
        })
    }))
}

/// The gradient of [`max_pool2d`]: each window's gradient shared evenly among the elements equal
/// to its maximum, as `max` over a dim does.
pub(crate) fn max_pool2d_backward(
    x: &Tensor,
    y: &Tensor,
    g: &Tensor,
    geometry: &WindowGeometry,
) -> Result<Tensor> {
    let location = Location::caller();
    let shape = geometry.input;
    let storage = compute(
        "max_pool2d_backward",
        location,
        &[x, y, g],
        (&shape, g.dtype()),
        |s| s[0].max_pool_backward(x.layout(), (s[1], y.layout()), (s[2], g.layout()), geometry),
        host_only("max_pool2d_backward"),
    )?;
    Ok(g.derived(storage, &shape, g.dtype(), "max_pool2d_backward", location))
}
