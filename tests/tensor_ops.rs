//! Op-by-op behaviour with hand-computed values, creation, moves and the device/dtype contracts.

use devcheck::{CmpOp, DType, Device, Error, Tensor};

const CPU: Device = Device::Cpu;

fn v32(t: &Tensor) -> Vec<f32> {
    t.to_vec().unwrap()
}

fn close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{a:?} vs {b:?}");
    }
}

#[test]
fn devices_parse_and_print_like_pytorch() {
    for (s, d) in [
        ("cpu", Device::Cpu),
        ("cuda:0", Device::Cuda(0)),
        ("cuda:12", Device::Cuda(12)),
        ("mps", Device::Mps),
    ] {
        assert_eq!(s.parse::<Device>().unwrap(), d);
        assert_eq!(d.to_string(), s);
    }
    assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
    for bad in ["", "CPU", "cuda:", "cuda:-1", "cuda:01", "cuda:1x", "gpu", "cuda:99999999999999999999"] {
        assert!(matches!(bad.parse::<Device>(), Err(Error::InvalidDevice { .. })), "{bad}");
    }
}

#[test]
fn availability_never_panics_and_best_available_falls_back() {
    let n = devcheck::cuda::device_count();
    assert_eq!(devcheck::cuda::is_available(), n > 0);
    assert_eq!(devcheck::cuda::device_name(n), None);
    let best = Device::best_available();
    assert_eq!(best, if n > 0 { Device::Cuda(0) } else { Device::Cpu });
    assert!(Device::Mps.ensure_available().is_err());
}

#[test]
fn default_device_is_settable() {
    assert_eq!(Device::default(), devcheck::default_device());
    devcheck::set_default_device(Device::Cuda(3));
    assert_eq!(Device::default(), Device::Cuda(3));
    devcheck::set_default_device(Device::Cpu);
    assert_eq!(devcheck::default_device(), Device::Cpu);
}

#[test]
fn dtypes_parse_with_pytorch_names() {
    assert_eq!("float32".parse::<DType>().unwrap(), DType::F32);
    assert_eq!("torch.bfloat16".parse::<DType>().unwrap(), DType::BF16);
    assert_eq!("long".parse::<DType>().unwrap(), DType::I64);
    assert!("float8".parse::<DType>().is_err());
    assert_eq!(DType::F16.promote(DType::BF16), DType::F32);
    assert_eq!(DType::I32.promote(DType::F16), DType::F16);
}

#[test]
fn creation_and_like_constructors_inherit_device_and_dtype() {
    let a = Tensor::arange(0.0, 5.0, 2.0, (DType::I64, &CPU)).unwrap();
    assert_eq!(a.to_vec::<i64>().unwrap(), vec![0, 2, 4]);
    close(&v32(&Tensor::linspace(0.0, 1.0, 5, &CPU).unwrap()), &[0.0, 0.25, 0.5, 0.75, 1.0], 0.0);
    close(&v32(&Tensor::eye(2, &CPU).unwrap()), &[1.0, 0.0, 0.0, 1.0], 0.0);
    let f = Tensor::full([2], 7.5, (DType::F64, &CPU)).unwrap();
    let z = Tensor::zeros_like(&f).unwrap();
    assert_eq!((z.dtype(), z.device(), z.shape()), (DType::F64, CPU, &[2usize][..]));
    let n = f.new_tensor(&[1i32, 2, 3], [3]).unwrap();
    assert_eq!(n.dtype(), DType::F64);
    assert_eq!(n.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0]);
    assert_eq!(f.new_ones([1, 1]).unwrap().to_vec::<f64>().unwrap(), vec![1.0]);
    assert_eq!(f.new_full([1], 2.0).unwrap().origin().op(), "new_full");
    assert!(Tensor::from_vec(vec![1.0f32; 5], [2, 3], &CPU).is_err());
    assert!(Tensor::arange(0.0, 1.0, 0.0, &CPU).is_err());
    assert!(Tensor::randn([2], (DType::I64, &CPU)).is_err());
}

#[test]
fn random_tensors_are_seeded_and_reproducible() {
    devcheck::manual_seed(7);
    let a = v32(&Tensor::randn([64], &CPU).unwrap());
    devcheck::manual_seed(7);
    let b = v32(&Tensor::randn([64], &CPU).unwrap());
    assert_eq!(a, b);
    let mean = a.iter().sum::<f32>() / 64.0;
    assert!(mean.abs() < 0.5);
    let u = v32(&Tensor::rand([1000], &CPU).unwrap());
    assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
}

