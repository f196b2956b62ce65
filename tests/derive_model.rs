//! `#[derive(Module)]` on a small transformer-shaped model: everything moves, skipped fields are
//! reported, a half-moved model names its stragglers.

use std::collections::BTreeMap;

use devcheck::module::{EntryKind, ModuleInfo};
use devcheck::{DType, Device, Module, Param, Tensor};

#[derive(Module)]
struct Attention {
    query: Param,
    key: Param,
    /// Lower-triangular: moved with the model, rebuilt rather than saved.
    #[module(non_persistent)]
    causal_mask: Tensor,
}

#[derive(Module)]
struct Block {
    attn: Attention,
    norm_scale: Param,
}

#[derive(Module)]
struct Head(Param, Tensor);

struct Config {
    width: usize,
}

#[derive(Module)]
struct Model {
    embed: Param,
    /// Sinusoidal positional encoding: a buffer, moved and saved.
    pos_enc: Tensor,
    blocks: Vec<Block>,
    head: Option<Head>,
    #[module(skip)]
    pos_cache: Tensor,
    #[module(skip)]
    config: Config,
    dropout: f32,
    name: String,
}

const WIDTH: usize = 4;
const SEQ: usize = 3;

fn causal_mask(device: &Device) -> devcheck::Result<Tensor> {
    let values: Vec<u8> = (0..SEQ * SEQ).map(|i| u8::from(i % SEQ <= i / SEQ)).collect();
    Tensor::from_vec(values, [SEQ, SEQ], device)
}

fn sinusoidal(device: &Device) -> devcheck::Result<Tensor> {
    let mut values = Vec::with_capacity(SEQ * WIDTH);
    for pos in 0..SEQ {
        for i in 0..WIDTH {
            let angle = pos as f32 / 10000f32.powf((i / 2 * 2) as f32 / WIDTH as f32);
            values.push(if i % 2 == 0 { angle.sin() } else { angle.cos() });
        }
    }
    Tensor::from_vec(values, [SEQ, WIDTH], device)
}

fn block(device: &Device) -> devcheck::Result<Block> {
    Ok(Block {
        attn: Attention {
            query: Param::new(Tensor::randn([WIDTH, WIDTH], device)?),
            key: Param::new(Tensor::randn([WIDTH, WIDTH], device)?),
            causal_mask: causal_mask(device)?,
        },
        norm_scale: Param::new(Tensor::ones([WIDTH], device)?),
    })
}

fn model(device: &Device) -> devcheck::Result<Model> {
    Ok(Model {
        embed: Param::new(Tensor::randn([10, WIDTH], device)?),
        pos_enc: sinusoidal(device)?,
        blocks: vec![block(device)?, block(device)?],
        head: Some(Head(Param::new(Tensor::randn([WIDTH, 10], device)?), Tensor::zeros([10], device)?)),
        pos_cache: Tensor::zeros([SEQ, WIDTH], device)?,
        config: Config { width: WIDTH },
        dropout: 0.1,
        name: "tiny".into(),
    })
}

fn paths(list: &[(String, Tensor)]) -> Vec<&str> {
    list.iter().map(|(p, _)| p.as_str()).collect()
}

#[test]
fn every_tensor_has_a_dotted_path() -> devcheck::Result<()> {
    let model = model(&Device::Cpu)?;
    assert_eq!(model.config.width, WIDTH);
    assert_eq!((model.dropout, model.name.as_str()), (0.1, "tiny"));
    assert_eq!(
        paths(&model.named_tensors()),
        [
            "embed",
            "pos_enc",
            "blocks.0.attn.query",
            "blocks.0.attn.key",
            "blocks.0.attn.causal_mask",
            "blocks.0.norm_scale",
            "blocks.1.attn.query",
            "blocks.1.attn.key",
            "blocks.1.attn.causal_mask",
            "blocks.1.norm_scale",
            "head.0",
            "head.1",
        ]
    );
    let params: Vec<String> = model.named_parameters().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        params,
        [
            "embed",
            "blocks.0.attn.query",
            "blocks.0.attn.key",
            "blocks.0.norm_scale",
            "blocks.1.attn.query",
            "blocks.1.attn.key",
            "blocks.1.norm_scale",
            "head.0"
        ]
    );
    assert_eq!(
        paths(&model.named_buffers()),
        ["pos_enc", "blocks.0.attn.causal_mask", "blocks.1.attn.causal_mask", "head.1"]
    );
    assert_eq!(model.num_parameters(), 10 * WIDTH + 2 * (2 * WIDTH * WIDTH + WIDTH) + WIDTH * 10);
    assert_eq!(model.parameters().len(), 8);

    let modules: Vec<(String, &str)> = model
        .named_modules()
        .into_iter()
        .map(|(p, ModuleInfo { type_name, .. })| (p, type_name.rsplit("::").next().unwrap_or(type_name)))
        .collect();
    let expected = [
        ("", "Model"),
        ("blocks.0", "Block"),
        ("blocks.0.attn", "Attention"),
        ("blocks.1", "Block"),
        ("blocks.1.attn", "Attention"),
        ("head", "Head"),
    ];
    assert_eq!(modules, expected.map(|(p, t)| (p.to_string(), t)));
    Ok(())
}

