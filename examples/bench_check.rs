//! Times the checker on a GPT-2-small-shaped model (12 layers, width 768, vocabulary 50257):
//! the forward dry run on a fake `cuda:0` (clone, fake placement and forward) and the inventory.
//!
//! `cargo run --release --example bench_check [-- --json] [--runs N]`

#[allow(dead_code)]
#[path = "../benches/workloads/check.rs"]
mod workload;

use std::time::{Duration, Instant};

struct Timing {
    name: &'static str,
    runs: Vec<Duration>,
}

impl Timing {
    fn sorted_ms(&self) -> Vec<f64> {
        let mut ms: Vec<f64> = self.runs.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        ms
    }

    fn median_ms(&self) -> f64 {
        let ms = self.sorted_ms();
        ms[ms.len() / 2]
    }
}

fn main() {
    let mut json = false;
    let mut runs = 50usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--runs" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => runs = n,
                _ => fail("`--runs` takes a positive number"),
            },
            other => fail(&format!("unknown argument `{other}`; arguments are --json and --runs N")),
        }
    }

    let mut gpt2 = workload::Gpt2DryRun::new().unwrap_or_else(|e| fail(&format!("{e:?}")));
    let target = gpt2.target();

    let mut dry_run = Timing { name: "check_forward gpt2-small on fake cuda:0", runs: Vec::new() };
    let mut inventory = Timing { name: "inspect gpt2-small", runs: Vec::new() };
    let mut last = None;
    for i in 0..runs + 3 {
        let started = Instant::now();
        let report = gpt2.dry_run().unwrap_or_else(|e| fail(&format!("{e:?}")));
        let elapsed = started.elapsed();
        let started = Instant::now();
        let listed = gpt2.inspect();
        let inspect_elapsed = started.elapsed();
        // The first runs warm caches and are not counted.
        if i >= 3 {
            dry_run.runs.push(elapsed);
            inventory.runs.push(inspect_elapsed);
        }
        last = Some((report, listed));
    }
    let Some((report, listed)) = last else { fail("no run") };
    if !report.is_clean() || report.data_bytes() != 0 {
        fail(&format!("the dry run is not clean:\n{}", report.render(100)));
    }
    let on_gpu = report.allocations().get(&target).copied().unwrap_or_default();

    if json {
        let rows: Vec<serde_json::Value> = [&dry_run, &inventory]
            .iter()
            .map(|t| {
                let ms = t.sorted_ms();
                serde_json::json!({
                    "workload": t.name,
                    "runs": ms.len(),
                    "median_ms": t.median_ms(),
                    "min_ms": ms[0],
                    "max_ms": ms[ms.len() - 1],
                })
            })
            .collect();
        let out = serde_json::json!({
            "results": rows,
            "parameters": listed.totals().iter().map(|t| t.parameter_elements).sum::<usize>(),
            "forward_fake_tensors": on_gpu.fake_tensors,
            "forward_fake_bytes": on_gpu.fake_bytes,
            "data_bytes": report.data_bytes(),
        });
        println!("{out}");
        return;
    }
    for t in [&dry_run, &inventory] {
        let ms = t.sorted_ms();
        println!(
            "{:<42} median {:>7.2} ms  (min {:.2}, max {:.2}, {} runs)",
            t.name,
            t.median_ms(),
            ms[0],
            ms[ms.len() - 1],
            ms.len()
        );
    }
    println!(
        "forward made {} tensors on {target} ({} in all); element data allocated: {}",
        devcheck::check::fmt_count(on_gpu.fake_tensors),
        devcheck::check::fmt_bytes(on_gpu.fake_bytes),
        devcheck::check::fmt_bytes(report.data_bytes())
    );
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2);
}