#[test]
fn origin_records_the_call_site_and_op() {
    let line = line!() + 1;
    let t = Tensor::ones([2], &CPU).unwrap();
    assert_eq!(t.origin().op(), "ones");
    assert_eq!(t.origin().line(), line);
    assert!(t.origin().file().ends_with("tensor_ops.rs"));
    let u = t.exp().unwrap();
    assert_eq!(u.origin().op(), "exp");
}

#[test]
fn moves_are_cheap_when_nothing_changes_and_keep_the_origin() {
    let t = Tensor::ones([2], &CPU).unwrap();
    let same = t.to(&CPU).unwrap();
    assert!(same.same_storage(&t));
    assert!(t.to_dtype(DType::F32).unwrap().same_storage(&t));
    let _fake = devcheck::fake::enter();
    let moved = t.to(&Device::Cuda(1)).unwrap();
    assert!(moved.is_fake());
    assert_eq!(moved.device(), Device::Cuda(1));
    assert_eq!(moved.origin(), t.origin());
    let back = moved.cpu().unwrap();
    assert!(back.is_fake(), "a fake tensor stays fake");
}

#[test]
fn host_reads() {
    let t = Tensor::from_vec(vec![1.5f32, 2.5], [2], &CPU).unwrap();
    assert_eq!(t.sum_all().unwrap().to_scalar::<f32>().unwrap(), 4.0);
    assert!(t.to_scalar::<f32>().is_err());
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 2]);
    let bytes = t.to_raw_bytes().unwrap();
    let back = Tensor::from_raw_bytes(&bytes, DType::F32, [2], &CPU).unwrap();
    assert_eq!(v32(&back), vec![1.5, 2.5]);
    assert!(Tensor::from_raw_bytes(&bytes[1..], DType::F32, [2], &CPU).is_err());
}

#[test]
fn casts_between_all_dtypes() {
    let t = Tensor::from_vec(vec![-1.7f32, 0.0, 2.2, 300.0], [4], &CPU).unwrap();
    assert_eq!(t.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(), vec![-1, 0, 2, 300]);
    assert_eq!(t.to_dtype(DType::Bool).unwrap().to_vec::<bool>().unwrap(), vec![true, false, true, true]);
    assert_eq!(t.to_dtype(DType::U8).unwrap().to_vec::<u8>().unwrap(), vec![0, 0, 2, 255]);
    close(&v32(&t.to_dtype(DType::BF16).unwrap()), &[-1.7, 0.0, 2.2, 300.0], 1e-2);
    close(&v32(&t.to_dtype(DType::F16).unwrap()), &[-1.7, 0.0, 2.2, 300.0], 1e-3);
}

/// GELU in f64 against values computed with mpmath at 50 significant digits (mpmath 1.3, `mp.dps =
/// 50`), rounded to 20 digits:
///
/// ```python
/// exact = x / 2 * (1 + erf(x / sqrt(2)))
/// tanh  = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + mpf("0.044715") * x**3)))
/// ```
///
/// Every value must agree to 1e-12 relative, the far negative tail included, where computing
/// `1 + erf(..)` in floating point cancels to a few digits.
#[test]
fn gelu_in_f64_matches_the_exact_values() {
    // mpmath's 20 digits as printed; the compiler rounds them to the nearest f64.
    #[rustfmt::skip]
    #[allow(clippy::excessive_precision)]
    const CASES: [(f64, f64, f64); 12] = [
        // x, gelu(x), gelu(x, approximate='tanh')
        (-8.0, -4.9767684594174272988e-15, -3.107782937501111218e-21),
        (-3.5, -0.00081420177662433762722, -0.00061619765537366330893),
        (-1.0, -0.15865525393145705141, -0.15880800939172329522),
        (-0.5, -0.15426876936299344818, -0.15428599017485607796),
        (-1e-3, -0.00049960105778608893742, -0.0004996010577864180343),
        (0.0, 0.0, 0.0),
        (1e-8, 5.0000000398942280401e-9, 5.0000000398942280401e-9),
        (0.25, 0.14967658142073093106, 0.14967535070168500023),
        (0.7, 0.53062544344384888968, 0.5305701347051167512),
        (1.0, 0.84134474606854294859, 0.84119199060827670478),
        (2.5, 2.4844758366855596621, 2.4849157339100014179),
        (6.0, 5.9999999940804741298, 5.999999999915603533),
    ];
    let xs: Vec<f64> = CASES.iter().map(|c| c.0).collect();
    let t = Tensor::from_slice(&xs, [xs.len()], &CPU).unwrap();
    let exact: Vec<f64> = t.gelu().unwrap().to_vec().unwrap();
    let tanh: Vec<f64> = t.gelu_tanh().unwrap().to_vec().unwrap();
    let module: Vec<f64> =
        devcheck::nn::Forward::forward(&devcheck::nn::Gelu::tanh(), &t).unwrap().to_vec().unwrap();
    for (i, &(x, want_exact, want_tanh)) in CASES.iter().enumerate() {
        let relative =
            |got: f64, want: f64| if want == 0.0 { got.abs() } else { ((got - want) / want).abs() };
        assert!(relative(exact[i], want_exact) <= 1e-12, "gelu({x}) = {} not {want_exact}", exact[i]);
        assert!(relative(tanh[i], want_tanh) <= 1e-12, "gelu_tanh({x}) = {} not {want_tanh}", tanh[i]);
        assert_eq!(module[i], tanh[i], "nn::Gelu::tanh() is gelu_tanh");
    }
}

