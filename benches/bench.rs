//! devcheck's benchmark runner: `cargo bench --bench bench -- [--json] [--quick] [FILTER...]`.
//!
//! Each workload is timed after a warm-up over repeated runs; the median is reported as a rate
//! (GFLOP/s, GB/s, steps/s, MB/s; higher is better) or, for the checker, as milliseconds (lower is
//! better). Kernels and the MLP step run at 1 and 2 threads; the checker and the linter are
//! single-threaded and run once. `scripts/bench-peers.sh` runs the same workloads in numpy and
//! PyTorch and prints one table with the ratios.

mod workloads;

use std::time::{Duration, Instant};

use devcheck::{Device, Tensor};

use workloads::{check, lint, mlp};

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
    filters: Vec<String>,
}

fn main() {
    let mut opts = Options { json: false, quick: false, filters: Vec::new() };
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--json" => opts.json = true,
            "--quick" => opts.quick = true,
            // cargo bench passes --bench to every bench target.
            "--bench" => {}
            other if other.starts_with("--") => {
                eprintln!(
                    "error: unknown option `{other}`\nhelp: options are --json, --quick, and name filters"
                );
                std::process::exit(2);
            }
            other => opts.filters.push(other.to_string()),
        }
    }
    let mut results = Vec::new();
    for threads in [1, 2] {
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
    if threads == 1 {
        run_single_threaded(opts, results);
    }
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
    times.sort_by(f64::total_cmp);
    let median_s = times[times.len() / 2];
    let (rate, unit) = match work {
        Work::Rate(amount, unit) => (amount / median_s, unit),
        Work::Millis => (median_s * 1e3, "ms"),
    };
    let m = Measurement { name, threads, median_s, rate, unit, detail: None, floor: None };
    if !opts.json {
        println!(
            "{:<24} {} thread(s)  {:>10.3} ms  {:>9.1} {}",
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
