//! Compiles every CUDA kernel module through devcheck's own NVRTC path, for each `--arch`, and
//! fails on any compile error or registry mismatch. Needs NVRTC, not a GPU:
//!
//! ```text
//! cargo run --example kernels_check -- --arch sm_80 --arch sm_90 [--include DIR]...
//! ```
//!
//! Exit codes: 0 all modules compiled, 1 a module failed, 2 NVRTC missing or bad arguments.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use devcheck::cuda::{kernels, nvrtc};

#[derive(Parser)]
#[command(about = "Compile every devcheck CUDA kernel module with NVRTC")]
struct Args {
    /// GPU architecture to compile for (repeatable): sm_80, sm_90, compute_80, ...
    #[arg(long = "arch", required = true)]
    archs: Vec<String>,
    /// Directory holding cuda_fp16.h / cuda_bf16.h (repeatable); default: found automatically.
    #[arg(long = "include")]
    include_dirs: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let info = nvrtc::info();
    match (info.found, info.version) {
        (true, Some((major, minor))) => println!(
            "NVRTC {major}.{minor} from {}",
            info.library.as_ref().map_or("(path unknown)".into(), |p| p.display().to_string())
        ),
        _ => println!("NVRTC not found"),
    }
    let mut failed = false;
    for arch in &args.archs {
        match kernels::check_all(arch, &args.include_dirs) {
            Ok(checks) => {
                print!("{}", kernels::format_report(arch, &checks));
                failed |= checks.iter().any(|c| !c.is_ok());
            }
            Err(e) => {
                eprintln!("{}", e.render(100));
                return ExitCode::from(2);
            }
        }
    }
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}
