//! `devcheck lint --fix`: safe fixes only by default, unsafe ones on request, and the fixed files
//! always parse.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use devcheck_lint::{FixMode, LintTable, Overrides, Settings, apply_fixes, lint_paths};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root")
}

/// `devcheck lint` with the preview rules on: these tests are about what `--fix` writes.
fn devcheck(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_devcheck"))
        .args(["--color", "never", "lint", "--isolated", "--preview", "--format", "concise"])
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("the devcheck binary runs")
}

/// Copies a fixture into a fresh directory as `src/model.rs` (library code).
fn copy_fixture(fixture: &str) -> (tempfile::TempDir, String) {
    copy_fixture_as(fixture, "src/model.rs")
}

fn copy_fixture_as(fixture: &str, name: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("src")).expect("mkdir");
    let text = std::fs::read_to_string(root().join(fixture)).expect("fixture");
    std::fs::write(dir.path().join(name), &text).expect("write");
    (dir, text)
}

fn read(dir: &Path) -> String {
    read_as(dir, "src/model.rs")
}

fn read_as(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).expect("read back")
}

/// A unified diff of the fix, for a readable snapshot.
fn changes(before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after).unified_diff().context_radius(1).to_string()
}

#[test]
fn fix_applies_safe_fixes_and_reports_what_is_left() {
    let (dir, before) = copy_fixture("fixtures/lint/d001/candle.rs");
    let out = devcheck(&["--fix", "src/model.rs"], dir.path());
    let after = read(dir.path());
    assert!(syn::parse_file(&after).is_ok());
    // Six D001 fixes; one of them also removes the `Device::new_cuda(0)` of a D002 finding.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "devcheck: src/model.rs: fixed 7 findings\ndevcheck: fixed 7 findings in 1 file\n"
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "No findings in 1 file.\n");
    insta::assert_snapshot!("fix_d001_candle", changes(&before, &after));
}

#[test]
fn fix_tch_constants_and_implicit_cpu() {
    let (dir, before) = copy_fixture("fixtures/lint/d001/tch.rs");
    devcheck(&["--fix", "src/model.rs"], dir.path());
    let after = read(dir.path());
    assert!(syn::parse_file(&after).is_ok());
    insta::assert_snapshot!("fix_d001_tch", changes(&before, &after));
}

#[test]
fn unsafe_fixes_need_the_flag() {
    let (dir, before) = copy_fixture("fixtures/lint/d003/candle.rs");
    let out = devcheck(&["--fix", "src/model.rs"], dir.path());
    assert_eq!(read(dir.path()), before, "an unsafe fix was applied without --unsafe-fixes");
    assert_eq!(out.status.code(), Some(1));
    let out = devcheck(&["--fix", "--unsafe-fixes", "src/model.rs"], dir.path());
    let after = read(dir.path());
    assert!(syn::parse_file(&after).is_ok());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    insta::assert_snapshot!("fix_d003_candle_unsafe", changes(&before, &after));
}

#[test]
fn fix_devcheck_skip_becomes_non_persistent() {
    let (dir, before) = copy_fixture("fixtures/lint/d004/devcheck.rs");
    let out = devcheck(&["--fix", "src/model.rs"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("fix_d004_devcheck", changes(&before, &read(dir.path())));
}

#[test]
fn fix_removes_empty_cache_in_loop() {
    let (dir, before) = copy_fixture("fixtures/lint/d006/devcheck.rs");
    let out = devcheck(&["--fix", "--unsafe-fixes", "src/model.rs"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("fix_d006_devcheck", changes(&before, &read(dir.path())));
}

#[test]
fn every_fix_of_every_fixture_leaves_code_that_parses() {
    // With preview, so that the Python rules' fixes are applied too.
    let preview = Overrides { preview: true, ..Overrides::default() };
    let settings =
        Settings::from_table(LintTable::default(), PathBuf::from("."), None, &preview).expect("settings");
    let mut run = lint_paths(&[root().join("fixtures/lint")], &settings).expect("lint");
    let fixable = run.diagnostics().filter(|d| d.fix.is_some()).count();
    let fixable_py = run.diagnostics().filter(|d| d.fix.is_some() && d.path.ends_with(".py")).count();
    assert!(
        fixable >= 20 && fixable_py >= 10,
        "expected fixes to test, found {fixable} ({fixable_py} in Python)"
    );
    let summary = apply_fixes(&mut run, FixMode::Unsafe, &settings, false).expect("fix in memory");
    // A fixed file is re-parsed in its language before it is kept: none may be rejected.
    let rejected: Vec<&str> = summary.rejected().map(|f| f.path.as_str()).collect();
    assert!(rejected.is_empty(), "fixed files that did not parse: {rejected:?}");
    // A fix may remove more than its own finding (a D001 fix replacing a D002 device literal).
    assert!(
        summary.fixed() >= fixable,
        "every fix should remove its finding: {} < {fixable}",
        summary.fixed()
    );
    for file in &run.files {
        if file.path.contains("parse_error.") {
            continue;
        }
        if file.path.ends_with(".rs") {
            assert!(syn::parse_file(&file.text).is_ok(), "{} no longer parses", file.path);
        }
        assert!(file.diagnostics.iter().all(|d| d.fix.is_none()), "{} still has fixable findings", file.path);
    }
}

#[test]
fn fix_python_numpy_on_the_gpu_safely() {
    let (dir, before) = copy_fixture_as("fixtures/lint/d008/torch.py", "src/model.py");
    let out = devcheck(&["--fix", "src/model.py"], dir.path());
    let after = read_as(dir.path(), "src/model.py");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "devcheck: src/model.py: fixed 6 findings\ndevcheck: fixed 6 findings in 1 file\n"
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    insta::assert_snapshot!("fix_d008_torch", changes(&before, &after));
}

#[test]
fn fix_python_module_state_registers_it() {
    let (dir, before) = copy_fixture_as("fixtures/lint/d004/torch.py", "src/model.py");
    devcheck(&["--fix", "--unsafe-fixes", "src/model.py"], dir.path());
    let after = read_as(dir.path(), "src/model.py");
    let out = devcheck(&["--select", "D004", "src/model.py"], dir.path());
    // What has no fix is left: the three unregistered parameters and the criterion never moved.
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(" D004 ")).count(), 4);
    insta::assert_snapshot!("fix_d004_torch", changes(&before, &after));
}

#[test]
fn a_fix_naming_a_rebound_input_is_unsafe() {
    // `xs` is a `Vec<f32>` by the time of the line: `xs.device()` would not compile.
    let shadowed = "use candle_core::{Device, Tensor};\n\n\
        pub fn forward(xs: &Tensor, w: &Tensor) -> candle_core::Result<Tensor> {\n\
        \x20   let xs = xs.to_vec1::<f32>()?;\n\
        \x20   let t = Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu)?;\n\
        \x20   t.broadcast_mul(w)?.affine(xs[0] as f64, 0.0)\n}\n";
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("src")).expect("mkdir");
    std::fs::write(dir.path().join("src/model.rs"), shadowed).expect("write");
    let out = devcheck(&["--fix", "src/model.rs"], dir.path());
    assert_eq!(read(dir.path()), shadowed, "a safe fix named the shadowed `xs`");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with("1 more with `--fix --unsafe-fixes`.\n"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "devcheck: fixed 0 findings in 0 files, 1 file with nothing to fix\n"
    );
}
