//! Tensors on `cuda:0`: every op the CPU backend has, run on both devices from the same inputs and
//! compared element by element, plus moves, pinned memory and training. Also what a review of the
//! backend asked for: sizes past 2^24 elements and rows past 1,024, views (offsets, strides,
//! stride 0) into every op family, expanded matmul operands and the gradients of `Linear(k, 1)`
//! and a sum, work from several threads, copies between two GPUs whose source is reused at once,
//! `to_non_blocking` chains, pinned-memory reuse, and a training run compared step by step. With no GPU the
//! comparisons print "skipped: no CUDA device" (never a silent pass); what needs no GPU (the
//! errors without a driver, and that every op the front end sends to the GPU has a kernel) is
//! checked everywhere.

use devcheck::cuda::registry::{kernel_name, module_for_kernel};
use devcheck::nn::Forward;
use devcheck::nn::functional::{ClassLossOptions, cross_entropy};
use devcheck::optim::{AdamW, Optimizer};
use devcheck::{BinaryOp, CmpOp, DType, Device, Module, Result, Tensor, UnaryOp};

use crate::support::gpu;

const CUDA0: Device = Device::Cuda(0);
const CUDA1: Device = Device::Cuda(1);

/// Runs `f` on the CPU and on cuda:0 and compares shape, dtype and every value.
fn same_on_both(what: &str, tol: f64, f: impl Fn(&Device) -> Result<Tensor>) {
    let cpu = f(&Device::Cpu).unwrap_or_else(|e| panic!("{what} on cpu: {e:?}"));
    let gpu = f(&CUDA0).unwrap_or_else(|e| panic!("{what} on cuda:0: {e:?}"));
    assert_eq!(gpu.device(), CUDA0, "{what}: the result stays on the GPU");
    assert_eq!(cpu.shape(), gpu.shape(), "{what}: shape");
    assert_eq!(cpu.dtype(), gpu.dtype(), "{what}: dtype");
    let (a, b) = (cpu.to_vec::<f64>().unwrap(), gpu.to_vec::<f64>().unwrap());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol * (1.0 + x.abs());
        assert!(ok, "{what}: element {i}: cpu {x} vs cuda {y}");
    }
}

/// Deterministic values in about [-2, 2], none exactly zero.
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 37 + seed * 101) % 97) as f32 / 24.0 - 2.01).collect()
}

fn input(shape: &[usize], seed: usize, device: &Device) -> Result<Tensor> {
    Tensor::from_vec(values(shape.iter().product(), seed), shape, device)
}

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        DType::F32 => 2e-5,
        _ => 1e-12,
    }
}

// ---- checked on every machine ----------------------------------------------------------------

const UNARY_OPS: [UnaryOp; 13] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Relu,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Rsqrt,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::Gelu,
    UnaryOp::Silu,
    UnaryOp::Sin,
    UnaryOp::Cos,
];
const BINARY_OPS: [BinaryOp; 7] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Pow,
    BinaryOp::Maximum,
    BinaryOp::Minimum,
];
const CMP_OPS: [CmpOp; 6] = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
const SIGNED: [DType; 2] = [DType::I64, DType::I32];

/// The kernel names the op front end asks the CUDA backend for, for every op and dtype the front
/// end accepts, exist in the kernel registry (which `devcheck kernels check` compares with what
/// NVRTC builds): a name that drifted would otherwise only fail on a GPU.
#[test]
fn every_op_the_front_end_sends_to_the_gpu_has_a_kernel() {
    let mut wanted = Vec::new();
    for op in UNARY_OPS {
        wanted.extend(FLOATS.map(|d| kernel_name(op.name(), d)));
    }
    for op in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Relu] {
        wanted.extend(SIGNED.map(|d| kernel_name(op.name(), d)));
    }
    let numeric = [FLOATS.as_slice(), &SIGNED, &[DType::U8]].concat();
    for op in BINARY_OPS {
        let dtypes: &[DType] = if matches!(op, BinaryOp::Div | BinaryOp::Pow) { &FLOATS } else { &numeric };
        for &d in dtypes {
            wanted.push(kernel_name(op.name(), d));
            wanted.push(kernel_name(&format!("{}_scalar", op.name()), d));
        }
    }
    wanted.extend(numeric.iter().map(|&d| kernel_name("rsub_scalar", d)));
    for op in CMP_OPS {
        for &d in &numeric {
            wanted.push(kernel_name(op.name(), d));
            wanted.push(kernel_name(&format!("{}_scalar", op.name()), d));
        }
    }
    // logical_not is `x == false`
    wanted.extend(["logical_and_bool", "logical_or_bool", "eq_scalar_bool"].map(String::from));
    for op in ["sum", "mean", "var", "softmax", "log_softmax", "uniform", "normal"] {
        wanted.extend(FLOATS.map(|d| kernel_name(op, d)));
    }
    for op in ["max", "min", "argmax", "argmin"] {
        wanted.extend(numeric.iter().map(|&d| kernel_name(op, d)));
    }
    wanted.extend(["sum_i64", "sum_i32", "sum_u8", "sum_bool"].map(String::from));
    let all = [numeric.as_slice(), &[DType::Bool]].concat();
    for &d in &all {
        for op in ["where", "masked_fill", "triu", "tril"] {
            wanted.push(kernel_name(op, d));
        }
        wanted.push(format!("index_select_i64_{}", d.as_str()));
        wanted.push(format!("gather_i64_{}", d.as_str()));
        for &to in &all {
            wanted.push(format!("cast_{}_{}", d.as_str(), to.as_str()));
        }
    }
    wanted.extend(["copy_u8", "copy_u16", "copy_u32", "copy_u64"].map(String::from));
    wanted.extend(["fill_u8", "fill_u16", "fill_u32", "fill_u64"].map(String::from));
    let missing: Vec<&String> = wanted.iter().filter(|k| module_for_kernel(k).is_err()).collect();
    assert!(missing.is_empty(), "kernels the front end launches but no module defines: {missing:?}");
}

