//! Sliding windows (convolution's column matrix, max pooling) as single host passes with fused
//! backward nodes. Each forward returns `None` unless the data is floating and on the host: the
//! caller then composes the same math from `index_select` and `max`, which runs on every device
//! and in dry runs (fake tensors), where only shapes and devices matter.

use std::panic::Location;

use crate::backend::cpu::{self, CpuStorage, WindowGeometry};
use crate::backend::fake;
use crate::error::Result;
use crate::tensor::{Tensor, compute, host_only};

use super::{GradFn, record};

/// Is `x` floating data on the host, outside a dry run?
fn on_host(x: &Tensor) -> bool {
    x.device().is_cpu() && x.dtype().is_float() && !fake::is_active() && !x.is_fake()
}

/// `[N, C, kh*kw*H'*W']`: for every kernel offset (row-major), the value of `x` (`[N, C, H, W]`)
/// under it at each output position, `pad` in the padding.
#[track_caller]
pub(crate) fn im2col(x: &Tensor, geometry: &WindowGeometry, pad: f64) -> Option<Result<Tensor>> {
    if !on_host(x) {
        return None;
    }
    let location = Location::caller();
    let [n, c, _, _] = geometry.input;
    let shape = [n, c, geometry.kernel[0] * geometry.kernel[1] * geometry.out[0] * geometry.out[1]];
    let storage = compute(
        "im2col",
        location,
        &[x],
        (&shape, x.dtype()),
        |s| {
            cpu::with_float_storage!(s[0], v => {
                CpuStorage::from_vec(cpu::im2col(v, x.layout(), geometry, pad))
            }, _ => unreachable!("im2col runs on floating data only"))
        },
        host_only("im2col"),
    );
    Some(storage.map(|storage| {
        let out = x.derived(storage, &shape, x.dtype(), "im2col", location);
        record(out, &[x], |_| GradFn::Im2col { geometry: *geometry })
    }))
}

/// The gradient of [`im2col`]: each column entry of `g` added back where it was read.
pub(crate) fn col2im(g: &Tensor, geometry: &WindowGeometry) -> Result<Tensor> {
    let location = Location::caller();
    let shape = geometry.input;
    let storage = compute(
        "col2im",
        location,
        &[g],
        (&shape, g.dtype()),
        |s| {
            cpu::with_float_storage!(s[0], v => {
                let g = cpu::contiguous(v, g.layout());
                CpuStorage::from_vec(cpu::col2im(&g, geometry))
            }, _ => unreachable!("gradients are floating"))
        },
        host_only("col2im"),
    )?;
    Ok(g.derived(storage, &shape, g.dtype(), "col2im", location))
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
        |s| {
            cpu::with_float_storage!(s[0], v => {
                CpuStorage::from_vec(cpu::max_pool(v, x.layout(), geometry))
            }, _ => unreachable!("max_pool2d runs on floating data only"))
        },
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
        |s| {
            macro_rules! arm {
                ($x:expr, $y:expr, $g:expr) => {{
                    let (y, g) = (cpu::contiguous($y, y.layout()), cpu::contiguous($g, g.layout()));
                    CpuStorage::from_vec(cpu::max_pool_backward($x, x.layout(), &y, &g, geometry))
                }};
            }
            match (s[0], s[1], s[2]) {
                (CpuStorage::F32(x), CpuStorage::F32(y), CpuStorage::F32(g)) => arm!(x, y, g),
                (CpuStorage::F64(x), CpuStorage::F64(y), CpuStorage::F64(g)) => arm!(x, y, g),
                (CpuStorage::F16(x), CpuStorage::F16(y), CpuStorage::F16(g)) => arm!(x, y, g),
                (CpuStorage::BF16(x), CpuStorage::BF16(y), CpuStorage::BF16(g)) => arm!(x, y, g),
                _ => unreachable!("max_pool2d's gradient is recorded for floating tensors of one dtype only"),
            }
        },
        host_only("max_pool2d_backward"),
    )?;
    Ok(g.derived(storage, &shape, g.dtype(), "max_pool2d_backward", location))
}