/// GELU in f32 and its gradient, over a tensor large enough to run the vectorised kernels on
/// several threads, agree with the f64 path (checked against mpmath above) over [-12, 12]. The
/// bound grows with x²: rounding x/√2 to f32 moves erfc's far tail by 2 (x/√2)² ε relative.
#[test]
fn gelu_in_f32_and_its_gradient_agree_with_f64() {
    let n = 100_003;
    let xs: Vec<f32> = (0..n).map(|i| -12.0 + 24.0 * i as f32 / (n - 1) as f32).collect();
    let x32 = Tensor::from_slice(&xs, [n], &CPU).unwrap().with_requires_grad().unwrap();
    let x64 = x32.to_dtype(DType::F64).unwrap().detach().with_requires_grad().unwrap();
    let y32 = x32.gelu().unwrap();
    let y64 = x64.gelu().unwrap();
    y32.sum_all().unwrap().backward().unwrap();
    y64.sum_all().unwrap().backward().unwrap();
    let (y32, y64): (Vec<f32>, Vec<f64>) = (y32.to_vec().unwrap(), y64.to_vec().unwrap());
    let g32: Vec<f32> = x32.grad().unwrap().to_vec().unwrap();
    let g64: Vec<f64> = x64.grad().unwrap().to_vec().unwrap();
    let eps = f64::from(f32::EPSILON);
    for (i, &x) in xs.iter().enumerate() {
        let x = f64::from(x);
        let tol = (16.0 + 2.0 * x * x) * eps;
        let err = (f64::from(y32[i]) - y64[i]).abs();
        assert!(err <= tol * y64[i].abs() + 1e-44, "gelu({x}) = {} not {}", y32[i], y64[i]);
        // Φ(x) + x φ(x) cancels near x = -0.75: bound the error by the size of its terms.
        let x_pdf = (x * (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()).abs();
        let err = (f64::from(g32[i]) - g64[i]).abs();
        assert!(err <= tol * (g64[i].abs() + x_pdf) + 1e-44, "gelu'({x}) = {} not {}", g32[i], g64[i]);
    }
}

#[test]
fn unary_ops_match_std() {
    let xs = [-2.0f32, -0.5, 0.0, 0.5, 3.0];
    let t = Tensor::from_slice(&xs, [5], &CPU).unwrap();
    let erf = |x: f32| libm_erf(x as f64) as f32;
    let cases: Vec<(Tensor, Vec<f32>)> = vec![
        (t.neg().unwrap(), xs.iter().map(|x| -x).collect()),
        (t.abs().unwrap(), xs.iter().map(|x| x.abs()).collect()),
        (t.relu().unwrap(), xs.iter().map(|x| x.max(0.0)).collect()),
        (t.exp().unwrap(), xs.iter().map(|x| x.exp()).collect()),
        (t.tanh().unwrap(), xs.iter().map(|x| x.tanh()).collect()),
        (t.sigmoid().unwrap(), xs.iter().map(|x| 1.0 / (1.0 + (-x).exp())).collect()),
        (t.gelu().unwrap(), xs.iter().map(|&x| 0.5 * x * (1.0 + erf(x / 2f32.sqrt()))).collect()),
        (t.silu().unwrap(), xs.iter().map(|x| x / (1.0 + (-x).exp())).collect()),
        (t.sin().unwrap(), xs.iter().map(|x| x.sin()).collect()),
        (t.cos().unwrap(), xs.iter().map(|x| x.cos()).collect()),
        (t.abs().unwrap().sqrt().unwrap(), xs.iter().map(|x| x.abs().sqrt()).collect()),
        (
            t.abs().unwrap().add_scalar(1.0).unwrap().log().unwrap(),
            xs.iter().map(|x| (x.abs() + 1.0).ln()).collect(),
        ),
        (
            t.abs().unwrap().add_scalar(1.0).unwrap().rsqrt().unwrap(),
            xs.iter().map(|x| 1.0 / (x.abs() + 1.0).sqrt()).collect(),
        ),
    ];
    for (got, want) in cases {
        close(&v32(&got), &want, 1e-6);
    }
    // f16/bf16 go through f32 per element.
    close(&v32(&t.to_dtype(DType::BF16).unwrap().exp().unwrap()), &xs.map(f32::exp), 1e-2);
    assert!(Tensor::ones([1], (DType::I64, &CPU)).unwrap().exp().is_err());
    assert_eq!(
        Tensor::from_slice(&[-3i64, 4], [2], &CPU).unwrap().abs().unwrap().to_vec::<i64>().unwrap(),
        vec![3, 4]
    );
}

fn libm_erf(x: f64) -> f64 {
    // Abramowitz-Stegun 7.1.26 is too coarse here; integrate erf' with Simpson's rule instead.
    let n = 2000;
    let h = x / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(x);
    for i in 1..n {
        s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn scalar_ops_and_integer_arithmetic() {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3], &CPU).unwrap();
    close(&v32(&t.mul_scalar(2.0).unwrap()), &[2.0, 4.0, 6.0], 0.0);
    close(&v32(&t.rsub_scalar(1.0).unwrap()), &[0.0, -1.0, -2.0], 0.0);
    close(&v32(&t.pow_scalar(2.0).unwrap()), &[1.0, 4.0, 9.0], 1e-6);
    close(&v32(&t.clamp(1.5, 2.5).unwrap()), &[1.5, 2.0, 2.5], 0.0);
    close(&v32(&(&t * 2.0 + &t)), &[3.0, 6.0, 9.0], 0.0);
    let i = Tensor::from_slice(&[250u8, 3], [2], &CPU).unwrap();
    assert_eq!(i.add_scalar(10.0).unwrap().to_vec::<u8>().unwrap(), vec![4, 13], "u8 wraps like PyTorch");
    assert!(i.div(&i).is_err(), "division is for floating dtypes");
    let s = Tensor::from_slice(&[i64::MAX, 1], [2], &CPU).unwrap();
    assert_eq!(s.sum_all().unwrap().to_vec::<i64>().unwrap(), vec![i64::MIN], "i64 sums are exact and wrap");
    let b = Tensor::from_slice(&[true, false, true], [3], &CPU).unwrap();
    assert_eq!(b.sum_all().unwrap().to_scalar::<i64>().unwrap(), 2);
    assert!(b.add(&b).is_err());
    assert_eq!(b.logical_not().unwrap().to_vec::<bool>().unwrap(), vec![false, true, false]);
    assert_eq!(t.cmp_scalar(CmpOp::Ge, 2.0).unwrap().to_vec::<bool>().unwrap(), vec![false, true, true]);
}

#[test]
fn nan_propagates_through_max_and_argmax() {
    let t = Tensor::from_slice(&[1.0f32, f32::NAN, 3.0], [3], &CPU).unwrap();
    assert!(t.max_all().unwrap().to_scalar::<f32>().unwrap().is_nan());
    assert_eq!(t.argmax(0, false).unwrap().to_scalar::<i64>().unwrap(), 1);
    let empty = Tensor::zeros([0, 2], &CPU).unwrap();
    assert!(empty.max(0, false).is_err());
    assert_eq!(empty.sum(0, false).unwrap().to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
}

#[test]
fn softmax_and_log_softmax_are_stable() {
    let t = Tensor::from_slice(&[1000.0f32, 1001.0, -1000.0, 0.0], [2, 2], &CPU).unwrap();
    let s = v32(&t.softmax(-1).unwrap());
    close(&s, &[0.26894142, 0.7310586, 0.0, 1.0], 1e-6);
    let l = v32(&t.log_softmax(1).unwrap());
    close(&l, &[-1.3132616, -0.31326166, -1000.0, 0.0], 1e-6);
    let cols = v32(&t.softmax(0).unwrap());
    close(&cols, &[1.0, 1.0, 0.0, 0.0], 1e-6);
}

#[test]
fn selection_and_triangles() {
    let x = Tensor::arange(0.0, 9.0, 1.0, &CPU).unwrap().reshape([3, 3]).unwrap();
    close(&v32(&x.triu(1).unwrap()), &[0.0, 1.0, 2.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0], 0.0);
    close(&v32(&x.tril(0).unwrap()), &[0.0, 0.0, 0.0, 3.0, 4.0, 0.0, 6.0, 7.0, 8.0], 0.0);
    let mask = Tensor::ones([3, 3], (DType::Bool, &CPU)).unwrap().triu(1).unwrap();
    let filled = x.masked_fill(&mask, f64::NEG_INFINITY).unwrap();
    assert_eq!(v32(&filled)[1], f32::NEG_INFINITY);
    assert_eq!(v32(&filled)[3], 3.0);
    let cond = Tensor::from_slice(&[true, false, true], [3], &CPU).unwrap();
    let w = cond.where_cond(&x, &x.neg().unwrap()).unwrap();
    close(&v32(&w), &[0.0, -1.0, 2.0, 3.0, -4.0, 5.0, 6.0, -7.0, 8.0], 0.0);
    assert!(x.masked_fill(&x, 0.0).is_err(), "masks are bool");
}

#[test]
fn views_and_copies() {
    let x = Tensor::arange(0.0, 6.0, 1.0, &CPU).unwrap().reshape([2, 3]).unwrap();
    let t = x.t().unwrap();
    assert!(!t.is_contiguous());
    close(&v32(&t), &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0], 0.0);
    close(&v32(&t.reshape([6]).unwrap()), &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0], 0.0);
    close(&v32(&x.narrow(1, 1, 2).unwrap()), &[1.0, 2.0, 4.0, 5.0], 0.0);
    assert!(x.narrow(1, 2, 2).is_err());
    assert_eq!(x.unsqueeze(0).unwrap().shape(), &[1, 2, 3]);
    assert_eq!(x.unsqueeze(-1).unwrap().shape(), &[2, 3, 1]);
    assert_eq!(x.unsqueeze(0).unwrap().squeeze(0).unwrap().shape(), &[2, 3]);
    assert_eq!(x.squeeze(0).unwrap().shape(), &[2, 3]);
    let e = x.narrow(0, 0, 1).unwrap().expand([4, 3]).unwrap();
    close(&v32(&e.sum(0, false).unwrap()), &[0.0, 4.0, 8.0], 0.0);
    assert!(x.expand([3, 3]).is_err());
    assert_eq!(x.flatten_from(0).unwrap().shape(), &[6]);
    assert!(x.permute([0, 0]).is_err());
    assert!(x.transpose(0, 2).is_err());
}