#[test]
fn without_a_driver_tensors_on_cuda_are_a_clear_error() {
    if devcheck::cuda::is_available() {
        gpu::skip_note("skipped: a CUDA device is present (this test is for machines without one)");
        return;
    }
    let e = Tensor::zeros([2, 3], &CUDA0).unwrap_err().render(100);
    assert!(e.contains("device cuda:0 is not available"), "{e}");
    let x = Tensor::ones([4], &Device::Cpu).unwrap();
    let e = x.to(&CUDA0).unwrap_err().render(100);
    assert!(e.contains("device cuda:0 is not available"), "{e}");
    let e = x.to_non_blocking(&CUDA0).unwrap_err().render(100);
    assert!(e.contains("device cuda:0 is not available"), "{e}");
    let e = x.pin_memory().unwrap_err().render(100);
    assert!(e.contains("device cuda:0 is not available"), "pinning needs the driver, as in PyTorch: {e}");
    assert!(!x.is_pinned());
}

#[test]
fn pinning_wants_a_host_tensor_and_moves_to_the_same_device_are_free() {
    let x = Tensor::ones([4], &Device::Cpu).unwrap();
    let same = x.to_non_blocking(&Device::Cpu).unwrap();
    assert!(same.same_storage(&x));
    let _fake = devcheck::fake::enter();
    let f = Tensor::fake([2], DType::F32, &CUDA0).unwrap();
    let e = f.pin_memory().unwrap_err().render(100);
    assert!(e.contains("only CPU tensors can be pinned, this one is on cuda:0"), "{e}");
}

// ---- with a GPU: the same ops on both devices --------------------------------------------------

#[test]
fn creation_and_round_trips_keep_every_dtype_exact() {
    let Some(_gpu) = gpu::shared("round trips") else { return };
    for dtype in [FLOATS.as_slice(), &SIGNED, &[DType::U8, DType::Bool]].concat() {
        same_on_both(&format!("arange {dtype}"), 0.0, |d| Tensor::arange(0.0, 10.0, 1.0, (dtype, d)));
        same_on_both(&format!("full {dtype}"), 0.0, |d| Tensor::full([3, 2], 1.0, (dtype, d)));
    }
    same_on_both("eye", 0.0, |d| Tensor::eye(4, d));
    let x = input(&[3, 4], 1, &Device::Cpu).unwrap();
    let back = x.cuda(0).unwrap().cpu().unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    assert_eq!(back.origin(), x.origin(), "a move keeps the origin");
    let t = x.t().unwrap().cuda(0).unwrap();
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        x.t().unwrap().to_vec::<f32>().unwrap(),
        "views upload as laid out"
    );
    assert_eq!(
        x.cuda(0).unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap(),
        x.sum_all().unwrap().to_scalar::<f32>().unwrap()
    );
}

#[test]
fn elementwise_ops_match_the_cpu() {
    let Some(_gpu) = gpu::shared("elementwise") else { return };
    for dtype in FLOATS {
        let tol = tolerance(dtype);
        for op in UNARY_OPS {
            same_on_both(&format!("{} {dtype}", op.name()), tol * 4.0, |d| {
                let x = input(&[5, 7], 2, d)?.to_dtype(dtype)?;
                let x =
                    if matches!(op, UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt) { x.abs()? } else { x };
                x.unary_op(op)
            });
        }
        for op in BINARY_OPS {
            same_on_both(&format!("{} {dtype} broadcast", op.name()), tol * 4.0, |d| {
                let a = input(&[4, 1, 3], 3, d)?.to_dtype(dtype)?;
                let b = input(&[5, 3], 4, d)?.to_dtype(dtype)?;
                let a = if op == BinaryOp::Pow { a.abs()? } else { a };
                a.binary_op(op, &b)
            });
            same_on_both(&format!("{} {dtype} transposed", op.name()), tol * 4.0, |d| {
                let a = input(&[6, 4], 5, d)?.to_dtype(dtype)?.abs()?;
                let b = input(&[4, 6], 6, d)?.to_dtype(dtype)?;
                a.binary_op(op, &b.t()?)
            });
        }
        for op in CMP_OPS {
            same_on_both(&format!("{} {dtype}", op.name()), 0.0, |d| {
                let a = input(&[4, 5], 7, d)?.to_dtype(dtype)?;
                a.cmp_op(op, &a.flip_sign_of_some()?)
            });
            same_on_both(&format!("{} scalar {dtype}", op.name()), 0.0, |d| {
                input(&[4, 5], 8, d)?.to_dtype(dtype)?.cmp_scalar(op, 0.5)
            });
        }
        same_on_both(&format!("scalars {dtype}"), tol * 4.0, |d| {
            let x = input(&[9], 9, d)?.to_dtype(dtype)?;
            let y = x.add_scalar(1.5)?.mul_scalar(-2.0)?.rsub_scalar(3.0)?.div_scalar(4.0)?;
            y.abs()?.pow_scalar(1.5)?.clamp(-1.0, 1.0)
        });
    }
    for dtype in SIGNED {
        same_on_both(&format!("integer arithmetic {dtype}"), 0.0, |d| {
            let a = Tensor::arange(-6.0, 6.0, 1.0, (dtype, d))?;
            let b = Tensor::arange(0.0, 12.0, 1.0, (dtype, d))?;
            a.mul(&b)?.add(&a.neg()?)?.maximum(&b.sub_scalar(5.0)?)?.abs()?.relu()
        });
    }
    same_on_both("logical", 0.0, |d| {
        let a = input(&[3, 4], 10, d)?.gt(&Tensor::zeros([3, 4], d)?)?;
        let b = input(&[4], 11, d)?.cmp_scalar(CmpOp::Lt, 0.3)?;
        a.logical_and(&b)?.logical_or(&a.logical_not()?)
    });
}

