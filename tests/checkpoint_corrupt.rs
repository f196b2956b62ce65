//! Damaged checkpoint files end in a clear error, never a panic, and leave the model untouched.

use std::path::PathBuf;
use std::sync::Once;

use devcheck::{Device, Module, Param, Tensor};

fn scratch(name: &str) -> PathBuf {
    static CWD: Once = Once::new();
    CWD.call_once(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("checkpoint_corrupt");
        std::fs::create_dir_all(&dir).expect("scratch folder");
        std::env::set_current_dir(&dir).expect("enter scratch folder");
    });
    PathBuf::from(name)
}

#[derive(Module)]
struct Linear {
    weight: Param,
    bias: Tensor,
}

fn linear() -> devcheck::Result<Linear> {
    let cpu = Device::Cpu;
    Ok(Linear { weight: Param::new(Tensor::zeros([2, 2], &cpu)?), bias: Tensor::zeros([2], &cpu)? })
}

/// A safetensors file: little-endian header length, JSON header, data.
fn file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

const GOOD_HEADER: &str = r#"{"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"weight":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}}"#;

/// Loads `bytes` as `name` into a fresh model; the error, rendered, plus a check that nothing
/// was loaded.
fn load_error(name: &str, bytes: &[u8]) -> String {
    let path = scratch(name);
    std::fs::write(&path, bytes).expect("write the damaged file");
    let mut model = linear().expect("cpu model");
    let error = model.load_state_dict(&path, &Device::Cpu).expect_err("a damaged file must not load");
    let untouched = model.weight.tensor().to_vec::<f32>().expect("cpu data") == [0.0; 4];
    assert!(untouched, "{name}: the model changed");
    error.render(100)
}

#[test]
fn an_intact_file_loads() -> devcheck::Result<()> {
    let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let path = scratch("intact.safetensors");
    std::fs::write(&path, file(GOOD_HEADER, &data)).expect("write");
    let mut model = linear()?;
    model.load_state_dict(&path, &Device::Cpu)?;
    assert_eq!(model.bias.to_vec::<f32>()?, [1.0, 2.0]);
    assert_eq!(model.weight.tensor().to_vec::<f32>()?, [3.0, 4.0, 5.0, 6.0]);
    Ok(())
}

#[test]
fn damaged_files_are_clear_errors() {
    let data = [0u8; 24];
    let good = file(GOOD_HEADER, &data);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty.safetensors", Vec::new()),
        ("shorter_than_header_length.safetensors", vec![1, 2, 3]),
        ("truncated.safetensors", good[..good.len() - 5].to_vec()),
        ("trailing_bytes.safetensors", [good.as_slice(), &[0, 0]].concat()),
        ("header_length_past_end.safetensors", {
            let mut bytes = good.clone();
            bytes[..8].copy_from_slice(&(good.len() as u64 * 2).to_le_bytes());
            bytes
        }),
        ("huge_header_length.safetensors", {
            let mut bytes = good.clone();
            bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
            bytes
        }),
        ("not_json.safetensors", file("this is not json", &[])),
        (
            "unknown_dtype.safetensors",
            file(r#"{"bias":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}"#, &[0; 8]),
        ),
        (
            "shape_overflow.safetensors",
            file(
                r#"{"bias":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}}"#,
                &[0; 8],
            ),
        ),
        (
            "wrong_byte_range.safetensors",
            file(r#"{"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,6]}}"#, &[0; 6]),
        ),
        ("not_utf8.safetensors", {
            let mut bytes = 2u64.to_le_bytes().to_vec();
            bytes.extend_from_slice(&[0xff, 0xfe]);
            bytes
        }),
    ];
    let mut report = String::new();
    for (name, bytes) in cases {
        let rendered = load_error(name, &bytes);
        report.push_str(&format!("── {name}\n{rendered}\n"));
    }
    insta::assert_snapshot!(report);
}

#[test]
fn a_dtype_devcheck_does_not_have_is_a_mismatch_in_the_report() {
    // I16 is a valid safetensors dtype that devcheck has no tensors for.
    let header = r#"{"bias":{"dtype":"I16","shape":[2],"data_offsets":[0,4]},"weight":{"dtype":"F32","shape":[2,2],"data_offsets":[4,20]}}"#;
    let rendered = load_error("i16.safetensors", &file(header, &[0; 20]));
    insta::assert_snapshot!(rendered);
}
