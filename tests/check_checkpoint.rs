//! `devcheck::check::inspect_checkpoint`: what `devcheck inspect FILE.safetensors` prints.

use std::collections::HashMap;
use std::path::PathBuf;

use devcheck::check::inspect_checkpoint;
use devcheck::checkpoint::DEVICES_METADATA_KEY;
use devcheck::{DType, Device, Error, Module, Param, Tensor};
use safetensors::tensor::{Dtype, TensorView};

/// Relative to the package root (where tests run), so that reports, which show the path (and wrap
/// long lines), read the same on every machine: the target folder's scratch space when it is
/// inside the package, else the same relative path (ignored by git) under the package root.
fn scratch(name: &str) -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let relative =
        std::env::current_dir().ok().and_then(|cwd| tmp.strip_prefix(&cwd).ok().map(PathBuf::from));
    let dir = relative.unwrap_or_else(|| PathBuf::from("target/tmp")).join("check_checkpoint");
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir.join(name)
}

/// Snapshots with this machine's reason for a missing GPU masked.
macro_rules! snapshot {
    ($name:expr, $text:expr) => {{
        let mut settings = insta::Settings::clone_current();
        settings.add_filter(r"reason: [^\n]*(\n *│ [^\n]*)*", "reason: [why]");
        settings.bind(|| insta::assert_snapshot!($name, $text));
    }};
}

#[derive(Module)]
struct Net {
    weight: Param,
    steps: Tensor,
}

#[test]
fn a_checkpoint_saved_by_devcheck_lists_its_tensors_and_devices() -> devcheck::Result<()> {
    let path = scratch("net.safetensors");
    let net = Net {
        weight: Param::new(Tensor::randn([3, 4], &Device::Cpu)?),
        steps: Tensor::zeros([2], (DType::I64, &Device::Cpu))?,
    };
    net.save(&path)?;
    let inventory = inspect_checkpoint(&path)?;
    let rows: Vec<_> = inventory
        .tensors()
        .iter()
        .map(|t| (t.name.as_str(), t.file_dtype.as_str(), t.shape.clone(), t.bytes, t.saved_from))
        .collect();
    assert_eq!(
        rows,
        [
            ("steps", "i64", vec![2], 16, Some(Device::Cpu)),
            ("weight", "f32", vec![3, 4], 48, Some(Device::Cpu))
        ]
    );
    assert!(inventory.records_devices());
    assert_eq!(inventory.bytes(), 64);
    let cpu = &inventory.load_targets()[0];
    assert_eq!((cpu.device, cpu.blocked.as_deref(), cpu.saved_from_here), (Device::Cpu, None, 2));
    assert!(inventory.is_clean() && inventory.findings().is_empty(), "{inventory}");
    // With GPUs present, the table lists them too.
    if devcheck::cuda::device_count() == 0 {
        snapshot!("saved_by_devcheck", inventory.to_string());
    }
    Ok(())
}

/// A file as another tool (or a half-moved model) might leave it.
fn write_odd_checkpoint(path: &PathBuf) {
    let a = vec![0u8; 16];
    let b = vec![0u8; 4];
    let c = vec![0u8; 4];
    let tensors = vec![
        ("a.weight", TensorView::new(Dtype::F32, vec![2, 2], &a).unwrap()),
        ("b.scale", TensorView::new(Dtype::F8_E4M3, vec![4], &b).unwrap()),
        ("c.ids", TensorView::new(Dtype::I16, vec![2], &c).unwrap()),
    ];
    let devices = serde_json::json!({"a.weight": "cuda:1", "b.scale": "cpu", "c.ids": "cpu"}).to_string();
    let metadata = HashMap::from([(DEVICES_METADATA_KEY.to_string(), devices)]);
    std::fs::write(path, safetensors::serialize(tensors, Some(metadata)).unwrap()).unwrap();
}