#[test]
fn preallocated_outputs_are_written_in_place() {
    let Some(_gpu) = gpu::shared("into") else { return };
    same_on_both("add_into", 0.0, |d| {
        let a = input(&[3, 4], 12, d)?;
        let b = input(&[4], 13, d)?;
        let out = Tensor::zeros([3, 4], d)?;
        a.add_into(&b, &out)?;
        a.mul_into(&a, &a)?;
        out.add(&a)
    });
}

#[test]
fn matmul_matches_the_cpu_for_every_layout() {
    let Some(_gpu) = gpu::shared("matmul") else { return };
    for dtype in FLOATS {
        let tol = tolerance(dtype) * 20.0;
        same_on_both(&format!("matmul {dtype}"), tol, |d| {
            input(&[7, 5], 14, d)?.to_dtype(dtype)?.matmul(&input(&[5, 3], 15, d)?.to_dtype(dtype)?)
        });
        same_on_both(&format!("x @ w.t() {dtype}"), tol, |d| {
            input(&[7, 5], 16, d)?.to_dtype(dtype)?.matmul(&input(&[3, 5], 17, d)?.to_dtype(dtype)?.t()?)
        });
        same_on_both(&format!("batched, broadcast batch {dtype}"), tol, |d| {
            let a = input(&[2, 3, 4, 5], 18, d)?.to_dtype(dtype)?;
            let b = input(&[3, 5, 6], 19, d)?.to_dtype(dtype)?;
            a.matmul(&b)
        });
        same_on_both(&format!("vector operands {dtype}"), tol, |d| {
            let m = input(&[4, 5], 20, d)?.to_dtype(dtype)?;
            let v = input(&[5], 21, d)?.to_dtype(dtype)?;
            m.matmul(&v)?.matmul(&m)
        });
        same_on_both(&format!("permuted batch {dtype}"), tol, |d| {
            let a = input(&[4, 2, 3], 22, d)?.to_dtype(dtype)?.permute([1, 0, 2])?;
            let b = input(&[2, 3, 4], 23, d)?.to_dtype(dtype)?;
            a.matmul(&b)
        });
    }
}

#[test]
fn reductions_and_softmax_match_the_cpu() {
    let Some(_gpu) = gpu::shared("reductions") else { return };
    for dtype in FLOATS {
        let tol = tolerance(dtype) * 20.0;
        for dims in [vec![0isize], vec![1], vec![-1], vec![0, 2], vec![0, 1, 2]] {
            for keepdim in [false, true] {
                let label = format!("{dtype} dims {dims:?} keepdim {keepdim}");
                same_on_both(&format!("sum {label}"), tol, |d| {
                    input(&[3, 4, 5], 24, d)?.to_dtype(dtype)?.sum(dims.clone(), keepdim)
                });
                same_on_both(&format!("mean {label}"), tol, |d| {
                    input(&[3, 4, 5], 25, d)?.to_dtype(dtype)?.mean(dims.clone(), keepdim)
                });
                same_on_both(&format!("max {label}"), 0.0, |d| {
                    input(&[3, 4, 5], 26, d)?.to_dtype(dtype)?.max(dims.clone(), keepdim)
                });
                same_on_both(&format!("min {label}"), 0.0, |d| {
                    input(&[3, 4, 5], 27, d)?.to_dtype(dtype)?.min(dims.clone(), keepdim)
                });
                same_on_both(&format!("var {label}"), tol, |d| {
                    input(&[3, 4, 5], 28, d)?.to_dtype(dtype)?.var(dims.clone(), keepdim)
                });
            }
        }
        for dim in [0isize, 1, -1] {
            same_on_both(&format!("argmax {dtype} {dim}"), 0.0, |d| {
                input(&[3, 4, 5], 29, d)?.to_dtype(dtype)?.argmax(dim, false)
            });
            same_on_both(&format!("argmin {dtype} {dim}"), 0.0, |d| {
                input(&[3, 4, 5], 30, d)?.to_dtype(dtype)?.argmin(dim, true)
            });
            same_on_both(&format!("softmax {dtype} {dim}"), tol, |d| {
                input(&[3, 4, 5], 31, d)?.to_dtype(dtype)?.softmax(dim)
            });
            same_on_both(&format!("log_softmax {dtype} {dim}"), tol, |d| {
                input(&[3, 4, 5], 32, d)?.to_dtype(dtype)?.log_softmax(dim)
            });
        }
        same_on_both(&format!("mean of nothing {dtype}"), 0.0, |d| {
            Tensor::zeros([0, 3], (dtype, d))?.mean(0isize, false)
        });
    }
    for dtype in [DType::I64, DType::I32, DType::U8, DType::Bool] {
        same_on_both(&format!("integer sum {dtype}"), 0.0, |d| {
            Tensor::arange(0.0, 24.0, 1.0, (dtype, d))?.reshape([4, 6])?.sum(0isize, false)
        });
    }
}

