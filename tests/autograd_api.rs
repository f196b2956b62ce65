//! The autograd surface: requires_grad, backward, grad, detach, no_grad, devices, and the errors.

use devcheck::{DType, Device, Tensor};

fn vec64(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, [v.len()], &Device::Cpu).unwrap()
}

fn leaf(v: &[f64]) -> Tensor {
    vec64(v).with_requires_grad().unwrap()
}

fn grad_of(t: &Tensor) -> Vec<f64> {
    t.grad().expect("a gradient").to_vec::<f64>().unwrap()
}

#[test]
fn untracked_ops_record_nothing() {
    let a = vec64(&[1.0, 2.0]);
    let y = a.mul(&a).unwrap().sum_all().unwrap();
    assert!(!y.requires_grad());
    assert!(y.is_leaf());
    assert_eq!(y.grad_fn_name(), None);
}

#[test]
fn backward_fills_leaf_gradients_and_names_nodes() {
    let x = leaf(&[1.0, -2.0, 3.0]);
    let y = x.mul(&x).unwrap();
    assert_eq!(y.grad_fn_name(), Some("MulBackward"));
    assert!(!y.is_leaf());
    let loss = y.sum_all().unwrap();
    assert_eq!(loss.grad_fn_name(), Some("SumBackward"));
    loss.backward().unwrap();
    assert_eq!(grad_of(&x), vec![2.0, -4.0, 6.0]);
    assert!(y.grad().is_none(), "computed tensors keep no gradient");
}

#[test]
fn a_shared_subexpression_sums_both_paths() {
    let x = leaf(&[2.0]);
    let y = x.mul(&x).unwrap().add(&x.mul_scalar(3.0).unwrap()).unwrap();
    y.sum_all().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![7.0]); // 2x + 3
}

#[test]
fn gradients_accumulate_until_cleared() {
    let x = leaf(&[1.0, 2.0]);
    let loss = x.mul_scalar(3.0).unwrap().sum_all().unwrap();
    loss.backward().unwrap();
    loss.backward().unwrap();
    assert_eq!(grad_of(&x), vec![6.0, 6.0]);
    x.set_grad(None).unwrap();
    assert!(x.grad().is_none());
    loss.backward().unwrap();
    assert_eq!(grad_of(&x), vec![3.0, 3.0]);
}

#[test]
fn clones_share_the_gradient_slot() {
    let x = leaf(&[1.0]);
    let handle = x.clone();
    x.mul_scalar(5.0).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(grad_of(&handle), vec![5.0]);
}

#[test]
fn no_grad_stops_recording_and_restores_the_mode() {
    let x = leaf(&[1.0]);
    assert!(devcheck::is_grad_enabled());
    {
        let _outer = devcheck::no_grad();
        assert!(!devcheck::is_grad_enabled());
        assert!(!x.mul_scalar(2.0).unwrap().requires_grad());
        {
            let _inner = devcheck::enable_grad();
            assert!(x.mul_scalar(2.0).unwrap().requires_grad());
        }
        assert!(!devcheck::is_grad_enabled());
    }
    assert!(devcheck::is_grad_enabled());
    assert!(x.mul_scalar(2.0).unwrap().requires_grad());
}

#[test]
fn grad_mode_is_per_thread() {
    let _guard = devcheck::no_grad();
    let other = std::thread::spawn(devcheck::is_grad_enabled).join().unwrap();
    assert!(other);
    assert!(!devcheck::is_grad_enabled());
}

#[test]
fn detach_cuts_the_graph_and_shares_data() {
    let x = leaf(&[3.0]);
    x.set_name("encoder.scale");
    let d = x.detach();
    assert_eq!(d.name().as_deref(), Some("encoder.scale"));
    assert!(!d.requires_grad());
    assert!(d.same_storage(&x));
    assert_eq!(d.origin(), x.origin());
    // Only the tracked path contributes: d/dx (x * stop(x)) = stop(x) = 3.
    x.mul(&d).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![3.0]);
}

