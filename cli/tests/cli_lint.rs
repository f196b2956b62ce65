//! `devcheck lint` as a user runs it: formats, exit codes, configuration, suppressions, bad files.

use std::process::Output;

use crate::common;
use common::{root, run as devcheck, stderr, stdout};

/// Lints `paths` (relative to the crate root) without any devcheck.toml, with the preview rules
/// on: these tests are about the command, whatever each rule's status.
fn lint(args: &[&str]) -> Output {
    let mut all = vec!["--color", "never", "lint", "--isolated", "--preview"];
    all.extend_from_slice(args);
    devcheck(&all, root())
}

#[test]
fn human_format_snapshot() {
    let out = lint(&["fixtures/lint/d003/candle.rs", "fixtures/lint/d006/devcheck.rs"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("human", stdout(&out));
}

#[test]
fn concise_format_snapshot() {
    let out = lint(&["--format", "concise", "fixtures/lint/d001", "fixtures/lint/d005"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("concise", stdout(&out));
}

#[test]
fn json_format_has_the_documented_fields() {
    let out = lint(&["--format", "json", "fixtures/lint/d001/tch.rs"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let items = value.as_array().expect("an array");
    assert_eq!(items.len(), 4);
    for item in items {
        for key in [
            "code",
            "name",
            "severity",
            "message",
            "path",
            "line",
            "column",
            "end_line",
            "end_column",
            "help",
        ] {
            assert!(item.get(key).is_some(), "missing `{key}` in {item}");
        }
    }
    assert_eq!(items[0]["code"], "D001");
    assert_eq!(items[0]["name"], "tensor-on-fixed-device");
    assert_eq!(items[0]["path"], "fixtures/lint/d001/tch.rs");
    assert_eq!(items[0]["line"], 24);
    assert_eq!(items[0]["fix"]["applicability"], "safe");
    insta::assert_snapshot!("json", text);
}

#[test]
fn sarif_format_is_what_code_scanning_reads() {
    let out = lint(&["--fail-on", "warning", "--format", "sarif", "fixtures/lint/d002/devcheck.rs"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let sarif: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "devcheck");
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    for rule in rules {
        for key in ["id", "name", "shortDescription", "fullDescription", "help", "defaultConfiguration"] {
            assert!(rule.get(key).is_some(), "rule without `{key}`: {rule}");
        }
        assert!(rule["help"]["text"].as_str().is_some_and(|t| t.contains("### Why is this bad?")));
    }
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    for r in results {
        let index = r["ruleIndex"].as_u64().expect("ruleIndex") as usize;
        assert_eq!(rules[index]["id"], r["ruleId"]);
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], "fixtures/lint/d002/devcheck.rs");
        assert!(loc["region"]["startLine"].as_u64().is_some_and(|l| l >= 1));
        assert!(loc["region"]["startColumn"].as_u64().is_some_and(|c| c >= 1));
    }
    // The results (the rules' docs are checked above and by `devcheck explain`).
    insta::assert_snapshot!("sarif_results", serde_json::to_string_pretty(results).unwrap_or_default());
}

#[test]
fn github_format_snapshot() {
    let out =
        lint(&["--format", "github", "fixtures/lint/d002/devcheck.rs", "fixtures/lint/d003/devcheck.rs"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.lines().all(|l| l.starts_with("::error file=") || l.starts_with("::warning file=")));
    insta::assert_snapshot!("github", text);
}

#[test]
fn clean_code_exits_zero() {
    let out = lint(&["fixtures/lint/d002/examples/train.rs", "fixtures/lint/d002/src/bin/serve.rs"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "No findings in 2 files.\n");
}

#[test]
fn fail_on_error_ignores_warnings() {
    let out = lint(&["--fail-on", "error", "fixtures/lint/d005"]);
    assert_eq!(out.status.code(), Some(0));
    let out = lint(&["--fail-on", "error", "fixtures/lint/d001/burn.rs"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn select_and_ignore_pick_rules() {
    let out = lint(&["--format", "concise", "--select", "D002", "fixtures/lint/d001/candle.rs"]);
    let text = stdout(&out);
    assert!(text.contains(" D002 ") && !text.contains(" D001 "), "{text}");
    let out = lint(&[
        "--format",
        "concise",
        "--ignore",
        "tensor-on-fixed-device,D002",
        "fixtures/lint/d001/candle.rs",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn unknown_rule_is_a_usage_error() {
    let out = lint(&["--select", "D123", "fixtures/lint/d001"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("unknown_rule", stderr(&out));
}

#[test]
fn missing_path_is_an_error() {
    let out = lint(&["fixtures/lint/no-such-dir"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("missing_path", stderr(&out));
}

#[test]
fn bad_usage_exits_two() {
    let out = lint(&["--format", "xml", "."]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("possible values: human, concise, json, sarif, github"));
}

#[test]
fn parse_errors_are_reported_and_the_run_goes_on() {
    let out =
        lint(&["--format", "concise", "fixtures/lint/misc/parse_error.rs", "fixtures/lint/d006/tch.rs"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("fixtures/lint/misc/parse_error.rs:7:5: D000 [error] expected `;`"), "{text}");
    assert!(text.contains("fixtures/lint/d006/tch.rs:16:9: D006"), "{text}");
}

#[test]
fn odd_files_never_crash_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::write(d.join("empty.rs"), "").expect("write");
    std::fs::write(d.join("latin1.rs"), b"// caf\xe9\nfn main() {}\n").expect("write");
    std::fs::write(d.join("binary.rs"), [0u8, 159, 146, 150, 0, 1, 2, 255]).expect("write");
    let mut deep = String::from("fn f() -> i32 { ");
    deep.push_str(&"(".repeat(5000));
    deep.push('1');
    deep.push_str(&")".repeat(5000));
    deep.push_str(" }\n");
    std::fs::write(d.join("deep.rs"), deep).expect("write");
    let huge = "// padding\n".repeat((devcheck_lint::MAX_FILE_BYTES / 11) + 10);
    std::fs::write(d.join("huge.rs"), huge).expect("write");
    std::fs::write(d.join("bom.rs"), "\u{feff}#!/usr/bin/env run-cargo-script\nfn main() {}\n")
        .expect("write");
    let out = devcheck(&["--color", "never", "lint", "--isolated", "--format", "concise", "."], d);
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("latin1.rs:1:7: D000 [error] file is not valid UTF-8"), "{text}");
    assert!(text.contains("binary.rs:1:2: D000 [error] file is not valid UTF-8"), "{text}");
    assert!(text.contains("deep.rs:1:"), "{text}");
    assert!(text.contains("too deeply nested to analyse"), "{text}");
    assert!(text.contains("huge.rs:1:1: D000 [error] file not linted: it is"), "{text}");
    assert!(!text.contains("empty.rs") && !text.contains("bom.rs"), "{text}");
    assert!(text.ends_with("in 4 of 6 files.\n"), "{text}");
    assert!(!text.contains("D999"), "{text}");
}

#[test]
fn config_file_selects_ignores_and_sets_levels() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("src/models")).expect("mkdir");
    std::fs::create_dir_all(d.join("scripts")).expect("mkdir");
    let model = std::fs::read_to_string(root().join("fixtures/lint/d001/candle.rs")).expect("fixture");
    std::fs::write(d.join("src/models/attention.rs"), &model).expect("write");
    std::fs::write(d.join("scripts/attention.rs"), &model).expect("write");
    std::fs::write(
        d.join("devcheck.toml"),
        "[lint]\npreview = true\nignore = [\"D002\"]\nfail-on = \"error\"\n\n[lint.severity]\nD001 = \"warning\"\n\n\
         [lint.per-file-ignores]\n\"scripts/**\" = [\"D001\"]\n",
    )
    .expect("write");
    let out = devcheck(&["--color", "never", "lint", "--format", "concise"], d);
    let text = stdout(&out);
    // D001 only in src/, as a warning; D002 nowhere; warnings do not fail the run.
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(text.matches(" D001 [warning] ").count(), 6, "{text}");
    assert!(text.lines().filter(|l| l.contains(" D001 ")).all(|l| l.starts_with("src/models/attention.rs:")));
    assert!(!text.contains("D002"), "{text}");
    // The command line overrides the file.
    let out = devcheck(&["--color", "never", "lint", "--format", "concise", "--fail-on", "warning"], d);
    assert_eq!(out.status.code(), Some(1));
    let out = devcheck(&["--color", "never", "lint", "--format", "concise", "--isolated", "--preview"], d);
    assert_eq!(stdout(&out).matches(" D001 [error] ").count(), 12);
}

#[test]
fn invalid_config_is_reported_with_its_location() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("devcheck.toml"), "[lint]\nselect = [\"D001\"]\nfail_on = \"error\"\n")
        .expect("write");
    let out = devcheck(&["--color", "never", "lint"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("invalid_config", stderr(&out));
}

#[test]
fn gitignored_files_are_skipped_unless_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("gen")).expect("mkdir");
    std::fs::write(d.join(".gitignore"), "gen/\n").expect("write");
    let model = std::fs::read_to_string(root().join("fixtures/lint/d006/devcheck.rs")).expect("fixture");
    std::fs::write(d.join("gen/model.rs"), &model).expect("write");
    let out = devcheck(&["--color", "never", "lint", "--isolated"], d);
    assert_eq!(stdout(&out), "No findings in 0 files.\n");
    let out = devcheck(
        &[
            "--color",
            "never",
            "lint",
            "--isolated",
            "--fail-on",
            "warning",
            "--format",
            "concise",
            "gen/model.rs",
        ],
        d,
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn color_always_colours_human_output() {
    let out =
        devcheck(&["--color", "always", "lint", "--isolated", "fixtures/lint/d006/devcheck.rs"], root());
    assert!(stdout(&out).contains("\u{1b}["));
    let out = devcheck(&["--color", "never", "lint", "--isolated", "fixtures/lint/d006/devcheck.rs"], root());
    assert!(!stdout(&out).contains("\u{1b}["));
}

/// A burn crate `ocr-train` with two modules defining a `CtcLoss` whose `forward` calls a
/// helper reading the device (`loss/ctc.rs` and `loss/ctc2.rs`, the read at line 12), `src/lib.rs`
/// declaring `loss` and `train`, and `loss/mod.rs` as given; the caller writes `src/train.rs`.
fn ctc_crate(d: &std::path::Path, loss_mod: &str) {
    for sub in ["src/loss", "examples"] {
        std::fs::create_dir_all(d.join(sub)).expect("mkdir");
    }
    std::fs::write(
        d.join("Cargo.toml"),
        "[package]\nname = \"ocr-train\"\n\n[dependencies]\nburn = { version = \"0.16\", features = [\"wgpu\"] }\n",
    )
    .expect("write");
    std::fs::write(d.join("src/lib.rs"), "pub mod loss;\npub mod train;\n").expect("write");
    std::fs::write(d.join("src/loss/mod.rs"), loss_mod).expect("write");
    let loss = |read: &str| {
        format!(
            "use burn::tensor::{{backend::Backend, Int, Tensor}};\n\n\
             pub struct CtcLoss<B: Backend> {{ blank: usize, _b: std::marker::PhantomData<B> }}\n\n\
             impl<B: Backend> CtcLoss<B> {{\n    \
                 pub fn new(blank: usize) -> Self {{ Self {{ blank, _b: Default::default() }} }}\n    \
                 pub fn forward(&self, x: Tensor<B, 2>, lengths: Tensor<B, 1, Int>) -> Tensor<B, 1> {{\n        \
                     Self::check(lengths);\n        x.sum()\n    }}\n    \
                 fn check(lengths: Tensor<B, 1, Int>) {{\n        {read}\n    }}\n}}\n"
        )
    };
    std::fs::write(d.join("src/loss/ctc.rs"), loss("let _ = lengths.max().into_scalar();")).expect("write");
    std::fs::write(d.join("src/loss/ctc2.rs"), loss("let _ = lengths.sum().into_scalar();")).expect("write");
}

/// A crate whose code and manifest name no accelerator, with a `main` that picks the CPU, runs
/// on the CPU: D005 (like D001, D004 and D007) is not applied, and a note says so and how to
/// have it anyway. A `cuda` feature, a declared target, or a crate without `main` (its device
/// comes from elsewhere) is checked as code for a GPU.
#[test]
fn code_that_names_no_accelerator_is_not_checked_for_gpu_hazards() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("src")).expect("mkdir");
    let manifest = |deps: &str| format!("[package]\nname = \"fit\"\n\n[dependencies]\n{deps}\n");
    let train = "use candle_core::{Device, Tensor};\nuse candle_nn::{AdamW, Optimizer};\n\n\
                 pub fn fit(opt: &mut AdamW, xs: &[Tensor]) -> candle_core::Result<f32> {\n    \
                     let mut last = 0f32;\n    for x in xs {\n        let loss = x.sqr()?.mean_all()?;\n        \
                     opt.backward_step(&loss)?;\n        last = loss.to_scalar::<f32>()?;\n    }\n    Ok(last)\n}\n";
    let main = "mod train;\n\nfn main() -> candle_core::Result<()> {\n    \
                let device = candle_core::Device::Cpu;\n    let _ = device;\n    Ok(())\n}\n";
    std::fs::write(d.join("Cargo.toml"), manifest("candle-core = \"0.8\"\ncandle-nn = \"0.8\""))
        .expect("write");
    std::fs::write(d.join("src/train.rs"), train).expect("write");
    std::fs::write(d.join("src/main.rs"), main).expect("write");
    let run = |extra: &[&str]| {
        let mut args = vec!["--color", "never", "lint", "--isolated", "--format", "concise", "--preview"];
        args.extend_from_slice(extra);
        args.push(".");
        devcheck(&args, d)
    };
    let out = run(&[]);
    assert_eq!(stdout(&out), "No findings in 2 files.\n");
    assert!(
        stderr(&out).starts_with(
            "note: the Rust code of this run names no accelerator (no CUDA, Metal or wgpu device, backend or feature), so it runs on the CPU, where D001, D004, D005 and D007 cannot bite: they were not applied\n  \
             help: declare where the code runs (`--target cuda`"
        ),
        "{}",
        stderr(&out)
    );
    // Declared, it is code for a GPU.
    let out = run(&["--target", "cuda"]);
    assert!(stdout(&out).starts_with("src/train.rs:9:21: D005"), "{}", stdout(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    // A plain run applies none of the four: no note.
    let plain = devcheck(&["--color", "never", "lint", "--isolated", "."], d);
    assert!(stderr(&plain).is_empty(), "{}", stderr(&plain));
    // A `cuda` feature names one.
    std::fs::write(
        d.join("Cargo.toml"),
        manifest("candle-core = \"0.8\"\ncandle-nn = \"0.8\"\n\n[features]\ncuda = [\"candle-core/cuda\"]"),
    )
    .expect("write");
    assert!(stdout(&run(&[])).starts_with("src/train.rs:9:21: D005"));
    // Given only some files of the package (a hook given the changed ones), the others still
    // count: one of them picks the GPU.
    std::fs::write(d.join("Cargo.toml"), manifest("candle-core = \"0.8\"\ncandle-nn = \"0.8\""))
        .expect("write");
    std::fs::write(
        d.join("src/device.rs"),
        "pub fn pick() -> candle_core::Device {\n    candle_core::Device::cuda_if_available(0).unwrap()\n}\n",
    )
    .expect("write");
    let mut args = vec!["--color", "never", "lint", "--isolated", "--format", "concise", "--preview"];
    args.extend(["src/main.rs", "src/train.rs"]);
    assert!(stdout(&devcheck(&args, d)).starts_with("src/train.rs:9:21: D005"));
    std::fs::remove_file(d.join("src/device.rs")).expect("rm");
    assert_eq!(stdout(&devcheck(&args, d)), "No findings in 2 files.\n");
    // A build script's `main` picks no device.
    std::fs::write(
        d.join("build.rs"),
        "fn main() {\n    println!(\"cargo:rerun-if-changed=build.rs\");\n}\n",
    )
    .expect("write");
    // Without `main`, where the device comes from is not in the run.
    std::fs::remove_file(d.join("src/main.rs")).expect("rm");
    std::fs::write(d.join("src/lib.rs"), "pub mod train;\n").expect("write");
    assert!(stdout(&run(&[])).starts_with("src/train.rs:9:21: D005"));
}

/// A `cuda` feature given in the workspace's manifest (`[workspace.dependencies]`) names an
/// accelerator for its members.
#[test]
fn a_workspace_manifest_names_an_accelerator_for_its_members() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("app/src")).expect("mkdir");
    std::fs::write(
        d.join("Cargo.toml"),
        "[workspace]\nmembers = [\"app\"]\n\n[workspace.dependencies]\ncandle-core = { version = \"0.8\", features = [\"cuda\"] }\n",
    )
    .expect("write");
    std::fs::write(
        d.join("app/Cargo.toml"),
        "[package]\nname = \"app\"\n\n[dependencies]\ncandle-core = { workspace = true }\ncandle-nn = \"0.8\"\n",
    )
    .expect("write");
    std::fs::write(
        d.join("app/src/main.rs"),
        "use candle_core::Tensor;\nuse candle_nn::{AdamW, Optimizer};\n\n\
         fn fit(opt: &mut AdamW, xs: &[Tensor]) -> candle_core::Result<()> {\n    \
             for x in xs {\n        let loss = x.sqr()?.mean_all()?;\n        opt.backward_step(&loss)?;\n        \
             println!(\"{}\", loss.to_scalar::<f32>()?);\n    }\n    Ok(())\n}\n\nfn main() {}\n",
    )
    .expect("write");
    let out =
        devcheck(&["--color", "never", "lint", "--isolated", "--format", "concise", "--preview", "."], d);
    assert!(stdout(&out).starts_with("app/src/main.rs:8:29: D005"), "{}", stdout(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

/// Two modules of a crate define a `CtcLoss` with a `forward`; the training loop imports one
/// (`use crate::loss::ctc::CtcLoss;`), so the per-step read in that one's helper is found, and
/// nothing in the other. An example imports the other through the crate's name.
#[test]
fn imports_decide_which_of_two_same_named_types_a_call_reaches() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    ctc_crate(d, "pub mod ctc;\npub mod ctc2;\n");
    std::fs::write(
        d.join("src/train.rs"),
        "use burn::tensor::{backend::AutodiffBackend, Int, Tensor};\n\nuse crate::loss::ctc::CtcLoss;\n\n\
         pub fn train<B: AutodiffBackend, M, O>(xs: Vec<(Tensor<B, 2>, Tensor<B, 1, Int>)>, mut model: M, optim: &mut O) {\n    \
             for (x, l) in xs {\n        let loss = CtcLoss::new(0).forward(x, l);\n        let grads = loss.backward();\n        model = optim.step(1e-3, model, grads);\n    }\n}\n",
    )
    .expect("write");
    let out = devcheck(&["--color", "never", "lint", "--format", "concise", "--preview", "src"], d);
    let text = stdout(&out);
    assert_eq!(text.matches(" D005 ").count(), 1, "{text}");
    assert!(text.contains("src/loss/ctc.rs:12:"), "{text}");
    // Through the crate's name, from an example: the other one.
    std::fs::write(
        d.join("examples/fit.rs"),
        "use burn::tensor::{backend::AutodiffBackend, Int, Tensor};\nuse ocr_train::loss::ctc2::CtcLoss;\n\n\
         fn fit<B: AutodiffBackend, M, O>(xs: Vec<(Tensor<B, 2>, Tensor<B, 1, Int>)>, mut model: M, optim: &mut O) {\n    \
             for (x, l) in xs {\n        let loss = CtcLoss::new(0).forward(x, l);\n        let grads = loss.backward();\n        model = optim.step(1e-3, model, grads);\n    }\n}\n\n\
         fn main() {}\n",
    )
    .expect("write");
    let out = devcheck(&["--color", "never", "lint", "--format", "concise", "--preview", "."], d);
    let text = stdout(&out);
    assert_eq!(text.matches(" D005 ").count(), 2, "{text}");
    assert!(text.contains("src/loss/ctc2.rs:12:"), "{text}");
}

/// The same two `CtcLoss` types; the training loop names one through a re-export of its parent
/// module (`pub use ctc::CtcLoss;` in `loss/mod.rs`) and under another name
/// (`use crate::loss::CtcLoss as Ctc;`): the read in that one's helper is found, nothing in the
/// other.
#[test]
fn renamed_and_reexported_imports_reach_their_type() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    ctc_crate(d, "pub mod ctc;\npub mod ctc2;\npub use ctc::CtcLoss;\n");
    std::fs::write(
        d.join("src/train.rs"),
        "use burn::tensor::{backend::AutodiffBackend, Int, Tensor};\n\nuse crate::loss::CtcLoss as Ctc;\n\n\
         pub fn train<B: AutodiffBackend, M, O>(xs: Vec<(Tensor<B, 2>, Tensor<B, 1, Int>)>, mut model: M, optim: &mut O) {\n    \
             for (x, l) in xs {\n        let loss = Ctc::new(0).forward(x, l);\n        let grads = loss.backward();\n        model = optim.step(1e-3, model, grads);\n    }\n}\n",
    )
    .expect("write");
    let out = devcheck(&["--color", "never", "lint", "--format", "concise", "--preview", "src"], d);
    let text = stdout(&out);
    assert_eq!(text.matches(" D005 ").count(), 1, "{text}");
    assert!(text.contains("src/loss/ctc.rs:12:"), "{text}");
}

/// What `devcheck lint --preview` reports on a candle crate whose `src/lib.rs` is `lib`.
fn candle_crate_findings(lib: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("src")).expect("mkdir");
    std::fs::write(
        d.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\n\n[dependencies]\ncandle-core = \"0.8\"\n",
    )
    .expect("write");
    std::fs::write(d.join("src/lib.rs"), lib).expect("write");
    stdout(&devcheck(&["--color", "never", "lint", "--format", "concise", "--preview", "src"], d))
}

/// `xs.apply(block)` over `self.blocks` runs the block's `forward` once per layer, as
/// `block.forward(&xs)` would: a read there waits for the device at every layer.
#[test]
fn a_module_applied_in_a_layer_loop_runs_per_layer() {
    let text = candle_crate_findings(
        "use candle_core::{Module, Result, Tensor};\n\n\
         pub struct Block {\n    scale: Tensor,\n}\n\n\
         impl Module for Block {\n    fn forward(&self, xs: &Tensor) -> Result<Tensor> {\n        \
             let s = self.scale.to_scalar::<f32>()?;\n        xs.affine(s as f64, 0.0)\n    }\n}\n\n\
         pub struct Net {\n    blocks: Vec<Block>,\n    head: Block,\n}\n\n\
         impl Module for Net {\n    fn forward(&self, xs: &Tensor) -> Result<Tensor> {\n        \
             let mut xs = xs.clone();\n        for block in &self.blocks {\n            xs = xs.apply(block)?;\n        }\n        \
             xs.apply(&self.head)\n    }\n}\n",
    );
    assert_eq!(text.matches(" D005 ").count(), 1, "{text}");
    assert!(text.contains("src/lib.rs:9:28: D005"), "{text}");
    assert!(text.contains("runs once per layer"), "{text}");
}

/// A layer chosen by an enum (`match self { Self::Conv(c) => c.forward(xs), .. }`) runs the
/// variant's `forward` once per layer too, also through `xs.apply(p)`.
#[test]
fn an_enum_variant_forward_runs_per_layer() {
    let layer = |name: &str, body: &str| {
        format!(
            "pub struct {name} {{\n    scale: Tensor,\n}}\n\n\
             impl Module for {name} {{\n    fn forward(&self, xs: &Tensor) -> Result<Tensor> {{\n        {body}\n        xs.affine(1.0, 0.0)\n    }}\n}}\n\n"
        )
    };
    let text = format!(
        "use candle_core::{{Module, Result, Tensor}};\n\n{}{}\
         pub enum Down {{\n    Conv(Conv),\n    Pool(Pool),\n}}\n\n\
         impl Module for Down {{\n    fn forward(&self, xs: &Tensor) -> Result<Tensor> {{\n        match self {{\n            \
             Self::Conv(c) => c.forward(xs),\n            Down::Pool(p) => xs.apply(p),\n        }}\n    }}\n}}\n\n\
         pub struct Net {{\n    blocks: Vec<Down>,\n}}\n\n\
         impl Module for Net {{\n    fn forward(&self, xs: &Tensor) -> Result<Tensor> {{\n        let mut xs = xs.clone();\n        \
             for block in &self.blocks {{\n            xs = block.forward(&xs)?;\n        }}\n        Ok(xs)\n    }}\n}}\n",
        layer("Conv", "let _ = self.scale.to_scalar::<f32>()?;"),
        layer("Pool", "let _ = self.scale.to_vec1::<f32>()?;"),
    );
    let text = candle_crate_findings(&text);
    assert_eq!(text.matches("runs once per layer").count(), 2, "{text}");
    assert!(text.contains("src/lib.rs:9:28: D005"), "{text}");
    assert!(text.contains("src/lib.rs:20:28: D005"), "{text}");
}

/// Three crates under `fixtures/rust-index/` where an import could send a call to the wrong
/// function: another crate's function imported under a short name (`use candle_nn::loss::
/// cross_entropy as ce;`) is not the crate's own `cross_entropy`; a private glob re-exports
/// nothing and an item shadows it; an `impl` written under an imported name keeps its methods.
#[test]
fn imports_under_other_names_and_private_globs_resolve_as_rust_does() {
    let concise =
        |case: &str| stdout(&lint(&["--format", "concise", &format!("fixtures/rust-index/{case}")]));
    assert_eq!(concise("renamed_external"), "No findings in 3 files.\n");
    let glob = concise("private_glob");
    assert!(
        glob.starts_with(
            "fixtures/rust-index/private_glob/src/layers.rs:15:28: D005 [warning] `.to_scalar()` in `forward` waits for the device, and `forward` runs at every training step\n"
        ),
        "{glob}"
    );
    assert_eq!(glob.matches(" D005 ").count(), 1, "{glob}");
    let renamed = concise("impl_on_renamed");
    assert!(
        renamed.starts_with(
            "fixtures/rust-index/impl_on_renamed/src/train.rs:19:58: D005 [warning] `.to_scalar()` in `accuracy` waits for the device, and `accuracy` runs at every training step\n"
        ),
        "{renamed}"
    );
}

/// A Rust file that no target of its package compiles (a module commented out of `lib.rs`, a
/// snapshot kept beside the code) has its findings left out, and a note names it, in every
/// format; an example's own module, a raw-identifier module (`mod r#type;`) and the modules a
/// `#[path]` file declares beside it are compiled; a call made only by uncompiled code makes no
/// function run at every step (`helpers::log_loss`). Linted alone, or where a macro may declare
/// modules, nothing is left out: the walk cannot tell.
#[test]
fn files_no_target_compiles_are_left_out_with_a_note() {
    let out = lint(&["--format", "concise", "fixtures/rust-index/uncompiled"]);
    assert_eq!(
        stdout(&out),
        "fixtures/rust-index/uncompiled/examples/helpers.rs:11:29: D005 [warning] `.to_scalar()` waits for the device at every training step\n\
         fixtures/rust-index/uncompiled/src/kernels/launch.rs:9:23: D005 [warning] `.to_scalar()` waits for the device at every training step\n\
         fixtures/rust-index/uncompiled/src/train.rs:9:23: D005 [warning] `.to_scalar()` waits for the device at every training step\n\
         fixtures/rust-index/uncompiled/src/type.rs:9:23: D005 [warning] `.to_scalar()` waits for the device at every training step\n\
         Found 4 findings (0 errors, 4 warnings) in 4 of 12 files.\n"
    );
    assert!(stderr(&out).starts_with("note: not reported on: 2 Rust files"), "{}", stderr(&out));
    let human = lint(&["fixtures/rust-index/uncompiled"]);
    assert!(
        stderr(&human).contains(
            "note: not reported on: 2 Rust files that no target of their package compiles (`fixtures/rust-index/uncompiled/old/train_v1.rs`, `fixtures/rust-index/uncompiled/src/legacy.rs`): no `mod` declares them and no target names them"
        ),
        "{}",
        stderr(&human)
    );
    let alone = stdout(&lint(&["--format", "concise", "fixtures/rust-index/uncompiled/src/legacy.rs"]));
    assert!(alone.starts_with("fixtures/rust-index/uncompiled/src/legacy.rs:9:23: D005"), "{alone}");
    let by_macro = stdout(&lint(&["--format", "concise", "fixtures/rust-index/declared_by_macro"]));
    assert!(
        by_macro.starts_with("fixtures/rust-index/declared_by_macro/src/legacy.rs:9:23: D005"),
        "{by_macro}"
    );
}