#[test]
fn selection_and_indexing_match_the_cpu() {
    let Some(_gpu) = gpu::shared("selection") else { return };
    for dtype in [FLOATS.as_slice(), &SIGNED, &[DType::U8]].concat() {
        same_on_both(&format!("where {dtype}"), 0.0, |d| {
            let x = input(&[3, 4], 33, d)?;
            let cond = x.cmp_scalar(CmpOp::Gt, 0.0)?;
            let a = x.abs()?.to_dtype(dtype)?;
            let b = Tensor::full([4], 7.0, (dtype, d))?;
            cond.where_cond(&a, &b)
        });
        same_on_both(&format!("masked_fill {dtype}"), 0.0, |d| {
            let mask = Tensor::ones([4, 4], d)?.triu(1)?.cmp_scalar(CmpOp::Gt, 0.5)?;
            input(&[2, 4, 4], 34, d)?.abs()?.to_dtype(dtype)?.masked_fill(&mask, 3.0)
        });
        same_on_both(&format!("tril {dtype}"), 0.0, |d| {
            input(&[2, 3, 5], 35, d)?.abs()?.to_dtype(dtype)?.tril(-1)
        });
        same_on_both(&format!("index_select {dtype}"), 0.0, |d| {
            let ids = Tensor::from_vec(vec![2i64, 0, 1, 2], [4], d)?;
            input(&[3, 5], 36, d)?.abs()?.to_dtype(dtype)?.index_select(0, &ids)
        });
        same_on_both(&format!("gather {dtype}"), 0.0, |d| {
            let ids = Tensor::from_vec(vec![0i64, 4, 1, 3, 2, 2], [3, 2], d)?;
            input(&[3, 5], 37, d)?.abs()?.to_dtype(dtype)?.gather(1, &ids)
        });
        same_on_both(&format!("cat and views {dtype}"), 0.0, |d| {
            let a = input(&[2, 3], 38, d)?.abs()?.to_dtype(dtype)?;
            let b = input(&[3, 2], 39, d)?.abs()?.to_dtype(dtype)?.t()?;
            Tensor::cat(&[&a, &b, &a.narrow(1, 1, 2)?], 1)?.unsqueeze(0)?.permute([2, 0, 1])?.contiguous()
        });
    }
    // Out-of-range and negative indices are errors on both devices, as in PyTorch.
    for (bad, said) in [(3i64, "index 3 is out of range"), (-1, "index -1 is out of range")] {
        let ids = Tensor::from_vec(vec![0i64, bad], [2], &CUDA0).unwrap();
        let e = input(&[3, 5], 40, &CUDA0).unwrap().index_select(0, &ids).unwrap_err().render(100);
        assert!(e.contains(&format!("{said} for a dimension of size 3")), "{e}");
        assert!(e.contains("tests/cuda_tensor.rs"), "the error points at the call: {e}");
    }
}

#[test]
fn every_cast_matches_the_cpu() {
    let Some(_gpu) = gpu::shared("casts") else { return };
    let all = [FLOATS.as_slice(), &SIGNED, &[DType::U8, DType::Bool]].concat();
    for &from in &all {
        for &to in &all {
            same_on_both(&format!("{from} -> {to}"), 0.0, |d| {
                Tensor::arange(0.0, 12.0, 1.0, (DType::F32, d))?.mul_scalar(1.5)?.to_dtype(from)?.to_dtype(to)
            });
        }
    }
}

#[test]
fn gradients_and_an_adamw_step_match_the_cpu() {
    let Some(_gpu) = gpu::shared("training") else { return };
    #[derive(Module)]
    struct Net {
        a: devcheck::nn::Linear,
        b: devcheck::nn::Linear,
    }
    let step = |device: &Device| -> Result<Vec<Vec<f32>>> {
        devcheck::manual_seed(7);
        let mut net = Net {
            a: devcheck::nn::Linear::new(6, 8, &Device::Cpu)?,
            b: devcheck::nn::Linear::new(8, 3, &Device::Cpu)?,
        };
        net.to(device)?;
        let mut opt = AdamW::new(net.parameters(), 1e-2)?;
        let x = input(&[5, 6], 41, device)?;
        let y = Tensor::from_vec(vec![0i64, 2, 1, 1, 0], [5], device)?;
        for _ in 0..3 {
            opt.zero_grad();
            let logits = net.b.forward(&net.a.forward(&x)?.relu()?)?;
            cross_entropy(&logits, &y, &ClassLossOptions::default())?.backward()?;
            opt.step()?;
        }
        net.parameters().iter().map(|p| p.tensor().to_vec::<f32>()).collect()
    };
    let (cpu, gpu) = (step(&Device::Cpu).unwrap(), step(&CUDA0).unwrap());
    for (i, (a, b)) in cpu.iter().zip(&gpu).enumerate() {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-4 * (1.0 + x.abs()), "parameter {i}: cpu {x} vs cuda {y}");
        }
    }
}

#[test]
fn a_model_with_buffers_moves_saves_and_loads_on_the_gpu() {
    let Some(_gpu) = gpu::shared("modules") else { return };
    #[derive(Module)]
    struct Block {
        proj: devcheck::nn::Linear,
        #[module(non_persistent)]
        mask: Tensor,
        scale: Tensor,
    }
    let make = |device: &Device| -> Result<Block> {
        devcheck::manual_seed(11);
        Ok(Block {
            proj: devcheck::nn::Linear::new(4, 4, device)?,
            mask: Tensor::ones([4, 4], device)?.triu(1)?.cmp_scalar(CmpOp::Gt, 0.5)?,
            scale: Tensor::full([4], 0.5, device)?,
        })
    };
    let mut block = make(&Device::Cpu).unwrap();
    block.to(&CUDA0).unwrap();
    devcheck::assert_on_device!(block, CUDA0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("block.safetensors");
    block.save(&path).unwrap();
    let mut loaded = make(&Device::Cpu).unwrap();
    loaded.load_state_dict(&path, &CUDA0).unwrap();
    for (a, b) in block.parameters().iter().zip(loaded.parameters()) {
        assert_eq!(b.device(), CUDA0);
        assert_eq!(a.tensor().to_vec::<f32>().unwrap(), b.tensor().to_vec::<f32>().unwrap());
    }
    let x = input(&[2, 4], 44, &CUDA0).unwrap();
    let y = block.proj.forward(&x).unwrap().masked_fill(&block.mask.narrow(0, 0, 2).unwrap(), 0.0).unwrap();
    assert_eq!(y.device(), CUDA0);
}

#[test]
fn random_samples_are_made_on_the_device_with_the_right_moments() {
    let Some(_gpu) = gpu::shared("random") else { return };
    const N: usize = 1 << 16;
    for dtype in FLOATS {
        devcheck::manual_seed(3);
        let u = Tensor::rand([N], (dtype, &CUDA0)).unwrap();
        let z = Tensor::randn([N], (dtype, &CUDA0)).unwrap();
        devcheck::manual_seed(3);
        let again = Tensor::rand([N], (dtype, &CUDA0)).unwrap();
        assert_eq!(u.to_vec::<f64>().unwrap(), again.to_vec::<f64>().unwrap(), "{dtype}: seeded");
        let u = u.to_vec::<f64>().unwrap();
        assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)), "{dtype}: uniform in [0, 1)");
        let mean = u.iter().sum::<f64>() / N as f64;
        assert!((mean - 0.5).abs() < 0.01, "{dtype}: uniform mean {mean}");
        let z = z.to_vec::<f64>().unwrap();
        let mean = z.iter().sum::<f64>() / N as f64;
        let var = z.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / N as f64;
        assert!(z.iter().all(|x| x.is_finite()), "{dtype}: normal samples are finite");
        assert!(mean.abs() < 0.02 && (var - 1.0).abs() < 0.03, "{dtype}: normal mean {mean}, var {var}");
    }
    let x = Tensor::ones([4096], &CUDA0).unwrap();
    let dropped = devcheck::nn::functional::dropout(&x, 0.25, true).unwrap().to_vec::<f32>().unwrap();
    let kept = dropped.iter().filter(|&&v| v != 0.0).count() as f64 / 4096.0;
    assert!((kept - 0.75).abs() < 0.03, "dropout keeps about 3/4: {kept}");
    assert!(dropped.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
}