#[test]
fn cat_stack_index_select_gather() {
    let a = Tensor::arange(0.0, 4.0, 1.0, &CPU).unwrap().reshape([2, 2]).unwrap();
    let b = Tensor::arange(4.0, 6.0, 1.0, &CPU).unwrap().reshape([2, 1]).unwrap();
    let c = Tensor::cat(&[&a, &b], 1).unwrap();
    close(&v32(&c), &[0.0, 1.0, 4.0, 2.0, 3.0, 5.0], 0.0);
    assert!(Tensor::cat(&[&a, &b], 0).is_err());
    assert!(Tensor::cat(&[], 0).is_err());
    let s = Tensor::stack(&[&a, &a.t().unwrap()], 0).unwrap();
    assert_eq!(s.shape(), &[2, 2, 2]);
    close(&v32(&s), &[0.0, 1.0, 2.0, 3.0, 0.0, 2.0, 1.0, 3.0], 0.0);
    let idx = Tensor::from_slice(&[1i64, 0, 1], [3], &CPU).unwrap();
    close(&v32(&a.index_select(0, &idx).unwrap()), &[2.0, 3.0, 0.0, 1.0, 2.0, 3.0], 0.0);
    // As in PyTorch, a negative index is out of range (it does not count from the end).
    for bad in [2i64, -1] {
        let bad = Tensor::from_slice(&[bad], [1], &CPU).unwrap();
        assert!(a.index_select(0, &bad).is_err());
        assert!(a.gather(1, &bad.reshape([1, 1]).unwrap()).is_err());
    }
    let g = Tensor::from_slice(&[1i64, 1, 0, 1], [2, 2], &CPU).unwrap();
    close(&v32(&a.gather(1, &g).unwrap()), &[1.0, 1.0, 2.0, 3.0], 0.0);
    let labels = Tensor::from_slice(&[1i64, 0], [2, 1], &CPU).unwrap();
    close(&v32(&a.gather(1, &labels).unwrap()), &[1.0, 2.0], 0.0);
}

