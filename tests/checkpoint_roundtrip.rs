//! Checkpoints: save/load round trips, map-to-device, strict and non-strict reports.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Once;

use devcheck::checkpoint::{DEVICES_METADATA_KEY, LoadOptions};
use devcheck::{DType, Device, Module, Param, Tensor};

/// Tests write relative paths inside the target's scratch folder, so reports (which show the
/// path) are the same on every machine.
fn scratch(name: &str) -> PathBuf {
    static CWD: Once = Once::new();
    CWD.call_once(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("checkpoint_roundtrip");
        std::fs::create_dir_all(&dir).expect("scratch folder");
        std::env::set_current_dir(&dir).expect("enter scratch folder");
    });
    PathBuf::from(name)
}

#[derive(Module)]
struct Block {
    weight: Param,
    bias: Tensor,
}

#[derive(Module)]
struct Model {
    embed: Param,
    blocks: Vec<Block>,
    /// i64 token ids: a non-float buffer.
    vocab_ids: Tensor,
    #[module(non_persistent)]
    causal_mask: Tensor,
    half_scale: Tensor,
}

fn model(seed: u64, width: usize, layers: usize) -> devcheck::Result<Model> {
    devcheck::manual_seed(seed);
    let cpu = Device::Cpu;
    Ok(Model {
        embed: Param::new(Tensor::randn([6, width], &cpu)?),
        blocks: (0..layers)
            .map(|_| {
                Ok(Block {
                    weight: Param::new(Tensor::randn([width, width], &cpu)?),
                    bias: Tensor::randn([width], &cpu)?,
                })
            })
            .collect::<devcheck::Result<_>>()?,
        vocab_ids: Tensor::from_vec((0..6i64).map(|i| i * 100 + seed as i64).collect(), [6], &cpu)?,
        causal_mask: Tensor::ones([3, 3], &cpu)?,
        half_scale: Tensor::randn([width], &cpu)?.to_dtype(DType::F16)?,
    })
}

fn values(model: &Model) -> devcheck::Result<Vec<(String, Vec<f64>)>> {
    model.state_dict().into_iter().map(|(k, t)| Ok((k, t.to_vec::<f64>()?))).collect()
}

#[test]
fn round_trip_restores_every_parameter_and_persistent_buffer() -> devcheck::Result<()> {
    let path = scratch("round_trip.safetensors");
    let saved = model(1, 4, 2)?;
    saved.save(&path)?;

    let mut loaded = model(2, 4, 2)?;
    assert_ne!(values(&loaded)?, values(&saved)?);
    let optimizer_view = loaded.blocks[1].weight.clone();
    loaded.blocks[1].weight.set_grad(Some(Tensor::ones([4, 4], &Device::Cpu)?))?;
    loaded.load_state_dict(&path, &Device::Cpu)?;

    assert_eq!(values(&loaded)?, values(&saved)?);
    assert_eq!(loaded.vocab_ids.dtype(), DType::I64);
    assert_eq!(loaded.half_scale.dtype(), DType::F16);
    assert_eq!(
        saved.state_dict().keys().collect::<Vec<_>>(),
        [
            "blocks.0.bias",
            "blocks.0.weight",
            "blocks.1.bias",
            "blocks.1.weight",
            "embed",
            "half_scale",
            "vocab_ids"
        ],
        "the non-persistent mask is not saved"
    );
    // The parameter cell is the same, so an optimizer holding it sees the loaded value.
    assert_eq!(optimizer_view.tensor().to_vec::<f32>()?, saved.blocks[1].weight.tensor().to_vec::<f32>()?);
    assert!(optimizer_view.grad().is_none(), "the old gradient belonged to the old value");
    assert_eq!(loaded.embed.tensor().name().as_deref(), Some("embed"));
    Ok(())
}

#[test]
fn the_file_records_where_each_tensor_was_saved_from() -> devcheck::Result<()> {
    let path = scratch("devices.safetensors");
    model(1, 2, 1)?.save(&path)?;
    let bytes = std::fs::read(&path).expect("the saved file");
    let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes).expect("valid file");
    let devices = metadata.metadata().as_ref().and_then(|m| m.get(DEVICES_METADATA_KEY)).cloned();
    assert_eq!(
        devices.as_deref(),
        Some(
            r#"{"blocks.0.bias":"cpu","blocks.0.weight":"cpu","embed":"cpu","half_scale":"cpu","vocab_ids":"cpu"}"#
        )
    );
    Ok(())
}

#[test]
fn load_maps_to_a_fake_cuda_device() -> devcheck::Result<()> {
    let path = scratch("to_fake_cuda.safetensors");
    model(3, 4, 1)?.save(&path)?;
    let mut loaded = model(4, 4, 1)?;
    let _fake = devcheck::fake::enter();
    loaded.load_state_dict(&path, &Device::Cuda(1))?;
    for (key, tensor) in loaded.state_dict() {
        assert_eq!(tensor.device(), Device::Cuda(1), "{key}");
    }
    // Only what was loaded moved: the non-persistent mask stays, and `device()` says so.
    let error = loaded.device().expect_err("the mask is still on cpu");
    assert!(error.to_string().contains("on cpu: causal_mask"), "{error}");
    loaded.to(&Device::Cuda(1))?;
    assert_eq!(loaded.device()?, Device::Cuda(1));
    Ok(())
}

