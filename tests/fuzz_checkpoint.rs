//! The checkpoint reader against hostile files: random bytes and mutated headers never panic,
//! always give a loaded model or a checkpoint error, leave the model untouched on error, and agree
//! with the `safetensors` crate's own parser about what a valid file holds.
//!
//! CI runs a few dozen cases per property; `scripts/fuzz.sh` runs the same properties with many
//! more (`PROPTEST_CASES`).

use std::path::PathBuf;

use devcheck::checkpoint::LoadOptions;
use devcheck::{Device, Error, Module, Param, Tensor};
use proptest::prelude::*;
use safetensors::SafeTensors;

const CPU: Device = Device::Cpu;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48);
    // Failures print their case; fuzz runs write no regression files into the source tree.
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

#[derive(Module)]
struct Small {
    weight: Param,
    bias: Tensor,
    steps: Tensor,
}

fn small() -> Small {
    let cpu = CPU;
    Small {
        weight: Param::new(Tensor::zeros([2, 3], &cpu).expect("cpu")),
        bias: Tensor::zeros([3], &cpu).expect("cpu"),
        steps: Tensor::zeros([1], (devcheck::DType::I64, &cpu)).expect("cpu"),
    }
}

fn values(model: &Small) -> Vec<Vec<f64>> {
    model.state_dict().values().map(|t| t.to_vec::<f64>().expect("cpu")).collect()
}

/// A valid checkpoint of `Small` with distinct values.
fn valid_file() -> Vec<u8> {
    let model = small();
    let weight = Tensor::arange(1.0, 7.0, 1.0, &CPU).and_then(|t| t.reshape([2, 3])).expect("cpu");
    model.weight.set_tensor(weight).expect("same shape");
    let path = scratch("valid");
    model.save(&path).expect("save");
    std::fs::read(&path).expect("read back")
}

/// A file of this test thread's own in the target's scratch folder.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz_checkpoint");
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let thread = std::thread::current().name().unwrap_or("main").replace("::", "-");
    dir.join(format!("{thread}-{name}.safetensors"))
}

/// Loads `bytes` into a fresh model (strict, then not strict), inspects it, and checks the
/// outcome against the `safetensors` crate.
fn check_file(bytes: &[u8]) -> Result<(), TestCaseError> {
    let path = scratch("case");
    std::fs::write(&path, bytes).expect("write the case");
    let reference = SafeTensors::deserialize(bytes);
    for strict in [true, false] {
        let mut model = small();
        let before = values(&model);
        match model.load_state_dict_with(&path, &LoadOptions::new(&CPU).strict(strict)) {
            Ok(report) => {
                let reference = reference
                    .as_ref()
                    .map_err(|e| TestCaseError::fail(format!("loaded a file safetensors rejects ({e:?})")))?;
                for key in &report.loaded {
                    let view = reference.tensor(key).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                    let loaded = model.state_dict()[key].to_raw_bytes().expect("cpu");
                    prop_assert_eq!(loaded.as_slice(), view.data(), "`{}` differs from the file", key);
                }
            }
            Err(Error::Checkpoint(_)) => {
                prop_assert_eq!(values(&model), before, "a failed load changed the model");
            }
            Err(other) => return Err(TestCaseError::fail(format!("not a checkpoint error: {other:?}"))),
        }
    }
    // A file safetensors accepts is one devcheck reads too (whether or not it fits the model).
    let inventory = devcheck::check::inspect_checkpoint(&path);
    prop_assert_eq!(
        inventory.is_ok(),
        reference.is_ok(),
        "inspect and safetensors disagree: {:?}",
        inventory.err()
    );
    Ok(())
}

/// Header tokens that steer a mutated header into the validator's corners.
fn token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "\"",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "0",
        "1",
        "8",
        "24",
        "-1",
        "1e400",
        "18446744073709551615",
        "4294967296",
        "\"F32\"",
        "\"BOOL\"",
        "\"F8_E4M3\"",
        "\"I64\"",
        "\"weight\"",
        "\"bias\"",
        "\"__metadata__\"",
        "\"data_offsets\"",
        "\"shape\"",
        "\"dtype\"",
        "null",
        "\"\\u0000\"",
        "\u{00e9}",
    ])
}

/// How a valid file is damaged.
#[derive(Clone, Debug)]
enum Mutation {
    /// Overwrite one byte anywhere.
    Byte { at: usize, value: u8 },
    /// Cut the file short.
    Truncate { at: usize },
    /// Append bytes.
    Append(Vec<u8>),
    /// Replace a span of the header with a token, and fix the length field so the header parses
    /// as far as it can.
    Splice { at: usize, len: usize, token: &'static str },
    /// Set the header length field.
    Length(u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Mutation::Byte { at, value }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        prop::collection::vec(any::<u8>(), 1..16).prop_map(Mutation::Append),
        (any::<usize>(), 0usize..12, token()).prop_map(|(at, len, token)| Mutation::Splice {
            at,
            len,
            token
        }),
        prop_oneof![Just(0u64), Just(7), Just(u64::MAX), Just(100_000_001), any::<u64>()]
            .prop_map(Mutation::Length),
    ]
}

fn apply(file: &mut Vec<u8>, mutation: &Mutation) {
    let header_len = u64::from_le_bytes(file[..8].try_into().expect("8 bytes")) as usize;
    match mutation {
        Mutation::Byte { at, value } => {
            let at = at % file.len();
            file[at] = *value;
        }
        Mutation::Truncate { at } => file.truncate(at % file.len()),
        Mutation::Append(bytes) => file.extend_from_slice(bytes),
        Mutation::Splice { at, len, token } => {
            if header_len == 0 || header_len.saturating_add(8) > file.len() {
                return;
            }
            let start = 8 + at % header_len;
            let end = (start + len).min(8 + header_len);
            file.splice(start..end, token.bytes());
            let new_len = header_len - (end - start) + token.len();
            file[..8].copy_from_slice(&(new_len as u64).to_le_bytes());
        }
        Mutation::Length(len) => file[..8].copy_from_slice(&len.to_le_bytes()),
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_bytes_are_errors_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check_file(&bytes)?;
    }

    #[test]
    fn random_bytes_behind_a_plausible_length_field(header in prop::collection::vec(any::<u8>(), 0..256), data in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&data);
        check_file(&bytes)?;
    }

    #[test]
    fn mutated_files_load_only_what_safetensors_reads(mutations in prop::collection::vec(mutation(), 1..4)) {
        let mut file = valid_file();
        for m in &mutations {
            if file.len() >= 8 {
                apply(&mut file, m);
            }
        }
        check_file(&file)?;
    }
}

#[test]
fn the_unmutated_file_loads_and_is_what_safetensors_reads() {
    check_file(&valid_file()).expect("a valid file");
    let mut model = small();
    model.load_state_dict(scratch("valid"), &CPU).expect("load");
    assert_eq!(model.weight.tensor().to_vec::<f32>().expect("cpu"), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}