#[test]
fn pinned_memory_copies_without_waiting_and_arrives_intact() {
    let Some(_gpu) = gpu::shared("pinned") else { return };
    let x = input(&[256, 64], 42, &Device::Cpu).unwrap();
    let pinned = x.pin_memory().unwrap();
    assert!(pinned.is_pinned() && pinned.device().is_cpu());
    assert_eq!(pinned.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    let on_gpu = pinned.to_non_blocking(&CUDA0).unwrap();
    devcheck::cuda::synchronize(&CUDA0).unwrap();
    assert_eq!(on_gpu.to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
    assert_eq!(
        pinned.add(&x).unwrap().to_vec::<f32>().unwrap(),
        x.mul_scalar(2.0).unwrap().to_vec::<f32>().unwrap()
    );
    // Back to the host in the background: a pinned CPU tensor whose reads wait for the copy.
    let back = on_gpu.t().unwrap().to_non_blocking(&Device::Cpu).unwrap();
    assert!(back.is_pinned() && back.device().is_cpu());
    assert_eq!(back.to_vec::<f32>().unwrap(), x.t().unwrap().to_vec::<f32>().unwrap());
}

// ---- with a GPU: what the first review of the CUDA backend asked the suite to catch -----------

/// `a` and `b` element by element, relative to `tol`.
fn assert_close(what: &str, a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + x.abs()), "{what}: element {i}: cpu {x} vs cuda {y}");
    }
}

#[test]
fn sizes_past_2_pow_24_elements_and_rows_past_1024_match() {
    let Some(_gpu) = gpu::shared("large sizes") else { return };
    // More elements than 65,535 blocks of 256 threads cover in one sweep: grid-stride loops.
    let n = (1 << 24) + 3;
    same_on_both("element-wise past 2^24", 1e-6, |d| {
        let x = input(&[n], 50, d)?;
        x.mul_scalar(0.5)?.add(&x.abs()?)?.tanh()
    });
    same_on_both("strided copy past 2^24", 0.0, |d| input(&[4099, 4097], 51, d)?.t()?.contiguous());
    // Whole-tensor reductions cut into pieces across blocks, against a host f64 reference.
    let xs = values(n, 52);
    let x = Tensor::from_vec(xs.clone(), [n], &CUDA0).unwrap();
    let exact: f64 = xs.iter().map(|&v| v as f64).sum();
    let scale: f64 = xs.iter().map(|&v| (v as f64).abs()).sum();
    let sum = x.sum_all().unwrap().to_scalar::<f64>().unwrap();
    assert!((sum - exact).abs() <= 1e-6 * scale, "sum_all {sum} vs {exact}");
    let mean = x.mean_all().unwrap().to_scalar::<f64>().unwrap();
    assert!((mean - exact / n as f64).abs() <= 1e-6 * scale / n as f64, "mean_all {mean}");
    let max = xs.iter().copied().fold(f32::MIN, f32::max);
    let min = xs.iter().copied().fold(f32::MAX, f32::min);
    assert_eq!(x.max_all().unwrap().to_scalar::<f32>().unwrap(), max);
    assert_eq!(x.min_all().unwrap().to_scalar::<f32>().unwrap(), min);
    // The values repeat every 97: the first of many equal maxima, across pieces.
    let first_max = xs.iter().position(|&v| v == max).unwrap() as i64;
    assert_eq!(x.argmax(0, false).unwrap().to_scalar::<i64>().unwrap(), first_max);
    let mu = exact / n as f64;
    let var = xs.iter().map(|&v| (v as f64 - mu).powi(2)).sum::<f64>() / (n - 1) as f64;
    let got = x.var(0isize, false).unwrap().to_scalar::<f64>().unwrap();
    assert!((got - var).abs() <= 1e-5 * var, "var {got} vs {var}");
    // Rows past 1024 elements, few of them (pieces) and many (one block each), along the
    // contiguous dim and across it (a warp over neighbouring outputs).
    for dtype in FLOATS {
        let tol = tolerance(dtype) * 50.0;
        for (shape, dim) in
            [([7, 3000], 1isize), ([3000, 7], 0), ([5000, 37], 0), ([2, 70_000], 1), ([300, 1500], 1)]
        {
            let label = format!("{dtype} {shape:?} over {dim}");
            let x = |d: &Device| input(&shape, 53, d)?.to_dtype(dtype);
            same_on_both(&format!("sum {label}"), tol, |d| x(d)?.sum(dim, false));
            same_on_both(&format!("mean {label}"), tol, |d| x(d)?.mean(dim, true));
            same_on_both(&format!("var {label}"), tol, |d| x(d)?.var(dim, false));
            same_on_both(&format!("max {label}"), 0.0, |d| x(d)?.max(dim, false));
            same_on_both(&format!("argmin {label}"), 0.0, |d| x(d)?.argmin(dim, false));
        }
        same_on_both(&format!("softmax {dtype} rows of 3000"), tol, |d| {
            input(&[7, 3000], 54, d)?.to_dtype(dtype)?.softmax(-1)
        });
        same_on_both(&format!("log_softmax {dtype} rows of 3000"), tol, |d| {
            input(&[7, 3000], 55, d)?.to_dtype(dtype)?.log_softmax(-1)
        });
    }
    // Several leading dims at once (read in place), and dims that are not neighbours (copied).
    same_on_both("sum over (0, 1)", 1e-4, |d| input(&[64, 100, 33], 56, d)?.sum([0isize, 1], false));
    same_on_both("sum over (0, 2)", 1e-4, |d| input(&[64, 100, 33], 57, d)?.sum([0isize, 2], false));
    same_on_both("integer sum past 2^24", 0.0, |d| Tensor::ones([n], (DType::I32, d))?.sum_all());
}

