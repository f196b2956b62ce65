//! Layers: values against naive references, gradients against finite differences, paths, modes
//! and device moves.

use crate::support::gradcheck;

use devcheck::nn::functional::{conv2d, embedding, layer_norm, linear, max_pool2d};
use devcheck::nn::{
    CausalSelfAttention, Conv2d, Conv2dOptions, Dropout, Embedding, Flatten, Forward, LayerNorm, Linear,
    MaxPool2d, Relu, Sequential, SinusoidalPositionalEncoding,
};
use devcheck::{DType, Device, Module, Tensor};
use gradcheck::{check, randn, values};

fn paths<M: Module>(m: &M) -> Vec<String> {
    m.named_tensors().into_iter().map(|(p, _)| p).collect()
}

/// Direct loops over the definition of a (grouped, strided, padded, dilated) convolution.
fn naive_conv(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    o: Conv2dOptions,
) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, wd] = xs;
    let [oc, cg, kh, kw] = ws;
    let g = o.groups;
    let ho = (h + 2 * o.padding[0] - o.dilation[0] * (kh - 1) - 1) / o.stride[0] + 1;
    let wo = (wd + 2 * o.padding[1] - o.dilation[1] * (kw - 1) - 1) / o.stride[1] + 1;
    let mut out = vec![0.0; n * oc * ho * wo];
    for b in 0..n {
        for oo in 0..oc {
            let group = oo / (oc / g);
            for i in 0..ho {
                for j in 0..wo {
                    let mut acc = 0.0;
                    for ci in 0..cg {
                        let cin = group * cg + ci;
                        for a in 0..kh {
                            for e in 0..kw {
                                let y =
                                    (i * o.stride[0] + a * o.dilation[0]) as isize - o.padding[0] as isize;
                                let z =
                                    (j * o.stride[1] + e * o.dilation[1]) as isize - o.padding[1] as isize;
                                if y < 0 || z < 0 || y >= h as isize || z >= wd as isize {
                                    continue;
                                }
                                let xv = x[((b * c + cin) * h + y as usize) * wd + z as usize];
                                acc += xv * w[((oo * cg + ci) * kh + a) * kw + e];
                            }
                        }
                    }
                    out[((b * oc + oo) * ho + i) * wo + j] = acc;
                }
            }
        }
    }
    (out, [n, oc, ho, wo])
}

#[test]
fn conv2d_matches_the_definition() {
    let cases = [
        ([2, 3, 5, 6], [4, 3, 3, 2], Conv2dOptions::default()),
        ([1, 2, 7, 7], [2, 2, 3, 3], Conv2dOptions { stride: [2, 3], padding: [1, 2], ..Default::default() }),
        ([1, 4, 6, 5], [6, 2, 2, 2], Conv2dOptions { groups: 2, dilation: [2, 1], ..Default::default() }),
    ];
    for (xs, ws, options) in cases {
        let x = randn(&xs);
        let w = randn(&ws);
        let got = conv2d(&x, &w, None, options).unwrap();
        let (want, shape) = naive_conv(&values(&x), xs, &values(&w), ws, options);
        assert_eq!(got.shape(), &shape);
        for (g, w) in values(&got).iter().zip(&want) {
            assert!((g - w).abs() < 1e-10, "{g} vs {w} for {xs:?} * {ws:?} {options:?}");
        }
    }
}

#[test]
fn conv2d_gradients() {
    let options = Conv2dOptions { stride: [2, 1], padding: [1, 1], ..Default::default() };
    check("conv2d", &[randn(&[2, 2, 4, 3]), randn(&[3, 2, 2, 2]), randn(&[3])], |x| {
        conv2d(&x[0], &x[1], Some(&x[2]), options)
    });
    let grouped = Conv2dOptions { groups: 2, ..Default::default() };
    check("grouped conv2d", &[randn(&[1, 4, 3, 3]), randn(&[2, 2, 2, 2])], |x| {
        conv2d(&x[0], &x[1], None, grouped)
    });
}