#[test]
fn the_inventory_includes_skipped_fields_with_their_type() -> devcheck::Result<()> {
    let model = model(&Device::Cpu)?;
    let skipped: Vec<(String, Option<&str>, bool, Option<Device>)> = model
        .entries()
        .into_iter()
        .filter(|e| e.kind == EntryKind::Skipped)
        .map(|e| (e.path, e.type_name, e.may_hold_tensors, e.tensor.map(|t| t.device())))
        .collect();
    assert_eq!(
        skipped,
        [
            ("pos_cache".to_string(), Some("Tensor"), true, Some(Device::Cpu)),
            ("config".to_string(), Some("Config"), true, None),
        ]
    );
    let kinds: Vec<EntryKind> = model.entries().iter().map(|e| e.kind).take(5).collect();
    assert_eq!(
        kinds,
        [
            EntryKind::Parameter,
            EntryKind::Buffer,
            EntryKind::Parameter,
            EntryKind::Parameter,
            EntryKind::NonPersistentBuffer
        ]
    );
    Ok(())
}

#[test]
fn the_whole_model_moves_to_a_fake_cuda_1() -> devcheck::Result<()> {
    let mut model = model(&Device::Cpu)?;
    let _fake = devcheck::fake::enter();
    model.to(&Device::Cuda(1))?;

    let tensors = model.named_tensors();
    assert_eq!(tensors.len(), 12);
    for (path, tensor) in &tensors {
        assert_eq!(tensor.device(), Device::Cuda(1), "{path}");
        assert!(tensor.is_fake(), "{path}");
        assert_eq!(tensor.name().as_deref(), Some(path.as_str()), "moved tensors are named by their path");
    }
    assert_eq!(model.device()?, Device::Cuda(1));
    // The mask keeps its dtype and shape; skipped fields stay and are still reported.
    assert_eq!(model.blocks[1].attn.causal_mask.dtype(), DType::U8);
    assert_eq!(model.blocks[1].attn.causal_mask.shape(), [SEQ, SEQ]);
    assert_eq!(model.pos_cache.device(), Device::Cpu);
    assert_eq!(model.pos_cache.name().as_deref(), Some("pos_cache"));
    Ok(())
}

#[test]
fn device_of_a_half_moved_model_names_the_stragglers() -> devcheck::Result<()> {
    let mut model = model(&Device::Cpu)?;
    let _fake = devcheck::fake::enter();
    model.to(&Device::Cuda(1))?;
    // Replaced by hand after the move: the classic straggler.
    model.pos_enc = sinusoidal(&Device::Cpu)?;
    model.blocks[1].attn.causal_mask = causal_mask(&Device::Cpu)?;

    let error = model.device().expect_err("two devices");
    let by_device = model.devices();
    assert_eq!(by_device[&Device::Cpu], ["pos_enc", "blocks.1.attn.causal_mask"]);
    assert_eq!(by_device[&Device::Cuda(1)].len(), 10);
    insta::assert_snapshot!(error.render(100));
    Ok(())
}

#[test]
fn device_of_a_module_without_tensors_says_so() {
    #[derive(Module)]
    struct Empty {
        _width: usize,
    }
    let error = Empty { _width: 3 }.device().expect_err("no tensors");
    insta::assert_snapshot!(error.render(100));
}

#[test]
fn a_failed_move_changes_nothing() -> devcheck::Result<()> {
    if devcheck::cuda::is_available() {
        return Ok(());
    }
    let mut model = model(&Device::Cpu)?;
    let error = model.to(&Device::Cuda(0)).expect_err("no CUDA here");
    assert!(matches!(error, devcheck::Error::DeviceUnavailable { .. } | devcheck::Error::Unsupported { .. }));
    assert_eq!(model.device()?, Device::Cpu);
    assert!(model.named_tensors().iter().all(|(_, t)| !t.is_fake()));
    Ok(())
}

