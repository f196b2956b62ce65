//! Python lint time against the floor it cannot beat: a bare parse with the same parser
//! (`ruff_python_parser`) and a full visit of every statement and expression of the same files.
//! Both run single-threaded on texts already in memory, so the ratio is the Python front end's
//! own overhead: the semantic model, the rules, the depth estimate and the report (`lint_source`
//! on the calling thread, whose stack holds every tree of these files). The lint is timed twice:
//! with the rules `devcheck lint` runs by default (the stable ones), and with every rule
//! (`--preview`: the preview rules too). The whole run is `devcheck lint --preview` as the
//! command does it on the same files: walked, read and linted on the linter's workers;
//! `RAYON_NUM_THREADS=1` makes it single-threaded. Its floor reads each file before the bare
//! parse (`read + bare parse`).
//!
//! `cargo bench --bench lint_python` (defaults to the ecosystem check's exported trees, the
//! folder `ECOSYSTEM_DIR` or `../ecosystem`), or
//! `cargo bench --bench lint_python -- [--json] [--repeat N] [--select D001,D002] PATH...`
//! (`--select`: only those rules, in both lint passes — a preview rule runs in the every-rule one
//! only — to measure what a rule adds).

use std::path::{Path, PathBuf};

/// The allocator the `devcheck` command uses, so that both sides of every ratio allocate alike.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::{Duration, Instant};

use devcheck_lint::{LintTable, Overrides, Settings};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, Stmt};

struct Args {
    json: bool,
    /// `--select D001,D002`: only these rules (both lint passes), to measure what a rule costs.
    select: Option<Vec<String>>,
    repeat: usize,
    paths: Vec<PathBuf>,
}

fn parse_args() -> Args {
    let mut args = Args { json: false, select: None, repeat: 5, paths: Vec::new() };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => args.json = true,
            "--select" => args.select = it.next().map(|s| s.split(',').map(String::from).collect()),
            "--repeat" => args.repeat = it.next().and_then(|n| n.parse().ok()).unwrap_or(5).max(1),
            // `cargo bench` passes `--bench`; other flags are libtest's and mean nothing here.
            s if s.starts_with('-') => {}
            s => args.paths.push(PathBuf::from(s)),
        }
    }
    if args.paths.is_empty() {
        let dir = std::env::var_os("ECOSYSTEM_DIR").map(PathBuf::from).unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new("..")).join("ecosystem")
        });
        args.paths.push(dir);
    }
    args
}