#[test]
fn matmul_promotes_vectors_and_broadcasts_batches() {
    let m = Tensor::arange(0.0, 6.0, 1.0, &CPU).unwrap().reshape([2, 3]).unwrap();
    let v = Tensor::ones([3], &CPU).unwrap();
    let mv = m.matmul(&v).unwrap();
    assert_eq!(mv.shape(), &[2]);
    close(&v32(&mv), &[3.0, 12.0], 0.0);
    let vm = Tensor::ones([2], &CPU).unwrap().matmul(&m).unwrap();
    close(&v32(&vm), &[3.0, 5.0, 7.0], 0.0);
    let batch = Tensor::ones([4, 1, 2], &CPU).unwrap();
    let out = batch.matmul(&m).unwrap();
    assert_eq!(out.shape(), &[4, 1, 3]);
    close(&v32(&out), &[3.0, 5.0, 7.0].repeat(4), 0.0);
    let i = Tensor::from_slice(&[1i64, 2, 3, 4], [2, 2], &CPU).unwrap();
    assert_eq!(i.matmul(&i).unwrap().to_vec::<i64>().unwrap(), vec![7, 10, 15, 22]);
    assert!(m.matmul(&Tensor::scalar(1.0f32, &CPU).unwrap()).is_err());
}

#[test]
fn fake_tensors_compute_shapes_and_check_devices_without_data() {
    let _fake = devcheck::fake::enter();
    let dev = Device::Cuda(0);
    let x = Tensor::randn([8, 16], &dev).unwrap();
    let w = Tensor::zeros([16, 4], &dev).unwrap();
    let y = x.matmul(&w).unwrap().relu().unwrap().softmax(-1).unwrap();
    assert_eq!(y.shape(), &[8, 4]);
    assert!(y.is_fake());
    assert_eq!(y.device(), dev);
    let cpu_mask = Tensor::ones([8, 4], &CPU).unwrap();
    assert!(matches!(y.mul(&cpu_mask), Err(Error::DeviceMismatch { .. })));
    assert!(y.sum_all().unwrap().to_scalar::<f32>().is_err());
}

