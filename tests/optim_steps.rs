//! Optimizer updates against PyTorch's formulas computed by hand in f64, state that follows its
//! parameter across devices, and state dicts that resume exactly.

use devcheck::nn::{Forward, Linear, Relu, Sequential};
use devcheck::optim::{Adam, AdamConfig, AdamW, Optimizer, Sgd, SgdConfig};
use devcheck::{DType, Device, Module, Param, Tensor};

const P0: [f64; 3] = [1.0, -2.0, 0.5];
const GRADS: [[f64; 3]; 3] = [[0.5, -1.0, 2.0], [0.1, 0.2, -0.3], [-0.4, 0.0, 1.0]];

fn param(values: &[f64]) -> Param {
    Param::new(
        Tensor::from_slice(values, [values.len()], &Device::Cpu).unwrap().with_requires_grad().unwrap(),
    )
}

/// `values` as a strided view (every other element of a larger buffer), shape `[n, 1]`.
fn strided_view(values: &[f64]) -> Tensor {
    let interleaved: Vec<f64> = values.iter().flat_map(|&v| [v, f64::NAN]).collect();
    let t = Tensor::from_vec(interleaved, [values.len(), 2], &Device::Cpu).unwrap().narrow(1, 0, 1).unwrap();
    assert!(!t.is_contiguous());
    t.with_requires_grad().unwrap()
}

fn set_grad(p: &Param, g: &[f64]) {
    let t = p.tensor();
    p.tensor().set_grad(Some(Tensor::from_slice(g, t.shape(), &Device::Cpu).unwrap())).unwrap();
}

fn values(p: &Param) -> Vec<f64> {
    p.tensor().to_vec::<f64>().unwrap()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{what}: got {got:?}, want {want:?}");
    }
}

/// PyTorch's Adam/AdamW for one element sequence of gradients.
fn adam_reference(decoupled: bool, lr: f64, wd: f64) -> Vec<Vec<f64>> {
    let (b1, b2, eps) = (0.9f64, 0.999f64, 1e-8);
    let mut p = P0.to_vec();
    let (mut m, mut v) = (vec![0.0; 3], vec![0.0; 3]);
    let mut out = Vec::new();
    for (t, g) in GRADS.iter().enumerate() {
        let t = t as i32 + 1;
        for i in 0..3 {
            let mut gi = g[i];
            if decoupled {
                p[i] *= 1.0 - lr * wd;
            } else {
                gi += wd * p[i];
            }
            m[i] = b1 * m[i] + (1.0 - b1) * gi;
            v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
            let denom = v[i].sqrt() / (1.0 - b2.powi(t)).sqrt() + eps;
            p[i] -= lr / (1.0 - b1.powi(t)) * m[i] / denom;
        }
        out.push(p.clone());
    }
    out
}

/// Three steps with [`GRADS`]. With `strided`, the parameter is made a strided view before every
/// step, so the update cannot run in place on contiguous memory and takes the tensor-op path (the
/// one accelerators and dry runs use) every time.
fn run(optimizer: &mut dyn Optimizer, p: &Param, strided_steps: bool) -> Vec<Vec<f64>> {
    GRADS
        .iter()
        .map(|g| {
            if strided_steps {
                p.set_tensor(strided_view(&values(p))).unwrap();
            }
            set_grad(p, g);
            optimizer.step().unwrap();
            values(p)
        })
        .collect()
}

#[test]
fn adamw_first_step_by_hand() {
    // Step 1: m = 0.1 g, v = 0.001 g^2, so the update is lr * g / (|g| + eps) after the decay.
    let p = param(&P0);
    let mut opt = AdamW::with_config(vec![p.clone()], AdamConfig { lr: 0.1, ..AdamConfig::adamw() }).unwrap();
    set_grad(&p, &GRADS[0]);
    opt.step().unwrap();
    let want: Vec<f64> =
        P0.iter().zip(GRADS[0]).map(|(&p, g)| p * (1.0 - 0.1 * 0.01) - 0.1 * g / (g.abs() + 1e-8)).collect();
    assert_close(&values(&p), &want, "AdamW step 1");
    assert_close(&[0.899000002], &want[..1], "the formula itself");
}

