//! Every differentiable op's gradient against central finite differences in f64.
//!
//! Each check projects the op's output onto fixed random weights `w` (so every output element
//! counts, with its own weight), runs `backward` on `sum(out * w)`, and compares each input's
//! gradient with `(f(x + eps) - f(x - eps)) / 2 eps`, element by element.

use devcheck::{DType, Device, Tensor};
use proptest::prelude::*;

use crate::support::gradcheck;
use gradcheck::{check, check_with, randn, uniform, values};

// ---- element-wise binary, with broadcasting on both sides --------------------------------------

#[test]
fn add() {
    check("add", &[randn(&[2, 3, 4]), randn(&[3, 1])], |x| x[0].add(&x[1]));
    check("add (lhs broadcast)", &[randn(&[4]), randn(&[2, 3, 4])], |x| x[0].add(&x[1]));
}

#[test]
fn sub() {
    check("sub", &[randn(&[2, 3]), randn(&[2, 3])], |x| x[0].sub(&x[1]));
    check("sub (broadcast)", &[randn(&[1, 3]), randn(&[2, 1])], |x| x[0].sub(&x[1]));
}

#[test]
fn mul() {
    check("mul", &[randn(&[2, 3, 4]), randn(&[4])], |x| x[0].mul(&x[1]));
    check("mul (same input twice)", &[randn(&[3])], |x| x[0].mul(&x[0]));
}

#[test]
fn div() {
    check("div", &[randn(&[2, 3]), uniform(&[3], 0.5, 2.0)], |x| x[0].div(&x[1]));
    check("div (negative divisor)", &[randn(&[2, 1]), uniform(&[2, 3], -2.0, -0.5)], |x| x[0].div(&x[1]));
}

#[test]
fn pow() {
    check("pow", &[uniform(&[2, 3], 0.5, 2.0), randn(&[2, 3])], |x| x[0].pow(&x[1]));
    check("pow (broadcast exponent)", &[uniform(&[2, 3], 0.5, 2.0), randn(&[1])], |x| x[0].pow(&x[1]));
}

#[test]
fn maximum_and_minimum() {
    check("maximum", &[randn(&[3, 4]), randn(&[4])], |x| x[0].maximum(&x[1]));
    check("minimum", &[randn(&[3, 4]), randn(&[3, 1])], |x| x[0].minimum(&x[1]));
}

