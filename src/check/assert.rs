//! Assertions for test suites: on failure they panic with the rendered report (colour only when
//! stderr is a terminal), naming each tensor, its path and the line to fix.

use crate::device::Device;
use crate::error::Result;
use crate::module::Module;
use crate::tensor::Tensor;

use super::forward::{Input, check_forward};
use super::inventory::inspect;
use super::report::render_for_panic;

/// Panics unless every parameter, buffer and skipped tensor field of `model` is on `device`.
/// `model` is borrowed, not moved (for a `&Model`, write `assert_on_device!(*model, device)`).
///
/// ```should_panic
/// use devcheck::{Device, Module, Param, Tensor};
///
/// #[derive(Module)]
/// struct Net { weight: Param }
///
/// let net = Net { weight: Param::new(Tensor::zeros([2], &Device::Cpu).unwrap()) };
/// devcheck::assert_on_device!(net, Device::Cuda(0)); // panics: `weight` is on cpu
/// ```
#[macro_export]
macro_rules! assert_on_device {
    ($model:expr, $device:expr $(,)?) => {
        $crate::check::assert::on_device(&$model, &$device)
    };
}

/// Dry-runs forward on a fake `device` (see [`crate::check_forward`]) and panics with the report
/// unless it is clean. `model` is borrowed mutably for the run (its tensors are swapped for fakes
/// and put back afterwards), so it must be a mutable place: `let mut model = ..`.
///
/// * `assert_forward_clean!(model, input, device)` calls `model.forward(&x)` with one fake input
///   (`input` is an [`Input`](crate::check::Input) or an example `&Tensor`);
/// * `assert_forward_clean!(model, inputs, device, |model, x| ...)` runs any closure over the fake
///   inputs (`inputs`: an array or `Vec` of [`Input`](crate::check::Input)s).
///
/// ```
/// use devcheck::check::Input;
/// use devcheck::{DType, Device, Module, Param, Tensor};
///
/// #[derive(Module)]
/// struct Scale { weight: Param }
///
/// impl Scale {
///     fn forward(&self, x: &Tensor) -> devcheck::Result<Tensor> {
///         x.mul(&self.weight.tensor())
///     }
/// }
///
/// let mut model = Scale { weight: Param::new(Tensor::ones([4], &Device::Cpu).unwrap()) };
/// devcheck::assert_forward_clean!(model, Input::new("x", [2, 4], DType::F32), Device::Cuda(0));
/// ```
#[macro_export]
macro_rules! assert_forward_clean {
    ($model:expr, $input:expr, $device:expr $(,)?) => {
        $crate::check::assert::forward_clean(
            &mut $model,
            [$crate::check::Input::from($input)],
            &$device,
            |model, inputs| model.forward(&inputs[0]),
        )
    };
    ($model:expr, $inputs:expr, $device:expr, $forward:expr $(,)?) => {
        $crate::check::assert::forward_clean(&mut $model, $inputs, &$device, $forward)
    };
}

/// What `assert_on_device!` calls.
#[track_caller]
pub fn on_device<M: Module + ?Sized>(model: &M, device: &Device) {
    if let Err(report) = inspect(model).expect_device(device) {
        panic!("{}", render_for_panic(&report));
    }
}

/// What `assert_forward_clean!` calls.
#[track_caller]
pub fn forward_clean<M, R>(
    model: &mut M,
    inputs: impl AsRef<[Input]>,
    device: &Device,
    forward: impl FnOnce(&mut M, &[Tensor]) -> Result<R>,
) where
    M: Module + ?Sized,
{
    match check_forward(model, inputs, device, forward) {
        Ok(report) if report.is_clean() => {}
        Ok(report) => panic!("{}", render_for_panic(&report.to_error())),
        Err(error) => panic!("{}", error.render(100)),
    }
}