#[test]
fn integer_results_are_not_tracked() {
    let x = leaf(&[1.0, 5.0, 2.0]);
    let i = x.argmax(0, false).unwrap();
    assert_eq!(i.dtype(), DType::I64);
    assert!(!i.requires_grad());
    assert!(!x.cmp_scalar(devcheck::tensor::CmpOp::Gt, 1.5).unwrap().requires_grad());
}

#[test]
fn backward_with_an_output_gradient() {
    let x = leaf(&[1.0, 2.0]);
    let y = x.mul(&x).unwrap();
    y.backward_with_grad(&vec64(&[1.0, 10.0])).unwrap();
    assert_eq!(grad_of(&x), vec![2.0, 40.0]);
}

#[test]
fn f32_leaves_get_f32_gradients() {
    let w = Tensor::ones([2, 2], &Device::Cpu).unwrap().with_requires_grad().unwrap();
    w.sum_all().unwrap().backward().unwrap();
    let g = w.grad().unwrap();
    assert_eq!(g.dtype(), DType::F32);
    assert_eq!(g.to_vec::<f32>().unwrap(), vec![1.0; 4]);
}

#[test]
fn a_leaf_can_be_the_loss() {
    let x = Tensor::scalar(2.0f64, &Device::Cpu).unwrap().with_requires_grad().unwrap();
    x.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_scalar::<f64>().unwrap(), 1.0);
}

#[test]
fn gradients_are_made_on_the_parameters_device() {
    let _fake = devcheck::fake::enter();
    let gpu = Device::Cuda(1);
    let w = Tensor::randn([4, 3], &gpu).unwrap().with_requires_grad().unwrap();
    let b = Tensor::zeros([4], &gpu).unwrap().with_requires_grad().unwrap();
    let x = Tensor::randn([8, 3], &gpu).unwrap();
    let target = Tensor::zeros([8], (DType::I64, &gpu)).unwrap();
    let logits = x.matmul(&w.t().unwrap()).unwrap().add(&b).unwrap().relu().unwrap();
    let picked = logits.log_softmax(-1).unwrap().gather(1, &target.unsqueeze(1).unwrap()).unwrap();
    picked.mean_all().unwrap().neg().unwrap().backward().unwrap();
    for (p, shape) in [(&w, [4usize, 3].as_slice()), (&b, [4].as_slice())] {
        let g = p.grad().expect("a gradient");
        assert_eq!(g.device(), gpu);
        assert_eq!(g.shape(), shape);
        assert_eq!(g.dtype(), DType::F32);
        assert!(g.is_fake());
    }
}

#[test]
fn a_move_sends_the_gradient_back_to_the_source_device() {
    let _fake = devcheck::fake::enter();
    let x = Tensor::randn([2, 3], &Device::Cpu).unwrap().with_requires_grad().unwrap();
    let on_gpu = x.to(&Device::Cuda(1)).unwrap();
    assert_eq!(on_gpu.grad_fn_name(), Some("ToDeviceBackward"));
    on_gpu.mul_scalar(2.0).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().device(), Device::Cpu);
}

// ---- errors ----------------------------------------------------------------------------------

fn render(e: devcheck::Error) -> String {
    devcheck::error::render_diagnostic(&e, 100)
}

#[test]
fn backward_of_a_non_scalar_is_an_error() {
    let x = leaf(&[1.0, 2.0]);
    let err = x.mul_scalar(2.0).unwrap().backward().unwrap_err();
    insta::assert_snapshot!(render(err));
}

#[test]
fn backward_without_any_tracked_leaf_is_an_error() {
    let err = vec64(&[1.0]).sum_all().unwrap().backward().unwrap_err();
    insta::assert_snapshot!(render(err));
}