/// A view of a tensor.
type View = fn(&Tensor) -> Result<Tensor>;

/// Views of a `[6, 10, 8]` tensor: an offset, a transpose, a permute, a stride-0 expand, rows
/// with gaps.
const VIEWS: [(&str, View); 5] = [
    ("narrow", |x| x.narrow(1, 3, 6)),
    ("transpose", |x| x.transpose(0, 2)),
    ("permute+narrow", |x| x.permute([2, 0, 1])?.narrow(0, 1, 5)),
    ("expand", |x| x.narrow(0, 2, 1)?.expand([4, 10, 8])),
    ("gaps", |x| x.narrow(2, 2, 5)),
];

#[test]
fn views_with_offsets_and_strides_feed_every_op_family() {
    let Some(_gpu) = gpu::shared("views") else { return };
    for (name, view) in VIEWS {
        let v = |d: &Device, seed: usize| view(&input(&[6, 10, 8], seed, d)?);
        same_on_both(&format!("unary {name}"), 1e-5, |d| v(d, 60)?.exp());
        same_on_both(&format!("binary {name}"), 1e-5, |d| v(d, 61)?.mul(&v(d, 62)?));
        same_on_both(&format!("broadcast {name}"), 1e-5, |d| {
            let a = v(d, 63)?;
            a.sub(&a.narrow(0, 1, 1)?)
        });
        same_on_both(&format!("scalar {name}"), 1e-5, |d| v(d, 64)?.rsub_scalar(1.5));
        same_on_both(&format!("comparison {name}"), 0.0, |d| v(d, 65)?.cmp_scalar(CmpOp::Gt, 0.1));
        same_on_both(&format!("cast {name}"), 0.0, |d| v(d, 66)?.to_dtype(DType::F16));
        for dim in 0..3isize {
            same_on_both(&format!("sum {name} {dim}"), 1e-5, |d| v(d, 67)?.sum(dim, false));
            same_on_both(&format!("var {name} {dim}"), 1e-4, |d| v(d, 68)?.var(dim, true));
            same_on_both(&format!("max {name} {dim}"), 0.0, |d| v(d, 69)?.max(dim, false));
            same_on_both(&format!("argmax {name} {dim}"), 0.0, |d| v(d, 70)?.argmax(dim, false));
        }
        same_on_both(&format!("sum over (0, 1) {name}"), 1e-5, |d| v(d, 71)?.sum([0isize, 1], false));
        same_on_both(&format!("sum_all {name}"), 1e-5, |d| v(d, 72)?.sum_all());
        same_on_both(&format!("softmax {name}"), 1e-5, |d| v(d, 73)?.softmax(-1));
        same_on_both(&format!("log_softmax {name}"), 1e-5, |d| v(d, 74)?.log_softmax(1));
        same_on_both(&format!("where {name}"), 0.0, |d| {
            let c = v(d, 75)?;
            c.cmp_scalar(CmpOp::Gt, 0.0)?.where_cond(&c, &v(d, 76)?)
        });
        same_on_both(&format!("masked_fill {name}"), 0.0, |d| {
            v(d, 77)?.masked_fill(&v(d, 78)?.cmp_scalar(CmpOp::Lt, 0.0)?, 9.0)
        });
        same_on_both(&format!("triu {name}"), 0.0, |d| v(d, 79)?.triu(1));
        same_on_both(&format!("index_select {name}"), 0.0, |d| {
            let ids = Tensor::from_vec(vec![9i64, 0, 2, 1, 2, 0, 1], [7], d)?.narrow(0, 1, 4)?;
            v(d, 80)?.index_select(1, &ids)
        });
        same_on_both(&format!("gather {name}"), 0.0, |d| {
            // Each row's argmax, expanded along the last dim (an index with stride 0).
            let x = v(d, 81)?;
            let mut shape = x.shape().to_vec();
            let ids = x.argmax(2, true)?;
            shape[2] = 3;
            x.gather(2, &ids.expand(&shape)?)
        });
        same_on_both(&format!("matmul {name}"), 1e-5, |d| v(d, 82)?.matmul(&v(d, 83)?.transpose(1, 2)?));
        same_on_both(&format!("cat {name}"), 0.0, |d| Tensor::cat(&[&v(d, 84)?, &v(d, 85)?], 1));
        same_on_both(&format!("contiguous {name}"), 0.0, |d| v(d, 86)?.contiguous());
        // Off the GPU, blocking and not.
        let on_gpu = v(&CUDA0, 87).unwrap();
        let on_cpu = v(&Device::Cpu, 87).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(on_gpu.cpu().unwrap().to_vec::<f32>().unwrap(), on_cpu, "{name} to the CPU");
        let pinned = on_gpu.to_non_blocking(&Device::Cpu).unwrap();
        assert_eq!(pinned.to_vec::<f32>().unwrap(), on_cpu, "{name} to pinned memory");
    }
}

