//! The `devcheck` command line: `lint`, `inspect`, `check`, `explain`, `env`.
//!
//! Exit codes: 0 clean, 1 findings at the failing level, 2 usage, I/O or internal error (a
//! file `--fix` could not write included; every other file is still fixed and reported).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use devcheck_lint::output::{Format, RenderOptions, json_escaped, printable, render, statistics};
use devcheck_lint::{
    Api, FixMode, Overrides, Settings, Severity, Target, add_ignores, apply_fixes, inspect_paths, lint_paths,
    registry, render_inspect, unified_diff,
};
use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};

/// mimalloc: the linter allocates a syntax tree per file and frees it whole, which it serves
/// faster than the system allocator (about 15% of a lint run).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "devcheck",
    version,
    about = "Device-placement linter and checker for deep-learning code in Rust and PyTorch"
)]
struct Cli {
    /// When to colour the output.
    #[arg(long, value_enum, default_value_t = Color::Auto, global = true)]
    color: Color,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand)]
enum Command {
    /// Lint Rust and Python (PyTorch) files for device hazards (D001-D010).
    Lint(LintArgs),
    /// Show what a device move carries in each module struct, and what it leaves behind.
    Inspect(InspectArgs),
    /// Dry-run a PyTorch model on a fake GPU and report its device bugs at their lines:
    /// `devcheck check model.py:build --input x:float32[8,128]` (needs the devcheck package and
    /// torch in a Python: see `--python`).
    Check(CheckArgs),
    /// Print a rule's documentation: `devcheck explain D001`.
    Explain {
        /// A rule code (`D001`) or name (`tensor-on-fixed-device`).
        code: String,
    },
    /// Show the devcheck version, CUDA driver and devices, NVRTC, and the default device.
    Env {
        #[arg(long, value_enum, default_value_t = EnvFormat::Human)]
        format: EnvFormat,
    },
    /// CUDA kernel tools (no GPU needed).
    Kernels {
        #[command(subcommand)]
        command: KernelsCommand,
    },
}

#[derive(Subcommand)]
enum KernelsCommand {
    /// Compile every kernel module in `kernels/` with NVRTC for each `--arch`, and check that the
    /// compiled kernels are exactly the ones the backend looks up.
    Check {
        /// Target architecture; repeatable (`--arch sm_80 --arch sm_90`).
        #[arg(long = "arch", default_value = "sm_80")]
        archs: Vec<String>,
        /// Extra include directory for the CUDA headers (cuda_fp16.h); repeatable.
        #[arg(long = "include")]
        include: Vec<std::path::PathBuf>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum EnvFormat {
    Human,
    Json,
}

#[derive(Args)]
struct InspectArgs {
    /// Rust or Python files or directories to inspect, or `.safetensors` checkpoints.
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = EnvFormat::Human)]
    format: EnvFormat,
    /// The tensor API of every file, instead of detecting it from its `use` lines.
    #[arg(long, value_enum)]
    api: Option<Api>,
    /// Read this configuration file instead of looking for devcheck.toml.
    #[arg(long, conflicts_with = "isolated")]
    config: Option<PathBuf>,
    /// Ignore every devcheck.toml.
    #[arg(long)]
    isolated: bool,
}

#[derive(Args)]
struct CheckArgs {
    /// The model to check: FILE.py:NAME, NAME being a zero-argument factory function or an
    /// `nn.Module` class in that file.
    target: String,
    /// An input of `forward`: NAME:DTYPE[SHAPE], e.g. `x:float32[8,128]`, `ids:int64[2,64]=0..50257`
    /// (repeatable).
    #[arg(long = "input")]
    inputs: Vec<String>,
    /// The device the model is checked for.
    #[arg(long, default_value = "cuda:0")]
    device: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = EnvFormat::Human)]
    format: EnvFormat,
    /// The Python to run the check in (it needs the devcheck package and torch). Default:
    /// `DEVCHECK_PYTHON`, else the Python this command was installed with, else `python3`.
    #[arg(long)]
    python: Option<PathBuf>,
}