#[test]
fn out_variants_reuse_memory_and_allow_aliasing() {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [2, 2], &CPU).unwrap();
    let bias = Tensor::from_slice(&[10.0f32, 20.0], [2], &CPU).unwrap();
    let out = Tensor::zeros([2, 2], &CPU).unwrap();
    a.add_into(&bias, &out).unwrap();
    close(&v32(&out), &[11.0, 22.0, 13.0, 24.0], 0.0);
    a.mul_into(&a, &out).unwrap();
    close(&v32(&out), &[1.0, 4.0, 9.0, 16.0], 0.0);
    // In place: out is an input.
    out.sub_into(&a, &out).unwrap();
    close(&v32(&out), &[0.0, 2.0, 6.0, 12.0], 0.0);
    assert!(a.add_into(&a, &Tensor::zeros([4], &CPU).unwrap()).is_err(), "shape must match");
    assert!(a.add_into(&a, &Tensor::zeros([2, 2], (DType::F64, &CPU)).unwrap()).is_err());
    assert!(a.add_into(&a, &Tensor::zeros([2, 2], &CPU).unwrap().t().unwrap()).is_err(), "contiguous only");
    // Large enough to take the threaded path.
    let big = Tensor::arange(0.0, 100_000.0, 1.0, &CPU).unwrap();
    let big_out = Tensor::zeros([100_000], &CPU).unwrap();
    big.add_into(&big, &big_out).unwrap();
    let v = v32(&big_out);
    assert!(v.iter().enumerate().all(|(i, &x)| x == 2.0 * i as f32));
}

