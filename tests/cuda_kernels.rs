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

/// The arguments the launchers in src/backend/cuda/storage.rs pass to each family of kernels, in
/// order: `b64` for sizes, pointers and i64 values, `f64` for scalars. Every kernel's PTX must
/// declare exactly these, so a launch never reads garbage (a launch is also checked against the
/// PTX at run time; this finds a drift on a machine without a GPU).
fn launcher_arguments(kernel: &str) -> Vec<nvrtc::PtxParam> {
    use nvrtc::PtxParam::{Bits, F64};
    let b64 = |n: usize| vec![Bits(64); n];
    let with = |mut v: Vec<nvrtc::PtxParam>, tail: &[nvrtc::PtxParam]| {
        v.extend_from_slice(tail);
        v
    };
    let family = kernel.rsplit_once('_').map_or(kernel, |(head, _)| head);
    if let Some(width) = kernel.strip_prefix("fill_u") {
        return vec![Bits(64), Bits(64), Bits(width.parse().unwrap())];
    }
    if kernel.contains("_scalar_") {
        // numel, ndim, info, x, scalar, out
        return with(b64(4), &[F64, Bits(64)]);
    }
    let head = kernel.split('_').next().unwrap_or(kernel);
    match head {
        // numel, ndim, info, src, dst
        "copy" | "cast" => b64(5),
        // numel, ndim, info, cond, a, b, out
        "where" => b64(7),
        // numel, ndim, info, x, mask, value, out
        "masked" => with(b64(5), &[F64, Bits(64)]),
        // numel, ndim, info, diagonal, x, out
        "triu" | "tril" => b64(6),
        // n_out, outer, src_dim, n_ids, inner, ids, x, out, bad / numel, ndim, info, dim, size, ids, x, out, bad
        "index" | "gather" => b64(9),
        // n, param, grad, exp_avg, exp_avg_sq, then lr, beta1, beta2, eps, weight_decay, bc1, bc2
        "adamw" => with(b64(5), &[F64; 7]),
        // n_out, splits, reduce_size, partials, out, correction
        "sum" | "mean" | "var" | "max" | "min" | "argmax" | "argmin" if kernel.contains("_finish_") => {
            with(b64(5), &[F64])
        }
        // n_out, reduce_size, reduce_stride, ndim, info, x, splits, partials, out, correction
        "sum" | "mean" | "var" | "max" | "min" | "argmax" | "argmin" => with(b64(9), &[F64]),
        // n, seed, out
        "uniform" | "normal" => b64(3),
        // rows, cols, x, out
        "softmax" | "log" if family.ends_with("softmax") => b64(4),
        _ if kernels::module("binary").unwrap().has_kernel(kernel) => b64(6),
        // numel, ndim, info, x, out
        _ => b64(5),
    }
}

#[test]
fn every_kernel_takes_the_arguments_its_launcher_passes() {
    if !nvrtc_or_skip() {
        return;
    }
    // PTX only (no ptxas): the parameter lists are decided before machine code.
    let arch = nvrtc::Arch::parse("compute_80").unwrap();
    let mut checked = 0;
    for module in kernels::MODULES {
        let compiled = nvrtc::compile(module, &arch, &nvrtc::info().include_dirs).unwrap();
        let signatures = compiled.signatures();
        assert_eq!(signatures.len(), module.kernel_names().len(), "module {}", module.name);
        for (kernel, params) in signatures {
            let expected = launcher_arguments(&kernel);
            assert_eq!(
                params, expected,
                "kernel `{kernel}` in {}: PTX parameters vs the launcher's",
                module.file
            );
            checked += 1;
        }
    }
    assert_eq!(checked, kernels::MODULES.iter().map(|m| m.kernel_names().len()).sum::<usize>());
}