#[test]
fn dtypes_it_cannot_load_and_devices_it_was_saved_from_are_flagged() -> devcheck::Result<()> {
    let path = scratch("odd.safetensors");
    write_odd_checkpoint(&path);
    let inventory = inspect_checkpoint(&path)?;
    let codes: Vec<&str> = inventory.findings().iter().map(|f| f.code()).collect();
    let cuda_1_is_here = devcheck::cuda::device_count() >= 2;
    let mut expected = vec!["unsupported-dtype", "unsupported-dtype", "mixed-devices"];
    if !cuda_1_is_here {
        expected.push("saved-from-unavailable");
    }
    assert_eq!(codes, expected, "{inventory}");
    assert_eq!(inventory.tensors()[1].dtype, None);
    assert_eq!(inventory.tensors()[0].dtype, Some(DType::F32));
    let cpu = &inventory.load_targets()[0];
    assert_eq!(cpu.blocked.as_deref(), Some("2 tensors have dtypes devcheck does not have"));
    assert!(inventory.load_targets().iter().any(|t| t.device == Device::Cuda(1) && t.saved_from_here == 1));
    let json = inventory.to_json();
    assert_eq!(json["tensors"][1]["dtype"], "f8_e4m3");
    assert_eq!(json["tensors"][1]["loadable_dtype"], false);
    assert_eq!(json["load_targets"][0]["loads"], false);
    if devcheck::cuda::device_count() == 0 {
        snapshot!("odd_table", inventory.to_string());
        snapshot!("odd_report", inventory.render(100));
    }
    assert!(matches!(inventory.ensure_clean(), Err(Error::Check(_))));
    Ok(())
}

#[test]
fn a_file_from_elsewhere_says_it_records_no_devices() -> devcheck::Result<()> {
    let path = scratch("plain.safetensors");
    let data = vec![0u8; 8];
    let tensors = vec![("w", TensorView::new(Dtype::BF16, vec![4], &data).unwrap())];
    std::fs::write(&path, safetensors::serialize(tensors, None).unwrap()).unwrap();
    let inventory = inspect_checkpoint(&path)?;
    assert!(!inventory.records_devices());
    assert_eq!(inventory.tensors()[0].dtype, Some(DType::BF16));
    assert_eq!(inventory.tensors()[0].saved_from, None);
    let codes: Vec<&str> = inventory.findings().iter().map(|f| f.code()).collect();
    assert_eq!(codes, ["no-device-record"]);
    // A note only: nothing stops it from loading.
    assert!(inventory.is_clean());
    Ok(())
}

#[test]
fn damaged_and_missing_files_are_clear_errors() {
    let good = scratch("to_damage.safetensors");
    write_odd_checkpoint(&good);
    let bytes = std::fs::read(&good).unwrap();

    let truncated = scratch("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() - 3]).unwrap();
    let error = inspect_checkpoint(&truncated).unwrap_err();
    assert!(error.to_string().contains("describes 24 B of tensor data but the file holds 21 B"), "{error}");

    let header_cut = scratch("header_cut.safetensors");
    std::fs::write(&header_cut, &bytes[..20]).unwrap();
    let error = inspect_checkpoint(&header_cut).unwrap_err();
    assert!(error.to_string().contains("points past the end of the file"), "{error}");

    let tiny = scratch("tiny.safetensors");
    std::fs::write(&tiny, b"abc").unwrap();
    assert!(inspect_checkpoint(&tiny).unwrap_err().to_string().contains("shorter than the 8-byte header"));

    let not_json = scratch("not_json.safetensors");
    let mut garbage = 4u64.to_le_bytes().to_vec();
    garbage.extend(b"{{{{");
    std::fs::write(&not_json, garbage).unwrap();
    let error = inspect_checkpoint(&not_json).unwrap_err();
    assert!(error.to_string().contains("not valid safetensors JSON"), "{error}");

    let missing = inspect_checkpoint(scratch("missing.safetensors")).unwrap_err();
    snapshot!("missing", missing.render(100));
}