#[derive(Args)]
struct LintArgs {
    /// Files or directories to lint (directories are walked for `.rs` and `.py` files, respecting
    /// .gitignore).
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Only these rules (codes or names, comma-separated, or ALL); replaces `select` in devcheck.toml.
    #[arg(long, value_delimiter = ',')]
    select: Option<Vec<String>>,
    /// Skip these rules (codes or names, comma-separated); added to `ignore` in devcheck.toml.
    #[arg(long, value_delimiter = ',')]
    ignore: Vec<String>,
    /// The tensor API of every file, instead of detecting it from its `use` lines.
    #[arg(long, value_enum)]
    api: Option<Api>,
    /// The level of finding that makes the run fail (exit code 1).
    #[arg(long, value_enum)]
    fail_on: Option<Severity>,
    /// Also run the preview rules and patterns (less precise on real code; see `devcheck explain`).
    #[arg(long)]
    preview: bool,
    /// Where the code must run: `cuda` (only ever on CUDA GPUs) or `any` (also without a GPU);
    /// replaces `target` in devcheck.toml.
    #[arg(long, value_enum)]
    target: Option<Target>,
    /// Read this configuration file instead of looking for devcheck.toml.
    #[arg(long, conflicts_with = "isolated")]
    config: Option<PathBuf>,
    /// Ignore every devcheck.toml.
    #[arg(long)]
    isolated: bool,
    /// Apply safe fixes in place.
    #[arg(long)]
    fix: bool,
    /// With --fix or --diff, apply unsafe fixes too (read them first: see `devcheck explain`).
    #[arg(long)]
    unsafe_fixes: bool,
    /// Print what `--fix` would change as a unified diff, and write nothing (exit 1 when there
    /// is a diff).
    #[arg(long, conflicts_with = "fix")]
    diff: bool,
    /// Write a suppression comment (`# devcheck: ignore[D002]`) for every current finding, so
    /// that only new findings fail from now on; nothing else in the files changes.
    #[arg(long, conflicts_with_all = ["fix", "diff"])]
    add_ignore: bool,
    /// Print how many findings each rule has instead of the findings.
    #[arg(long)]
    statistics: bool,
    /// Show only errors (warnings are not printed nor counted).
    #[arg(long)]
    errors_only: bool,
    /// Exit with 0 even when there are findings (2 still means the run itself failed).
    #[arg(long)]
    exit_zero: bool,
    /// List the rules and exit.
    #[arg(long)]
    list_rules: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let color = match cli.color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    let code = match cli.command {
        Command::Lint(args) => lint(args, color),
        Command::Inspect(args) => inspect(args, color),
        Command::Check(args) => check(args),
        Command::Explain { code } => explain(&code, color),
        Command::Env { format } => env(format),
        Command::Kernels { command: KernelsCommand::Check { archs, include } } => {
            kernels_check(&archs, &include)
        }
    };
    ExitCode::from(code)
}

fn width() -> usize {
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).filter(|w| *w >= 40).unwrap_or(100)
}

/// Prints an error of the run itself as a miette report on stderr. Errors quote what users and
/// their files wrote (paths, rule codes, configuration, checkpoint tensor names), so the report
/// is rendered without colour and goes out through [`print_err`], which escapes every control
/// character: nothing in it can drive the terminal.
fn report_error(error: &dyn Diagnostic, _color: bool) {
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
        .with_links(false)
        .with_width(width());
    let mut out = String::new();
    if handler.render_report(&mut out, error).is_err() {
        out = error.to_string();
    }
    print_err(&out);
}

fn print(text: &str) {
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`devcheck lint | head`) is not an error worth a panic.
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Everything devcheck writes to stderr goes through here: control and bidirectional-override
/// characters are escaped (`\u{1b}`), and a full disk or a closed stderr must not turn into a
/// panic that hides the exit code.
fn print_err(text: &str) {
    let _ = std::io::stderr().lock().write_all(printable(text).as_bytes());
}