#[test]
fn integer_tensors_cannot_require_grad() {
    let idx = Tensor::from_vec(vec![1i64, 2], [2], &Device::Cpu).unwrap();
    insta::assert_snapshot!(render(idx.set_requires_grad(true).unwrap_err()));
}

#[test]
fn computed_tensors_cannot_be_switched_off() {
    let y = leaf(&[1.0]).mul_scalar(2.0).unwrap();
    y.set_requires_grad(true).unwrap();
    insta::assert_snapshot!(render(y.set_requires_grad(false).unwrap_err()));
}

#[test]
fn a_gradient_must_match_its_tensor() {
    let x = leaf(&[1.0, 2.0]);
    insta::assert_snapshot!(render(x.set_grad(Some(vec64(&[1.0, 2.0, 3.0]))).unwrap_err()));
    let f32_grad = Tensor::ones([2], &Device::Cpu).unwrap();
    insta::assert_snapshot!(render(x.backward_with_grad(&f32_grad).unwrap_err()));
}

#[test]
fn writing_into_a_tensor_is_refused_while_gradients_are_tracked() {
    let x = leaf(&[1.0, 2.0]);
    let out = vec64(&[0.0, 0.0]);
    insta::assert_snapshot!(render(x.add_into(&x, &out).unwrap_err()));
    let _guard = devcheck::no_grad();
    x.add_into(&x, &out).unwrap();
    assert_eq!(out.to_vec::<f64>().unwrap(), vec![2.0, 4.0]);
}

// ReLU's backward writes its result over the gradient it is handed when nothing else holds that
// gradient; here the same gradient also becomes a leaf's `.grad` (an addition passes it to both
// operands unchanged), and a caller's output gradient stays the caller's.
#[test]
fn relu_never_writes_over_a_gradient_someone_else_holds() {
    let (w, v) = (leaf(&[1.0, -2.0, 3.0, -4.0]), leaf(&[0.5, 0.5, 0.5, 0.5]));
    let c = vec64(&[1.0, 2.0, 3.0, 4.0]);
    let loss = w.relu().unwrap().add(&v).unwrap().mul(&c).unwrap().sum_all().unwrap();
    loss.backward().unwrap();
    assert_eq!(grad_of(&v), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(grad_of(&w), vec![1.0, 0.0, 3.0, 0.0]);

    let x = leaf(&[-1.0, 2.0, -3.0]);
    let seed = vec64(&[5.0, 6.0, 7.0]);
    x.relu().unwrap().backward_with_grad(&seed).unwrap();
    assert_eq!(seed.to_vec::<f64>().unwrap(), vec![5.0, 6.0, 7.0]);
    assert_eq!(grad_of(&x), vec![0.0, 6.0, 0.0]);

    // The gradient a product makes is handed to ReLU alone, which writes over it; the result is
    // the same.
    let x = leaf(&[-1.0, 2.0, -3.0, 4.0]);
    x.relu().unwrap().mul(&c).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![0.0, 2.0, 0.0, 4.0]);

    // The backward reads ReLU's result, not its input: the two are positive at the same places.
    let x = leaf(&[f64::NAN, -0.0, 0.0, 1.5]);
    x.relu().unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(grad_of(&x), vec![0.0, 0.0, 0.0, 1.0]);

    // Large enough to be split over the pool's threads.
    let n = 300_001;
    let values: Vec<f32> = (0..n).map(|i| ((i * 7919) % 13) as f32 - 6.0).collect();
    let weights: Vec<f32> = (0..n).map(|i| (i % 5) as f32).collect();
    let x = Tensor::from_slice(&values, [n], &Device::Cpu).unwrap().with_requires_grad().unwrap();
    let c = Tensor::from_slice(&weights, [n], &Device::Cpu).unwrap();
    x.relu().unwrap().mul(&c).unwrap().sum_all().unwrap().backward().unwrap();
    let expected: Vec<f32> =
        values.iter().zip(&weights).map(|(&v, &w)| if v > 0.0 { w } else { 0.0 }).collect();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), expected);
}