#[test]
fn max_pool2d_matches_the_definition_and_its_gradient() {
    let x = randn(&[2, 3, 4, 6]);
    let got = max_pool2d(&x, [2, 3], Conv2dOptions { stride: [2, 3], ..Default::default() }).unwrap();
    assert_eq!(got.shape(), &[2, 3, 2, 2]);
    let v = values(&x);
    let mut want = Vec::new();
    for plane in 0..6 {
        for i in 0..2 {
            for j in 0..2 {
                let mut m = f64::NEG_INFINITY;
                for a in 0..2 {
                    for e in 0..3 {
                        m = m.max(v[plane * 24 + (2 * i + a) * 6 + 3 * j + e]);
                    }
                }
                want.push(m);
            }
        }
    }
    assert_eq!(values(&got), want);
    let padded = Conv2dOptions { stride: [1, 1], padding: [1, 1], ..Default::default() };
    check("max_pool2d", &[randn(&[1, 2, 3, 3])], |x| max_pool2d(&x[0], [2, 2], padded));
}

#[test]
fn linear_embedding_layer_norm_gradients() {
    check("linear", &[randn(&[3, 4]), randn(&[2, 4]), randn(&[2])], |x| linear(&x[0], &x[1], Some(&x[2])));
    let ids = Tensor::from_vec(vec![1i64, 0, 1, 3], [2, 2], &Device::Cpu).unwrap();
    check("embedding", &[randn(&[4, 3])], |x| embedding(&ids, &x[0]));
    check("layer_norm", &[randn(&[2, 3, 4]), randn(&[3, 4]), randn(&[3, 4])], |x| {
        layer_norm(&x[0], &[3, 4], Some(&x[1]), Some(&x[2]), 1e-5)
    });
}

#[test]
fn layer_norm_normalises_the_last_dims() {
    let ln = LayerNorm::new([4], &Device::Cpu).unwrap();
    let x =
        Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, -1.0, -1.0, 1.0, 1.0], [2, 4], &Device::Cpu).unwrap();
    let y = ln.forward(&x).unwrap().to_vec::<f32>().unwrap();
    let s = (1.25f32 + 1e-5).sqrt();
    let want = [-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s, -1.0 / (1.0f32 + 1e-5).sqrt()];
    for (g, w) in y.iter().zip(&want) {
        assert!((g - w).abs() < 1e-5, "{y:?}");
    }
}

#[test]
fn linear_follows_pytorch_layout_and_init() {
    let layer = Linear::new(16, 4, &Device::Cpu).unwrap();
    assert_eq!(layer.weight.shape(), vec![4, 16]);
    assert_eq!(paths(&layer), ["weight", "bias"]);
    let bound = 0.25;
    let w = layer.weight.tensor().to_vec::<f32>().unwrap();
    assert!(w.iter().all(|v| v.abs() <= bound), "weights lie in U(-1/sqrt(in), 1/sqrt(in))");
    let no_bias = Linear::with_bias(16, 4, false, &Device::Cpu).unwrap();
    assert_eq!(paths(&no_bias), ["weight"]);
    let y = layer.forward(&Tensor::ones([3, 16], &Device::Cpu).unwrap()).unwrap();
    assert_eq!(y.shape(), &[3, 4]);
}

#[test]
fn embedding_picks_rows() {
    let emb = Embedding::new(5, 3, &Device::Cpu).unwrap();
    let ids = Tensor::from_vec(vec![4i64, 0], [2], &Device::Cpu).unwrap();
    let rows = emb.forward(&ids).unwrap().to_vec::<f32>().unwrap();
    let table = emb.weight.tensor().to_vec::<f32>().unwrap();
    assert_eq!(rows, [&table[12..15], &table[0..3]].concat());
}

#[test]
fn dropout_drops_in_training_only() {
    devcheck::manual_seed(3);
    let mut model = Sequential::new().append(Dropout::new(0.25));
    let x = Tensor::ones([10_000], &Device::Cpu).unwrap();
    let y = model.forward(&x).unwrap().to_vec::<f32>().unwrap();
    let dropped = y.iter().filter(|&&v| v == 0.0).count();
    assert!((2200..2800).contains(&dropped), "{dropped} of 10000 dropped at p = 0.25");
    assert!(y.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6), "survivors scaled by 1/(1-p)");
    model.eval();
    assert!(!model.is_training());
    assert_eq!(model.forward(&x).unwrap().to_vec::<f32>().unwrap(), vec![1.0; 10_000]);
}

