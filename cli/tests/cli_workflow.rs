//! What a team needs to adopt the linter on an existing codebase: exit codes that do not fail CI
//! on warnings unless asked, `--exit-zero`, `--statistics`, `--errors-only`, `--diff` (exactly what
//! `--fix` would write), the `[*]` marker of fixable findings, and configuration in
//! `pyproject.toml`.

use std::path::Path;
use std::process::Output;

use crate::common;
use common::{stderr, stdout};

fn devcheck(args: &[&str], cwd: &Path) -> Output {
    let mut all = vec!["--color", "never"];
    all.extend_from_slice(args);
    common::run(&all, cwd)
}

fn write(path: impl AsRef<Path>, text: &str) {
    let path = path.as_ref();
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A module with a warning (D002: the project also offers MPS) and, under `--preview`, fixable
/// findings (D004, D009).
const MODEL: &str = "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n\n\n\
    class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        \
    self.scale = torch.ones(3)\n\n    def forward(self, x):\n        return x * self.scale\n\n\n\
    def mask(n):\n    return torch.ones(n).cuda()\n\n\n\
    def train(ds, dev):\n    loader = DataLoader(ds, pin_memory=True)\n    for xb in loader:\n        \
    xb = xb.to(dev)\n\n\nDEVICES = (\"cuda\", \"mps\")\n";

#[test]
fn warnings_do_not_fail_the_run_unless_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path().join("m.py"), MODEL);
    let plain =
        devcheck(&["lint", "--isolated", "--select", "D002", "--format", "concise", "m.py"], dir.path());
    assert_eq!(plain.status.code(), Some(0), "{}", stdout(&plain));
    assert!(
        stdout(&plain).contains("m.py:16:12: D002 [warning] `torch.ones(n).cuda()`"),
        "{}",
        stdout(&plain)
    );
    let strict =
        devcheck(&["lint", "--isolated", "--select", "D002", "--fail-on", "warning", "m.py"], dir.path());
    assert_eq!(strict.status.code(), Some(1));
    // Errors fail the run; `--exit-zero` says nothing fails it.
    let errors = devcheck(&["lint", "--isolated", "--preview", "m.py"], dir.path());
    assert_eq!(errors.status.code(), Some(1));
    let zero = devcheck(&["lint", "--isolated", "--preview", "--exit-zero", "m.py"], dir.path());
    assert_eq!(zero.status.code(), Some(0));
    assert_eq!(stdout(&zero), stdout(&errors));
}

#[test]
fn statistics_count_each_rule_and_errors_only_hides_warnings() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path().join("m.py"), MODEL);
    let out = devcheck(&["lint", "--isolated", "--preview", "--statistics", "m.py"], dir.path());
    assert_eq!(
        stdout(&out),
        "1  D002  hardcoded-accelerator\n\
         1  D004  unmoved-tensor-field (1 fixable with `--fix`)\n\
         1  D009  ineffective-non-blocking (1 fixable with `--fix`)\n"
    );
    let json = devcheck(
        &["lint", "--isolated", "--preview", "--statistics", "--format", "json", "m.py"],
        dir.path(),
    );
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(
        rows[1],
        serde_json::json!({"code": "D004", "name": "unmoved-tensor-field", "count": 1, "fixable": 1})
    );
    let errors = devcheck(
        &["lint", "--isolated", "--preview", "--errors-only", "--format", "concise", "m.py"],
        dir.path(),
    );
    assert_eq!(
        stdout(&errors),
        "m.py:9:9: D004 [error] [*] `self.scale` is a plain tensor attribute: `model.to(device)` does not move it\n\
         Found 1 finding (1 error, 0 warnings) in 1 of 1 file. 1 fixable with `--fix`.\n"
    );
}

/// `--diff` writes nothing and prints exactly the change `--fix` makes to the same file.
#[test]
fn diff_is_exactly_what_fix_would_write() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path().join("a/m.py"), MODEL);
    write(dir.path().join("b/m.py"), MODEL);
    let diff = devcheck(&["lint", "--isolated", "--preview", "--diff", "m.py"], &dir.path().join("a"));
    assert_eq!(diff.status.code(), Some(1), "{}", stderr(&diff));
    assert_eq!(std::fs::read_to_string(dir.path().join("a/m.py")).expect("read"), MODEL, "--diff wrote");
    assert_eq!(stderr(&diff), "devcheck: would fix 2 findings in 1 file\n");
    let fix = devcheck(&["lint", "--isolated", "--preview", "--fix", "m.py"], &dir.path().join("b"));
    assert_eq!(fix.status.code(), Some(0), "{}", stderr(&fix));
    let fixed = std::fs::read_to_string(dir.path().join("b/m.py")).expect("read");
    assert_ne!(fixed, MODEL);
    let expected = similar::TextDiff::from_lines(MODEL, &fixed)
        .unified_diff()
        .context_radius(3)
        .header("a/m.py", "b/m.py")
        .to_string();
    assert_eq!(stdout(&diff), expected);
    // Nothing to fix: no diff, exit 0.
    let clean = devcheck(&["lint", "--isolated", "--preview", "--diff", "m.py"], &dir.path().join("b"));
    assert_eq!((clean.status.code(), stdout(&clean)), (Some(0), String::new()));
}

