//! Losses against values computed by hand in f64, their gradients against finite differences, and
//! their errors.

use crate::support::gradcheck;

use devcheck::nn::functional::{cross_entropy, mse_loss, nll_loss};
use devcheck::nn::{ClassLossOptions, CrossEntropyLoss, Reduction};
use devcheck::{DType, Device, Module, Tensor};
use gradcheck::{check, randn};

const LOGITS: [[f64; 3]; 4] = [[1.0, 2.0, 0.5], [0.1, -1.0, 2.0], [0.0, 0.0, 0.0], [3.0, -2.0, 1.0]];
const TARGET: [i64; 4] = [1, 2, 0, 2];
const WEIGHT: [f64; 3] = [0.2, 1.0, 3.0];

fn logits() -> Tensor {
    Tensor::from_vec(LOGITS.concat(), [4, 3], &Device::Cpu).unwrap()
}

fn target() -> Tensor {
    Tensor::from_slice(&TARGET, [4], &Device::Cpu).unwrap()
}

fn weight() -> Tensor {
    Tensor::from_slice(&WEIGHT, [3], &Device::Cpu).unwrap()
}

fn log_softmax(row: &[f64]) -> Vec<f64> {
    let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = max + row.iter().map(|x| (x - max).exp()).sum::<f64>().ln();
    row.iter().map(|x| x - lse).collect()
}

/// PyTorch's definition: per row `(1 - s) * w[t] * -logp[t] + s / C * sum_c w[c] * -logp[c]`;
/// the mean divides by the sum of `w[t]` over rows that are not ignored.
fn reference(weight: Option<&[f64]>, smoothing: f64, ignore: i64, reduction: Reduction) -> Vec<f64> {
    let c = 3.0;
    let w = |k: usize| weight.map_or(1.0, |w| w[k]);
    let mut per_row = Vec::new();
    let mut norm = 0.0;
    for (row, &t) in LOGITS.iter().zip(&TARGET) {
        if t == ignore {
            per_row.push(0.0);
            continue;
        }
        let lp = log_softmax(row);
        let nll = -w(t as usize) * lp[t as usize];
        let smooth: f64 = (0..3).map(|k| -w(k) * lp[k]).sum();
        per_row.push((1.0 - smoothing) * nll + smoothing / c * smooth);
        norm += w(t as usize);
    }
    match reduction {
        Reduction::Mean => vec![per_row.iter().sum::<f64>() / norm],
        Reduction::Sum => vec![per_row.iter().sum()],
        Reduction::None => per_row,
    }
}

fn assert_close(got: &Tensor, want: &[f64]) {
    let got = got.to_vec::<f64>().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "got {got:?}, want {want:?}");
    }
}

#[test]
fn cross_entropy_matches_the_definition() {
    for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        for weighted in [false, true] {
            for smoothing in [0.0, 0.1] {
                for ignore in [-100, 2] {
                    let options = ClassLossOptions {
                        weight: weighted.then(weight),
                        ignore_index: ignore,
                        label_smoothing: smoothing,
                        reduction,
                    };
                    let got = cross_entropy(&logits(), &target(), &options).unwrap();
                    let want = reference(weighted.then_some(&WEIGHT[..]), smoothing, ignore, reduction);
                    assert_close(&got, &want);
                }
            }
        }
    }
}

#[test]
fn nll_loss_of_log_softmax_is_cross_entropy() {
    let options = ClassLossOptions { weight: Some(weight()), ..ClassLossOptions::default() };
    let nll = nll_loss(&logits().log_softmax(1).unwrap(), &target(), &options).unwrap();
    assert_close(&nll, &reference(Some(&WEIGHT), 0.0, -100, Reduction::Mean));
}

#[test]
fn cross_entropy_of_one_sample_and_of_spatial_logits() {
    let one = cross_entropy(
        &logits().narrow(0, 1, 1).unwrap().squeeze(0).unwrap(),
        &Tensor::scalar(2i64, &Device::Cpu).unwrap(),
        &ClassLossOptions::default(),
    )
    .unwrap();
    assert_close(&one, &[-log_softmax(&LOGITS[1])[2]]);

    // [N=2, C=3, d=2]: sample n, position p has logits LOGITS[2n + p].
    let spatial = logits().reshape([2, 2, 3]).unwrap().permute([0, 2, 1]).unwrap();
    let targets = target().reshape([2, 2]).unwrap();
    let options = ClassLossOptions { reduction: Reduction::None, ..ClassLossOptions::default() };
    let per_position = cross_entropy(&spatial, &targets, &options).unwrap();
    assert_eq!(per_position.shape(), &[2, 2]);
    assert_close(&per_position, &reference(None, 0.0, -100, Reduction::None));
}