#[test]
fn sequential_paths_and_gradients() {
    let cpu = Device::Cpu;
    let model = Sequential::new()
        .append(Conv2d::new(1, 2, 3, &cpu).unwrap())
        .append(Relu)
        .append(MaxPool2d::new(2))
        .append(Flatten)
        .append(Linear::new(2 * 3 * 3, 4, &cpu).unwrap());
    assert_eq!(paths(&model), ["0.weight", "0.bias", "4.weight", "4.bias"]);
    let y = model.forward(&Tensor::randn([2, 1, 8, 8], &cpu).unwrap()).unwrap();
    assert_eq!(y.shape(), &[2, 4]);
    y.sum_all().unwrap().backward().unwrap();
    for (path, p) in model.named_parameters() {
        let g = p.tensor().grad().expect(&path);
        assert_eq!(g.shape(), p.shape().as_slice(), "{path}");
    }
}

#[derive(Module)]
struct TinyGpt {
    pos: SinusoidalPositionalEncoding,
    attn: CausalSelfAttention,
    norm: LayerNorm,
}

impl Forward for TinyGpt {
    fn forward(&self, x: &Tensor) -> devcheck::Result<Tensor> {
        self.norm.forward(&self.attn.forward(&self.pos.forward(x)?)?)
    }
}

#[test]
fn attention_buffers_move_with_the_model() {
    let mut model = TinyGpt {
        pos: SinusoidalPositionalEncoding::new(8, 6, &Device::Cpu).unwrap(),
        attn: CausalSelfAttention::new(8, 2, 6, &Device::Cpu).unwrap(),
        norm: LayerNorm::new([8], &Device::Cpu).unwrap(),
    };
    let saved: Vec<String> = model.state_dict().into_keys().collect();
    assert!(saved.contains(&"pos.table".to_string()));
    assert!(!saved.contains(&"attn.mask".to_string()), "the mask is rebuilt, not saved");

    let _fake = devcheck::fake::enter();
    model.to(&Device::Cuda(1)).unwrap();
    for (path, t) in model.named_tensors() {
        assert_eq!(t.device(), Device::Cuda(1), "{path}");
    }
    let y = model.forward(&Tensor::fake([2, 5, 8], DType::F32, &Device::Cuda(1)).unwrap()).unwrap();
    assert_eq!((y.device(), y.shape()), (Device::Cuda(1), &[2, 5, 8][..]));
}

#[test]
fn attention_is_causal() {
    let attn = CausalSelfAttention::new(4, 2, 5, &Device::Cpu).unwrap();
    let x = Tensor::randn([1, 5, 4], &Device::Cpu).unwrap();
    let full = attn.forward(&x).unwrap().narrow(1, 0, 3).unwrap().to_vec::<f32>().unwrap();
    // Changing the last two tokens cannot change the outputs at the first three.
    let changed =
        Tensor::cat(&[&x.narrow(1, 0, 3).unwrap(), &Tensor::randn([1, 2, 4], &Device::Cpu).unwrap()], 1)
            .unwrap();
    let prefix = attn.forward(&changed).unwrap().narrow(1, 0, 3).unwrap().to_vec::<f32>().unwrap();
    for (a, b) in full.iter().zip(&prefix) {
        assert!((a - b).abs() < 1e-6);
    }
}

fn render(e: devcheck::Error) -> String {
    devcheck::error::render_diagnostic(&e, 100)
}

#[test]
fn a_layer_of_the_wrong_width_says_which_sizes_disagree() {
    let layer = Linear::new(64, 10, &Device::Cpu).unwrap();
    let x = Tensor::zeros([8, 32], &Device::Cpu).unwrap();
    insta::assert_snapshot!(render(layer.forward(&x).unwrap_err()));
}

