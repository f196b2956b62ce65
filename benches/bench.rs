//! devcheck's benchmark runner: `cargo bench --bench bench -- [--json] [--quick] [--caller-thread]
//! [FILTER...]`.
//!
//! Each workload is timed after a warm-up over repeated runs; the median is reported as a rate
//! (GFLOP/s, GB/s, steps/s, MB/s; higher is better) or, for the checker, as milliseconds (lower is
//! better). Kernels, the training steps and the layers forward+backward run at 1 and 2 threads; the checker and the linter are
//! single-threaded and run once. With `--caller-thread` every workload runs once, on the program's
//! own thread the way a user's training loop does (outside any rayon pool, with as many threads as
//! `RAYON_NUM_THREADS` or the cores give), instead of inside a pool of 1 and then 2 threads.
//! `scripts/bench-peers.sh` runs the same workloads in numpy and
//! PyTorch and prints one table with the ratios.

mod workloads;

use std::time::{Duration, Instant};

use devcheck::{DType, Device, Tensor};

use workloads::{check, cnn, gpt, lint, mlp, ops};

struct Measurement {
    name: String,
    threads: usize,
    median_s: f64,
    rate: f64,
    unit: &'static str,
    /// What the workload was run on, when its name does not say.
    detail: Option<String>,
    /// The workload this one is compared with in the same run (the linter against bare syn).
    floor: Option<String>,
}

