//! devcheck's benchmark runner: `cargo bench --bench bench -- [--json] [--quick] [FILTER...]`.
//!
//! Each workload is timed after a warm-up over repeated runs; the median is reported as a rate
//! (GFLOP/s, GB/s, steps/s) next to the median time. `scripts/bench-peers.sh` runs the same
//! workloads in numpy and PyTorch and prints one table with the ratios.

use std::time::{Duration, Instant};

use devcheck::{Device, Tensor};

struct Measurement {
    name: String,
    threads: usize,
    median_s: f64,
    rate: f64,
    unit: &'static str,
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
                    "rate": m.rate, "unit": m.unit,
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
        record(opts, results, name, threads, flops / 1e9, "GFLOP/s", || must(a.matmul(&b)));
    }
    let len = if opts.quick { 1 << 20 } else { 1 << 24 };
    let x = must(Tensor::randn([len], &cpu));
    let y = must(Tensor::randn([len], &cpu));
    let out = must(Tensor::zeros([len], &cpu));
    let bytes3 = 3.0 * 4.0 * len as f64 / 1e9;
    let bytes2 = 2.0 * 4.0 * len as f64 / 1e9;
    let m = len >> 20;
    if wanted(opts, &format!("add_{m}M")) {
        record(opts, results, format!("add_{m}M"), threads, bytes3, "GB/s", || must(x.add(&y)));
    }
    if wanted(opts, &format!("add_out_{m}M")) {
        record(opts, results, format!("add_out_{m}M"), threads, bytes3, "GB/s", || {
            must(x.add_into(&y, &out))
        });
    }
    if wanted(opts, &format!("mul_{m}M")) {
        record(opts, results, format!("mul_{m}M"), threads, bytes3, "GB/s", || must(x.mul(&y)));
    }
    if wanted(opts, &format!("exp_{m}M")) {
        record(opts, results, format!("exp_{m}M"), threads, bytes2, "GB/s", || must(x.exp()));
    }
    let (rows, cols) = if opts.quick { (256, 1024) } else { (4096, 1024) };
    let name = format!("softmax_{rows}x{cols}");
    if wanted(opts, &name) {
        let s = must(Tensor::randn([rows, cols], &cpu));
        let bytes = 2.0 * 4.0 * (rows * cols) as f64 / 1e9;
        record(opts, results, name, threads, bytes, "GB/s", || must(s.softmax(-1)));
    }
}

fn wanted(opts: &Options, name: &str) -> bool {
    opts.filters.is_empty() || opts.filters.iter().any(|f| name.contains(f.as_str()))
}

/// Times `f` (after a warm-up) until 15 runs or 2 s (0.2 s with --quick), records the median.
fn record<R>(
    opts: &Options,
    results: &mut Vec<Measurement>,
    name: String,
    threads: usize,
    work: f64,
    unit: &'static str,
    mut f: impl FnMut() -> R,
) {
    std::hint::black_box(f());
    let budget = if opts.quick { Duration::from_millis(200) } else { Duration::from_secs(2) };
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 15 && (times.len() < 3 || start.elapsed() < budget) {
        let t = Instant::now();
        std::hint::black_box(f());
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let median_s = times[times.len() / 2];
    let m = Measurement { name, threads, median_s, rate: work / median_s, unit };
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
    match r {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e:?}");
            std::process::exit(2);
        }
    }
}