/// `[tool.devcheck]` in `pyproject.toml` takes `devcheck.toml`'s keys; the closest configuration
/// file wins, and in one folder `devcheck.toml` wins.
#[test]
fn pyproject_configures_devcheck_and_the_closest_file_wins() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    write(
        root.join("pyproject.toml"),
        "[project]\nname = \"demo\"\n\n[tool.other]\nx = 1\n\n[tool.devcheck.lint]\npreview = true\nignore = [\"D002\"]\n",
    );
    write(root.join("pkg/m.py"), MODEL);
    // The table turns preview on and D002 off: the preview findings but D002's.
    let seen = |out: &Output| {
        let text = stdout(out);
        text.contains(" D004 ") && text.contains(" D009 ") && !text.contains(" D002 ")
    };
    let out = devcheck(&["lint", "--format", "concise", "pkg"], root);
    assert!(seen(&out), "{}{}", stdout(&out), stderr(&out));
    // From inside the package, the same file is found upwards.
    let inside = devcheck(&["lint", "--format", "concise", "."], &root.join("pkg"));
    assert!(seen(&inside), "{}", stdout(&inside));
    // A closer pyproject.toml without a devcheck table is passed over.
    write(root.join("pkg/pyproject.toml"), "[project]\nname = \"inner\"\n");
    let passed_over = devcheck(&["lint", "--format", "concise", "."], &root.join("pkg"));
    assert!(seen(&passed_over), "{}", stdout(&passed_over));
    // A devcheck.toml beside the pyproject.toml wins over it.
    write(root.join("devcheck.toml"), "[lint]\nselect = [\"D002\"]\n");
    let own = devcheck(&["lint", "--format", "concise", "pkg"], root);
    assert!(stdout(&own).contains("D002"), "{}", stdout(&own));
    // Errors point into the pyproject.toml's table.
    std::fs::remove_file(root.join("devcheck.toml")).expect("rm");
    write(root.join("pyproject.toml"), "[tool.devcheck.lint]\nignor = [\"D002\"]\n");
    let bad = devcheck(&["lint", "pkg"], root);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("unknown field `ignor`"), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("the `[tool.devcheck.lint]` table takes"), "{}", stderr(&bad));
}

/// `--add-ignore` writes a suppression for every finding and nothing else: after it, a plain run
/// reports nothing, and the files differ only by the comments.
#[test]
fn add_ignore_suppresses_every_finding_and_changes_nothing_else() {
    let dir = tempfile::tempdir().expect("temp dir");
    let python = "import torch\n\n\ndef masks(n):\n    a = torch.ones(n).cuda()\n    b = torch.ones(n).cuda()  # a note\n    \
                  d = torch.ones(n).cuda()  # devcheck: ignore[D005]\n    return a, b, d\n\n\n\
                  def continued(n):\n    x = 1\n    c = torch.zeros(n).cuda() + \\\n        x\n    return c\n\n\n\
                  def in_string(n):\n    t = torch.ones(n).cuda(); s = \"\"\"a\n    b\"\"\"\n    return t, s\n\n\n\
                  DEVICES = (\"cuda\", \"mps\")\n";
    let rust = "use candle_core::{Device, Tensor};\n\npub fn forward(xs: &Tensor) -> candle_core::Result<Tensor> {\n    \
                Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu)?.add(xs) // note\n}\n";
    write(dir.path().join("m.py"), python);
    write(dir.path().join("r.rs"), rust);
    let out = devcheck(&["lint", "--isolated", "--preview", "--add-ignore", "."], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stderr(&out),
        "devcheck: m.py: suppressed 3 findings\ndevcheck: r.rs: suppressed 1 finding\n\
         devcheck: suppressed 4 findings in 2 files\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("m.py")).expect("read"),
        "import torch\n\n\ndef masks(n):\n    a = torch.ones(n).cuda()  # devcheck: ignore[D002]\n    \
         b = torch.ones(n).cuda()  # a note  # devcheck: ignore[D002]\n    \
         d = torch.ones(n).cuda()  # devcheck: ignore[D002, D005]\n    return a, b, d\n\n\n\
         def continued(n):\n    x = 1\n    # devcheck: ignore[D002]\n    c = torch.zeros(n).cuda() + \\\n        x\n    return c\n\n\n\
         def in_string(n):\n    # devcheck: ignore[D002]\n    t = torch.ones(n).cuda(); s = \"\"\"a\n    b\"\"\"\n    return t, s\n\n\n\
         DEVICES = (\"cuda\", \"mps\")\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("r.rs")).expect("read"),
        rust.replace("// note\n", "// note  // devcheck: ignore[D001]\n")
    );
    let plain = devcheck(&["lint", "--isolated", "--preview", "--format", "concise", "."], dir.path());
    assert_eq!(stdout(&plain), "No findings in 2 files.\n");
    // Run again: nothing left to suppress, nothing written.
    let again = devcheck(&["lint", "--isolated", "--preview", "--add-ignore", "."], dir.path());
    assert_eq!(
        stderr(&again),
        "devcheck: suppressed 0 findings in 0 files, 2 files with nothing to suppress\n"
    );
}