#[test]
fn optimizer_state_follows_a_loaded_parameter_to_the_target_device() -> devcheck::Result<()> {
    let path = scratch("state.safetensors");
    model(5, 2, 1)?.save(&path)?;
    let mut loaded = model(6, 2, 1)?;
    loaded.embed.set_state("exp_avg", Tensor::zeros([6, 2], &Device::Cpu)?)?;
    let _fake = devcheck::fake::enter();
    loaded.load_state_dict(&path, &Device::Cuda(0))?;
    assert_eq!(loaded.embed.state("exp_avg").map(|t| t.device()), Some(Device::Cuda(0)));
    Ok(())
}

#[derive(Module)]
struct Renamed {
    embed: Param,
    blocks: Vec<Block>,
    vocab_ids: Tensor,
    half_scale: Tensor,
    head: Param,
}

#[test]
fn strict_load_reports_every_mismatch_at_once_and_loads_nothing() -> devcheck::Result<()> {
    let path = scratch("mismatch.safetensors");
    model(7, 4, 2)?.save(&path)?;
    let cpu = Device::Cpu;
    let mut other = Renamed {
        embed: Param::new(Tensor::zeros([6, 4], &cpu)?),
        // One layer of a wider model: a shape mismatch, and layer 1 is unexpected.
        blocks: vec![Block {
            weight: Param::new(Tensor::zeros([8, 4], &cpu)?),
            bias: Tensor::zeros([4], &cpu)?,
        }],
        vocab_ids: Tensor::zeros([6], &cpu)?.to_dtype(DType::I32)?,
        half_scale: Tensor::zeros([4], &cpu)?.to_dtype(DType::F16)?,
        head: Param::new(Tensor::zeros([4, 6], &cpu)?),
    };
    let error = other.load_state_dict(&path, &cpu).expect_err("keys disagree");
    insta::assert_snapshot!(error.render(100));
    assert_eq!(other.embed.tensor().to_vec::<f32>()?, vec![0.0; 24], "strict: nothing loaded");

    let report = other.load_state_dict_with(&path, &LoadOptions::new(&cpu).strict(false))?;
    assert_eq!(report.loaded, ["blocks.0.bias", "embed", "half_scale"]);
    assert_eq!(report.missing.iter().map(|m| m.key.as_str()).collect::<Vec<_>>(), ["head"]);
    assert_eq!(
        report.unexpected.iter().map(|m| m.key.as_str()).collect::<Vec<_>>(),
        ["blocks.1.bias", "blocks.1.weight"]
    );
    assert_eq!(report.shape_mismatches[0].found.shape, [4, 4]);
    assert_eq!(report.dtype_mismatches[0].found.dtype, "i64");
    assert_ne!(other.embed.tensor().to_vec::<f32>()?, vec![0.0; 24], "non-strict: matching keys loaded");
    assert_eq!(other.vocab_ids.dtype(), DType::I32, "mismatched keys are left alone");
    Ok(())
}

#[test]
fn the_report_shows_the_device_a_tensor_was_saved_from() -> devcheck::Result<()> {
    // A checkpoint written on a GPU machine: the bytes are the same, the metadata says cuda:0.
    let path = scratch("from_gpu.safetensors");
    let weight: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2], &weight).expect("view");
    let metadata = HashMap::from([(DEVICES_METADATA_KEY.to_string(), r#"{"weight":"cuda:0"}"#.to_string())]);
    let bytes = safetensors::serialize([("weight", view)], Some(metadata)).expect("serialize");
    std::fs::write(&path, bytes).expect("write the file");

    #[derive(Module)]
    struct Small {
        weight: Param,
    }
    let mut small = Small { weight: Param::new(Tensor::zeros([3], &Device::Cpu)?) };
    let error = small.load_state_dict(&path, &Device::Cpu).expect_err("shape differs");
    insta::assert_snapshot!(error.render(100));

    let mut right = Small { weight: Param::new(Tensor::zeros([2], &Device::Cpu)?) };
    right.load_state_dict(&path, &Device::Cpu)?;
    assert_eq!(right.weight.tensor().to_vec::<f32>()?, [1.0, 2.0]);
    Ok(())
}

#[test]
fn loading_onto_cuda_without_cuda_suggests_cpu() -> devcheck::Result<()> {
    if devcheck::cuda::is_available() {
        return Ok(());
    }
    let path = scratch("no_cuda.safetensors");
    model(8, 2, 1)?.save(&path)?;
    let mut loaded = model(9, 2, 1)?;
    let error = loaded.load_state_dict(&path, &Device::Cuda(0)).expect_err("no CUDA");
    let rendered = error.render(100);
    assert!(rendered.contains("cannot load `no_cuda.safetensors` onto cuda:0"), "{rendered}");
    assert!(rendered.contains("`model.load_state_dict(path, &Device::Cpu)`"), "{rendered}");
    Ok(())
}

#[test]
fn fake_tensors_cannot_be_saved_and_io_errors_name_the_path() -> devcheck::Result<()> {
    let mut m = model(10, 2, 1)?;
    let error = m.save(scratch("no/such/folder/model.safetensors")).expect_err("folder missing");
    insta::assert_snapshot!(error.render(100));

    let error = m.load_state_dict(scratch("missing.safetensors"), &Device::Cpu).expect_err("no file");
    assert!(error.to_string().starts_with("cannot read checkpoint `missing.safetensors`"), "{error}");

    let _fake = devcheck::fake::enter();
    m.to(&Device::Cuda(0))?;
    let error = m.save(scratch("fake.safetensors")).expect_err("no data");
    assert!(matches!(error, devcheck::Error::NoData { .. }), "{error}");
    assert!(!scratch("fake.safetensors").exists(), "nothing is written");
    Ok(())
}