fn lint(args: LintArgs, color: bool) -> u8 {
    if args.list_rules {
        print(&list_rules(args.format));
        return 0;
    }
    // Asked for by name on the command line (not merely on with the other preview rules).
    let d010_asked = args.select.iter().flatten().any(|r| {
        let r = r.trim();
        r.eq_ignore_ascii_case("D010") || r == registry::D010.name
    });
    let overrides = Overrides {
        select: args.select,
        ignore: args.ignore,
        api: args.api,
        fail_on: args.fail_on,
        preview: args.preview,
        target: args.target,
    };
    let Some(settings) = settings(args.isolated, args.config.clone(), &overrides, color) else { return 2 };
    let mut run = match lint_paths(&args.paths, &settings) {
        Ok(r) => r,
        Err(e) => {
            report_error(&e, color);
            return 2;
        }
    };
    if args.unsafe_fixes && !(args.fix || args.diff) {
        print_err(
            "error: `--unsafe-fixes` needs `--fix` or `--diff`\n\nhelp: `devcheck lint --fix --unsafe-fixes` applies them; `--diff` shows them first\n",
        );
        return 2;
    }
    let mode = if args.unsafe_fixes { FixMode::Unsafe } else { FixMode::Safe };
    let mut fix_errors = false;
    let mut has_diff = false;
    if args.fix || args.diff {
        let before: Vec<(String, String)> =
            run.files.iter().map(|f| (f.path.clone(), f.disk_text().into_owned())).collect();
        match apply_fixes(&mut run, mode, &settings, args.fix) {
            Ok(summary) if args.fix => {
                print_err(&summary.render());
                fix_errors = summary.has_errors();
            }
            Ok(summary) => {
                // `--diff`: what `--fix` would write, file by file; nothing is written.
                let mut diff = String::new();
                for ((path, old), file) in before.iter().zip(&run.files) {
                    diff.push_str(&unified_diff(path, old, &file.disk_text()));
                }
                has_diff = !diff.is_empty();
                print(&printable(&diff));
                let fixes = summary.fixed();
                print_err(&format!(
                    "devcheck: would fix {fixes} finding{} in {} file{}\n",
                    if fixes == 1 { "" } else { "s" },
                    summary.fixed_files().count(),
                    if summary.fixed_files().count() == 1 { "" } else { "s" }
                ));
                fix_errors = summary.has_errors();
            }
            Err(e) => {
                report_error(&e, color);
                return 2;
            }
        }
    }
    if args.add_ignore {
        match add_ignores(&mut run, &settings, true) {
            Ok(summary) => {
                print_err(&summary.render());
                fix_errors = summary.has_errors();
            }
            Err(e) => {
                report_error(&e, color);
                return 2;
            }
        }
    }
    if args.errors_only {
        run.keep_at_least(Severity::Error);
    }
    if args.statistics {
        print(&statistics(&run, args.format));
    } else if !args.diff {
        let opts = RenderOptions { color, width: width(), summary: true };
        print(&render(&run, args.format, opts));
        if args.format == Format::Human {
            print_err(&all_preview_note(&run, &settings));
        }
        if d010_asked && settings.target != Some(Target::Any) && !run.files.is_empty() {
            print_err(&d010_target_note());
        }
        // On standard error, so that every format's output stays as it is.
        print_err(&not_compiled_note(&run));
        print_err(&host_only_note(&run, &settings));
    }
    if run.has_internal_errors() || fix_errors {
        2
    } else if args.diff {
        u8::from(has_diff)
    } else if !args.exit_zero && run.fails_at(settings.fail_on) {
        1
    } else {
        0
    }
}

/// D010 asked for by name in a run that does not declare the code to run also without a GPU:
/// it reports nothing there, and a note says why.
fn d010_target_note() -> String {
    "note: D010 checks `torch.load` only in code declared to run also without a GPU\n  help: \
     `--target any` (or `target = \"any\"` under `[lint]` in devcheck.toml) turns it on\n"
        .to_string()
}

/// Where files of a language were linted with none of its rules on (every rule of that language
/// is in preview, and the run is not), a note says so: "no findings" would read as "nothing wrong".
fn all_preview_note(run: &devcheck_lint::LintRun, settings: &Settings) -> String {
    let mut note = String::new();
    for lang in devcheck_lint::Language::ALL {
        let linted = run.files.iter().any(|f| devcheck_lint::Language::of_path(&f.disk_path) == Some(lang));
        let any_on = registry::all()
            .iter()
            .any(|r| r.group != registry::Group::Meta && settings.is_enabled_in(r.code, lang));
        if linted && !any_on {
            note.push_str(&format!(
                "note: no rule checks {} files by default: each is in preview until it is precise on code it \
                 was not tuned on\n  help: `--preview` (or `preview = true` in devcheck.toml) turns them on; \
                 `devcheck explain CODE` gives each one's measured precision\n",
                lang.title()
            ));
        }
    }
    note
}