/// What one run of a workload amounts to.
enum Work {
    /// `amount` of `unit` per run: the rate is amount / time.
    Rate(f64, &'static str),
    /// Only the time counts: reported in milliseconds.
    Millis,
}

struct Options {
    json: bool,
    quick: bool,
    caller_thread: bool,
    filters: Vec<String>,
}

fn main() {
    let mut opts = Options { json: false, quick: false, caller_thread: false, filters: Vec::new() };
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--json" => opts.json = true,
            "--quick" => opts.quick = true,
            "--caller-thread" => opts.caller_thread = true,
            // cargo bench passes --bench to every bench target.
            "--bench" => {}
            other if other.starts_with("--") => {
                eprintln!(
                    "error: unknown option `{other}`\nhelp: options are --json, --quick, --caller-thread, and name filters"
                );
                std::process::exit(2);
            }
            other => opts.filters.push(other.to_string()),
        }
    }
    let mut results = Vec::new();
    // The program's own thread (outside any pool), or a pool of 1 and then 2 threads.
    let pools: &[usize] = if opts.caller_thread { &[] } else { &[1, 2] };
    if opts.caller_thread {
        run_all(&opts, rayon::current_num_threads(), &mut results);
    }
    for &threads in pools {
        let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
            Ok(pool) => pool,
            Err(e) => {
                eprintln!("error: cannot build a {threads}-thread pool: {e}");
                std::process::exit(2);
            }
        };
        pool.install(|| run_all(&opts, threads, &mut results));
    }
    if opts.json {
        let rows: Vec<serde_json::Value> = results
            .iter()
            .map(|m| {
                serde_json::json!({
                    "workload": m.name, "threads": m.threads, "median_s": m.median_s,
                    "rate": m.rate, "unit": m.unit, "higher_is_better": m.unit != "ms",
                    "detail": m.detail, "floor": m.floor,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    }
}

fn run_all(opts: &Options, threads: usize, results: &mut Vec<Measurement>) {
    let cpu = Device::Cpu;
    let sizes: &[usize] = if opts.quick { &[256] } else { &[256, 512, 1024, 2048] };
    for &n in sizes {
        let name = format!("matmul_f32_{n}");
        if !wanted(opts, &name) {
            continue;
        }
        let a = must(Tensor::randn([n, n], &cpu));
        let b = must(Tensor::randn([n, n], &cpu));
        let flops = 2.0 * (n as f64).powi(3);
        record(opts, results, name, threads, Work::Rate(flops / 1e9, "GFLOP/s"), || must(a.matmul(&b)));
    }
    let len = if opts.quick { 1 << 20 } else { 1 << 24 };
    let m = len >> 20;
    if ["add", "add_out", "mul", "exp"].iter().any(|op| wanted(opts, &format!("{op}_{m}M"))) {
        elementwise(opts, threads, len, results);
    }
    let (rows, cols) = if opts.quick { (256, 1024) } else { (4096, 1024) };
    let name = format!("softmax_{rows}x{cols}");
    if wanted(opts, &name) {
        let s = must(Tensor::randn([rows, cols], &cpu));
        let bytes = 2.0 * 4.0 * (rows * cols) as f64 / 1e9;
        record(opts, results, name, threads, Work::Rate(bytes, "GB/s"), || must(s.softmax(-1)));
    }
    let name = format!("mlp_{}_{}_{}_step", mlp::SIZES[0], mlp::SIZES[1], mlp::SIZES[2]);
    if wanted(opts, &name) {
        let mut step = must(mlp::MlpStep::new());
        record(opts, results, name, threads, Work::Rate(1.0, "steps/s"), || must(step.step()));
    }
    training(opts, threads, results);
    if threads == 1 {
        run_single_threaded(opts, results);
        run_gpu(opts, results);
    }
}

/// The GPT-style and CNN training steps, and the transformer's pieces forward and backward on
/// their own (`benches/workloads/{gpt,cnn,ops}.rs`).
fn training(opts: &Options, threads: usize, results: &mut Vec<Measurement>) {
    let name = format!("gpt_d{}_l{}_t{}_b{}_step", gpt::DIM, gpt::LAYERS, gpt::SEQ, gpt::BATCH);
    if wanted(opts, &name) {
        let mut step = must(gpt::GptStep::new());
        record(opts, results, name, threads, Work::Rate(1.0, "steps/s"), || must(step.step()));
    }
    let name = format!("cnn_{}x{}_b{}_step", cnn::SIDE, cnn::SIDE, cnn::BATCH);
    if wanted(opts, &name) {
        let mut step = must(cnn::CnnStep::new());
        record(opts, results, name, threads, Work::Rate(1.0, "steps/s"), || must(step.step()));
    }
    let (rows, cols) = (ops::ROWS, ops::COLS);
    let [b, h, t, d] = ops::ATTENTION;
    let pieces: [(String, ops::Make); 4] = [
        (format!("layer_norm_{rows}x{cols}_fwd_bwd"), ops::layer_norm_fwd_bwd),
        (format!("gelu_{rows}x{cols}_fwd_bwd"), ops::gelu_fwd_bwd),
        (format!("attention_{b}x{h}x{t}x{d}_fwd_bwd"), ops::attention_fwd_bwd),
        (format!("cross_entropy_{rows}x{cols}_fwd_bwd"), ops::cross_entropy_fwd_bwd),
    ];
    for (name, make) in pieces {
        if wanted(opts, &name) {
            let piece = must(make());
            record(opts, results, name, threads, Work::Rate(1.0, "runs/s"), || must(piece.run()));
        }
    }
}

/// The GPU workloads (named `gpu_*`), on cuda:0 when there is one; timed on the device with CUDA
/// events, so host overheads between launches count only as far as they starve the GPU.
/// Element-wise rates are also given as a fraction of the device's peak memory bandwidth.
fn run_gpu(opts: &Options, results: &mut Vec<Measurement>) {
    const GPU_WORKLOADS: [&str; 10] = [
        "gpu_add_16M",
        "gpu_exp_16M",
        "gpu_sum_all_16M",
        "gpu_sum_dim0_4096x4096",
        "gpu_softmax_4096x1024",
        "gpu_matmul_f32_1024",
        "gpu_matmul_f32_4096",
        "gpu_matmul_bf16_4096",
        "gpu_h2d_pinned_64M",
        "gpu_mlp_784_256_10_step",
    ];
    if !GPU_WORKLOADS.iter().any(|w| wanted(opts, w)) {
        return;
    }
    if !devcheck::cuda::is_available() {
        if !opts.json {
            println!("  (gpu_* workloads skipped: no CUDA device)");
        }
        return;
    }
    let gpu = Device::Cuda(0);
    let name = devcheck::cuda::device_name(0).unwrap_or_else(|| "cuda:0".to_string());
    let peak = devcheck::cuda::device_memory_bandwidth(0);
    let len = 1 << 24;
    let x = must(Tensor::randn([len], &gpu));
    let y = must(Tensor::randn([len], &gpu));
    // Memory-bound workloads: the rate as a share of what the device's memory can do.
    let streamed = |results: &mut Vec<Measurement>| {
        if let Some(m) = results.last_mut() {
            let share = peak.map_or(String::new(), |p| {
                format!(", {:.0}% of its {:.0} GB/s peak", 100.0 * m.rate * 1e9 / p, p / 1e9)
            });
            let detail = format!("{name}{share}");
            if !opts.json {
                println!("  ({}: {detail})", m.name);
            }
            m.detail = Some(detail);
        }
    };
    for (workload, bytes, f) in [
        ("gpu_add_16M", 12.0, &(|| must(x.add(&y))) as &dyn Fn() -> Tensor),
        ("gpu_exp_16M", 8.0, &|| must(x.exp())),
        ("gpu_sum_all_16M", 4.0, &|| must(x.sum_all())),
    ] {
        if wanted(opts, workload) {
            let gb = bytes * len as f64 / 1e9;
            record_gpu(opts, results, &gpu, workload, Work::Rate(gb, "GB/s"), f);
            streamed(results);
        }
    }
    if wanted(opts, "gpu_sum_dim0_4096x4096") {
        let m = must(x.reshape([4096, 4096]));
        let gb = 4.0 * (4096 * 4096) as f64 / 1e9;
        record_gpu(opts, results, &gpu, "gpu_sum_dim0_4096x4096", Work::Rate(gb, "GB/s"), || {
            must(m.sum(0isize, false))
        });
        streamed(results);
    }
    if wanted(opts, "gpu_softmax_4096x1024") {
        let s = must(Tensor::randn([4096, 1024], &gpu));
        let gb = 8.0 * (4096 * 1024) as f64 / 1e9;
        record_gpu(opts, results, &gpu, "gpu_softmax_4096x1024", Work::Rate(gb, "GB/s"), || {
            must(s.softmax(-1))
        });
        streamed(results);
    }
    for (n, dtype) in [(1024, DType::F32), (4096, DType::F32), (4096, DType::BF16)] {
        let workload = format!("gpu_matmul_{}_{n}", dtype.as_str());
        if wanted(opts, &workload) {
            let a = must(must(Tensor::randn([n, n], &gpu)).to_dtype(dtype));
            let b = must(must(Tensor::randn([n, n], &gpu)).to_dtype(dtype));
            let flops = 2.0 * (n as f64).powi(3) / 1e9;
            record_gpu(opts, results, &gpu, &workload, Work::Rate(flops, "GFLOP/s"), || must(a.matmul(&b)));
        }
    }
    if wanted(opts, "gpu_h2d_pinned_64M") {
        let host = must(must(Tensor::randn([len], &Device::Cpu)).pin_memory());
        let gb = 4.0 * len as f64 / 1e9;
        record_gpu(opts, results, &gpu, "gpu_h2d_pinned_64M", Work::Rate(gb, "GB/s"), || {
            must(host.to_non_blocking(&gpu))
        });
    }
    let workload = format!("gpu_mlp_{}_{}_{}_step", mlp::SIZES[0], mlp::SIZES[1], mlp::SIZES[2]);
    if wanted(opts, &workload) {
        let mut step = must(mlp::MlpStep::on(&gpu));
        record_gpu(opts, results, &gpu, &workload, Work::Rate(1.0, "steps/s"), || must(step.step()));
    }
}

/// `record` for GPU work: a sample queues `f` repeatedly between two CUDA events and takes the
/// device time between them, so the queue is never drained by a synchronisation mid-sample.
fn record_gpu<R>(
    opts: &Options,
    results: &mut Vec<Measurement>,
    device: &Device,
    name: &str,
    work: Work,
    mut f: impl FnMut() -> R,
) {
    let synchronize = || must_cuda(devcheck::cuda::synchronize(device));
    // Warm-up: kernels compile at first use.
    std::hint::black_box(f());
    synchronize();
    let (start, end) =
        (must_cuda(devcheck::cuda::Event::new(device)), must_cuda(devcheck::cuda::Event::new(device)));
    let time = |f: &mut dyn FnMut() -> R, inner: usize| {
        must_cuda(start.record());
        for _ in 0..inner {
            std::hint::black_box(f());
        }
        must_cuda(end.record());
        f64::from(must_cuda(start.elapsed_time(&end))) / 1e3 / inner as f64
    };
    let once = time(&mut f, 1);
    let inner = if once < 0.01 { (0.01 / once.max(1e-9)) as usize + 1 } else { 1 };
    let budget = if opts.quick { Duration::from_millis(200) } else { Duration::from_secs(2) };
    let begin = Instant::now();
    let mut times = Vec::new();
    while times.len() < 15 && (times.len() < 3 || begin.elapsed() < budget) {
        times.push(time(&mut f, inner));
    }
    synchronize();
    push_measurement(opts, results, name.to_string(), 1, work, times);
}

fn must_cuda<T>(r: devcheck::cuda::CudaResult<T>) -> T {
    r.unwrap_or_else(|e| fail(&format!("{e:?}")))
}

/// Element-wise ops over `len` elements: allocating, into a preallocated output, and unary.
fn elementwise(opts: &Options, threads: usize, len: usize, results: &mut Vec<Measurement>) {
    let cpu = Device::Cpu;
    let x = must(Tensor::randn([len], &cpu));
    let y = must(Tensor::randn([len], &cpu));
    let out = must(Tensor::zeros([len], &cpu));
    let bytes3 = 3.0 * 4.0 * len as f64 / 1e9;
    let bytes2 = 2.0 * 4.0 * len as f64 / 1e9;
    let m = len >> 20;
    if wanted(opts, &format!("add_{m}M")) {
        record(opts, results, format!("add_{m}M"), threads, Work::Rate(bytes3, "GB/s"), || must(x.add(&y)));
    }
    if wanted(opts, &format!("add_out_{m}M")) {
        record(opts, results, format!("add_out_{m}M"), threads, Work::Rate(bytes3, "GB/s"), || {
            must(x.add_into(&y, &out))
        });
    }
    if wanted(opts, &format!("mul_{m}M")) {
        record(opts, results, format!("mul_{m}M"), threads, Work::Rate(bytes3, "GB/s"), || must(x.mul(&y)));
    }
    if wanted(opts, &format!("exp_{m}M")) {
        record(opts, results, format!("exp_{m}M"), threads, Work::Rate(bytes2, "GB/s"), || must(x.exp()));
    }
}

/// The checker and the linter: they use one thread, so they run once.
fn run_single_threaded(opts: &Options, results: &mut Vec<Measurement>) {
    if wanted(opts, "gpt2_small_dry_run") || wanted(opts, "inspect_gpt2_small") {
        let mut gpt2 = must(check::Gpt2DryRun::new());
        if wanted(opts, "gpt2_small_dry_run") {
            record(opts, results, "gpt2_small_dry_run".into(), 1, Work::Millis, || {
                let report = must(gpt2.dry_run());
                if !report.is_clean() || report.data_bytes() != 0 {
                    fail(&format!("the dry run is not clean:\n{}", report.render(100)));
                }
                report
            });
            if let Some(m) = results.last_mut() {
                m.detail = Some(format!("GPT-2 small, ids [8, 1024] on a fake {}", gpt2.target()));
            }
        }
        if wanted(opts, "inspect_gpt2_small") {
            record(opts, results, "inspect_gpt2_small".into(), 1, Work::Millis, || gpt2.inspect());
        }
    }
    let layers = 1000;
    let name = format!("inspect_{layers}_layers");
    if wanted(opts, &name) {
        let model = must(check::deep_model(layers, 1024));
        record(opts, results, name, 1, Work::Millis, || devcheck::inspect(&model));
    }
    if wanted(opts, "lint") || wanted(opts, "syn_parse_visit") {
        let limit = if opts.quick { 200 } else { 2000 };
        let files = lint::collect(&lint::default_roots(), Some(limit));
        if files.is_empty() {
            fail("no Rust sources found under the cargo registry to lint");
        }
        let mb = files.iter().map(|(_, t)| t.len()).sum::<usize>() as f64 / 1e6;
        let detail = format!("{} files of the cargo registry, {mb:.1} MB", files.len());
        let settings = devcheck_lint::Settings::default();
        let floor = "syn_parse_visit";
        record(opts, results, floor.into(), 1, Work::Rate(mb, "MB/s"), || {
            files.iter().map(|(_, t)| lint::bare(t)).sum::<usize>()
        });
        record(opts, results, "lint".into(), 1, Work::Rate(mb, "MB/s"), || {
            files.iter().map(|(p, t)| lint::lint(p, t, &settings)).sum::<usize>()
        });
        let n = results.len();
        for m in &mut results[n - 2..] {
            m.detail = Some(detail.clone());
        }
        results[n - 1].floor = Some(floor.to_string());
        if !opts.json {
            println!("  (lint and its floor over {detail})");
        }
    }
}

fn wanted(opts: &Options, name: &str) -> bool {
    opts.filters.is_empty() || opts.filters.iter().any(|f| name.contains(f.as_str()))
}

/// Times `f` (after a warm-up) until 15 samples or 2 s (0.2 s with --quick), records the median.
/// A sample repeats a fast `f` until it lasts 10 ms, so timer resolution and one-off stalls do
/// not dominate (`scripts/bench_peers.py` samples its peers the same way).
fn record<R>(
    opts: &Options,
    results: &mut Vec<Measurement>,
    name: String,
    threads: usize,
    work: Work,
    mut f: impl FnMut() -> R,
) {
    std::hint::black_box(f());
    let t = Instant::now();
    std::hint::black_box(f());
    let once = t.elapsed().as_secs_f64();
    let min_sample = 0.01;
    let inner = if once < min_sample { (min_sample / once.max(1e-9)) as usize + 1 } else { 1 };
    let budget = if opts.quick { Duration::from_millis(200) } else { Duration::from_secs(2) };
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 15 && (times.len() < 3 || start.elapsed() < budget) {
        let t = Instant::now();
        for _ in 0..inner {
            std::hint::black_box(f());
        }
        times.push(t.elapsed().as_secs_f64() / inner as f64);
    }
    push_measurement(opts, results, name, threads, work, times);
}

/// Records the median of `times` (seconds per run) and prints it.
fn push_measurement(
    opts: &Options,
    results: &mut Vec<Measurement>,
    name: String,
    threads: usize,
    work: Work,
    mut times: Vec<f64>,
) {
    times.sort_by(f64::total_cmp);
    let median_s = times[times.len() / 2];
    let (rate, unit) = match work {
        Work::Rate(amount, unit) => (amount / median_s, unit),
        Work::Millis => (median_s * 1e3, "ms"),
    };
    let m = Measurement { name, threads, median_s, rate, unit, detail: None, floor: None };
    if !opts.json {
        println!(
            "{:<34} {} thread(s)  {:>10.3} ms  {:>9.1} {}",
            m.name,
            m.threads,
            m.median_s * 1e3,
            m.rate,
            m.unit
        );
    }
    results.push(m);
}

fn must<T>(r: devcheck::Result<T>) -> T {
    r.unwrap_or_else(|e| fail(&format!("{e:?}")))
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2);
}