#[test]
fn expanded_operands_multiply_as_their_values_and_linear_k_1_sum_gradients_match() {
    let Some(_gpu) = gpu::shared("stride-0 matmul") else { return };
    same_on_both("rows expanded", 1e-5, |d| {
        input(&[1, 5], 90, d)?.expand([4, 5])?.matmul(&input(&[5, 3], 91, d)?)
    });
    same_on_both("columns expanded", 1e-5, |d| {
        input(&[4, 5], 92, d)?.matmul(&input(&[5, 1], 93, d)?.expand([5, 3])?)
    });
    same_on_both("one value expanded", 1e-5, |d| {
        Tensor::full([1, 1], 0.5, d)?.expand([6, 5])?.matmul(&input(&[5, 2], 94, d)?)
    });
    same_on_both("batch and rows expanded", 1e-5, |d| {
        input(&[1, 1, 5], 95, d)?.expand([3, 4, 5])?.matmul(&input(&[3, 5, 2], 96, d)?)
    });
    // Linear(k, 1) then a sum or mean: the gradient reaching the matmul is one value expanded
    // to [batch, 1], which cuBLAS must not read as a dense column.
    for batch in [vec![9usize], vec![2, 9]] {
        for mean in [false, true] {
            let grads = |device: &Device| -> Result<Vec<Vec<f32>>> {
                devcheck::manual_seed(5);
                let mut lin = devcheck::nn::Linear::new(7, 1, &Device::Cpu)?;
                lin.to(device)?;
                let mut shape = batch.clone();
                shape.push(7);
                let x = input(&shape, 97, device)?;
                x.set_requires_grad(true)?;
                let y = lin.forward(&x)?;
                let loss = if mean { y.mean_all()? } else { y.sum_all()? };
                loss.backward()?;
                let mut all: Vec<Vec<f32>> = lin
                    .parameters()
                    .iter()
                    .map(|p| p.grad().expect("a gradient").to_vec::<f32>())
                    .collect::<Result<_>>()?;
                all.push(x.grad().expect("an input gradient").to_vec::<f32>()?);
                Ok(all)
            };
            let (cpu, gpu) = (grads(&Device::Cpu).unwrap(), grads(&CUDA0).unwrap());
            for (i, (a, b)) in cpu.iter().zip(&gpu).enumerate() {
                assert_close(&format!("Linear(7, 1) on {batch:?}, mean {mean}: gradient {i}"), a, b, 1e-5);
            }
        }
    }
}

