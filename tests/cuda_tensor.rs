//! Tensors on `cuda:0`: every op the CPU backend has, run on both devices from the same inputs and
//! compared element by element, plus moves, pinned memory and a training step. With no GPU the
//! comparisons print "skipped: no CUDA device" (never a silent pass); what needs no GPU (the
//! errors without a driver, and that every op the front end sends to the GPU has a kernel) is
//! checked everywhere.

use devcheck::cuda::kernels::{kernel_name, module_for_kernel};
use devcheck::nn::Forward;
use devcheck::nn::functional::{ClassLossOptions, cross_entropy};
use devcheck::optim::{AdamW, Optimizer};
use devcheck::{BinaryOp, CmpOp, DType, Device, Module, Result, Tensor, UnaryOp};

/// Written to stderr directly, past the test harness's output capture, so a skip is always seen.
macro_rules! skip_note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

const CUDA0: Device = Device::Cuda(0);

fn gpu_present(test: &str) -> bool {
    if devcheck::cuda::is_available() {
        return true;
    }
    skip_note!("skipped: no CUDA device ({test})");
    false
}

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
        skip_note!("skipped: a CUDA device is present (this test is for machines without one)");
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
    if !gpu_present("round trips") {
        return;
    }
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
    if !gpu_present("elementwise") {
        return;
    }
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
    if !gpu_present("into") {
        return;
    }
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
    if !gpu_present("matmul") {
        return;
    }
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
    if !gpu_present("reductions") {
        return;
    }
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
    if !gpu_present("selection") {
        return;
    }
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
            let ids = Tensor::from_vec(vec![2i64, 0, -1, 2], [4], d)?;
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
    let ids = Tensor::from_vec(vec![0i64, 3], [2], &CUDA0).unwrap();
    let e = input(&[3, 5], 40, &CUDA0).unwrap().index_select(0, &ids).unwrap_err().render(100);
    assert!(e.contains("index 3 is out of range for a dimension of size 3"), "{e}");
    assert!(e.contains("tests/cuda_tensor.rs"), "the error points at the call: {e}");
}

#[test]
fn every_cast_matches_the_cpu() {
    if !gpu_present("casts") {
        return;
    }
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
    if !gpu_present("training") {
        return;
    }
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
    if !gpu_present("modules") {
        return;
    }
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
    if !gpu_present("random") {
        return;
    }
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
    if !gpu_present("pinned") {
        return;
    }
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

#[test]
fn copies_between_two_gpus() {
    if !gpu_present("two GPUs") {
        return;
    }
    if devcheck::cuda::device_count() < 2 {
        skip_note!("skipped: needs two CUDA devices");
        return;
    }
    let x = input(&[33, 17], 43, &CUDA0).unwrap();
    let y = x.t().unwrap().to(&Device::Cuda(1)).unwrap();
    assert_eq!(y.device(), Device::Cuda(1));
    assert_eq!(y.to_vec::<f32>().unwrap(), x.t().unwrap().to_vec::<f32>().unwrap());
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
