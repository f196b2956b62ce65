//! Ops against a naive reference, over random shapes, broadcasting and non-contiguous views.

use crate::support;

use devcheck::{DType, Device, Tensor};
use proptest::prelude::*;
use support::reference::{Nd, assert_close};

const CPU: Device = Device::Cpu;

fn shape_strategy(max_rank: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..5, 0..=max_rank)
}

fn nd_strategy(max_rank: usize) -> impl Strategy<Value = Nd> {
    shape_strategy(max_rank).prop_flat_map(|shape| {
        let n = shape.iter().product::<usize>();
        prop::collection::vec(-8.0f64..8.0, n).prop_map(move |data| Nd::new(&shape, data))
    })
}

/// A shape that broadcasts to `shape`: some dims set to 1, some leading dims dropped.
fn broadcastable_to(shape: Vec<usize>) -> impl Strategy<Value = Vec<usize>> {
    let rank = shape.len();
    (0..=rank, prop::collection::vec(any::<bool>(), rank)).prop_map(move |(drop, ones)| {
        shape.iter().zip(&ones).skip(drop).map(|(&d, &one)| if one { 1 } else { d }).collect()
    })
}

fn permutation(rank: usize) -> impl Strategy<Value = Vec<usize>> {
    Just((0..rank).collect::<Vec<_>>()).prop_shuffle()
}

fn tensor(nd: &Nd) -> Tensor {
    Tensor::from_vec(nd.data.clone(), &nd.shape, &CPU).expect("valid test tensor")
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().expect("readable")
}

