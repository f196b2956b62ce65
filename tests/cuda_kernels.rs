//! Every kernel module compiles with NVRTC and defines exactly the kernels the registry lists.
//! Needs NVRTC (not a GPU). Without it the test says it skipped, and with
//! `DEVCHECK_REQUIRE_NVRTC=1` (set by scripts/ci-nvrtc.sh) a missing NVRTC is a failure.

use devcheck::cuda::{kernels, nvrtc};

/// Written to stderr directly, past the test harness's output capture, so a skip is always seen.
macro_rules! skip_note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

fn nvrtc_or_skip() -> bool {
    if nvrtc::is_available() {
        return true;
    }
    if std::env::var("DEVCHECK_REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
        panic!("DEVCHECK_REQUIRE_NVRTC=1 but NVRTC is missing:{:?}", nvrtc::not_found_error());
    }
    skip_note!("skipped: NVRTC not found (looked for {})", nvrtc::info().searched.join(", "));
    false
}

#[test]
fn every_kernel_module_compiles_for_sm_80() {
    if !nvrtc_or_skip() {
        return;
    }
    let checks = kernels::check_all("sm_80", &[]).expect("NVRTC is available");
    let report = kernels::format_report("sm_80", &checks);
    println!("{report}");
    assert_eq!(checks.len(), kernels::MODULES.len());
    assert!(checks.iter().all(|c| c.is_ok()), "{report}");
    assert!(checks.iter().all(|c| c.cubin_bytes > 0), "a real architecture yields a cubin: {report}");
}

#[test]
fn virtual_architectures_yield_ptx_only() {
    if !nvrtc_or_skip() {
        return;
    }
    let module = kernels::module("softmax").unwrap();
    let arch = nvrtc::Arch::parse("compute_80").unwrap();
    let compiled = nvrtc::compile(module, &arch, &nvrtc::info().include_dirs).unwrap();
    assert!(compiled.cubin.is_none());
    assert_eq!(compiled.entry_points().len(), module.kernel_names().len());
    assert!(compiled.ptx.contains(".target sm_80"));
}

#[test]
fn a_missing_header_directory_is_a_compile_error_with_the_nvrtc_log() {
    if !nvrtc_or_skip() {
        return;
    }
    let module = kernels::module("adamw").unwrap();
    let arch = nvrtc::Arch::parse("sm_80").unwrap();
    let empty = std::env::temp_dir().join("devcheck-no-cuda-headers");
    std::fs::create_dir_all(&empty).unwrap();
    let err = match nvrtc::compile(module, &arch, &[empty]) {
        Err(err) => err,
        Ok(_) => {
            // NVRTC releases that bundle cuda_fp16.h need no include directory at all.
            skip_note!("skipped: this NVRTC compiles without CUDA headers on disk");
            return;
        }
    };
    let text = err.render(100);
    assert!(text.contains("kernel module `adamw` (adamw.cu) for sm_80"), "{text}");
    assert!(text.contains("cuda_fp16.h"), "the NVRTC log names the header: {text}");
    assert!(text.contains("DEVCHECK_CUDA_INCLUDE"), "the help says how to fix it: {text}");
}