#[test]
fn adamw_and_adam_match_pytorch_over_three_steps() {
    for strided in [false, true] {
        let make = |v: &[f64]| if strided { Param::new(strided_view(v)) } else { param(v) };
        let p = make(&P0);
        let config = AdamConfig { lr: 0.1, weight_decay: 0.05, ..AdamConfig::adamw() };
        let mut adamw = AdamW::with_config(vec![p.clone()], config).unwrap();
        let got = run(&mut adamw, &p, strided);
        for (step, (g, w)) in got.iter().zip(adam_reference(true, 0.1, 0.05)).enumerate() {
            assert_close(g, &w, &format!("AdamW step {} (strided: {strided})", step + 1));
        }

        let p = make(&P0);
        let mut adam = Adam::with_config(vec![p.clone()], config).unwrap();
        let got = run(&mut adam, &p, strided);
        for (step, (g, w)) in got.iter().zip(adam_reference(false, 0.1, 0.05)).enumerate() {
            assert_close(g, &w, &format!("Adam step {} (strided: {strided})", step + 1));
        }
    }
}

fn sgd_reference(c: &SgdConfig) -> Vec<Vec<f64>> {
    let mut p = P0.to_vec();
    let mut b = [0.0; 3];
    let mut out = Vec::new();
    for (t, g) in GRADS.iter().enumerate() {
        for i in 0..3 {
            let mut gi = g[i] + c.weight_decay * p[i];
            if c.momentum != 0.0 {
                b[i] = if t == 0 { gi } else { c.momentum * b[i] + (1.0 - c.dampening) * gi };
                gi = if c.nesterov { gi + c.momentum * b[i] } else { b[i] };
            }
            p[i] -= c.lr * gi;
        }
        out.push(p.clone());
    }
    out
}

#[test]
fn sgd_variants_match_pytorch() {
    let configs = [
        SgdConfig { lr: 0.1, ..SgdConfig::default() },
        SgdConfig { lr: 0.1, weight_decay: 0.1, ..SgdConfig::default() },
        SgdConfig { lr: 0.1, momentum: 0.9, ..SgdConfig::default() },
        SgdConfig { lr: 0.1, momentum: 0.9, dampening: 0.3, weight_decay: 0.01, ..SgdConfig::default() },
        SgdConfig { lr: 0.1, momentum: 0.9, nesterov: true, ..SgdConfig::default() },
    ];
    for config in configs {
        for strided in [false, true] {
            let p = if strided { Param::new(strided_view(&P0)) } else { param(&P0) };
            let mut sgd = Sgd::with_config(vec![p.clone()], config).unwrap();
            let got = run(&mut sgd, &p, strided);
            for (step, (g, w)) in got.iter().zip(sgd_reference(&config)).enumerate() {
                assert_close(g, &w, &format!("{config:?} step {} (strided: {strided})", step + 1));
            }
        }
    }
}

#[test]
fn f32_parameters_update_in_f32() {
    let p = Param::new(Tensor::ones([4], &Device::Cpu).unwrap().with_requires_grad().unwrap());
    let mut sgd = Sgd::new(vec![p.clone()], 0.5).unwrap();
    p.tensor().set_grad(Some(Tensor::full([4], 2.0, &Device::Cpu).unwrap())).unwrap();
    sgd.step().unwrap();
    assert_eq!(p.dtype(), DType::F32);
    assert_eq!(p.tensor().to_vec::<f32>().unwrap(), vec![0.0; 4]);
}