/// Rust code that names no accelerator runs on the CPU, where the rules whose hazard needs one
/// cannot bite; a note says they were not applied, and how to have them anyway.
fn host_only_note(run: &devcheck_lint::LintRun, settings: &Settings) -> String {
    let asked = ["D001", "D004", "D005", "D007"]
        .iter()
        .any(|code| settings.is_enabled_in(code, devcheck_lint::Language::Rust));
    if !asked || !run.files.iter().any(|f| f.host_only) {
        return String::new();
    }
    "note: the Rust code of this run names no accelerator (no CUDA, Metal or wgpu device, backend or feature), so it runs on the CPU, where D001, D004, D005 and D007 cannot bite: they were not applied\n  \
     help: declare where the code runs (`--target cuda`, or `target = \"cuda\"` under `[lint]` in devcheck.toml) to check it as code for a GPU\n"
        .to_string()
}

/// Rust files that no target of their package compiles are not reported on; a note names them,
/// so that "no findings" is not read as "nothing wrong".
fn not_compiled_note(run: &devcheck_lint::LintRun) -> String {
    const SHOWN: usize = 5;
    let left_out: Vec<&str> = run.files.iter().filter(|f| f.not_compiled).map(|f| f.path.as_str()).collect();
    if left_out.is_empty() {
        return String::new();
    }
    let mut names = left_out.iter().take(SHOWN).map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ");
    if left_out.len() > SHOWN {
        names.push_str(&format!(" and {} more", left_out.len() - SHOWN));
    }
    let (files, it, its) =
        if left_out.len() == 1 { ("file", "it", "its") } else { ("files", "them", "their") };
    format!(
        "note: not reported on: {} Rust {files} that no target of {its} package compiles ({names}): no `mod` declares {it} and no target names {it}\n  \
         help: declare the module (`mod name;`) if it is meant to be built; otherwise {its} code never runs\n",
        left_out.len(),
    )
}

/// The configuration: `--config`, else devcheck.toml found upwards from here, else defaults.
fn settings(isolated: bool, config: Option<PathBuf>, overrides: &Overrides, color: bool) -> Option<Settings> {
    let config_path = if isolated {
        None
    } else {
        config.or_else(|| {
            let cwd = std::env::current_dir().ok()?;
            let found = Settings::discover(&cwd)?;
            // Shown in messages: relative to where the user is, when it is below.
            let cwd = cwd.canonicalize().unwrap_or(cwd);
            Some(found.strip_prefix(&cwd).map(PathBuf::from).unwrap_or(found))
        })
    };
    match Settings::load(config_path.as_deref(), overrides) {
        Ok(s) => Some(s),
        Err(e) => {
            report_error(&e, color);
            None
        }
    }
}

fn inspect(args: InspectArgs, color: bool) -> u8 {
    // Checkpoints are inspected from their header; everything else is Rust source.
    let (checkpoints, sources): (Vec<PathBuf>, Vec<PathBuf>) =
        args.paths.iter().cloned().partition(|p| p.extension().is_some_and(|e| e == "safetensors"));
    let json = args.format == EnvFormat::Json;
    let mut code = 0;
    for path in &checkpoints {
        match devcheck::check::inspect_checkpoint(path) {
            Ok(inventory) => {
                // Tensor names come from the checkpoint, which may come from anywhere.
                print(&if json {
                    format!("{}\n", json_escaped(inventory.to_json().to_string()))
                } else {
                    format!("{}\n", printable(&inventory.to_string()))
                });
                if !inventory.is_clean() {
                    report_error(&inventory.to_error(), color);
                    code = 1;
                }
            }
            Err(e) => {
                report_error(&e, color);
                return 2;
            }
        }
    }
    if sources.is_empty() && !checkpoints.is_empty() {
        return code;
    }
    // Asked about a module, `inspect` reports every field a move leaves behind (D004), whatever the
    // rule's status in a plain `lint`; a configuration that ignores D004 still silences it.
    let overrides = Overrides { api: args.api, preview: true, ..Overrides::default() };
    let Some(settings) = settings(args.isolated, args.config, &overrides, color) else { return 2 };
    let run = match inspect_paths(&sources, &settings) {
        Ok(r) => r,
        Err(e) => {
            report_error(&e, color);
            return 2;
        }
    };
    print(&render_inspect(&run, json, color));
    if run.fails_at(settings.fail_on) { 1 } else { code }
}