#[test]
fn gradients_and_optimizer_state_follow_their_parameter() -> devcheck::Result<()> {
    let mut model = model(&Device::Cpu)?;
    // An optimizer built before the move holds clones of the parameters.
    let held: Vec<Param> = model.parameters();
    let embed = &held[0];
    embed.set_grad(Some(Tensor::ones([10, WIDTH], &Device::Cpu)?))?;
    embed.set_state("exp_avg", Tensor::zeros([10, WIDTH], &Device::Cpu)?)?;
    embed.set_state("step", Tensor::scalar(3i64, &Device::Cpu)?)?;

    let _fake = devcheck::fake::enter();
    model.to(&Device::Cuda(1))?;
    assert_eq!(embed.device(), Device::Cuda(1), "the optimizer's handle sees the move");
    assert_eq!(embed.grad().map(|g| g.device()), Some(Device::Cuda(1)));
    assert_eq!(embed.state("exp_avg").map(|t| t.device()), Some(Device::Cuda(1)));
    assert_eq!(embed.state("step").map(|t| t.device()), Some(Device::Cuda(1)));
    assert_eq!(embed.state_keys(), ["exp_avg", "step"]);
    assert!(held.iter().all(|p| p.device() == Device::Cuda(1)));
    assert!(held[0].same_param(&model.embed) && held[0].id() == model.embed.id());

    model.zero_grad();
    assert!(embed.grad().is_none());
    Ok(())
}

#[test]
fn state_must_live_where_the_parameter_does() -> devcheck::Result<()> {
    let p = Param::new(Tensor::zeros([2], &Device::Cpu)?);
    let _fake = devcheck::fake::enter();
    let error = p.set_state("exp_avg", Tensor::zeros([2], &Device::Cuda(0))?).expect_err("other device");
    assert!(
        error.to_string().contains("the parameter is on cpu but the state tensor is on cuda:0"),
        "{error}"
    );
    let error = p.set_grad(Some(Tensor::zeros([3], &Device::Cpu)?)).expect_err("other shape");
    assert!(error.to_string().contains("the parameter is cpu [2] but the gradient is cpu [3]"), "{error}");
    Ok(())
}

#[test]
fn tied_parameters_move_once_and_stay_tied() -> devcheck::Result<()> {
    #[derive(Module)]
    struct Tied {
        embed: Param,
        unembed: Param,
    }
    let shared = Param::new(Tensor::randn([5, 3], &Device::Cpu)?);
    let mut model = Tied { embed: shared.clone(), unembed: shared };
    assert_eq!(model.named_parameters().len(), 1);
    assert_eq!(model.num_parameters(), 15);
    assert_eq!(model.state_dict().len(), 2, "a checkpoint holds both keys");
    let _fake = devcheck::fake::enter();
    model.to(&Device::Cuda(0))?;
    assert!(model.embed.same_param(&model.unembed));
    assert_eq!(model.unembed.device(), Device::Cuda(0));
    assert_eq!(model.embed.tensor().name().as_deref(), Some("embed"));
    Ok(())
}

#[test]
fn to_dtype_converts_floating_tensors_only() -> devcheck::Result<()> {
    let mut model = model(&Device::Cpu)?;
    model.embed.set_state("step", Tensor::scalar(1i64, &Device::Cpu)?)?;
    model.to_dtype(DType::F16)?;
    assert_eq!(model.embed.dtype(), DType::F16);
    assert_eq!(model.pos_enc.dtype(), DType::F16);
    assert_eq!(model.blocks[0].attn.causal_mask.dtype(), DType::U8);
    assert_eq!(model.embed.state("step").map(|t| t.dtype()), Some(DType::I64));
    assert_eq!(model.pos_cache.dtype(), DType::F32, "skipped");
    let values = model.pos_enc.to_vec::<f32>()?;
    let reference = sinusoidal(&Device::Cpu)?.to_vec::<f32>()?;
    for (a, b) in values.iter().zip(&reference) {
        assert!((a - b).abs() < 1e-3, "{a} vs {b}");
    }

    let error = model.to_dtype(DType::I32).expect_err("not floating");
    assert!(error.to_string().contains("i32 is not a floating dtype"), "{error}");
    assert_eq!(model.embed.dtype(), DType::F16);
    Ok(())
}