/// Every `.py` file under `roots` that the linter would read, sorted by path.
fn collect(roots: &[PathBuf]) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for root in roots {
        for entry in ignore::WalkBuilder::new(root).build().flatten() {
            let p = entry.path();
            if p.extension().is_some_and(|e| e == "py")
                && let Ok(text) = std::fs::read_to_string(p)
                && text.len() <= devcheck_lint::MAX_FILE_BYTES
            {
                files.push((p.to_path_buf(), text));
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// The floor: parse, and visit every node once. Returns the number of expressions seen.
/// Never inlined, so `valgrind --tool=callgrind --toggle-collect='*lint_python::bare*'` counts it
/// alone (and `--toggle-collect='devcheck_lint::python::check'` the Python pass, or
/// `--toggle-collect='devcheck_lint::pipeline::lint_text'` the whole analysis of a file with its report;
/// divide by the number of calls each shows).
#[inline(never)]
fn bare(text: &str) -> usize {
    struct Count(usize);
    impl<'a> Visitor<'a> for Count {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            visitor::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            self.0 += 1;
            visitor::walk_expr(self, e);
        }
    }
    match ruff_python_parser::parse_module(text) {
        Ok(parsed) => {
            let mut c = Count(0);
            c.visit_body(&parsed.syntax().body);
            c.0
        }
        Err(_) => 0,
    }
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
    let files = collect(&args.paths);
    if files.is_empty() {
        eprintln!("no .py files under {:?} (run scripts/ecosystem.py first, or name a folder)", args.paths);
        std::process::exit(2);
    }
    let bytes: usize = files.iter().map(|(_, t)| t.len()).sum();
    let settings_with = |preview: bool| {
        let overrides = Overrides { preview, select: args.select.clone(), ..Overrides::default() };
        Settings::from_table(LintTable::default(), PathBuf::from("."), None, &overrides)
    };
    let (Ok(settings), Ok(default_settings)) = (settings_with(true), settings_with(false)) else {
        eprintln!("settings could not be built");
        std::process::exit(2);
    };
    let lint = |p: &Path, t: &str| devcheck_lint::lint_source(p, t, &settings).diagnostics.len();
    let lint_default =
        |p: &Path, t: &str| devcheck_lint::lint_source(p, t, &default_settings).diagnostics.len();
    // Warm up allocator and caches once.
    for (p, t) in files.iter().take(50) {
        bare(t);
        lint(p, t);
        lint_default(p, t);
    }
    // The passes alternate, round by round, so that all see the same state of a shared machine
    // (run one after the other, a noisy minute lands on one side only).
    let (mut t_bare, mut t_lint, mut t_default) = (Duration::MAX, Duration::MAX, Duration::MAX);
    let (mut exprs, mut findings, mut default_findings) = (0, 0, 0);
    for _ in 0..args.repeat {
        let (t, n) = best_of(1, || files.iter().map(|(_, t)| bare(t)).sum());
        (t_bare, exprs) = (t_bare.min(t), n);
        let (t, n) = best_of(1, || files.iter().map(|(p, t)| lint(p, t)).sum());
        (t_lint, findings) = (t_lint.min(t), n);
        let (t, n) = best_of(1, || files.iter().map(|(p, t)| lint_default(p, t)).sum());
        (t_default, default_findings) = (t_default.min(t), n);
    }
    // The whole run's floor: the same bare parse, of each file read from disk first.
    let (t_read_bare, _) = best_of(args.repeat, || {
        files.iter().map(|(p, _)| std::fs::read_to_string(p).map_or(0, |t| bare(&t))).sum()
    });
    // The command's way: every file read and linted on the linter's own large-stack workers
    // (`RAYON_NUM_THREADS=1` for one), with no hand-off to another thread per file.
    let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
    let (mut t_run, mut t_run_default) = (Duration::MAX, Duration::MAX);
    for _ in 0..args.repeat {
        let (t, _) = best_of(1, || {
            devcheck_lint::lint_paths(&paths, &settings).map(|run| run.diagnostics().count()).unwrap_or(0)
        });
        t_run = t_run.min(t);
        let (t, _) = best_of(1, || {
            devcheck_lint::lint_paths(&paths, &default_settings)
                .map(|run| run.diagnostics().count())
                .unwrap_or(0)
        });
        t_run_default = t_run_default.min(t);
    }
    let ratio = t_lint.as_secs_f64() / t_bare.as_secs_f64();
    let default_ratio = t_default.as_secs_f64() / t_bare.as_secs_f64();
    let run_ratio = t_run.as_secs_f64() / t_bare.as_secs_f64();
    let run_default_ratio = t_run_default.as_secs_f64() / t_bare.as_secs_f64();
    let run_read_ratio = t_run.as_secs_f64() / t_read_bare.as_secs_f64();
    let threads = rayon::current_num_threads();
    let mb = bytes as f64 / 1e6;
    if args.json {
        println!(
            "{{\"files\":{},\"bytes\":{bytes},\"expressions\":{exprs},\"findings\":{findings},\
             \"bare_parse_visit_s\":{:.4},\"lint_s\":{:.4},\"ratio\":{ratio:.3},\
             \"default_findings\":{default_findings},\"lint_default_s\":{:.4},\"default_ratio\":{default_ratio:.3},\
             \"whole_run_s\":{:.4},\"threads\":{threads},\"whole_run_ratio\":{run_ratio:.3},\
             \"whole_run_default_s\":{:.4},\"whole_run_default_ratio\":{run_default_ratio:.3},\
             \"read_bare_s\":{:.4},\"whole_run_vs_read_bare\":{run_read_ratio:.3}}}",
            files.len(),
            t_bare.as_secs_f64(),
            t_lint.as_secs_f64(),
            t_default.as_secs_f64(),
            t_run.as_secs_f64(),
            t_run_default.as_secs_f64(),
            t_read_bare.as_secs_f64(),
        );
    } else {
        println!(
            "{} files, {mb:.1} MB, {exprs} expressions, {findings} findings ({default_findings} by the default rules)",
            files.len()
        );
        println!(
            "bare ruff parse + visit  {:>8.3} s  {:>7.1} MB/s",
            t_bare.as_secs_f64(),
            mb / t_bare.as_secs_f64()
        );
        println!(
            "lint, default rules      {:>8.3} s  {:>7.1} MB/s",
            t_default.as_secs_f64(),
            mb / t_default.as_secs_f64()
        );
        println!("lint (default) / bare    {default_ratio:>8.2}x");
        println!(
            "lint, every rule         {:>8.3} s  {:>7.1} MB/s",
            t_lint.as_secs_f64(),
            mb / t_lint.as_secs_f64()
        );
        println!("lint (every rule) / bare {ratio:>8.2}x");
        println!(
            "whole run, {threads} thread(s) {:>8.3} s  {:>7.1} MB/s",
            t_run.as_secs_f64(),
            mb / t_run.as_secs_f64()
        );
        println!("whole run / bare         {run_ratio:>8.2}x");
        println!(
            "whole run, default rules {:>8.3} s  {:>7.1} MB/s",
            t_run_default.as_secs_f64(),
            mb / t_run_default.as_secs_f64()
        );
        println!("whole run (default) / bare {run_default_ratio:>6.2}x");
        println!(
            "read + bare parse        {:>8.3} s  {:>7.1} MB/s",
            t_read_bare.as_secs_f64(),
            mb / t_read_bare.as_secs_f64()
        );
        println!("whole run / (read + bare) {run_read_ratio:>7.2}x");
    }
}