#[test]
fn parameters_without_gradients_are_left_alone_and_zero_grad_clears() {
    let (a, b) = (param(&P0), param(&P0));
    let mut opt = AdamW::new(vec![a.clone(), b.clone()], 0.1).unwrap();
    set_grad(&a, &GRADS[0]);
    opt.step().unwrap();
    assert_ne!(values(&a), P0.to_vec());
    assert_eq!(values(&b), P0.to_vec());
    assert!(b.state_keys().is_empty(), "no state for a parameter that never had a gradient");
    opt.zero_grad();
    assert!(a.tensor().grad().is_none() && a.grad().is_none());
}

#[test]
fn an_update_keeps_the_parameter_trainable() {
    let model = Sequential::new().append(Linear::new(3, 4, &Device::Cpu).unwrap()).append(Relu);
    let mut opt = Adam::new(model.parameters(), 0.01).unwrap();
    for _ in 0..2 {
        opt.zero_grad();
        let loss = model.forward(&Tensor::randn([2, 3], &Device::Cpu).unwrap()).unwrap().sum_all().unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
    }
    for p in model.parameters() {
        assert!(p.tensor().requires_grad() && p.tensor().is_leaf());
    }
}

fn tiny_model() -> Sequential {
    Sequential::new()
        .append(Linear::new(4, 8, &Device::Cpu).unwrap())
        .append(Relu)
        .append(Linear::new(8, 3, &Device::Cpu).unwrap())
}

fn train_steps(model: &Sequential, opt: &mut dyn Optimizer, steps: usize) {
    let device = model.device().unwrap();
    for _ in 0..steps {
        opt.zero_grad();
        let x = Tensor::randn([5, 4], &device).unwrap();
        let loss = model.forward(&x).unwrap().pow_scalar(2.0).unwrap().mean_all().unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
    }
}

#[test]
fn optimizer_state_follows_the_model_to_another_device() {
    let mut model = tiny_model();
    let mut opt = AdamW::new(model.parameters(), 1e-3).unwrap();
    train_steps(&model, &mut opt, 2);

    let _fake = devcheck::fake::enter();
    model.to(&Device::Cuda(1)).unwrap();
    let mut states = 0;
    for (path, p) in model.named_parameters() {
        assert_eq!(p.device(), Device::Cuda(1), "{path}");
        for key in p.state_keys() {
            assert_eq!(p.state(&key).unwrap().device(), Device::Cuda(1), "{path}.{key}");
            states += 1;
        }
    }
    assert_eq!(states, 8, "exp_avg and exp_avg_sq of four parameters");
    // The optimizer built before the move sees the moved parameters: a step on cuda:1 runs.
    train_steps(&model, &mut opt, 1);
    for (path, t) in opt.state_dict() {
        if path.ends_with("exp_avg") || path.ends_with("exp_avg_sq") {
            assert_eq!(t.device(), Device::Cuda(1), "{path}");
        }
    }
}