/// A view is the same tensor to reports: `fc.weight.t()` is still `fc.weight`, a parameter made by
/// `Linear::new`, and says it is a view. A computed result is not.
#[test]
fn views_keep_their_sources_name_role_and_origin() {
    #[derive(Module)]
    struct Net {
        fc: Linear,
    }
    let net = Net { fc: Linear::new(3, 2, &Device::Cpu).unwrap() };
    let _ = net.parameters(); // a walk names the parameters by their paths
    let weight = net.fc.weight.tensor();
    let views = [weight.t().unwrap(), weight.reshape([6]).unwrap(), weight.narrow(0, 1, 1).unwrap()];
    for view in &views {
        assert_eq!(view.name().as_deref(), Some("fc.weight"));
        assert_eq!(view.role(), Some(devcheck::TensorRole::Parameter));
        assert_eq!(view.origin(), weight.origin());
        assert_eq!(view.origin().op(), "Linear::new");
        assert!(view.is_view() && !weight.is_view());
    }
    let computed = weight.mul_scalar(2.0).unwrap();
    assert_eq!((computed.name(), computed.role(), computed.is_view()), (None, None, false));
    assert_eq!(computed.origin().op(), "mul");
}

#[test]
fn conv2d_matches_the_definition_for_odd_geometries() {
    let cases = [
        // Batch 1, one channel, odd sizes, a non-square kernel.
        ([1, 1, 5, 7], [2, 1, 3, 2], Conv2dOptions::default()),
        // A stride larger than the kernel skips input; padding wider than the kernel's reach makes
        // windows of padding only.
        ([2, 3, 9, 8], [4, 3, 2, 2], Conv2dOptions { stride: [3, 3], padding: [3, 0], ..Default::default() }),
        // Stride, padding and dilation together, different on each axis.
        (
            [2, 2, 7, 9],
            [3, 2, 3, 3],
            Conv2dOptions { stride: [2, 1], padding: [2, 1], dilation: [2, 3], groups: 1 },
        ),
        ([3, 5, 4, 4], [2, 5, 1, 1], Conv2dOptions::default()),
    ];
    for (xs, ws, options) in cases {
        let x = randn(&xs);
        let w = randn(&ws);
        let got = conv2d(&x, &w, None, options).unwrap();
        let (want, shape) = naive_conv(&values(&x), xs, &values(&w), ws, options);
        assert_eq!(got.shape(), &shape);
        for (g, w) in values(&got).iter().zip(&want) {
            assert!((g - w).abs() < 1e-10, "{g} vs {w} for {xs:?} * {ws:?} {options:?}");
        }
    }
}

#[test]
fn conv2d_reads_non_contiguous_inputs_and_f32() {
    let options = Conv2dOptions { stride: [1, 2], padding: [1, 1], ..Default::default() };
    // [2, 6, 5, 3] permuted to [2, 3, 5, 6]: every stride differs from a contiguous one.
    let x = randn(&[2, 6, 5, 3]).permute([0, 3, 2, 1]).unwrap();
    assert!(!x.is_contiguous());
    let w = randn(&[4, 3, 3, 3]);
    let (want, shape) = naive_conv(&values(&x), [2, 3, 5, 6], &values(&w), [4, 3, 3, 3], options);
    let got = conv2d(&x, &w, None, options).unwrap();
    assert_eq!(got.shape(), &shape);
    for (g, w) in values(&got).iter().zip(&want) {
        assert!((g - w).abs() < 1e-10, "{g} vs {w}");
    }
    let (x32, w32) = (x.to_dtype(DType::F32).unwrap(), w.to_dtype(DType::F32).unwrap());
    let got = conv2d(&x32, &w32, None, options).unwrap();
    assert_eq!(got.dtype(), DType::F32);
    for (g, w) in got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap().iter().zip(&want) {
        assert!((g - w).abs() < 1e-4 * (1.0 + w.abs()), "f32: {g} vs {w}");
    }
}