#[test]
fn maximum_splits_ties_evenly() {
    let a = Tensor::from_vec(vec![1.0f64, 2.0], [2], &Device::Cpu).unwrap().with_requires_grad().unwrap();
    let b = Tensor::from_vec(vec![1.0f64, 3.0], [2], &Device::Cpu).unwrap().with_requires_grad().unwrap();
    a.maximum(&b).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(values(&a.grad().unwrap()), vec![0.5, 0.0]);
    assert_eq!(values(&b.grad().unwrap()), vec![0.5, 1.0]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random broadcastable shape pairs: each dim of each side is the common size or 1, and
    /// either side may drop leading dims.
    #[test]
    fn binary_ops_broadcast(
        dims in proptest::collection::vec(1usize..4, 1..4),
        mask_a in proptest::collection::vec(any::<bool>(), 4),
        mask_b in proptest::collection::vec(any::<bool>(), 4),
        drop_a in 0usize..2,
        op in 0usize..4,
    ) {
        let a: Vec<usize> = dims.iter().zip(&mask_a).map(|(&d, &one)| if one { 1 } else { d }).collect();
        let b: Vec<usize> = dims.iter().zip(&mask_b).map(|(&d, &one)| if one { 1 } else { d }).collect();
        let a = a[drop_a.min(a.len() - 1)..].to_vec();
        let inputs = [randn(&a), uniform(&b, 0.5, 2.0)];
        let name = format!("binary op {op} on {a:?} and {b:?}");
        check(&name, &inputs, |x| match op {
            0 => x[0].add(&x[1]),
            1 => x[0].sub(&x[1]),
            2 => x[0].mul(&x[1]),
            _ => x[0].div(&x[1]),
        });
    }
}

// ---- with a Rust scalar ----------------------------------------------------------------------

#[test]
fn scalar_ops() {
    let x = || [randn(&[2, 3])];
    check("add_scalar", &x(), |x| x[0].add_scalar(1.5));
    check("sub_scalar", &x(), |x| x[0].sub_scalar(1.5));
    check("rsub_scalar", &x(), |x| x[0].rsub_scalar(1.5));
    check("mul_scalar", &x(), |x| x[0].mul_scalar(-2.5));
    check("div_scalar", &x(), |x| x[0].div_scalar(4.0));
    check("pow_scalar", &[uniform(&[2, 3], 0.5, 2.0)], |x| x[0].pow_scalar(2.5));
    check("pow_scalar (integer power of negatives)", &x(), |x| x[0].pow_scalar(3.0));
    check("maximum_scalar", &x(), |x| x[0].maximum_scalar(0.1));
    check("minimum_scalar", &x(), |x| x[0].minimum_scalar(0.1));
    check("clamp", &[randn(&[4, 5])], |x| x[0].clamp(-0.5, 0.5));
}

#[test]
fn operator_sugar() {
    check("a * b + 2 - a / 3", &[randn(&[3]), randn(&[3])], |x| Ok(&(&x[0] * &x[1]) + 2.0 - &x[0] / 3.0));
    check("-a", &[randn(&[3])], |x| Ok(-&x[0]));
}

// ---- unary ---------------------------------------------------------------------------------

#[test]
fn unary_ops() {
    let any = || [randn(&[3, 4])];
    let positive = || [uniform(&[3, 4], 0.3, 3.0)];
    check("neg", &any(), |x| x[0].neg());
    check("abs", &any(), |x| x[0].abs());
    check("relu", &any(), |x| x[0].relu());
    check("exp", &any(), |x| x[0].exp());
    check("log", &positive(), |x| x[0].log());
    check("sqrt", &positive(), |x| x[0].sqrt());
    check("rsqrt", &positive(), |x| x[0].rsqrt());
    check("tanh", &any(), |x| x[0].tanh());
    check("sigmoid", &any(), |x| x[0].sigmoid());
    check("gelu", &any(), |x| x[0].gelu());
    check("gelu_tanh", &any(), |x| x[0].gelu_tanh());
    check("silu", &any(), |x| x[0].silu());
    check("sin", &any(), |x| x[0].sin());
    check("cos", &any(), |x| x[0].cos());
}

#[test]
fn unary_ops_on_strided_views() {
    check("relu of a transpose", &[randn(&[3, 4])], |x| x[0].t()?.relu());
    check("exp of a narrow", &[randn(&[3, 4])], |x| x[0].narrow(1, 1, 2)?.exp());
}

// ---- matmul ----------------------------------------------------------------------------------

#[test]
fn matmul_matrix_shapes() {
    check("mm", &[randn(&[2, 3]), randn(&[3, 4])], |x| x[0].matmul(&x[1]));
    check("vector @ matrix", &[randn(&[3]), randn(&[3, 4])], |x| x[0].matmul(&x[1]));
    check("matrix @ vector", &[randn(&[2, 3]), randn(&[3])], |x| x[0].matmul(&x[1]));
    check("dot", &[randn(&[3]), randn(&[3])], |x| x[0].matmul(&x[1]));
    check("x @ w.t() (linear)", &[randn(&[5, 3]), randn(&[4, 3])], |x| x[0].matmul(&x[1].t()?));
    check("x.t() @ y", &[randn(&[3, 2]), randn(&[3, 4])], |x| x[0].t()?.matmul(&x[1]));
}

#[test]
fn matmul_batched_and_broadcast() {
    check("bmm", &[randn(&[2, 2, 3]), randn(&[2, 3, 4])], |x| x[0].matmul(&x[1]));
    check("batch @ shared matrix", &[randn(&[2, 3, 3]), randn(&[3, 2])], |x| x[0].matmul(&x[1]));
    check("batch @ shared transposed weight", &[randn(&[2, 3, 3]), randn(&[2, 3])], |x| {
        x[0].matmul(&x[1].t()?)
    });
    check("shared matrix @ batch", &[randn(&[2, 3]), randn(&[2, 3, 2])], |x| x[0].matmul(&x[1]));
    check("broadcast batch dims", &[randn(&[2, 1, 2, 3]), randn(&[3, 3, 2])], |x| x[0].matmul(&x[1]));
    check("batch @ vector", &[randn(&[2, 2, 3]), randn(&[3])], |x| x[0].matmul(&x[1]));
    check("vector @ batch", &[randn(&[3]), randn(&[2, 3, 2])], |x| x[0].matmul(&x[1]));
}

// ---- reductions ------------------------------------------------------------------------------

#[test]
fn sum_and_mean() {
    let x = || [randn(&[2, 3, 4])];
    check("sum dim 1", &x(), |x| x[0].sum(1, false));
    check("sum dims [0, 2] keepdim", &x(), |x| x[0].sum([0, 2], true));
    check("sum dim -1", &x(), |x| x[0].sum(-1, false));
    check("sum_all", &x(), |x| x[0].sum_all());
    check("mean dim 0", &x(), |x| x[0].mean(0, false));
    check("mean dims [1, 2] keepdim", &x(), |x| x[0].mean([1, 2], true));
    check("mean_all", &x(), |x| x[0].mean_all());
    check("sum of a transpose", &x(), |x| x[0].transpose(0, 2)?.sum(0, false));
}

#[test]
fn max_min_var() {
    let x = || [randn(&[3, 4])];
    check("max dim 1", &x(), |x| x[0].max(1, false));
    check("max dim 0 keepdim", &x(), |x| x[0].max(0, true));
    check("min dim 1", &x(), |x| x[0].min(1, false));
    check("max_all", &x(), |x| x[0].max_all());
    check("min_all", &x(), |x| x[0].min_all());
    check("var dim 1", &x(), |x| x[0].var(1, false));
    check("var dims [0, 1] keepdim", &x(), |x| x[0].var([0, 1], true));
    check("population var", &x(), |x| x[0].var_with_correction(0, 0, false));
}

#[test]
fn max_shares_the_gradient_among_ties() {
    let x =
        Tensor::from_vec(vec![3.0f64, 1.0, 3.0], [3], &Device::Cpu).unwrap().with_requires_grad().unwrap();
    x.max_all().unwrap().backward().unwrap();
    assert_eq!(values(&x.grad().unwrap()), vec![0.5, 0.0, 0.5]);
}

// ---- softmax ---------------------------------------------------------------------------------

#[test]
fn softmax_and_log_softmax() {
    let x = || [randn(&[3, 4])];
    check("softmax -1", &x(), |x| x[0].softmax(-1));
    check("softmax 0", &x(), |x| x[0].softmax(0));
    check("log_softmax -1", &x(), |x| x[0].log_softmax(-1));
    check("log_softmax 0", &x(), |x| x[0].log_softmax(0));
    check("softmax of a 3-d middle dim", &[randn(&[2, 3, 2])], |x| x[0].softmax(1));
    check("log_softmax of a transpose", &x(), |x| x[0].t()?.log_softmax(-1));
    check("softmax of a scalar", &[randn(&[])], |x| x[0].softmax(0));
    // Rows longer than the kernels' 16 accumulator lanes, and not a multiple of them.
    check("softmax of long rows", &[randn(&[3, 37])], |x| x[0].softmax(-1));
    check("log_softmax of long rows", &[randn(&[3, 37])], |x| x[0].log_softmax(-1));
}

// ---- selection -------------------------------------------------------------------------------

#[test]
fn where_and_masked_fill() {
    let mask = || randn(&[3, 4]).cmp_scalar(devcheck::tensor::CmpOp::Gt, 0.0).unwrap();
    let m = mask();
    check("where", &[randn(&[3, 4]), randn(&[3, 4])], |x| m.where_cond(&x[0], &x[1]));
    let row = randn(&[1, 4]).cmp_scalar(devcheck::tensor::CmpOp::Gt, 0.0).unwrap();
    check("where (broadcast values)", &[randn(&[4]), randn(&[3, 1])], |x| row.where_cond(&x[0], &x[1]));
    check("masked_fill", &[randn(&[3, 4])], |x| x[0].masked_fill(&m, -3.0));
    check("masked_fill (broadcast mask)", &[randn(&[3, 4])], |x| x[0].masked_fill(&row, 0.0));
}

#[test]
fn triu_and_tril() {
    check("triu", &[randn(&[3, 4])], |x| x[0].triu(0));
    check("triu 1", &[randn(&[2, 3, 3])], |x| x[0].triu(1));
    check("tril -1", &[randn(&[4, 3])], |x| x[0].tril(-1));
}

// ---- views and copies ------------------------------------------------------------------------

#[test]
fn reshape_and_flatten() {
    check("reshape", &[randn(&[2, 3, 4])], |x| x[0].reshape([6, 4]));
    check("reshape of a transpose (copies)", &[randn(&[2, 3])], |x| x[0].t()?.reshape([6]));
    check("flatten_from", &[randn(&[2, 3, 2])], |x| x[0].flatten_from(1));
    check("contiguous", &[randn(&[2, 3])], |x| x[0].t()?.contiguous());
}

#[test]
fn transpose_and_permute() {
    check("transpose", &[randn(&[2, 3, 4])], |x| x[0].transpose(0, 2));
    check("t", &[randn(&[2, 3])], |x| x[0].t());
    check("permute", &[randn(&[2, 3, 4])], |x| x[0].permute([2, 0, 1]));
}

#[test]
fn narrow_squeeze_unsqueeze_expand() {
    check("narrow middle", &[randn(&[3, 5])], |x| x[0].narrow(1, 1, 3));
    check("narrow start", &[randn(&[4, 2])], |x| x[0].narrow(0, 0, 2));
    check("narrow end", &[randn(&[4, 2])], |x| x[0].narrow(0, 2, 2));
    check("narrow of a transposed view", &[randn(&[4, 5, 3])], |x| x[0].transpose(0, 2)?.narrow(1, 1, 3));
    check("narrow of a broadcast", &[randn(&[3, 1])], |x| x[0].expand([3, 4])?.narrow(1, 1, 2));
    check("narrow to nothing", &[randn(&[3, 4])], |x| x[0].narrow(1, 2, 0));
    check("squeeze", &[randn(&[3, 1, 2])], |x| x[0].squeeze(1));
    check("unsqueeze", &[randn(&[3, 2])], |x| x[0].unsqueeze(1));
    check("unsqueeze -1", &[randn(&[3])], |x| x[0].unsqueeze(-1));
    check("expand", &[randn(&[3, 1])], |x| x[0].expand([2, 3, 4]));
}

/// One tensor split with `narrow` into parts that are used again, as attention splits its fused
/// query/key/value projection: the parts' gradients, overlapping or not, add up.
#[test]
fn narrow_parts_used_more_than_once() {
    check("qkv split", &[randn(&[2, 3, 6])], |x| {
        let q = x[0].narrow(2, 0, 2)?;
        let k = x[0].narrow(2, 2, 2)?;
        let v = x[0].narrow(2, 4, 2)?;
        q.mul(&k)?.add(&v.mul(&q)?)?.add(&k)
    });
    check("overlapping narrows", &[randn(&[5, 4])], |x| {
        let a = x[0].narrow(0, 0, 3)?;
        let b = x[0].narrow(0, 1, 3)?;
        let c = x[0].narrow(0, 2, 3)?.narrow(1, 1, 2)?;
        a.mul(&b)?.narrow(1, 0, 2)?.add(&c)
    });
    check("heads of a fused projection", &[randn(&[2, 3, 12])], |x| {
        let heads = |i: usize| x[0].narrow(2, i * 4, 4)?.reshape([2, 3, 2, 2])?.transpose(1, 2);
        let (q, k, v) = (heads(0)?, heads(1)?, heads(2)?);
        q.matmul(&k.transpose(-2, -1)?)?.matmul(&v)
    });
}

#[test]
fn cat_and_stack() {
    check("cat dim 0", &[randn(&[2, 3]), randn(&[1, 3]), randn(&[3, 3])], |x| {
        Tensor::cat(&[&x[0], &x[1], &x[2]], 0)
    });
    check("cat dim 1", &[randn(&[2, 3]), randn(&[2, 1])], |x| Tensor::cat(&[&x[0], &x[1]], 1));
    check("stack", &[randn(&[2, 3]), randn(&[2, 3])], |x| Tensor::stack(&[&x[0], &x[1]], 1));
}

#[test]
fn index_select_and_gather() {
    let idx = Tensor::from_vec(vec![2i64, 0, 2, 1], [4], &Device::Cpu).unwrap();
    check("index_select dim 0 (repeated rows)", &[randn(&[3, 2])], |x| x[0].index_select(0, &idx));
    check("index_select dim 1", &[randn(&[2, 3, 2])], |x| x[0].index_select(1, &idx));
    let g = Tensor::from_vec(vec![0i64, 2, 1, 1, 0, 0], [3, 2], &Device::Cpu).unwrap();
    check("gather dim 1", &[randn(&[3, 3])], |x| x[0].gather(1, &g));
    check("gather dim 0 (smaller index)", &[randn(&[3, 4])], |x| x[0].gather(0, &g));
}

#[test]
fn to_dtype() {
    check_with(
        "f64 -> f32 -> f64",
        &[randn(&[2, 3])],
        |x| x[0].to_dtype(DType::F32)?.mul_scalar(3.0)?.to_dtype(DType::F64),
        1e-3,
        1e-3,
        1e-3,
    );
}

#[test]
fn gradient_of_an_f32_leaf_is_f32() {
    check_with("f32 tanh", &[randn(&[4]).to_dtype(DType::F32).unwrap()], |x| x[0].tanh(), 1e-2, 1e-3, 1e-2);
}

// ---- composite expressions -------------------------------------------------------------------

#[test]
fn a_small_network() {
    check("two-layer perceptron", &[randn(&[4, 3]), randn(&[5, 3]), randn(&[5]), randn(&[2, 5])], |x| {
        let h = x[0].matmul(&x[1].t()?)?.add(&x[2])?.tanh()?;
        h.matmul(&x[3].t()?)?.log_softmax(-1)
    });
}

#[test]
fn layer_norm_by_hand() {
    check("layer norm", &[randn(&[3, 5])], |x| {
        let mean = x[0].mean(-1, true)?;
        let centered = x[0].sub(&mean)?;
        let var = centered.mul(&centered)?.mean(-1, true)?;
        centered.mul(&var.add_scalar(1e-5)?.rsqrt()?)
    });
}

#[test]
fn attention_by_hand() {
    check("causal attention", &[randn(&[2, 3, 4]), randn(&[2, 3, 4]), randn(&[2, 3, 4])], |x| {
        let mask = Tensor::ones([3, 3], (DType::Bool, &Device::Cpu))?.triu(1)?;
        let scores = x[0].matmul(&x[1].transpose(-2, -1)?)?.mul_scalar(0.5)?;
        scores.masked_fill(&mask, f64::NEG_INFINITY)?.softmax(-1)?.matmul(&x[2])
    });
}