/// Whether a hard-coded `.cuda()` bites is the project's to say: another file that offers MPS
/// makes it a finding; a project that only runs on CUDA does not, nor does one declared
/// CUDA-only with `target = "cuda"`.
#[test]
fn the_project_decides_whether_a_hard_coded_cuda_bites() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    write(root.join("pyproject.toml"), "[project]\nname = \"p\"\n");
    write(root.join("pkg/model.py"), "import torch\n\n\ndef mask(n):\n    return torch.ones(n).cuda()\n");
    let lint = |args: &[&str]| {
        let mut all = vec!["lint", "--preview", "--select", "D002", "--format", "concise"];
        all.extend_from_slice(args);
        stdout(&devcheck(&all, root))
    };
    // CUDA only: the line works on every GPU run.
    assert_eq!(lint(&["pkg/model.py"]), "No findings in 1 file.\n");
    // Another file of the project offers Apple's GPUs: the line fails there.
    write(
        root.join("pkg/device.py"),
        "import torch\n\n\ndef pick():\n    return \"mps\" if torch.backends.mps.is_available() else \"cpu\"\n",
    );
    assert_eq!(
        lint(&["pkg/model.py"]),
        "pkg/model.py:5:12: D002 [warning] `torch.ones(n).cuda()` hard-codes the current CUDA device in \
         library code: the project also runs on other accelerators (MPS, XLA, ..), where this fails\n\
         Found 1 finding (0 errors, 1 warning) in 1 of 1 file.\n"
    );
    // Declared CUDA-only: MPS named somewhere is not a reason.
    write(root.join("devcheck.toml"), "[lint]\ntarget = \"cuda\"\n");
    assert_eq!(lint(&["pkg"]), "No findings in 2 files.\n");
    write(root.join("devcheck.toml"), "[lint]\ntarget = \"tpu\"\n");
    let bad = devcheck(&["lint", "pkg"], root);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("unknown variant `tpu`, expected `cuda` or `any`"), "{}", stderr(&bad));
}

/// A checkpoint loaded with no `map_location` fails only on a machine without the GPU it was saved
/// from: D010 reports it where the project says its code must also run there (`target = "any"`
/// in devcheck.toml, or `--target any`), and not otherwise.
#[test]
fn loads_are_checked_where_the_code_must_also_run_without_a_gpu() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    write(
        root.join("infer.py"),
        "import torch\n\ndevice = \"cuda\" if torch.cuda.is_available() else \"cpu\"\n\n\n\
         def load(model, path):\n    model.load_state_dict(torch.load(path))\n    return model.to(device)\n",
    );
    let lint = |args: &[&str]| {
        let mut all = vec!["lint", "--preview", "--select", "D010", "--format", "concise"];
        all.extend_from_slice(args);
        stdout(&devcheck(&all, root))
    };
    let found = "infer.py:7:27: D010 [warning] `torch.load` without `map_location` puts every tensor back on the \
                 device it was saved from\nFound 1 finding (0 errors, 1 warning) in 1 of 1 file. 1 more with \
                 `--fix --unsafe-fixes`.\n";
    assert_eq!(lint(&["infer.py"]), "No findings in 1 file.\n");
    // Asked for by name without the target, it says why it is silent.
    let silent = devcheck(&["lint", "--select", "D010", "infer.py"], root);
    assert!(
        stderr(&silent)
            .contains("note: D010 checks `torch.load` only in code declared to run also without a GPU"),
        "{}",
        stderr(&silent)
    );
    assert!(stderr(&silent).contains("`--target any`"), "{}", stderr(&silent));
    assert_eq!(lint(&["--target", "any", "infer.py"]), found);
    write(root.join("devcheck.toml"), "[lint]\ntarget = \"any\"\n");
    assert_eq!(lint(&["infer.py"]), found);
    // The command line replaces the file's target.
    assert_eq!(lint(&["--target", "cuda", "infer.py"]), "No findings in 1 file.\n");
}