#[test]
fn conv2d_gradients_with_dilation_skips_and_strides() {
    let dilated = Conv2dOptions { stride: [1, 2], padding: [2, 1], dilation: [2, 2], groups: 1 };
    check("dilated conv2d", &[randn(&[1, 2, 5, 6]), randn(&[2, 2, 2, 3]), randn(&[2])], |x| {
        conv2d(&x[0], &x[1], Some(&x[2]), dilated)
    });
    // Stride above the kernel: some inputs are never read and get a zero gradient.
    let skipping = Conv2dOptions { stride: [3, 2], ..Default::default() };
    check("skipping conv2d", &[randn(&[2, 1, 7, 5]), randn(&[3, 1, 2, 1])], |x| {
        conv2d(&x[0], &x[1], None, skipping)
    });
    check("non-contiguous conv2d", &[randn(&[1, 4, 3, 2]), randn(&[2, 2, 2, 2]), randn(&[2])], |x| {
        conv2d(&x[0].permute([0, 3, 2, 1])?, &x[1], Some(&x[2]), Conv2dOptions::default())
    });
    // Everything at once: three groups, a bias, stride, padding and dilation, a batch of two read
    // through permuted strides (the host convolution's products run per group over the batch).
    let mixed = Conv2dOptions { stride: [2, 1], padding: [1, 2], dilation: [1, 2], groups: 3 };
    check("grouped strided conv2d", &[randn(&[2, 5, 4, 6]), randn(&[6, 2, 2, 2]), randn(&[6])], |x| {
        conv2d(&x[0].permute([0, 3, 2, 1])?, &x[1], Some(&x[2]), mixed)
    });
}

#[test]
fn max_pool2d_gradients_with_dilation_and_strides() {
    let dilated = Conv2dOptions { stride: [2, 1], padding: [1, 0], dilation: [1, 2], groups: 1 };
    check("dilated max_pool2d", &[randn(&[2, 1, 5, 6])], |x| max_pool2d(&x[0], [3, 2], dilated));
    check("non-contiguous max_pool2d", &[randn(&[1, 5, 4, 2])], |x| {
        max_pool2d(
            &x[0].permute([0, 3, 2, 1])?,
            [2, 2],
            Conv2dOptions { stride: [2, 2], ..Default::default() },
        )
    });
}

#[test]
fn max_pool2d_gradients_where_windows_tile_the_input() {
    // Windows side by side, 2, 3 and 4 wide (the widths compiled as constants and the one read at
    // run time), with rows and columns past the last window that no window reads.
    for (kernel, shape) in [([2, 2], [2, 3, 7, 9]), ([3, 3], [1, 2, 7, 10]), ([2, 4], [1, 2, 5, 9])] {
        let tiles = Conv2dOptions { stride: kernel, ..Default::default() };
        check(&format!("max_pool2d {kernel:?}"), &[randn(&shape)], |x| max_pool2d(&x[0], kernel, tiles));
    }
}

#[test]
fn max_pool2d_shares_the_gradient_of_a_tie() {
    // Overlapping 2x2 windows (stride 1) over
    //   1 1 0
    //   0 1 5
    // the first window's maximum 1 is tied three ways, the second's 5 is alone.
    for dtype in [DType::F64, DType::F32] {
        let x = Tensor::from_vec(vec![1.0, 1.0, 0.0, 0.0, 1.0, 5.0], [1, 1, 2, 3], &Device::Cpu)
            .unwrap()
            .to_dtype(dtype)
            .unwrap()
            .with_requires_grad()
            .unwrap();
        let y = max_pool2d(&x, [2, 2], Conv2dOptions::default()).unwrap();
        assert_eq!(y.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(), vec![1.0, 5.0]);
        let g =
            Tensor::from_vec(vec![3.0, 10.0], [1, 1, 1, 2], &Device::Cpu).unwrap().to_dtype(dtype).unwrap();
        y.backward_with_grad(&g).unwrap();
        let grad = x.grad().unwrap().to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        // Each tied element gets a third of 3 (PyTorch gives all of it to the first); the 1 at
        // (1, 1) is also in the second window but is not its maximum there.
        assert_eq!(grad, vec![1.0, 1.0, 0.0, 0.0, 1.0, 10.0], "{dtype:?}");
    }
}

/// Layer norm as the tensor ops it is composed of on other devices (and before it was fused).
fn composed_layer_norm(
    x: &Tensor,
    dims: usize,
    w: Option<&Tensor>,
    b: Option<&Tensor>,
) -> devcheck::Result<Tensor> {
    let dims: Vec<isize> = (x.rank() - dims..x.rank()).map(|d| d as isize).collect();
    let centered = x.sub(&x.mean(dims.clone(), true)?)?;
    let var = centered.mul(&centered)?.mean(dims, true)?;
    let mut out = centered.mul(&var.add_scalar(1e-5)?.rsqrt()?)?;
    if let Some(w) = w {
        out = out.mul(w)?;
    }
    if let Some(b) = b {
        out = out.add(b)?;
    }
    Ok(out)
}