#[test]
fn containers_enums_generics_and_trait_objects() -> devcheck::Result<()> {
    trait Layer: Module {}

    #[derive(Module)]
    struct Linear {
        weight: Param,
    }
    impl Layer for Linear {}

    #[derive(Module)]
    enum Mixer {
        Linear(Linear),
        Gated { gate: Linear, scale: Tensor },
        Identity,
    }

    #[derive(Module)]
    struct Wrapper<M> {
        inner: Box<M>,
        extra: [Option<Tensor>; 2],
    }

    #[derive(Module)]
    struct Zoo {
        heads: BTreeMap<String, Linear>,
        by_index: BTreeMap<usize, Tensor>,
        layers: Vec<Box<dyn Layer>>,
        mixers: Vec<Mixer>,
        wrapped: Wrapper<Linear>,
        nested: Vec<Vec<Option<Param>>>,
        r#type: Tensor,
    }

    let cpu = Device::Cpu;
    let linear =
        || -> devcheck::Result<Linear> { Ok(Linear { weight: Param::new(Tensor::zeros([2, 2], &cpu)?) }) };
    let mut zoo = Zoo {
        heads: BTreeMap::from([("value".to_string(), linear()?), ("query".to_string(), linear()?)]),
        by_index: BTreeMap::from([(7, Tensor::zeros([1], &cpu)?)]),
        layers: vec![Box::new(linear()?)],
        mixers: vec![
            Mixer::Linear(linear()?),
            Mixer::Gated { gate: linear()?, scale: Tensor::ones([2], &cpu)? },
            Mixer::Identity,
        ],
        wrapped: Wrapper { inner: Box::new(linear()?), extra: [None, Some(Tensor::zeros([3], &cpu)?)] },
        nested: vec![vec![None, Some(Param::new(Tensor::zeros([1], &cpu)?))]],
        r#type: Tensor::zeros([1], &cpu)?,
    };
    assert_eq!(
        paths(&zoo.named_tensors()),
        [
            "heads.query.weight",
            "heads.value.weight",
            "by_index.7",
            "layers.0.weight",
            "mixers.0.weight",
            "mixers.1.gate.weight",
            "mixers.1.scale",
            "wrapped.inner.weight",
            "wrapped.extra.1",
            "nested.0.1",
            "type",
        ]
    );
    let _fake = devcheck::fake::enter();
    zoo.to(&Device::Cuda(3))?;
    assert_eq!(zoo.device()?, Device::Cuda(3));
    Ok(())
}

#[test]
fn train_and_eval_reach_hand_written_leaves() {
    struct Dropout {
        training: bool,
    }
    impl Module for Dropout {
        fn visit(
            &self,
            _: &mut dyn devcheck::module::Visitor,
            _: &mut devcheck::module::ModulePath,
        ) -> devcheck::Result<()> {
            Ok(())
        }
        fn visit_mut(
            &mut self,
            _: &mut dyn devcheck::module::VisitorMut,
            _: &mut devcheck::module::ModulePath,
        ) -> devcheck::Result<()> {
            Ok(())
        }
        fn own_training(&self) -> Option<bool> {
            Some(self.training)
        }
        fn set_own_training(&mut self, training: bool) {
            self.training = training;
        }
    }
    #[derive(Module)]
    struct Net {
        drops: Vec<Dropout>,
        last: Option<Dropout>,
    }
    let mut net = Net { drops: vec![Dropout { training: true }, Dropout { training: true }], last: None };
    assert!(net.is_training());
    net.eval();
    assert!(!net.is_training());
    assert!(net.drops.iter().all(|d| !d.training));
    net.train();
    assert!(net.drops.iter().all(|d| d.training) && net.is_training());

    #[derive(Module)]
    struct NoFlags {
        w: Tensor,
    }
    let mut plain = NoFlags { w: Tensor::zeros([1], &Device::Cpu).expect("cpu tensor") };
    plain.eval();
    assert!(plain.is_training(), "a model without mode-dependent layers reports PyTorch's default");
    assert_eq!(plain.w.numel(), 1);
}

#[test]
fn a_mismatch_error_names_the_skipped_field() -> devcheck::Result<()> {
    let mut model = model(&Device::Cpu)?;
    let _fake = devcheck::fake::enter();
    model.to(&Device::Cuda(1))?;
    let error = model.pos_enc.add(&model.pos_cache).expect_err("cuda:1 + cpu");
    let text = error.to_string();
    assert!(text.contains("`pos_enc`") && text.contains("`pos_cache`"), "{text}");
    Ok(())
}
