//! `devcheck inspect FILE.safetensors` prints a checkpoint's tensors from its header.

use std::collections::BTreeMap;
use std::process::Command;

use devcheck::{DType, Device, Tensor};

fn devcheck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_devcheck")).args(args).env("NO_COLOR", "1").output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn inspect_lists_a_checkpoints_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let mut tensors = BTreeMap::new();
    tensors.insert("encoder.weight".to_string(), Tensor::zeros([4, 3], &Device::Cpu).unwrap());
    tensors.insert("encoder.mask".to_string(), Tensor::ones([3, 3], (DType::Bool, &Device::Cpu)).unwrap());
    devcheck::checkpoint::save_tensors(&tensors, &path).unwrap();
    let p = path.to_str().unwrap();
    let (code, stdout, stderr) = devcheck(&["inspect", p]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("encoder.weight") && stdout.contains("encoder.mask"), "{stdout}");
    assert!(stdout.contains("[4, 3]") && stdout.contains("bool"), "{stdout}");
    let (code, json, _) = devcheck(&["inspect", "--format", "json", p]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert!(value.to_string().contains("encoder.weight"), "{json}");
}

#[test]
fn a_damaged_checkpoint_is_a_usage_error_with_a_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.safetensors");
    std::fs::write(&path, b"\x10\x00\x00\x00\x00\x00\x00\x00{not json").unwrap();
    let (code, _, stderr) = devcheck(&["inspect", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("help"), "{stderr}");
}