#[test]
fn a_saved_state_resumes_exactly() {
    let dir = std::env::temp_dir().join(format!("devcheck-optim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("adamw.safetensors");

    devcheck::manual_seed(1);
    let model = tiny_model();
    let mut opt = AdamW::new(model.parameters(), 1e-2).unwrap();
    train_steps(&model, &mut opt, 3);
    opt.save(&path).unwrap();

    // A second model with the same values and a fresh optimizer loaded from the file.
    let twin = tiny_model();
    for (a, b) in model.parameters().iter().zip(twin.parameters()) {
        let copy = a.tensor().detach().contiguous().unwrap().mul_scalar(1.0).unwrap();
        b.set_tensor(copy.with_requires_grad().unwrap()).unwrap();
    }
    let mut resumed = AdamW::new(twin.parameters(), 0.5).unwrap();
    resumed.load(&path).unwrap();
    assert_eq!(resumed.learning_rate(), 1e-2, "hyperparameters come back too");

    devcheck::manual_seed(9);
    train_steps(&model, &mut opt, 2);
    devcheck::manual_seed(9);
    train_steps(&twin, &mut resumed, 2);
    for (a, b) in model.parameters().iter().zip(twin.parameters()) {
        assert_eq!(a.tensor().to_vec::<f32>().unwrap(), b.tensor().to_vec::<f32>().unwrap());
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn loaded_state_lands_on_each_parameters_device() {
    let model = tiny_model();
    let mut opt =
        Sgd::with_config(model.parameters(), SgdConfig { lr: 0.1, momentum: 0.9, ..Default::default() })
            .unwrap();
    train_steps(&model, &mut opt, 1);
    let saved = opt.state_dict();

    let _fake = devcheck::fake::enter();
    let mut elsewhere = tiny_model();
    elsewhere.to(&Device::Cuda(1)).unwrap();
    let mut resumed = Sgd::new(elsewhere.parameters(), 0.1).unwrap();
    resumed.load_state_dict(&saved).unwrap();
    assert_eq!(resumed.config().momentum, 0.9);
    for p in elsewhere.parameters() {
        assert_eq!(p.state("momentum_buffer").unwrap().device(), Device::Cuda(1));
    }
}

fn render(e: devcheck::Error) -> String {
    devcheck::error::render_diagnostic(&e, 100)
}

#[test]
fn bad_hyperparameters_are_refused() {
    let err = AdamW::with_config(vec![param(&P0)], AdamConfig { betas: (0.9, 1.0), ..AdamConfig::adamw() })
        .err()
        .unwrap();
    insta::assert_snapshot!(render(err));
}

#[test]
fn a_state_for_other_parameters_is_refused() {
    let model = tiny_model();
    let mut opt = Adam::new(model.parameters(), 1e-3).unwrap();
    train_steps(&model, &mut opt, 1);
    let mut other = Adam::new(vec![param(&P0)], 1e-3).unwrap();
    insta::assert_snapshot!(render(other.load_state_dict(&opt.state_dict()).unwrap_err()));
    let mut sgd = Sgd::new(model.parameters(), 0.1).unwrap();
    insta::assert_snapshot!(render(sgd.load_state_dict(&opt.state_dict()).unwrap_err()));
}

#[test]
fn training_resumes_after_the_model_moves() {
    // Train on the host, move model and optimizer to a (fake) cuda:1, train on: every gradient and
    // every state tensor is made there, by the optimizer that was built before the move.
    let mut model = tiny_model();
    let mut opt = AdamW::new(model.parameters(), 1e-3).unwrap();
    train_steps(&model, &mut opt, 1);
    let _fake = devcheck::fake::enter();
    model.to(&Device::Cuda(1)).unwrap();
    opt.zero_grad();
    let x = Tensor::randn([5, 4], &Device::Cuda(1)).unwrap();
    model.forward(&x).unwrap().sum_all().unwrap().backward().unwrap();
    for (path, p) in model.named_parameters() {
        assert!(p.tensor().is_leaf() && p.requires_grad(), "{path} is still a trainable leaf");
        assert_eq!(p.grad().map(|g| g.device()), Some(Device::Cuda(1)), "{path}");
    }
    opt.step().unwrap();
    for (path, p) in model.named_parameters() {
        assert_eq!(p.device(), Device::Cuda(1), "{path}");
        assert!(p.tensor().is_fake() && p.tensor().is_leaf(), "{path} was updated on cuda:1");
        for key in p.state_keys() {
            assert_eq!(p.state(&key).unwrap().device(), Device::Cuda(1), "{path}.{key}");
        }
    }
}

#[test]
fn a_model_gradient_is_the_parameter_gradient() {
    let model = tiny_model();
    model
        .forward(&Tensor::randn([2, 4], &Device::Cpu).unwrap())
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    for p in model.parameters() {
        assert!(p.grad().is_some());
    }
    model.zero_grad();
    assert!(model.parameters().iter().all(|p| p.grad().is_none() && p.tensor().grad().is_none()));
}