/// On the host, layer norm is one fused node each way; its gradients against finite differences
/// on shapes its row loops must get right.
#[test]
fn fused_layer_norm_gradients_on_odd_shapes() {
    let fused = layer_norm(&randn(&[2, 3]).with_requires_grad().unwrap(), &[3], None, None, 1e-5).unwrap();
    assert_eq!(fused.grad_fn_name(), Some("LayerNormBackward"));
    check("two normalised dims", &[randn(&[2, 3, 5]), randn(&[3, 5]), randn(&[3, 5])], |x| {
        layer_norm(&x[0], &[3, 5], Some(&x[1]), Some(&x[2]), 1e-5)
    });
    check("one row", &[randn(&[1, 17]), randn(&[17]), randn(&[17])], |x| {
        layer_norm(&x[0], &[17], Some(&x[1]), Some(&x[2]), 1e-5)
    });
    check("rows of one", &[randn(&[4, 1]), randn(&[1]), randn(&[1])], |x| {
        layer_norm(&x[0], &[1], Some(&x[1]), Some(&x[2]), 1e-5)
    });
    check("a transposed input", &[randn(&[6, 4]), randn(&[6]), randn(&[6])], |x| {
        layer_norm(&x[0].t()?, &[6], Some(&x[1]), Some(&x[2]), 1e-5)
    });
    check("no weight or bias", &[randn(&[3, 19])], |x| layer_norm(&x[0], &[19], None, None, 1e-5));
    check("weight only", &[randn(&[3, 4]), randn(&[4])], |x| {
        layer_norm(&x[0], &[4], Some(&x[1]), None, 1e-5)
    });
    check("bias only", &[randn(&[3, 4]), randn(&[4])], |x| layer_norm(&x[0], &[4], None, Some(&x[1]), 1e-5));
}

/// The fused kernels give the composed ops' values and gradients, in f32, on rows whose mean is
/// far from 0 (where a one-pass variance would lose its digits) and long enough to run in
/// parallel.
#[test]
fn fused_layer_norm_matches_the_composed_ops() {
    devcheck::manual_seed(3);
    let cpu = Device::Cpu;
    let x = Tensor::randn([300, 2, 129], &cpu).unwrap().add_scalar(1000.0).unwrap();
    let w = Tensor::randn([2, 129], &cpu).unwrap();
    let b = Tensor::randn([2, 129], &cpu).unwrap();
    let g = Tensor::randn([300, 2, 129], &cpu).unwrap();
    let run = |fused: bool| {
        let leaves: Vec<Tensor> =
            [&x, &w, &b].iter().map(|t| t.detach().with_requires_grad().unwrap()).collect();
        let y = if fused {
            layer_norm(&leaves[0], &[2, 129], Some(&leaves[1]), Some(&leaves[2]), 1e-5)
        } else {
            composed_layer_norm(&leaves[0], 2, Some(&leaves[1]), Some(&leaves[2]))
        }
        .unwrap();
        y.backward_with_grad(&g).unwrap();
        let mut all = vec![y.to_vec::<f32>().unwrap()];
        all.extend(leaves.iter().map(|l| l.grad().unwrap().to_vec::<f32>().unwrap()));
        all
    };
    let (fused, composed) = (run(true), run(false));
    for (what, (f, c)) in ["output", "d input", "d weight", "d bias"].iter().zip(fused.iter().zip(&composed))
    {
        let scale = c.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        for (i, (a, b)) in f.iter().zip(c).enumerate() {
            assert!((a - b).abs() <= 2e-3 * scale.max(1.0), "{what}[{i}]: fused {a}, composed {b}");
        }
    }
}

/// In a fake scope (a dry run) layer norm stays the composed ops, so what the checker records
/// is unchanged.
#[test]
fn layer_norm_is_composed_in_a_fake_scope() {
    let _fake = devcheck::fake::enter();
    let x = Tensor::fake([2, 4], DType::F32, &Device::Cpu).unwrap().with_requires_grad().unwrap();
    let y = layer_norm(&x, &[4], None, None, 1e-5).unwrap();
    assert_eq!(y.grad_fn_name(), Some("MulBackward"));
    assert!(y.is_fake());
}