/// The row-major index into a tensor of `shape` (aligned right) of the element that broadcasts
/// to position `index` of the output.
fn broadcast_source(index: &[usize], shape: &[usize]) -> usize {
    let skip = index.len() - shape.len();
    shape.iter().zip(&index[skip..]).fold(0, |flat, (&n, &i)| flat * n + if n == 1 { 0 } else { i })
}

/// Every position of `shape`, row-major.
fn positions(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut all = vec![vec![]];
    for &n in shape {
        all = all.into_iter().flat_map(|p| (0..n).map(move |i| [p.clone(), vec![i]].concat())).collect();
    }
    all
}

/// `masked_fill` and `where` on every broadcast their kernels walk differently (a mask of the
/// full shape, one repeated over the leading dims, one broadcast inside, a single value, a
/// transposed input, a scalar side), small and large enough to be split across threads,
/// against element-by-element references.
#[test]
fn masked_fill_and_where_on_every_broadcast() {
    for rows in [3, 400] {
        let full = [rows, 3, 37];
        let n: usize = full.iter().product();
        let x = Tensor::arange(0.0, n as f64, 1.0, &CPU).unwrap().reshape(full).unwrap();
        let xs = v32(&x);
        for mask_shape in
            [vec![rows, 3, 37], vec![3, 37], vec![rows, 1, 37], vec![37], vec![1], vec![rows, 3, 1]]
        {
            let m = mask_shape.iter().product::<usize>();
            let bits: Vec<bool> = (0..m).map(|i| (i * 7) % 3 == 0).collect();
            let mask = Tensor::from_slice(&bits, mask_shape.as_slice(), &CPU).unwrap();
            let at = |p: &[usize]| bits[broadcast_source(p, &mask_shape)];
            let want: Vec<f32> =
                positions(&full).iter().zip(&xs).map(|(p, &v)| if at(p) { -1.5 } else { v }).collect();
            assert_eq!(v32(&x.masked_fill(&mask, -1.5).unwrap()), want, "mask {mask_shape:?}, {rows} rows");
            let zero = Tensor::zeros([], &CPU).unwrap();
            let keep: Vec<f32> =
                positions(&full).iter().zip(&xs).map(|(p, &v)| if at(p) { v } else { 0.0 }).collect();
            assert_eq!(v32(&mask.where_cond(&x, &zero).unwrap()), keep, "where(mask, x, 0) {mask_shape:?}");
            let swap: Vec<f32> =
                positions(&full).iter().zip(&xs).map(|(p, &v)| if at(p) { 0.0 } else { v }).collect();
            assert_eq!(v32(&mask.where_cond(&zero, &x).unwrap()), swap, "where(mask, 0, x) {mask_shape:?}");
            let neg = x.neg().unwrap();
            let both: Vec<f32> =
                positions(&full).iter().zip(&xs).map(|(p, &v)| if at(p) { v } else { -v }).collect();
            assert_eq!(v32(&mask.where_cond(&x, &neg).unwrap()), both, "where(mask, x, -x) {mask_shape:?}");
        }
        // A transposed input under a mask of its (transposed) shape, and integer elements.
        let t = x.transpose(0, 2).unwrap();
        let mask = t.cmp_scalar(CmpOp::Gt, (n / 2) as f64).unwrap();
        let ts = v32(&t.contiguous().unwrap());
        let want: Vec<f32> = ts.iter().map(|&v| if v > (n / 2) as f32 { 7.0 } else { v }).collect();
        assert_eq!(v32(&t.masked_fill(&mask, 7.0).unwrap()), want);
        let ints = t.to_dtype(DType::I64).unwrap().masked_fill(&mask, -3.0).unwrap().to_vec::<i64>().unwrap();
        assert_eq!(
            ints,
            ts.iter().map(|&v| if v > (n / 2) as f32 { -3 } else { v as i64 }).collect::<Vec<_>>()
        );
    }
}