/// `devcheck check`: the PyTorch dry run, in the user's own Python (`python -m devcheck.torch
/// check`, where its arguments are read); its output and exit code are this command's.
fn check(args: CheckArgs) -> u8 {
    let python =
        args.python.clone().or_else(|| std::env::var_os("DEVCHECK_PYTHON").map(PathBuf::from)).or_else(
            || {
                // Installed from the wheel, the command sits beside the environment's interpreter.
                let dir = std::env::current_exe().ok()?.parent()?.to_path_buf();
                ["python3", "python", "python.exe"].iter().map(|n| dir.join(n)).find(|p| p.is_file())
            },
        );
    let python = python.unwrap_or_else(|| PathBuf::from("python3"));
    // Is the package there (and torch)? Asked without importing torch, which takes seconds.
    let probe = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.util as u, sys; sys.exit(0 if u.find_spec('devcheck') and u.find_spec('devcheck.torch') \
             else 3 if not u.find_spec('torch') and u.find_spec('devcheck') else 4)",
        ])
        .status();
    let help = match probe {
        Ok(s) if s.success() => None,
        Ok(s) if s.code() == Some(3) => Some((
            format!("PyTorch is not installed in `{}`", python.display()),
            "`pip install torch` in that environment, or name another Python with `--python`",
        )),
        Ok(_) => Some((
            format!("the devcheck package is not installed in `{}`", python.display()),
            "`pip install .` from a devcheck checkout into the environment that has torch, or name that \
             environment's Python with `--python` (or DEVCHECK_PYTHON)",
        )),
        Err(e) => Some((
            format!("could not run `{}`: {e}", python.display()),
            "name a Python with PyTorch and the devcheck package with `--python` (or DEVCHECK_PYTHON)",
        )),
    };
    if let Some((error, help)) = help {
        print_err(&format!("error: {error}\n\nhelp: {help}\n"));
        return 2;
    }
    let mut command = std::process::Command::new(&python);
    command.args(["-m", "devcheck.torch", "check", &args.target, "--device", &args.device]);
    command.args(["--format", if args.format == EnvFormat::Json { "json" } else { "human" }]);
    for input in &args.inputs {
        command.args(["--input", input]);
    }
    match command.status() {
        Ok(status) => status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(2),
        Err(e) => {
            print_err(&format!("error: could not run `{}`: {e}\n", python.display()));
            2
        }
    }
}

fn list_rules(format: Format) -> String {
    if format == Format::Json {
        let rules: Vec<serde_json::Value> = registry::all()
            .iter()
            .map(|r| {
                let languages: serde_json::Map<String, serde_json::Value> =
                    r.languages().map(|(l, s)| (l.as_str().to_string(), s.as_str().into())).collect();
                serde_json::json!({
                    "code": r.code,
                    "name": r.name,
                    "group": r.group.as_str(),
                    "status": r.status.as_str(),
                    "languages": languages,
                    "severity": r.default_severity().as_str(),
                    "fix": r.fix.as_str(),
                    "summary": r.summary,
                })
            })
            .collect();
        return serde_json::to_string_pretty(&rules).unwrap_or_default() + "\n";
    }
    let mut out = String::new();
    for r in registry::all() {
        // `rs:stable py:preview`: a rule's status in each language it checks.
        let status: Vec<String> = r
            .languages()
            .map(|(l, s)| {
                format!("{}:{}", if l == devcheck_lint::Language::Rust { "rs" } else { "py" }, s.as_str())
            })
            .collect();
        out.push_str(&format!(
            "{}  {:<32} {:<12} {:<21} {:<8} fix: {:<15} {}\n",
            r.code,
            r.name,
            r.group.as_str(),
            status.join(" "),
            r.default_severity().as_str(),
            r.fix.as_str(),
            r.summary
        ));
    }
    out
}

