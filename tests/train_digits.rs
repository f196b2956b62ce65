//! The digits example end to end, with fast settings: the loss falls, the test accuracy passes a
//! threshold, and the checkpoint it writes loads back into a fresh model.

#[allow(dead_code)]
#[path = "../examples/train_digits.rs"]
mod example;

use devcheck::nn::Forward;
use devcheck::{Device, Module};
use example::{Args, Mlp, pick_device, run};

fn args(checkpoint: std::path::PathBuf) -> Args {
    Args {
        device: "cpu".to_string(),
        epochs: 6,
        batch_size: 64,
        lr: 3e-3,
        seed: 0,
        data: concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/digits.csv.gz").into(),
        checkpoint,
        quiet: true,
    }
}

#[test]
fn a_few_epochs_learn_the_digits() {
    let dir = std::env::temp_dir().join(format!("devcheck-train-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let checkpoint = dir.join("digits.safetensors");
    let summary = run(&args(checkpoint.clone())).unwrap();

    let losses = &summary.epoch_losses;
    assert_eq!(losses.len(), 6);
    assert!(losses.windows(2).all(|w| w[1] < w[0]), "the loss falls every epoch: {losses:?}");
    assert!(losses[5] < losses[0] / 4.0, "{losses:?}");
    assert!(summary.test_accuracy > 0.9, "test accuracy {}", summary.test_accuracy);

    // The checkpoint holds the trained weights: a fresh model loaded from it classifies the digits
    // (an untrained one gets about one in ten right).
    let mut fresh = Mlp::new(&Device::Cpu).unwrap();
    fresh.load_state_dict(&checkpoint, &Device::Cpu).unwrap();
    fresh.eval();
    let table = devcheck::data::read_csv(args(checkpoint.clone()).data, false).unwrap();
    let x = table.narrow(1, 0, 64).unwrap().div_scalar(16.0).unwrap();
    let labels = table.narrow(1, 64, 1).unwrap().squeeze(1).unwrap().to_dtype(devcheck::DType::I64).unwrap();
    let predicted = fresh.forward(&x).unwrap().argmax(1, false).unwrap();
    let correct = predicted.eq(&labels).unwrap().sum_all().unwrap().to_scalar::<i64>().unwrap();
    assert!(correct as f64 / 1797.0 > 0.9, "{correct} of 1797 right after loading");
    let saved: Vec<String> = fresh.state_dict().into_keys().collect();
    assert_eq!(saved, ["hidden.bias", "hidden.weight", "out.bias", "out.weight"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_device_flag_is_checked() {
    assert_eq!(pick_device("cpu").unwrap(), Device::Cpu);
    assert!(pick_device("gpu").unwrap_err().to_string().contains("unknown device `gpu`"));
    if devcheck::cuda::device_count() < 4 {
        let err = pick_device("cuda:3").unwrap_err().to_string();
        assert!(err.contains("cuda:3 is not available"), "{err}");
    }
    let auto = pick_device("auto").unwrap();
    assert_eq!(auto, Device::best_available());
}
