//! Gradient checks shared by the test files: autograd against central finite differences in f64.
#![allow(dead_code)]

use devcheck::{DType, Device, Result, Tensor};

const EPS: f64 = 1e-6;

pub fn randn(shape: &[usize]) -> Tensor {
    Tensor::randn(shape, (DType::F64, &Device::Cpu)).unwrap()
}

/// Values in [lo, hi): for ops defined on part of the line (log, sqrt, pow).
pub fn uniform(shape: &[usize], lo: f64, hi: f64) -> Tensor {
    Tensor::rand(shape, (DType::F64, &Device::Cpu))
        .unwrap()
        .mul_scalar(hi - lo)
        .unwrap()
        .add_scalar(lo)
        .unwrap()
}

pub fn values(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

/// Checks the gradient of `f` with respect to every input, with tolerances `atol + rtol * |num|`.
pub fn check_with(
    name: &str,
    inputs: &[Tensor],
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    eps: f64,
    atol: f64,
    rtol: f64,
) {
    let leaves: Vec<Tensor> =
        inputs.iter().map(|t| t.detach().contiguous().unwrap().with_requires_grad().unwrap()).collect();
    let out = f(&leaves).unwrap_or_else(|e| panic!("{name}: forward failed: {e:?}"));
    assert!(out.requires_grad(), "{name}: output does not require grad");
    devcheck::manual_seed(7);
    let w = Tensor::randn(out.shape(), (out.dtype(), &Device::Cpu)).unwrap();
    out.mul(&w).unwrap().sum_all().unwrap().backward().unwrap_or_else(|e| panic!("{name}: {e:?}"));

    let project = |xs: &[Tensor]| -> f64 {
        let _guard = devcheck::no_grad();
        let out = f(xs).unwrap();
        out.mul(&w).unwrap().sum_all().unwrap().to_dtype(DType::F64).unwrap().to_scalar::<f64>().unwrap()
    };
    for (i, leaf) in leaves.iter().enumerate() {
        let grad = leaf.grad().unwrap_or_else(|| panic!("{name}: input {i} got no gradient"));
        assert_eq!(grad.shape(), leaf.shape(), "{name}: gradient shape of input {i}");
        assert_eq!(grad.dtype(), leaf.dtype(), "{name}: gradient dtype of input {i}");
        let analytic = grad.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let base = values(&leaf.to_dtype(DType::F64).unwrap());
        for j in 0..base.len() {
            let shifted = |delta: f64| -> f64 {
                let mut v = base.clone();
                v[j] += delta;
                let xi =
                    Tensor::from_vec(v, leaf.shape(), &Device::Cpu).unwrap().to_dtype(leaf.dtype()).unwrap();
                let mut xs: Vec<Tensor> = leaves.iter().map(Tensor::detach).collect();
                xs[i] = xi;
                project(&xs)
            };
            let numeric = (shifted(eps) - shifted(-eps)) / (2.0 * eps);
            let diff = (analytic[j] - numeric).abs();
            assert!(
                diff <= atol + rtol * numeric.abs(),
                "{name}: d/d input{i}[{j}]: autograd {} vs finite differences {numeric} (shape {:?})",
                analytic[j],
                leaf.shape()
            );
        }
    }
}

pub fn check(name: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Tensor>) {
    check_with(name, inputs, f, EPS, 1e-6, 1e-5);
}