fn explain(code: &str, color: bool) -> u8 {
    match devcheck_lint::explain(code) {
        Some(text) => {
            print(&text);
            if !text.ends_with('\n') {
                print("\n");
            }
            0
        }
        None => {
            let valid: Vec<&str> = registry::all().iter().map(|r| r.code).collect();
            let error = devcheck_lint::LintError::UnknownRule {
                code: code.to_string(),
                context: None,
                valid: valid.join(", "),
            };
            report_error(&error, color);
            2
        }
    }
}

/// One line of `devcheck env`: a key and its value.
struct EnvRow {
    key: &'static str,
    value: String,
}

/// What `devcheck env` reports. New probes (NVRTC, cuBLAS, ...) are one more row each.
fn env_rows() -> Vec<EnvRow> {
    let mut rows = vec![EnvRow { key: "devcheck", value: env!("CARGO_PKG_VERSION").to_string() }];
    let count = devcheck::cuda::device_count();
    let cuda = if count > 0 {
        format!("available, {count} device{}", if count == 1 { "" } else { "s" })
    } else {
        match devcheck::Device::Cuda(0).ensure_available() {
            Err(devcheck::Error::DeviceUnavailable { reason, .. }) => format!("not available: {reason}"),
            _ => "not available".to_string(),
        }
    };
    rows.push(EnvRow { key: "cuda", value: cuda });
    for i in 0..count {
        let name = devcheck::cuda::device_name(i).unwrap_or_else(|| "(name unavailable)".to_string());
        rows.push(EnvRow { key: "cuda device", value: format!("cuda:{i}: {name}") });
    }
    let nvrtc = devcheck::cuda::nvrtc_info();
    let nvrtc_row = match (nvrtc.found, nvrtc.version, &nvrtc.library) {
        (true, Some((major, minor)), Some(path)) => format!("{major}.{minor} ({})", path.display()),
        (true, Some((major, minor)), None) => format!("{major}.{minor}"),
        (true, None, _) => "found, version unknown".to_string(),
        (false, _, _) => match &nvrtc.unusable {
            Some(why) => why.clone(),
            None => format!(
                "not found (looked for {}; LD_LIBRARY_PATH={})",
                nvrtc.searched.join(", "),
                nvrtc.ld_library_path.as_deref().unwrap_or("")
            ),
        },
    };
    rows.push(EnvRow { key: "nvrtc", value: nvrtc_row });
    let headers = if nvrtc.include_dirs.is_empty() {
        "not found (set DEVCHECK_CUDA_INCLUDE to a directory with cuda_fp16.h)".to_string()
    } else {
        nvrtc.include_dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
    };
    rows.push(EnvRow { key: "cuda headers", value: headers });
    rows.push(EnvRow { key: "default device", value: devcheck::default_device().to_string() });
    rows.push(EnvRow { key: "best available", value: devcheck::Device::best_available().to_string() });
    rows
}

fn env(format: EnvFormat) -> u8 {
    let rows = env_rows();
    match format {
        EnvFormat::Human => {
            let width = rows.iter().map(|r| r.key.len()).max().unwrap_or(0);
            let mut out = String::new();
            for r in &rows {
                out.push_str(&format!("{:<width$}  {}\n", r.key, r.value));
            }
            print(&out);
        }
        EnvFormat::Json => {
            let list: Vec<serde_json::Value> =
                rows.iter().map(|r| serde_json::json!({ "key": r.key, "value": r.value })).collect();
            print(&(serde_json::to_string_pretty(&list).unwrap_or_default() + "\n"));
        }
    }
    0
}

fn kernels_check(archs: &[String], include: &[std::path::PathBuf]) -> u8 {
    let mut failed = false;
    for arch in archs {
        match devcheck::cuda::kernels::check_all(arch, include) {
            Ok(checks) => {
                print(&devcheck::cuda::kernels::format_report(arch, &checks));
                failed |= checks.iter().any(|m| !m.is_ok());
            }
            Err(e) => {
                print_err(&format!("{}\n", e.render(width())));
                return 2;
            }
        }
    }
    if failed { 1 } else { 0 }
}
