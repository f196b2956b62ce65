//! Lint time against the floor it cannot beat: a bare `syn` parse and full visit of the same
//! files. Both run single-threaded on texts already in memory, so the ratio is the linter's own
//! overhead; the parallel run shows what `devcheck lint` does with all cores. The whole run is
//! `devcheck lint` as the command does it: walking and reading the files, linting them, and the
//! crate-wide pass (call graph, findings that wait for it); `RAYON_NUM_THREADS=1` makes it
//! single-threaded, and its ratio then counts everything the command does on one core.
//!
//! `cargo bench --bench lint` (defaults to the cargo registry's sources), or
//! `cargo bench --bench lint -- [--json] [--repeat N] [--limit N] PATH...` (with `--limit`, no
//! whole run: it would lint every file under the paths).

#[path = "workloads/lint.rs"]
mod workload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use devcheck_lint::Settings;
use rayon::prelude::*;

struct Args {
    json: bool,
    repeat: usize,
    limit: Option<usize>,
    paths: Vec<PathBuf>,
}

fn parse_args() -> Args {
    let mut args = Args { json: false, repeat: 3, limit: None, paths: Vec::new() };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => args.json = true,
            "--repeat" => args.repeat = it.next().and_then(|n| n.parse().ok()).unwrap_or(3).max(1),
            "--limit" => args.limit = it.next().and_then(|n| n.parse().ok()),
            // `cargo bench` passes `--bench`; other flags are libtest's and mean nothing here.
            s if s.starts_with('-') => {}
            s => args.paths.push(PathBuf::from(s)),
        }
    }
    if args.paths.is_empty() {
        args.paths = workload::default_roots();
    }
    args
}

fn best_of(repeat: usize, mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut out = 0;
    for _ in 0..repeat {
        let start = Instant::now();
        out = std::hint::black_box(f());
        best = best.min(start.elapsed());
    }
    (best, out)
}

fn main() {
    let args = parse_args();
    let files = workload::collect(&args.paths, args.limit);
    let bytes: usize = files.iter().map(|(_, t)| t.len()).sum();
    let settings = Settings::default();
    // Warm up allocator and caches once.
    for (p, t) in files.iter().take(50) {
        workload::bare(t);
        workload::lint(p, t, &settings);
    }
    let (t_bare, exprs) = best_of(args.repeat, || files.iter().map(|(_, t)| workload::bare(t)).sum());
    let (t_lint, findings) =
        best_of(args.repeat, || files.iter().map(|(p, t)| workload::lint(p, t, &settings)).sum());
    let (t_par, _) =
        best_of(args.repeat, || files.par_iter().map(|(p, t)| workload::lint(p, t, &settings)).sum());
    // The whole run lints every file under the paths: with `--limit` it would not be comparable.
    let (t_run, _) = if args.limit.is_some() {
        (Duration::ZERO, 0)
    } else {
        best_of(args.repeat, || {
            devcheck_lint::lint_paths(&args.paths, &settings)
                .map(|run| run.diagnostics().count())
                .unwrap_or(0)
        })
    };
    let ratio = t_lint.as_secs_f64() / t_bare.as_secs_f64();
    let run_ratio = t_run.as_secs_f64() / t_bare.as_secs_f64();
    let mb = bytes as f64 / 1e6;
    if args.json {
        println!(
            "{{\"files\":{},\"bytes\":{bytes},\"expressions\":{exprs},\"findings\":{findings},\
             \"bare_parse_visit_s\":{:.4},\"lint_s\":{:.4},\"lint_parallel_s\":{:.4},\"whole_run_s\":{:.4},\
             \"threads\":{},\"ratio\":{ratio:.3},\"whole_run_ratio\":{run_ratio:.3}}}",
            files.len(),
            t_bare.as_secs_f64(),
            t_lint.as_secs_f64(),
            t_par.as_secs_f64(),
            t_run.as_secs_f64(),
            rayon::current_num_threads()
        );
    } else {
        println!("{} files, {mb:.1} MB, {exprs} expressions, {findings} findings", files.len());
        println!(
            "bare syn parse + visit  {:>8.3} s  {:>7.1} MB/s",
            t_bare.as_secs_f64(),
            mb / t_bare.as_secs_f64()
        );
        println!(
            "devcheck lint           {:>8.3} s  {:>7.1} MB/s",
            t_lint.as_secs_f64(),
            mb / t_lint.as_secs_f64()
        );
        println!(
            "devcheck lint, {} threads {:>6.3} s  {:>7.1} MB/s",
            rayon::current_num_threads(),
            t_par.as_secs_f64(),
            mb / t_par.as_secs_f64()
        );
        println!("lint / bare             {ratio:>8.2}x");
        if args.limit.is_none() {
            println!(
                "whole run, {} threads    {:>8.3} s  {:>7.1} MB/s",
                rayon::current_num_threads(),
                t_run.as_secs_f64(),
                mb / t_run.as_secs_f64()
            );
            println!("whole run / bare        {run_ratio:>8.2}x");
        }
    }
}