#[test]
fn cross_entropy_with_probability_targets() {
    let probs = Tensor::from_vec(
        vec![0.2f64, 0.8, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.3, 0.3, 0.4],
        [4, 3],
        &Device::Cpu,
    )
    .unwrap();
    let got = cross_entropy(&logits(), &probs, &ClassLossOptions::default()).unwrap();
    let p = probs.to_vec::<f64>().unwrap();
    let mut total = 0.0;
    for (i, row) in LOGITS.iter().enumerate() {
        let lp = log_softmax(row);
        total -= (0..3).map(|k| p[3 * i + k] * lp[k]).sum::<f64>();
    }
    assert_close(&got, &[total / 4.0]);
}

#[test]
fn mse_loss_matches_the_definition() {
    let a = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], [3], &Device::Cpu).unwrap();
    let b = Tensor::from_vec(vec![1.5f64, 0.0, 3.0], [3], &Device::Cpu).unwrap();
    assert_close(&mse_loss(&a, &b, Reduction::Mean).unwrap(), &[(0.25 + 4.0) / 3.0]);
    assert_close(&mse_loss(&a, &b, Reduction::Sum).unwrap(), &[4.25]);
    assert_close(&mse_loss(&a, &b, Reduction::None).unwrap(), &[0.25, 4.0, 0.0]);
}

#[test]
fn loss_gradients_match_finite_differences() {
    let t = target();
    for (name, options) in [
        ("plain", ClassLossOptions::default()),
        ("weighted", ClassLossOptions { weight: Some(weight()), ..ClassLossOptions::default() }),
        ("smoothed", ClassLossOptions { label_smoothing: 0.2, ..ClassLossOptions::default() }),
        (
            "weighted, smoothed, ignoring class 0",
            ClassLossOptions {
                weight: Some(weight()),
                label_smoothing: 0.1,
                ignore_index: 0,
                reduction: Reduction::Sum,
            },
        ),
    ] {
        check(&format!("cross_entropy {name}"), &[randn(&[4, 3])], |x| cross_entropy(&x[0], &t, &options));
    }
    check("mse_loss", &[randn(&[3, 2]), randn(&[3, 2])], |x| mse_loss(&x[0], &x[1], Reduction::Mean));
}

#[test]
fn the_class_weight_of_a_loss_module_moves_with_it() {
    let _fake = devcheck::fake::enter();
    let mut loss = CrossEntropyLoss::new().with_weight(Tensor::ones([3], &Device::Cpu).unwrap());
    loss.to(&Device::Cuda(1)).unwrap();
    assert_eq!(loss.weight.as_ref().unwrap().device(), Device::Cuda(1));
    let logits = Tensor::fake([4, 3], DType::F32, &Device::Cuda(1)).unwrap();
    let target = Tensor::fake([4], DType::I64, &Device::Cuda(1)).unwrap();
    let value = loss.forward(&logits, &target).unwrap();
    assert_eq!((value.device(), value.shape()), (Device::Cuda(1), &[][..]));
}

fn render(e: devcheck::Error) -> String {
    devcheck::error::render_diagnostic(&e, 100)
}

#[test]
fn a_target_out_of_range_names_the_class_count() {
    let bad = Tensor::from_vec(vec![1i64, 7, 0, 2], [4], &Device::Cpu).unwrap();
    insta::assert_snapshot!(render(
        cross_entropy(&logits(), &bad, &ClassLossOptions::default()).unwrap_err()
    ));
}

#[test]
fn float_labels_of_the_wrong_shape_are_refused() {
    let labels = Tensor::from_vec(vec![1.0f64, 2.0, 0.0, 2.0], [4], &Device::Cpu).unwrap();
    insta::assert_snapshot!(render(
        cross_entropy(&logits(), &labels, &ClassLossOptions::default()).unwrap_err()
    ));
}

#[test]
fn targets_of_the_wrong_shape_are_refused() {
    let labels = Tensor::from_vec(vec![1i64, 2], [2], &Device::Cpu).unwrap();
    insta::assert_snapshot!(render(
        cross_entropy(&logits(), &labels, &ClassLossOptions::default()).unwrap_err()
    ));
}

/// More classes than the row kernels' 16 accumulator lanes, and not a multiple of them.
#[test]
fn cross_entropy_gradient_over_many_classes_matches_finite_differences() {
    let target = Tensor::from_vec(vec![0i64, 36, 17], [3], &Device::Cpu).unwrap();
    check("cross_entropy over 37 classes", &[randn(&[3, 37])], |x| {
        cross_entropy(&x[0], &target, &ClassLossOptions::default())
    });
}