#[test]
fn uploads_and_ops_from_several_threads_match_the_cpu() {
    let Some(_gpu) = gpu::shared("threads") else { return };
    // Blocks freed on this thread stay cached: the workers' first uploads are served from the
    // cache, with no driver call on their thread that would bind the context on the way.
    drop(Tensor::zeros([1 << 16], &CUDA0).unwrap());
    let workers: Vec<_> = (0..4usize)
        .map(|t| {
            std::thread::spawn(move || -> Result<()> {
                for i in 0..25 {
                    let seed = t * 100 + i;
                    let run = |d: &Device| -> Result<Vec<f32>> {
                        let x = input(&[64, 48], seed, d)?;
                        let w = input(&[48, 16], seed + 1, d)?;
                        x.matmul(&w)?.relu()?.sum(0isize, false)?.add_scalar(t as f64)?.to_vec::<f32>()
                    };
                    assert_close(&format!("thread {t}, step {i}"), &run(&Device::Cpu)?, &run(&CUDA0)?, 1e-4);
                    let pinned = input(&[1000], seed, &Device::Cpu)?.pin_memory()?.to_non_blocking(&CUDA0)?;
                    assert_eq!(pinned.to_vec::<f32>()?, values(1000, seed), "thread {t}, step {i}: pinned");
                }
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a worker thread panicked").expect("a worker thread's GPU work failed");
    }
}

#[test]
fn copies_between_two_gpus_survive_the_immediate_reuse_of_their_source() {
    let Some(_gpu) = gpu::shared("two GPUs") else { return };
    if !gpu::two_devices("copies between GPUs") {
        return;
    }
    // About 1.6M elements: a copy long enough for later work on the source device to overlap it.
    let (rows, cols) = (1537, 1031);
    for round in 0..10usize {
        let (from, to) = if round % 2 == 0 { (CUDA0, CUDA1) } else { (CUDA1, CUDA0) };
        let host = input(&[rows, cols], round, &Device::Cpu).unwrap();
        let expected = host.t().unwrap().to_vec::<f32>().unwrap();
        // The transposed view goes through a temporary contiguous copy on `from`, freed when
        // `to` returns; the work queued right after reuses that block and overwrites it.
        let moved = host.to(&from).unwrap().t().unwrap().to(&to).unwrap();
        let clobber: Vec<Tensor> = (0..4).map(|_| Tensor::full([cols, rows], -1.0, &from).unwrap()).collect();
        // A source updated in place right after its copy was queued.
        let source = input(&[rows, cols], round + 50, &from).unwrap();
        let source_values = source.to_vec::<f32>().unwrap();
        let copied = source.to(&to).unwrap();
        source.mul_into(&source, &source).unwrap();
        // A short-lived source: made, copied and dropped in one expression.
        let short = input(&[cols, rows], round + 70, &from).unwrap().to(&to).unwrap();
        let reuse = Tensor::full([cols, rows], 3.0, &from).unwrap();
        assert_eq!(moved.device(), to);
        assert_eq!(moved.to_vec::<f32>().unwrap(), expected, "round {round}: transposed copy");
        assert_eq!(
            copied.to_vec::<f32>().unwrap(),
            source_values,
            "round {round}: copy of an updated source"
        );
        assert_eq!(
            short.to_vec::<f32>().unwrap(),
            values(cols * rows, round + 70),
            "round {round}: short-lived"
        );
        drop((clobber, reuse));
    }
}

#[test]
fn to_non_blocking_chains_across_devices_arrive_intact() {
    let Some(_gpu) = gpu::shared("non-blocking chains") else { return };
    let second = if devcheck::cuda::device_count() >= 2 {
        CUDA1
    } else {
        gpu::skip_note("only one CUDA device: the chain stays on cuda:0 (non-blocking chains)");
        CUDA0
    };
    for round in 0..10usize {
        let host = input(&[512, 300], 100 + round, &Device::Cpu).unwrap();
        let expected = host.mul_scalar(2.0).unwrap().add_scalar(1.0).unwrap().mul_scalar(3.0).unwrap();
        // cpu (pinned) -> cuda:0 -> cpu (pinned, filled in the background) -> the second device,
        // whose upload must wait for that download -> cuda:0 -> cpu (pinned), nothing waited for
        // on the host until the last read.
        let x = host.pin_memory().unwrap().to_non_blocking(&CUDA0).unwrap().mul_scalar(2.0).unwrap();
        let x = x.to_non_blocking(&Device::Cpu).unwrap();
        assert!(x.is_pinned());
        let x = x.to_non_blocking(&second).unwrap().add_scalar(1.0).unwrap();
        let x = x.to_non_blocking(&CUDA0).unwrap().mul_scalar(3.0).unwrap();
        let x = x.to_non_blocking(&Device::Cpu).unwrap();
        assert_eq!(x.to_vec::<f32>().unwrap(), expected.to_vec::<f32>().unwrap(), "round {round}");
    }
}

#[test]
fn pinned_batches_reuse_cached_host_memory() {
    // Reads the process-wide host allocator statistics: no other GPU test runs meanwhile.
    let Some(_alone) = gpu::exclusive("pinned cache") else { return };
    let before = devcheck::cuda::host_memory_stats();
    for step in 0..50usize {
        let batch = input(&[256, 64], step, &Device::Cpu).unwrap();
        let on_gpu = batch.pin_memory().unwrap().to_non_blocking(&CUDA0).unwrap();
        let doubled = on_gpu.mul_scalar(2.0).unwrap();
        if step % 10 == 0 {
            assert_eq!(
                doubled.to_vec::<f32>().unwrap(),
                batch.mul_scalar(2.0).unwrap().to_vec::<f32>().unwrap()
            );
        }
    }
    devcheck::cuda::synchronize(&CUDA0).unwrap();
    let after = devcheck::cuda::host_memory_stats();
    assert_eq!(after.allocation_requests - before.allocation_requests, 50);
    assert!(
        after.host_allocations - before.host_allocations <= 16,
        "pinned blocks are reused, not pinned per batch: {before:?} -> {after:?}"
    );
    assert_eq!(after.host_frees, before.host_frees, "nothing is unpinned in the loop");
    assert_eq!(devcheck::cuda::host_empty_cache().unwrap(), after.cached_bytes + after.pending_bytes);
}

#[test]
fn a_training_run_matches_the_cpu_step_by_step() {
    let Some(_gpu) = gpu::shared("training run") else { return };
    #[derive(Module)]
    struct Mlp {
        hidden: devcheck::nn::Linear,
        out: devcheck::nn::Linear,
    }
    let run = |device: &Device| -> Result<(Vec<f32>, Vec<Vec<f32>>)> {
        devcheck::manual_seed(17);
        let table =
            devcheck::data::read_csv(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/digits.csv.gz"), false)?;
        let pixels = table.narrow(1, 0, 64)?.div_scalar(16.0)?;
        let labels = table.narrow(1, 64, 1)?.squeeze(1)?.to_dtype(DType::I64)?;
        let data = devcheck::data::TensorDataset::new((pixels, labels))?;
        let loader =
            devcheck::data::DataLoader::new(data, 64)?.shuffle(true).seed(3).pin_memory(device.is_cuda());
        let mut model = Mlp {
            hidden: devcheck::nn::Linear::new(64, 48, &Device::Cpu)?,
            out: devcheck::nn::Linear::new(48, 10, &Device::Cpu)?,
        };
        model.to(device)?;
        let mut opt = AdamW::new(model.parameters(), 3e-3)?;
        let mut losses = Vec::new();
        // 40 steps: an epoch of 29 batches and part of the next (reshuffled).
        for batch in loader.iter().chain(loader.iter()).take(40) {
            let (x, y) = batch?;
            let (x, y) = (x.to_non_blocking(device)?, y.to_non_blocking(device)?);
            opt.zero_grad();
            let logits = model.out.forward(&model.hidden.forward(&x)?.relu()?)?;
            let loss = cross_entropy(&logits, &y, &ClassLossOptions::default())?;
            loss.backward()?;
            opt.step()?;
            losses.push(loss.to_scalar::<f32>()?);
        }
        let params = model.parameters().iter().map(|p| p.tensor().to_vec::<f32>()).collect::<Result<_>>()?;
        Ok((losses, params))
    };
    let ((cpu_losses, cpu_params), (gpu_losses, gpu_params)) =
        (run(&Device::Cpu).unwrap(), run(&CUDA0).unwrap());
    assert_eq!(cpu_losses.len(), 40);
    for (step, (a, b)) in cpu_losses.iter().zip(&gpu_losses).enumerate() {
        assert!((a - b).abs() <= 1e-3 * (1.0 + a.abs()), "step {step}: loss on cpu {a} vs cuda {b}");
    }
    assert!(gpu_losses[39] < gpu_losses[0] * 0.8, "the GPU run learns: {gpu_losses:?}");
    for (i, (a, b)) in cpu_params.iter().zip(&gpu_params).enumerate() {
        assert_close(&format!("parameter {i} after 40 steps"), a, b, 1e-3);
    }
}

/// A helper for comparisons with ties and both outcomes.
trait FlipSome {
    fn flip_sign_of_some(&self) -> Result<Tensor>;
}

impl FlipSome for Tensor {
    fn flip_sign_of_some(&self) -> Result<Tensor> {
        let mask = Tensor::arange(0.0, self.numel() as f64, 1.0, (DType::I64, &self.device()))?
            .reshape(self.shape())?
            .cmp_scalar(CmpOp::Lt, (self.numel() / 3) as f64)?;
        self.masked_fill(&mask, 0.25)
    }
}