/// A base array, a permutation, and a second array that broadcasts against the permuted view.
fn binary_case() -> impl Strategy<Value = (Nd, Vec<usize>, Nd)> {
    nd_strategy(4).prop_flat_map(|base| {
        let rank = base.shape.len();
        (Just(base), permutation(rank)).prop_flat_map(|(base, perm)| {
            let view_shape: Vec<usize> = perm.iter().map(|&d| base.shape[d]).collect();
            let rhs = broadcastable_to(view_shape).prop_flat_map(|s| {
                let n = s.iter().product::<usize>();
                prop::collection::vec(0.5f64..8.0, n).prop_map(move |d| Nd::new(&s, d))
            });
            (Just(base), Just(perm), rhs)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn binary_ops_broadcast_over_views((base, perm, rhs) in binary_case(), swap in any::<bool>()) {
        let view = tensor(&base).permute(&perm).unwrap();
        let expected_view = base.permute(&perm);
        let r = tensor(&rhs);
        type F = fn(f64, f64) -> f64;
        let cases: [(&str, F); 6] = [
            ("add", |a, b| a + b), ("sub", |a, b| a - b), ("mul", |a, b| a * b),
            ("div", |a, b| a / b), ("maximum", f64::max), ("minimum", f64::min),
        ];
        for (name, f) in cases {
            let (out, expected) = if swap {
                let out = match name {
                    "add" => r.add(&view), "sub" => r.sub(&view), "mul" => r.mul(&view),
                    "div" => r.div(&view), "maximum" => r.maximum(&view), _ => r.minimum(&view),
                }.unwrap();
                (out, rhs.broadcast_binary(&expected_view, f).unwrap())
            } else {
                let out = match name {
                    "add" => view.add(&r), "sub" => view.sub(&r), "mul" => view.mul(&r),
                    "div" => view.div(&r), "maximum" => view.maximum(&r), _ => view.minimum(&r),
                }.unwrap();
                (out, expected_view.broadcast_binary(&rhs, f).unwrap())
            };
            prop_assert_eq!(out.shape(), &expected.shape[..], "{}", name);
            assert_close(&values(&out), &expected.data, 1e-12);
        }
        let lt = view.lt(&r).unwrap();
        let expected = expected_view.broadcast_binary(&rhs, |a, b| (a < b) as u8 as f64).unwrap();
        prop_assert_eq!(lt.dtype(), DType::Bool);
        assert_close(&values(&lt), &expected.data, 0.0);
    }

    #[test]
    fn reductions_match_reference(base in nd_strategy(4), keepdim in any::<bool>(), pick in any::<u8>()) {
        let rank = base.shape.len();
        let dims: Vec<usize> = (0..rank).filter(|d| pick & (1 << d) != 0).collect();
        let idims: Vec<isize> = dims.iter().map(|&d| d as isize).collect();
        let t = tensor(&base);
        let sum = t.sum(idims.clone(), keepdim).unwrap();
        let expected = base.reduce(&dims, keepdim, |g| g.iter().sum());
        prop_assert_eq!(sum.shape(), &expected.shape[..]);
        assert_close(&values(&sum), &expected.data, 1e-12);
        let mean = t.mean(idims.clone(), keepdim).unwrap();
        assert_close(&values(&mean), &base.reduce(&dims, keepdim, |g| g.iter().sum::<f64>() / g.len() as f64).data, 1e-12);
        let max = t.max(idims.clone(), keepdim).unwrap();
        assert_close(&values(&max), &base.reduce(&dims, keepdim, |g| g.iter().cloned().fold(f64::MIN, f64::max)).data, 0.0);
        let min = t.min(idims.clone(), keepdim).unwrap();
        assert_close(&values(&min), &base.reduce(&dims, keepdim, |g| g.iter().cloned().fold(f64::MAX, f64::min)).data, 0.0);
        let var = t.var(idims.clone(), keepdim).unwrap();
        let expected_var = base.reduce(&dims, keepdim, |g| {
            let n = g.len() as f64;
            let m = g.iter().sum::<f64>() / n;
            g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)
        });
        assert_close(&values(&var), &expected_var.data, 1e-9);
    }

    #[test]
    fn reductions_over_transposed_views(base in nd_strategy(3), dim in 0usize..3) {
        prop_assume!(base.shape.len() >= 2);
        let rank = base.shape.len();
        let perm: Vec<usize> = (0..rank).rev().collect();
        let view = tensor(&base).permute(&perm).unwrap();
        let reference = base.permute(&perm);
        let d = dim % rank;
        let arg = view.argmax(d as isize, false).unwrap();
        let expected = reference.reduce(&[d], false, |g| {
            g.iter().enumerate().fold((0, f64::MIN), |(bi, bv), (i, &v)| if v > bv { (i, v) } else { (bi, bv) }).0 as f64
        });
        prop_assert_eq!(arg.dtype(), DType::I64);
        assert_close(&values(&arg), &expected.data, 0.0);
        let sm = view.softmax(d as isize).unwrap();
        let sums = sm.sum(d as isize, false).unwrap();
        assert_close(&values(&sums), &vec![1.0; sums.numel()], 1e-12);
    }

    #[test]
    fn matmul_matches_reference(
        batch in prop::collection::vec(1usize..3, 0..=2),
        m in 1usize..7, k in 1usize..7, n in 1usize..7,
        transposed in any::<bool>(),
        seed in any::<u64>(),
    ) {
        devcheck::manual_seed(seed);
        let mut sa = batch.clone();
        sa.extend([m, k]);
        let mut sb = batch.clone();
        sb.extend([k, n]);
        let a = Tensor::randn(&sa, (DType::F64, &CPU)).unwrap();
        let b = if transposed {
            let mut st = batch.clone();
            st.extend([n, k]);
            Tensor::randn(&st, (DType::F64, &CPU)).unwrap().transpose(-1, -2).unwrap()
        } else {
            Tensor::randn(&sb, (DType::F64, &CPU)).unwrap()
        };
        let expected = Nd::new(&sa, values(&a)).matmul(&Nd::new(&sb, values(&b)));
        let out = a.matmul(&b).unwrap();
        prop_assert_eq!(out.shape(), &expected.shape[..]);
        assert_close(&values(&out), &expected.data, 1e-10);
        // The f32 path through gemm agrees too.
        let out32 = a.to_dtype(DType::F32).unwrap().matmul(&b.to_dtype(DType::F32).unwrap()).unwrap();
        assert_close(&values(&out32), &expected.data, 1e-4);
    }
}
