//! `devcheck lint` and `devcheck inspect` on PyTorch code, as a user runs them: preview, output
//! formats, mixed trees, suppressions, configuration, files that do not parse.

use std::process::Output;

use crate::common;
use common::{root, run as devcheck};

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).expect("fixture")
}

/// Lints `args` from the workspace root without any devcheck.toml.
fn lint(args: &[&str]) -> Output {
    let mut all = vec!["--color", "never", "lint", "--isolated"];
    all.extend_from_slice(args);
    devcheck(&all, root())
}

/// `devcheck lint --preview` in concise form on the folder `d`, with no configuration read.
fn lint_preview(d: &std::path::Path) -> String {
    stdout(&devcheck(&["--color", "never", "lint", "--format", "concise", "--isolated", "--preview", "."], d))
}

/// [`lint_preview`] for code that must also run without a GPU (`--target any`: D010 on).
fn lint_preview_anywhere(d: &std::path::Path) -> String {
    let args = [
        "--color",
        "never",
        "lint",
        "--format",
        "concise",
        "--isolated",
        "--preview",
        "--target",
        "any",
        ".",
    ];
    stdout(&devcheck(&args, d))
}

/// Writes `text` to `name` under `d`, making its folders.
fn write_in(d: &std::path::Path, name: &str, text: &str) {
    let path = d.join(name);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// The places (`path:line:column`) of the findings of `code` in a concise report.
fn places<'t>(text: &'t str, code: &str) -> Vec<&'t str> {
    let marker = format!(": {code} ");
    text.lines().filter(|l| l.contains(&marker)).filter_map(|l| l.split(&marker).next()).collect()
}

#[test]
fn python_rules_are_preview_and_run_with_the_flag() {
    let out = lint(&["--format", "concise", "fixtures/lint/d003/torch.py"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "No findings in 1 file.\n");
    let out = lint(&["--format", "concise", "--preview", "fixtures/lint/d003/torch.py"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("concise_d003_torch", stdout(&out));
    // A rule selected by its code runs without `--preview`.
    let out = lint(&["--format", "concise", "--select", "D003", "fixtures/lint/d003/torch.py"]);
    assert_eq!(stdout(&out).matches(" D003 ").count(), 6, "{}", stdout(&out));
}

#[test]
fn json_findings_have_the_documented_fields_and_relative_paths() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("models")).expect("mkdir");
    std::fs::write(d.join("models/attention.py"), fixture("fixtures/lint/d001/torch.py")).expect("write");
    // As the ecosystem check runs it: from inside the tree, on `.`.
    let out = devcheck(&["--color", "never", "lint", "--format", "json", "--isolated", "--preview", "."], d);
    assert_eq!(out.status.code(), Some(1));
    let value: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("valid JSON");
    let items = value.as_array().expect("an array");
    // The fixture's seven D001 findings and four D005 (three tensors made on the host and copied
    // in `forward`, and an index made on the host for a tensor on the device).
    assert_eq!(items.len(), 11);
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
        assert_eq!(item["path"], "models/attention.py");
    }
    assert_eq!(items[0]["code"], "D001");
    assert_eq!((items[0]["line"].as_u64(), items[0]["column"].as_u64()), (Some(20), Some(15)));
}

#[test]
fn a_mixed_tree_lints_rust_and_python_in_one_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("src")).expect("mkdir");
    std::fs::create_dir_all(d.join("python")).expect("mkdir");
    std::fs::write(d.join("src/model.rs"), fixture("fixtures/lint/d006/devcheck.rs")).expect("write");
    std::fs::write(d.join("python/train.py"), fixture("fixtures/lint/d006/torch.py")).expect("write");
    std::fs::write(d.join("python/broken.py"), "import torch\ndef f(:\n").expect("write");
    std::fs::write(d.join("notes.txt"), "torch.cuda.empty_cache()\n").expect("write");
    let out = devcheck(&["--color", "never", "lint", "--isolated", "--preview", "--format", "concise"], d);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().any(|l| l.starts_with("src/model.rs:") && l.contains(" D006 ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("python/train.py:") && l.contains(" D006 ")), "{text}");
    // The file that does not parse is reported, and the others are still linted.
    assert!(text.contains("python/broken.py:2:7: D000 [error]"), "{text}");
    assert!(text.contains(" in 3 of 3 files."), "{text}");
}

#[test]
fn suppression_comments_and_per_file_ignores_work_in_python() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("pkg")).expect("mkdir");
    let code = "import torch\n\n\ndef shift(x: torch.Tensor, y: torch.Tensor):\n    \
                x.cpu()  # devcheck: ignore[D003]\n    # devcheck: ignore[discarded-transfer]\n    \
                y.cpu()\n    x.cuda()  # a string with # devcheck: in it does not count\n    return x\n";
    std::fs::write(d.join("pkg/ops.py"), code).expect("write");
    let text = stdout(&devcheck(
        &["--color", "never", "lint", "--isolated", "--select", "D003", "--format", "concise"],
        d,
    ));
    assert_eq!(text.lines().filter(|l| l.contains(" D003 ")).count(), 1, "{text}");
    assert!(text.contains("pkg/ops.py:8:5: D003"), "{text}");
    // A file-wide suppression, and a glob in devcheck.toml.
    std::fs::write(d.join("pkg/ops.py"), format!("# devcheck: ignore-file[D003]\n{code}")).expect("write");
    let out = devcheck(&["--color", "never", "lint", "--isolated", "--select", "D003"], d);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    std::fs::write(d.join("pkg/ops.py"), code).expect("write");
    std::fs::write(
        d.join("devcheck.toml"),
        "[lint]\nselect = [\"D003\"]\n[lint.per-file-ignores]\n\"pkg/*.py\" = [\"D003\"]\n",
    )
    .expect("write");
    let out = devcheck(&["--color", "never", "lint"], d);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn inspect_python_modules() {
    let out = devcheck(
        &["--color", "never", "inspect", "--isolated", "fixtures/lint/inspect/torch_model.py"],
        root(),
    );
    // Fields a move leaves behind are D004 errors: the run fails, as `lint --preview` would.
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    insta::assert_snapshot!("inspect_torch", stdout(&out));
    let out = devcheck(
        &[
            "--color",
            "never",
            "inspect",
            "--isolated",
            "--format",
            "json",
            "fixtures/lint/inspect/torch_model.py",
        ],
        root(),
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let classes = json.as_array().expect("an array of classes");
    assert_eq!(classes.len(), 2);
    let t = &classes[1];
    assert_eq!(
        (t["name"].as_str(), t["kind"].as_str(), t["api"].as_str()),
        (Some("Transformer"), Some("class"), Some("torch"))
    );
    let field = |name: &str| {
        t["fields"].as_array().and_then(|f| f.iter().find(|x| x["name"] == name)).cloned().unwrap_or_default()
    };
    assert_eq!(field("scale")["class"], "parameter");
    assert_eq!(field("positions")["class"], "buffer");
    assert_eq!(field("positions")["saved"], true);
    assert_eq!(field("rotary")["fate"], "left behind");
    assert_eq!(field("rotary")["line"], 25);
    assert_eq!(field("heads")["class"], "modules in a plain list");
    assert_eq!(field("cache")["class"], "tensors in a plain dict");
    assert_eq!(field("dropout")["fate"], "-");
}

/// With every Python rule in preview, a plain run on PyTorch code says so, rather than letting
/// "no findings" read as "nothing wrong"; with `--preview`, or on Rust files alone, it does not.
#[test]
fn a_run_with_no_python_rule_on_says_so() {
    let note = "note: no rule checks Python files by default";
    let plain = lint(&["fixtures/lint/d005/torch.py"]);
    assert_eq!(stdout(&plain), "No findings in 1 file.\n");
    let err = String::from_utf8_lossy(&plain.stderr).into_owned();
    assert!(err.starts_with(note) && err.contains("help: `--preview`"), "{err}");
    let preview = lint(&["--preview", "fixtures/lint/d005/torch.py"]);
    assert!(!String::from_utf8_lossy(&preview.stderr).contains(note));
    let rust = lint(&["fixtures/lint/d003/candle.rs"]);
    assert!(!String::from_utf8_lossy(&rust.stderr).contains("note:"));
    // Machine formats keep stderr for errors.
    let json = lint(&["--format", "json", "fixtures/lint/d005/torch.py"]);
    assert!(json.stderr.is_empty());
}

/// A module class whose base class is in another file of the repository: the repository index
/// knows it is an `nn.Module`, whether the folder is linted or only the changed file (as
/// pre-commit names it). A function of another file called at every step runs at every step.
#[test]
fn classes_imported_from_other_files_are_known() {
    let concise = |args: &[&str]| {
        let mut all = vec!["--preview", "--format", "concise"];
        all.extend_from_slice(args);
        stdout(&lint(&all))
    };
    let whole = concise(&["fixtures/project"]);
    assert!(whole.contains("fixtures/project/pkg/net.py:11:9: D004 [error]"), "{whole}");
    assert!(whole.contains("fixtures/project/train.py:21:18: D005 [warning]"), "{whole}");
    // A helper of another file called in the training loop reads the device at every step; the
    // same helper called only from the evaluation pass (`report`) is left alone.
    assert!(
        whole.contains(
            "fixtures/project/pkg/metrics.py:6:12: D005 [warning] `.item()` in `accuracy` waits for the \
             device at every step: `accuracy` is called in a loop at fixtures/project/train.py:22"
        ),
        "{whole}"
    );
    // A method of a class of another file, called at every step on an instance made here, with a
    // device tensor among its keyword arguments (the first call, with numbers only, is not the
    // one shown); a method given only numbers (`note`) is left alone.
    assert!(
        whole.contains(
            "fixtures/project/pkg/metrics.py:20:21: D005 [warning] `.item()` in `update` waits for the \
             device at every step: `Meter.update` is called in a loop at fixtures/project/train.py:25"
        ),
        "{whole}"
    );
    // A file that names no device, in a project that uses one: its loss is on the GPU.
    assert!(whole.contains("fixtures/project/pkg/algo.py:12:18: D005 [warning]"), "{whole}");
    // Losses put into a dict that a function of another file reduces, after a loss made by a
    // helper of this file from the discriminator's outputs: on the GPU, read at every step.
    // The loop is a training step (it steps the optimizer) although a helper it calls loops over
    // images with the network. Helpers that move their results to the host return host tensors
    // (no D005 or D008 on what they return).
    assert!(
        whole.contains(
            "fixtures/project/gan.py:28:15: D005 [warning] `.item()` in a loop waits for the device at every step\n"
        ),
        "{whole}"
    );
    assert!(!whole.contains("gan.py:29") && !whole.contains("gan.py:30"), "{whole}");
    // The instance may be kept on `self` (`self.meter = Averager()` in `__init__`).
    assert!(
        whole.contains(
            "fixtures/project/pkg/metrics.py:32:23: D005 [warning] `.item()` in `add` waits for the \
             device at every step: `Averager.add` is called in a loop at fixtures/project/trainer.py:20"
        ),
        "{whole}"
    );
    // A trainer whose base class, in another file, derives from Transformers' `Trainer`: its
    // `compute_loss` runs at every training step.
    assert!(
        whole.contains(
            "fixtures/project/sft.py:9:28: D005 [warning] `.item()` in `compute_loss` waits for the device at \
             every training step"
        ),
        "{whole}"
    );
    // A model file that names no device makes another file's class (its `__init__` runs) and
    // calls another file's function at every forward pass: both copy a host-made mask.
    for at in ["masking.py:8:21", "masking.py:13:12"] {
        assert!(
            whole.contains(&format!(
                "fixtures/project/pkg/{at}: D005 [warning] `torch.ones(..).to(..)` makes a tensor on the host and copies it to the device at every step"
            )),
            "{whole}"
        );
    }
    // A method the base class leaves to its subclasses (`@abstractmethod`), called in the base's
    // training loop: the override in another file runs at every step, though that file imports
    // nothing of torch's. A hook with a body of its own (`pass`) is not followed.
    assert!(
        whole.contains(
            "fixtures/project/pkg/sft_trainer.py:8:31: D005 [warning] `.item()` in `loss` waits for the device \
             at every step: `SFTTrainer.loss` is called in a loop at fixtures/project/pkg/loop_trainer.py:26"
        ),
        "{whole}"
    );
    // A method called in a training loop on an instance only the annotation of the parameter it
    // came from names (`agent: Agent | list[Agent] | None`, then `self.agent = agent`, or the
    // list's first): the base's own method runs at every step, and so does the override of a
    // class derived from it in another file. A loop that steps only the environment (a rollout,
    // `explore`) is not followed.
    assert!(
        whole.contains(
            "fixtures/project/pkg/agent.py:12:12: D005 [warning] `if rewards.max() > 0:` in `record` waits for \
             the device at every step: `Agent.record` is called in a loop at fixtures/project/runner.py:22"
        ),
        "{whole}"
    );
    assert!(
        whole.contains(
            "fixtures/project/pkg/greedy.py:6:18: D005 [warning] `.nonzero()` in `act` waits for the device at \
             every step: `Greedy.act` is called in a loop at fixtures/project/runner.py:20"
        ),
        "{whole}"
    );
    assert!(!whole.contains("agent.py:16"), "{whole}");
    // A model kept in a dict of `self`, filled item by item (`self.models[kind] = CVAE(..)`), then
    // taken out (`model = self.models[kind]`): its method runs at every step; whether it was
    // given a writer is no gate of the logging.
    assert!(
        whole.contains(
            "fixtures/project/pkg/cvae.py:14:48: D005 [warning] `add_scalar(.., loss, ..)` in `train_loss` waits \
             for the device at every step: `CVAE.train_loss` is called in a loop at fixtures/project/forecast.py:21"
        ),
        "{whole}"
    );
    // A module whose base derives, in another file, from a class that file took by a star
    // import (`from pkg.base_models import *`): an `nn.Module`, its `forward` a forward pass.
    assert!(
        whole.contains(
            "fixtures/project/din.py:8:16: D005 [warning] `torch.arange(..).to(..)` makes a tensor on the host \
             and copies it to the device at every forward pass"
        ),
        "{whole}"
    );
    // A pass of a module of another file run through a method named for one
    // (`self.mdl.forward_detect(..)`): its outputs are where the module is, whatever its input.
    assert!(
        whole.contains(
            "fixtures/project/pkg/boxes.py:10:23: D005 [warning] `detections[conf_mask]` in `postprocess` waits \
             for the device at every step: `postprocess` is called at every training step at \
             fixtures/project/detection.py:20"
        ),
        "{whole}"
    );
    // A report every `args.n_report_steps` steps, an option 1 by default that no run script
    // changes, runs at every step; one every `args.log_every` (50) steps is a gate.
    assert!(
        whole.contains(
            "fixtures/project/report_steps.py:22:37: D005 [warning] `.item()` in a loop waits for the device at \
             every step\n"
        ),
        "{whole}"
    );
    assert!(!whole.contains("report_steps.py:25"), "{whole}");
    assert_eq!(whole.matches(" D005 ").count(), 16, "{whole}");
    // A loop that calls another file's training pass is over epochs, not steps.
    assert!(!whole.contains("schedule.py"), "{whole}");
    // D010 runs only where the code must also run without a GPU (`--target any`). The project
    // offers the CPU in another file (`--device` in options.py): a load with no `map_location`
    // in a file that leaves the device to its caller fails there.
    assert!(!whole.contains(" D010 "), "{whole}");
    let anywhere = concise(&["--target", "any", "fixtures/project"]);
    assert!(anywhere.contains("fixtures/project/restore.py:9:27: D010 [warning]"), "{anywhere}");
    let one = concise(&["fixtures/project/pkg/net.py"]);
    assert!(one.contains("fixtures/project/pkg/net.py:11:9: D004 [error]"), "{one}");

    // No project marker above: the file's own folder is indexed.
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("base.py"),
        "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("model.py"),
        "import torch\n\nfrom base import Base\n\n\nclass Model(Base):\n    def __init__(self):\n        \
         super().__init__()\n        self.mask = torch.ones(4)\n\n    def forward(self, x):\n        \
         return x * self.mask\n",
    )
    .expect("write");
    let out = devcheck(
        &["--color", "never", "lint", "--isolated", "--preview", "--format", "concise", "model.py"],
        dir.path(),
    );
    assert!(stdout(&out).contains("model.py:9:9: D004 [error]"), "{}", stdout(&out));
    // Without the base class's file the class is not known to be a module: nothing is said.
    std::fs::remove_file(dir.path().join("base.py")).expect("remove");
    let out = devcheck(
        &["--color", "never", "lint", "--isolated", "--preview", "--format", "concise", "model.py"],
        dir.path(),
    );
    assert_eq!(stdout(&out), "No findings in 1 file.\n");

    let out = devcheck(&["--color", "never", "inspect", "--isolated", "fixtures/project"], root());
    let text = stdout(&out);
    assert!(
        text.contains("class Net (torch)") && text.contains("0 of 1 fields move, 1 left behind"),
        "{text}"
    );
}

/// The repository index against what real trees hold: a name two files bind differently is not
/// followed, the answer does not depend on how the paths are spelled, and a notebook caller is
/// named by cell.
#[test]
fn the_repository_index_holds_on_awkward_trees() {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    let helper =
        "import torch\n\n\ndef accuracy(out, y):\n    return (out.argmax(1) == y).float().mean().item()\n";
    let train = "import torch\n\nfrom utils import accuracy\n\n\ndef train(model, loader, opt):\n    \
                 for x, y in loader:\n        out = model(x.cuda())\n        out.sum().backward()\n        \
                 opt.step()\n        acc = accuracy(out, y.cuda())\n";
    write("cls/utils.py", helper);
    write("cls/train.py", train);
    let concise = |args: &[&str]| {
        let mut all = vec!["--color", "never", "lint", "--isolated", "--preview", "--format", "concise"];
        all.extend_from_slice(args);
        stdout(&devcheck(&all, dir.path()))
    };
    let found = concise(&["."]);
    assert!(found.contains("cls/utils.py:5:12: D005"), "{found}");
    // The same from an absolute path and from inside the folder.
    let absolute = dir.path().join("cls").to_string_lossy().into_owned();
    assert!(concise(&[&absolute]).contains("utils.py:5:12: D005"));
    let inside = stdout(&devcheck(
        &[
            "--color",
            "never",
            "lint",
            "--isolated",
            "--preview",
            "--format",
            "concise",
            "train.py",
            "utils.py",
        ],
        &dir.path().join("cls"),
    ));
    assert!(inside.contains("utils.py:5:12: D005"), "{inside}");
    // Another `utils.py` binds `accuracy` to something else: which one `train.py` means is not known.
    write("rl/utils.py", "from sklearn.metrics import accuracy_score as accuracy\n");
    write("rl/train.py", train);
    let ambiguous = concise(&["."]);
    assert!(!ambiguous.contains("D005"), "{ambiguous}");
}

/// A package that re-exports its modules with `from .logger import *` (and a cycle of such
/// imports, which must end): the logger's per-step read is found through the package's name; a
/// later star binding the same name wins, unless its module's `__all__` leaves the name out.
#[test]
fn star_imports_of_a_package_re_export_its_classes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    for sub in ["src/misc", "src/solver"] {
        std::fs::create_dir_all(d.join(sub)).expect("mkdir");
    }
    std::fs::write(d.join("src/__init__.py"), "").expect("write");
    std::fs::write(d.join("src/solver/__init__.py"), "").expect("write");
    std::fs::write(d.join("src/misc/__init__.py"), "from .logger import *\nfrom .dist import *\n")
        .expect("write");
    std::fs::write(d.join("src/misc/dist.py"), "from .logger import *\n\n\ndef world():\n    return 1\n")
        .expect("write");
    std::fs::write(
        d.join("src/misc/logger.py"),
        "import torch\n\nfrom .dist import *\n\n\nclass MetricLogger:\n    def __init__(self):\n        self.meters = {}\n\n    \
         def update(self, **kwargs):\n        for k, v in kwargs.items():\n            if isinstance(v, torch.Tensor):\n                \
         v = v.item()\n            self.meters[k] = v\n",
    )
    .expect("write");
    std::fs::write(
        d.join("src/solver/engine.py"),
        "import torch\n\nfrom ..misc import MetricLogger\n\nDEVICE = torch.device(\"cuda\")\n\n\ndef train_one_epoch(model, criterion, loader, optimizer, device):\n    \
         logger = MetricLogger()\n    for x, y in loader:\n        loss_dict = criterion(model(x.to(device)), y.to(device))\n        \
         loss = sum(loss_dict.values())\n        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n        \
         logger.update(loss=loss, **loss_dict)\n",
    )
    .expect("write");
    let out =
        devcheck(&["--color", "never", "lint", "--format", "concise", "--isolated", "--preview", "."], d);
    let text = stdout(&out);
    assert!(
        text.contains("src/misc/logger.py:13:21: D005 [warning] `.item()` in `update` waits for the device at every step: `MetricLogger.update` is called in a loop at src/solver/engine.py:16"),
        "{text}"
    );
    // A later star import binds the name anew (Python's last binding wins)…
    let quiet = "class MetricLogger:\n    def update(self, **kwargs):\n        self.kwargs = kwargs\n";
    std::fs::write(d.join("src/misc/quiet.py"), quiet).expect("write");
    std::fs::write(
        d.join("src/misc/__init__.py"),
        "from .logger import *\nfrom .dist import *\nfrom .quiet import *\n",
    )
    .expect("write");
    let out =
        devcheck(&["--color", "never", "lint", "--format", "concise", "--isolated", "--preview", "."], d);
    assert!(!stdout(&out).contains("logger.py"), "{}", stdout(&out));
    // …unless that module's `__all__` leaves it out.
    std::fs::write(d.join("src/misc/quiet.py"), format!("__all__ = [\"Other\"]\n\n\n{quiet}"))
        .expect("write");
    let out =
        devcheck(&["--color", "never", "lint", "--format", "concise", "--isolated", "--preview", "."], d);
    assert!(stdout(&out).contains("src/misc/logger.py:13:21: D005"), "{}", stdout(&out));
}

/// A loss object built by a factory of another file (`self.loss_fn = create_loss_function(..)`
/// in a Lightning module whose file imports no torch, its class two bases below
/// `LightningModule`), called at every training step: its `__call__` runs at every step, and a
/// read there that only feeds the logging dict is reported; the loss returned beside it is a
/// tensor on the device, which the host does not need. With no factory (a function returning
/// instances of two classes), nothing is known and nothing reported.
#[test]
fn objects_made_by_factories_of_other_files_are_followed_into_their_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    std::fs::create_dir_all(d.join("pkg")).expect("mkdir");
    std::fs::write(d.join("pkg/__init__.py"), "").expect("write");
    let losses = "import torch\n\n\nclass DualLoss:\n    def __init__(self, w):\n        self.w = w\n\n    \
                  def __call__(self, preds, targets):\n        total = [(preds - targets).abs().mean(), (preds - targets).pow(2).mean()]\n        \
                  logs = {name: value.detach().item() for name, value in zip([\"l1\", \"l2\"], total)}\n        \
                  return sum(total), logs\n\n\nclass Other:\n    def __call__(self, preds, targets):\n        return preds, {}\n\n\n\
                  def create_loss_function(w):\n    loss_function = DualLoss(w)\n    return loss_function\n";
    std::fs::write(d.join("pkg/losses.py"), losses).expect("write");
    std::fs::write(
        d.join("pkg/solver.py"),
        "from lightning import LightningModule\n\nfrom pkg.losses import create_loss_function\n\n\n\
         class Base(LightningModule):\n    def __init__(self, net):\n        super().__init__()\n        self.net = net.cuda()\n\n\n\
         class Train(Base):\n    def setup(self, stage):\n        self.loss_fn = create_loss_function(1.0)\n\n    \
         def training_step(self, batch, batch_idx):\n        images, targets = batch\n        \
         loss, logs = self.loss_fn(self.net(images), targets)\n        self.log_dict(logs)\n        return loss\n",
    )
    .expect("write");
    // The script that trains it (a module file nothing imports, beside one other files do, is not
    // reached).
    std::fs::write(
        d.join("train.py"),
        "import lightning\nimport torch\n\nfrom pkg.solver import Train\n\n\
         lightning.Trainer().fit(Train(torch.nn.Linear(4, 4)))\n",
    )
    .expect("write");
    let run = || {
        stdout(&devcheck(
            &["--color", "never", "lint", "--format", "concise", "--isolated", "--preview", "."],
            d,
        ))
    };
    let text = run();
    assert!(
        text.contains("pkg/losses.py:10:23: D005 [warning] `.item()` in `__call__` waits for the device at every step: `DualLoss.__call__` is called at every training step at pkg/solver.py:18"),
        "{text}"
    );
    let mixed = losses.replace(
        "    loss_function = DualLoss(w)\n    return loss_function\n",
        "    if w:\n        return DualLoss(w)\n    return Other()\n",
    );
    std::fs::write(d.join("pkg/losses.py"), mixed).expect("write");
    assert!(!run().contains("D005"), "{}", run());
    // A function that may return what its caller passed is no factory.
    let passed = losses.replace(
        "def create_loss_function(w):\n    loss_function = DualLoss(w)\n",
        "def create_loss_function(w, loss_function=None):\n    if loss_function is None:\n        loss_function = DualLoss(w)\n",
    );
    std::fs::write(d.join("pkg/losses.py"), &passed).expect("write");
    assert!(!run().contains("D005"), "{}", run());
    // A caller that decides on the logs at every step needs them: the read is the price of that.
    std::fs::write(d.join("pkg/losses.py"), losses).expect("write");
    let solver = std::fs::read_to_string(d.join("pkg/solver.py")).expect("read");
    std::fs::write(
        d.join("pkg/solver.py"),
        solver.replace(
            "        self.log_dict(logs)\n",
            "        if logs[\"l1\"] > 1e4:\n            return None\n",
        ),
    )
    .expect("write");
    assert!(!run().contains("D005"), "{}", run());
}

/// Code that only a non-default command-line option reaches (`if args.gail:` with `--gail` off by
/// default, `elif args.sampler == "ddpm":` when the default is `"ddim"`) is latent in the run the
/// project ships: its per-step reads are not reported, in the file that has the branch or in the
/// functions of other files only such branches call. The default path still is.
#[test]
fn code_only_non_default_options_reach_is_not_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    write(
        "gail.py",
        r#"import torch
from torch import nn


class Discriminator(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.trunk = nn.Linear(n, 1)

    def update(self, loader, opt):
        for expert, policy in loader:
            loss = self.trunk(expert).mean() - self.trunk(policy).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(loss.item())
"#,
    );
    write(
        "sampler.py",
        r#"import torch


def ddim_steps(x, model, steps):
    for t in range(steps):
        x = model(x, torch.ones(x.size(0)).to(x.device) * t)
        print(x.norm().item())
    return x


def ddpm_steps(x, model, steps):
    for t in range(steps):
        x = model(x, torch.ones(x.size(0)).to(x.device) * t)
        print(x.norm().item())
    return x
"#,
    );
    write(
        "main.py",
        r#"import argparse

import torch

import gail
from sampler import ddim_steps, ddpm_steps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gail", action="store_true", default=False)
    parser.add_argument("--sampler", type=str, default="ddim")
    parser.add_argument("--sample", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda")
    model = torch.nn.Linear(4, 4).to(device)
    opt = torch.optim.Adam(model.parameters())
    if args.sample:
        x = torch.randn(8, 4, device=device)
        if args.sampler == "ddim":
            x = ddim_steps(x, model, 50)
        elif args.sampler == "ddpm":
            x = ddpm_steps(x, model, 1000)
        return
    if args.gail:
        discr = gail.Discriminator(8).to(device)
    for step in range(1000):
        x = torch.randn(8, 4, device=device)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if args.gail:
            discr.update([(x, x)], opt)
            print(loss.item())


if __name__ == "__main__":
    main()
"#,
    );
    let run = || lint_preview(d);
    let text = run();
    let found = places(&text, "D005");
    // The default sampler is reported (a mode chosen with `--sample` is a run someone makes); the
    // other sampler, the discriminator and the read under `if args.gail:` are not.
    assert_eq!(found, ["sampler.py:6:22", "sampler.py:7:15"], "{text}");
    // A value the project's run scripts pass is a run it makes; a README that offers an option
    // beside the runs it recommends does not make one.
    std::fs::create_dir_all(d.join("scripts")).expect("mkdir");
    write("scripts/sample_ddpm.sh", "#!/bin/sh\npython main.py --sample \\\n  --sampler=ddpm\n");
    write("README.md", "Train with `python main.py`; add `--gail` to imitate an expert.\n");
    let text = run();
    assert!(text.contains("sampler.py:13:22: D005"), "{text}");
    assert!(!text.contains("gail.py"), "{text}");
    std::fs::remove_file(d.join("scripts/sample_ddpm.sh")).expect("remove");
    // With `--gail` on by default, its code runs at every step.
    let main = std::fs::read_to_string(d.join("main.py")).expect("read");
    write("main.py", &main.replace("default=False)", "default=True)"));
    let text = run();
    assert!(text.contains("gail.py:16:19: D005"), "{text}");
    assert!(text.contains("main.py:35:19: D005"), "{text}");
    assert!(!text.contains("sampler.py:13"), "{text}");
}

/// A `torch.load` only a non-default option reaches (`if args.load_model != "":`, a `--resume`
/// flag, in the script or through a method of another file only such a branch calls) is latent
/// in the runs the project makes; the load every run makes is reported.
#[test]
fn loads_only_non_default_options_reach_are_not_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    write(
        "agent.py",
        r#"import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Agent:
    def __init__(self):
        self.actor = nn.Linear(4, 2).to(device)

    def load(self, path):
        self.actor.load_state_dict(torch.load(path))
"#,
    );
    write(
        "main.py",
        r#"import argparse

import torch

from agent import Agent

parser = argparse.ArgumentParser()
parser.add_argument("--load_model", default="")
parser.add_argument("--resume", action="store_true")
parser.add_argument("--weights", default="model.pt")
args = parser.parse_args()
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

agent = Agent()
if args.load_model != "":
    agent.load(args.load_model)
if args.resume:
    agent.actor.load_state_dict(torch.load("last.pt"))
agent.actor.load_state_dict(torch.load(args.weights))
"#,
    );
    let text = lint_preview_anywhere(d);
    assert_eq!(places(&text, "D010"), ["main.py:19:29"], "{text}");
    // A run script that passes the option makes that run: the loads it reaches are reported.
    write("run.sh", "#!/bin/sh\npython main.py --load_model models/best.pt --resume\n");
    let text = lint_preview_anywhere(d);
    assert_eq!(places(&text, "D010"), ["agent.py:12:36", "main.py:18:33", "main.py:19:29"], "{text}");
}

/// `policy.load(..)` on a name each branch binds to another class's instance (`if args.policy ==
/// "TD3": policy = TD3.TD3() else: policy = DDPG.DDPG()`) is a call of each class's method: under
/// an option off by default, every one of them is reached only there.
#[test]
fn a_call_on_a_name_several_classes_made_reaches_each() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    for class in ["TD3", "DDPG"] {
        write(
            &format!("{class}.py"),
            &format!(
                "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n\n\
                 class {class}:\n    def __init__(self):\n        self.actor = torch.nn.Linear(4, 2).to(device)\n\n    \
                 def load(self, path):\n        self.actor.load_state_dict(torch.load(path))\n"
            ),
        );
    }
    write(
        "main.py",
        r#"import argparse

import torch

import DDPG
import TD3

parser = argparse.ArgumentParser()
parser.add_argument("--policy", default="TD3")
parser.add_argument("--load_model", default="")
args = parser.parse_args()

if args.policy == "TD3":
    policy = TD3.TD3()
elif args.policy == "DDPG":
    policy = DDPG.DDPG()
if args.load_model != "":
    policy.load(args.load_model)
"#,
    );
    let text = lint_preview_anywhere(d);
    assert!(places(&text, "D010").is_empty(), "{text}");
    // Given by a run script, the option is a run: both loads are reached.
    write("run.sh", "python main.py --load_model default\n");
    let text = lint_preview_anywhere(d);
    assert_eq!(places(&text, "D010"), ["DDPG.py:11:36", "TD3.py:11:36"], "{text}");
}

/// A helper of another file the training loop reaches through `from utils import *`, given the
/// data of a packed sequence of the model's output, reads the device at every step; the batch
/// sizes `pack_padded_sequence` returns beside the data, and the lengths `pad_packed_sequence`
/// returns, are on the host.
#[test]
fn helpers_a_star_import_brings_are_followed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    write(
        "utils.py",
        r#"import torch


def accuracy(scores, targets, k):
    _, ind = scores.topk(k, 1, True, True)
    correct = ind.eq(targets.view(-1, 1).expand_as(ind))
    return correct.view(-1).float().sum().item() * (100.0 / targets.size(0))


def count(sizes):
    return sizes.sum().item()
"#,
    );
    write(
        "train.py",
        r#"import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from utils import *

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(loader, encoder, decoder, criterion, opt):
    for imgs, caps, lengths in loader:
        imgs = encoder(imgs.to(device))
        scores, caps_sorted = decoder(imgs, caps.to(device))
        scores, sizes = pack_padded_sequence(scores, lengths, batch_first=True)
        targets, _ = pack_padded_sequence(caps_sorted[:, 1:], lengths, batch_first=True)
        loss = criterion(scores, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        top5 = accuracy(scores, targets, 5)
        steps = count(sizes)
        padded = pad_packed_sequence(pack_padded_sequence(caps_sorted, lengths, batch_first=True))
        tokens = count(padded[1])
        print(top5, steps, tokens)
"#,
    );
    let text = lint_preview(d);
    assert_eq!(places(&text, "D005"), ["utils.py:7:12"], "{text}");
}

/// A top-level function or class nothing in the repository names (no file calls or imports it, no
/// configuration or document mentions it) is code no run reaches: its per-step reads are not
/// reported. In a project of one Python file nothing else could name its code, so all of it is.
#[test]
fn code_nothing_in_the_repository_names_is_not_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    let utils = r#"import torch


def train_epoch(model, opt, loader):
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())


def old_train_epoch(model, opt, loader):
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())


def evaluate(model, loader):
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        loss.backward()
        print(loss.item())
"#;
    write("utils.py", utils);
    write(
        "train.py",
        "import torch\n\nfrom utils import train_epoch\n\nmodel = torch.nn.Linear(4, 4).cuda()\n\
         opt = torch.optim.SGD(model.parameters(), lr=0.1)\ntrain_epoch(model, opt, [])\n",
    );
    write("README.md", "Check a model with `utils.evaluate(model, loader)`.\n");
    let run = || lint_preview(d);
    let text = run();
    let found = places(&text, "D005");
    assert_eq!(found, ["utils.py:10:15", "utils.py:26:15"], "{text}");
    // Alone, nothing could name the file's functions: every one is linted.
    std::fs::remove_file(d.join("train.py")).expect("remove");
    let text = run();
    assert_eq!(text.lines().filter(|l| l.contains(": D005 ")).count(), 3, "{text}");
}

/// A sampler a package re-exports (`from .sampler import Sampler` in its `__init__.py`) that no
/// run mentions is not reached, and neither is the solver only it uses; once a script uses the
/// sampler, both are.
#[test]
fn code_only_unreached_code_and_imports_name_is_not_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    std::fs::create_dir_all(d.join("diffusion")).expect("mkdir");
    write("diffusion/__init__.py", "from .sampler import Sampler\nfrom .ddim import DDIMSampler\n");
    write(
        "diffusion/solver.py",
        r#"import torch


class Solver:
    def steps(self, x, model, n):
        for t in torch.linspace(1.0, 0.0, n).tolist():
            x = model(x, torch.full((x.size(0),), t).to(x.device))
        return x
"#,
    );
    write(
        "diffusion/sampler.py",
        r#"from .solver import Solver


class Sampler:
    def sample(self, x, model):
        return Solver().steps(x, model, 50)
"#,
    );
    write(
        "diffusion/ddim.py",
        r#"import torch


class DDIMSampler:
    def sample(self, x, model, n):
        for t in range(n):
            x = model(x, torch.full((x.size(0),), t).to(x.device))
        return x
"#,
    );
    write(
        "sample.py",
        r#"import torch

from diffusion import DDIMSampler

model = torch.nn.Linear(4, 4).cuda()
x = DDIMSampler().sample(torch.randn(2, 4, device="cuda"), lambda x, t: model(x), 50)
"#,
    );
    let text = lint_preview(d);
    assert_eq!(places(&text, "D005"), ["diffusion/ddim.py:7:26"], "{text}");
    write(
        "sample.py",
        &std::fs::read_to_string(d.join("sample.py")).expect("read").replace("DDIMSampler", "Sampler"),
    );
    let text = lint_preview(d);
    assert_eq!(places(&text, "D005"), ["diffusion/solver.py:7:26"], "{text}");
}

/// A package's `__init__.py` offers what it imports to the users of a library: one under a folder
/// with a `setup.py`. The `setup.py` that builds a custom op in a folder of its own makes no
/// library of the packages beside it: a class they re-export that nothing uses stays unreached.
#[test]
fn only_the_packages_under_a_setup_file_offer_what_they_import() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| write_in(d, name, text);
    write("models/utils/__init__.py", "from .position import RelPosition\n");
    write(
        "models/utils/position.py",
        "import torch\nfrom torch import nn\n\n\nclass RelPosition(nn.Module):\n    def forward(self, x):\n        \
         return x + torch.arange(x.size(-1)).to(x.device)\n",
    );
    write("models/head.py", "from .utils import *\n\n\ndef build():\n    return None\n");
    write(
        "train.py",
        "import torch\n\nfrom models.head import build\n\nmodel = build()\nx = torch.zeros(2).cuda()\n",
    );
    write("ops/dcn/setup.py", "from setuptools import setup\n\nsetup(name=\"dcn\")\n");
    let report = lint_preview(d);
    assert!(places(&report, "D005").is_empty(), "{report}");
    // A library: its package offers the class to its users.
    write("setup.py", "from setuptools import setup\n\nsetup(name=\"models\")\n");
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["models/utils/position.py:7:20"], "{report}");
}

/// An application's file that nothing imports and that cannot run by itself (a vendored model
/// zoo beside the one model the application uses) is code no run reaches: its findings are
/// latent. Once it can run by itself (a `__main__` block), or the repository is a library (a
/// `setup.py` above it), it is reported.
#[test]
fn an_applications_files_nothing_imports_are_not_reached() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| write_in(d, name, text);
    let zoo = "import torch\nfrom torch import nn\n\n\nclass Retrieval(nn.Module):\n    def __init__(self):\n        \
               super().__init__()\n        self.proj = nn.Linear(4, 4)\n\n    def forward(self, x):\n        \
               mask = torch.ones(x.size(0)).to(x.device)\n        return self.proj(x) * mask[:, None]\n";
    write("models/retrieval.py", zoo);
    write(
        "models/captioner.py",
        "import torch\nfrom torch import nn\n\n\nclass Captioner(nn.Module):\n    def __init__(self):\n        \
         super().__init__()\n        self.proj = nn.Linear(4, 4)\n\n    def forward(self, x):\n        return self.proj(x)\n",
    );
    write(
        "app.py",
        "import torch\n\nfrom models.captioner import Captioner\n\nmodel = Captioner().cuda()\nprint(model(torch.zeros(2, 4).cuda()))\n",
    );
    let report = lint_preview(d);
    assert!(places(&report, "D005").is_empty(), "{report}");
    // Runs by itself: its own check is a run of its own.
    write(
        "models/retrieval.py",
        &format!("{zoo}\n\nif __name__ == \"__main__\":\n    print(Retrieval()(torch.zeros(2, 4)))\n"),
    );
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["models/retrieval.py:11:16"], "{report}");
    // A library's module is its users' to import.
    write("models/retrieval.py", zoo);
    write("setup.py", "from setuptools import setup\n\nsetup(name=\"models\")\n");
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["models/retrieval.py:11:16"], "{report}");
}

/// What makes a function look reached only on opt-in branches must not hide a default path the
/// lint does not see: a caller in a file that imports no torch (not analysed), a run script that
/// spells the option by another flag (`--use-gail` for `dest="gail"`), a configuration file that
/// sets it. (Short flags, script variables and locals that share an option's name are in the
/// options module's unit tests.)
#[test]
fn default_paths_the_lint_does_not_see_keep_their_findings() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    write(
        "trainer.py",
        "import torch\n\n\ndef train(epochs):\n    model = torch.nn.Linear(4, 1).cuda()\n    \
         opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for _ in range(epochs):\n        \
         x = torch.randn(8, 4, device=\"cuda\")\n        loss = model(x).mean()\n        opt.zero_grad()\n        \
         loss.backward()\n        opt.step()\n        print(loss.item())\n",
    );
    write(
        "sweep.py",
        "import argparse\n\nimport torch\n\nfrom trainer import train\n\np = argparse.ArgumentParser()\n\
         p.add_argument(\"--use-gail\", dest=\"gail\", action=\"store_true\")\nargs = p.parse_args()\n\
         if args.gail:\n    train(torch.cuda.device_count())\n",
    );
    let run = || lint_preview(d);
    // Only an opt-in call is seen: the function is taken for opt-in only.
    assert!(!run().contains("trainer.py:13"), "{}", run());
    // A run script passes the flag by its own spelling: a default run.
    write("run.sh", "python sweep.py --use-gail\n");
    assert!(run().contains("trainer.py:13:15: D005"), "{}", run());
    std::fs::remove_file(d.join("run.sh")).expect("remove");
    // So does a configuration file that sets it.
    write("config.yaml", "gail: true\n");
    assert!(run().contains("trainer.py:13:15: D005"), "{}", run());
    std::fs::remove_file(d.join("config.yaml")).expect("remove");
    // An entry point that imports no torch calls it on the default path.
    write(
        "main.py",
        "# The entry point: it only wires the pieces (torch lives in trainer).\nfrom trainer import train\n\ntrain(90)\n",
    );
    assert!(run().contains("trainer.py:13:15: D005"), "{}", run());
}

/// D002 and where a project runs: a test helper that checks for other accelerators (copied from a
/// library that runs everywhere) is no evidence that the project's code does, nor is a file copied
/// from Hugging Face's libraries (their workarounds for MPS come along); a file that talks
/// NCCL, launches Triton kernels, captures CUDA graphs or runs as a Ray actor given its own GPU is
/// built for CUDA, where
/// a bare `"cuda"` or `cuda:0` is its own GPU. A file of the project's own code that offers MPS
/// is evidence.
#[test]
fn cuda_built_files_and_test_helpers_say_where_the_code_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| write_in(d, name, text);
    write(
        "tests/common.py",
        "def device_name(acc):\n    if acc.device_name() == \"xpu\":\n        return \"xpu\"\n    return \"npu\"\n",
    );
    write("rotary.py", "import torch\n\n\ndef table(n):\n    return torch.arange(n).float().cuda()\n");
    write(
        "worker.py",
        r#"import ray
import torch


@ray.remote(num_gpus=1)
class Collector:
    def stats(self):
        return torch.cuda.memory_allocated(torch.device("cuda:0"))

    def buffer(self, n):
        return torch.zeros(n, device="cuda")
"#,
    );
    write(
        "sync.py",
        r#"import torch
import torch.distributed as dist


def setup(rank, world):
    dist.init_process_group(backend="nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)


def broadcast(n):
    t = torch.empty(n, device="cuda")
    dist.broadcast(t, 0)
    return t
"#,
    );
    let report = lint_preview(d);
    assert!(places(&report, "D002").is_empty(), "{report}");
    // A pipeline copied from Diffusers (its license header) brings its MPS workaround along:
    // no evidence either.
    write(
        "pipeline.py",
        "# Copyright 2024 The HuggingFace Team. All rights reserved.\nimport torch\n\n\ndef step(latents):\n    \
         if torch.backends.mps.is_available():\n        latents = latents.float()\n    return latents\n",
    );
    let report = lint_preview(d);
    assert!(places(&report, "D002").is_empty(), "{report}");
    // So does one whose header cites the repository it was copied from.
    write(
        "inpaint.py",
        "# From https://raw.githubusercontent.com/huggingface/diffusers/53377ef/examples/community/inpaint.py
         import torch


def dtype_for(sample):
    is_mps = sample.device.type == \"mps\"
             return torch.float32 if is_mps else torch.float64
",
    );
    let report = lint_preview(d);
    assert!(places(&report, "D002").is_empty(), "{report}");
    // An inference engine's model runner that captures CUDA graphs runs on CUDA alone.
    write(
        "runner.py",
        "import torch\n\n\ndef capture(model, n):\n    x = torch.zeros(n, device=\"cuda\")\n    \
         graph = torch.cuda.CUDAGraph()\n    with torch.cuda.graph(graph):\n        y = model(x)\n    return graph, x, y\n",
    );
    // The project's own code offering MPS: `rotary.py`'s `.cuda()` fails there.
    write("device.py", "import torch\n\nDEVICES = (\"cuda\", \"mps\")\n");
    let report = lint_preview(d);
    assert_eq!(places(&report, "D002"), ["rotary.py:5:12"], "{report}");
}

/// The `__main__` block of a module other files import from, which reads no command line, is the
/// module's own benchmark: its loop is no run of the project. A script other files import from
/// (`from ppo import Agent`) that parses options is still run as itself.
#[test]
fn a_library_modules_main_block_is_its_own_check() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    let module = r#"import torch
from torch import nn


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


if __name__ == "__main__":
    unet = UNet().to("cuda")
    opt = torch.optim.SGD(unet.parameters(), lr=0.1)
    for step in range(10):
        loss = unet(torch.randn(1, 4, 64, 64).cuda()).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, loss.item())
"#;
    write("unet.py", module);
    write("ppo.py", &module.replace("if __name__ == \"__main__\":\n", "if __name__ == \"__main__\":\n    import argparse\n\n    args = argparse.ArgumentParser().parse_args()\n"));
    write(
        "train.py",
        "import torch\n\nfrom ppo import UNet as Policy\nfrom unet import UNet\n\n\ndef build():\n    return UNet().cuda(), Policy().cuda()\n",
    );
    // A training script named for what it runs, configured by a file rather than a command
    // line (`from train import build_model` in `evaluate.py`): still run.
    write("train.py", &module.replace("if __name__ == \"__main__\":\n", "if __name__ == \"__main__\":\n    import yaml\n\n    cfg = yaml.safe_load(open(\"train.yaml\"))\n"));
    write(
        "evaluate.py",
        "from train import UNet\nfrom unet import UNet as Base\n\n\ndef load():\n    return UNet(), Base()\n",
    );
    let report = lint_preview(d);
    assert_eq!(
        places(&report, "D005"),
        ["ppo.py:21:21", "ppo.py:25:21", "train.py:21:21", "train.py:25:21"],
        "{report}"
    );
}

/// An instance kept on `self` that the model's own method makes (`self.criterion =
/// self.build_loss()`, `return DualLoss(self)`) is called at every forward pass: its `__call__`,
/// in another file, runs there. Where subclasses override the method to make one loss each, which
/// runs depends on the model a run builds: nothing is said.
#[test]
fn a_loss_a_models_own_method_makes_runs_in_its_forward() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    write(
        "losses.py",
        r#"import torch


class DualLoss:
    def __init__(self, model):
        self.device = next(model.parameters()).device

    def __call__(self, preds, batch):
        loss = preds.sum() * 0.0
        if (preds > 0).sum():
            loss = loss + preds.mean()
        return loss


class PoseLoss(DualLoss):
    def __call__(self, preds, batch):
        loss = preds.sum() * 0.0
        if preds.max() > 1:
            loss = loss + preds.mean()
        return loss
"#,
    );
    let model = r#"import torch
from torch import nn

from losses import DualLoss, PoseLoss


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.criterion = None

    def forward(self, x):
        if self.criterion is None:
            self.criterion = self.build_loss()
        return self.criterion(self.conv(x), None)

    def build_loss(self):
        return DualLoss(self)
"#;
    write("model.py", model);
    write("train.py", "import torch\n\nfrom model import Net\n\n\ndef build():\n    return Net().cuda()\n");
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["losses.py:10:12"], "{report}");
    // A subclass making another loss: which one runs is the run's choice.
    write(
        "model.py",
        &format!(
            "{model}\n\nclass PoseNet(Net):\n    def build_loss(self):\n        return PoseLoss(self)\n"
        ),
    );
    let report = lint_preview(d);
    assert!(places(&report, "D005").is_empty(), "{report}");
}

/// A script of its own beside others (a tutorial's chapters, one program each) runs where it
/// says: another chapter's `.cuda()` says nothing of it. A script that takes its model from a
/// module of the project runs where the project puts it.
#[test]
fn a_script_of_its_own_runs_where_it_says() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| write_in(d, name, text);
    let train = |device: &str| {
        format!(
            "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        \
             super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n    def forward(self, x):\n        \
             return self.fc(x)\n\n\ndef main():\n    net = Net(){device}\n    opt = torch.optim.Adam(net.parameters())\n    \
             for step in range(100):\n        loss = net(torch.randn(8, 4{arg})).sum()\n        opt.zero_grad()\n        \
             loss.backward()\n        opt.step()\n        print(loss.item())\n\n\nif __name__ == \"__main__\":\n    main()\n",
            arg = if device.is_empty() { "" } else { ", device=\"cuda\"" },
        )
    };
    write("chapter1/dqn.py", &train(""));
    write("chapter2/sac.py", &train(".cuda()"));
    // A script that runs its loop by calling its own function at the top level (no `__main__`
    // block) is a program of its own too.
    write("chapter3/pg.py", &train("").replace("if __name__ == \"__main__\":\n    main()\n", "main()\n"));
    write(
        "chapter4/a2c.py",
        &train("").replacen("import torch\n", "import sys\n\nimport torch\n", 1).replace(
            "if __name__ == \"__main__\":\n    main()\n",
            "try:\n    sys.exit(main())\nexcept KeyboardInterrupt:\n    pass\n",
        ),
    );
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["chapter2/sac.py:22:15"], "{report}");
    // Taking its network from a module of the project: on the device the project uses.
    write("chapter1/nets.py", "import torch.nn as nn\n\n\nclass Head(nn.Module):\n    pass\n");
    write(
        "chapter1/dqn.py",
        &train("").replacen("import torch\n", "import torch\nfrom nets import Head\n", 1),
    );
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["chapter1/dqn.py:23:15", "chapter2/sac.py:22:15"], "{report}");
}

/// A distribution built at every step from tensors on the device checks its arguments on the host,
/// until some file of the project turns the checks off (`set_default_validate_args(False)` in
/// the entry script, spaced as its author spaced it): then no file's distributions are reported.
#[test]
fn distributions_are_checked_until_the_project_turns_checks_off() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write_in(
        d,
        "agent/policy.py",
        r#"import torch
from torch import nn
from torch.distributions import Normal


class Policy(nn.Module):
    def __init__(self, n, k):
        super().__init__()
        self.mu = nn.Linear(n, k)
        self.log_std = nn.Parameter(torch.zeros(k))

    def forward(self, x):
        return Normal(self.mu(x), self.log_std.exp())
"#,
    );
    let train = r#"import torch

from agent.policy import Policy


def main(loader):
    model = Policy(8, 2).cuda()
    opt = torch.optim.Adam(model.parameters())
    for x, a in loader:
        loss = -model(x.cuda()).log_prob(a.cuda()).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"#;
    write_in(d, "train.py", train);
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["agent/policy.py:13:16"], "{report}");
    assert!(report.contains("`Normal(..)` in `forward` waits for the device"), "{report}");
    // The entry script with `prelude` before its `main`.
    let with_prelude = |prelude: &str| {
        write_in(
            d,
            "train.py",
            &train.replace("def main(loader):", &format!("{prelude}\n\n\ndef main(loader):")),
        );
        lint_preview(d)
    };
    let report = with_prelude("torch.distributions.Distribution.set_default_validate_args( False )");
    assert!(places(&report, "D005").is_empty(), "{report}");
    // Spelled with the parameter's name; a comment that mentions it, or a test that turns the
    // checks off for itself, says nothing of the training code.
    let report = with_prelude(
        "from torch.distributions import Distribution\n\nDistribution.set_default_validate_args(value=False)",
    );
    assert!(places(&report, "D005").is_empty(), "{report}");
    with_prelude("# (set_default_validate_args(False) would hide bugs)");
    write_in(
        d,
        "tests/test_policy.py",
        "import torch\n\ntorch.distributions.Distribution.set_default_validate_args(False)\n\n\ndef test_policy():\n    pass\n",
    );
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["agent/policy.py:13:16"], "{report}");
}

/// A plain meter of another file (star-imported, as `from utils import *` does) that keeps what its
/// `update` is given holds the device's tensors when a training loop gives it some: reading its
/// fields at every step waits. A library module that fills a table at import time with a helper
/// of its own that loops is not a program (its hard-coded device is still reported).
#[test]
fn meters_of_other_files_and_library_tables() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write_in(
        d,
        "utils.py",
        "class AverageMeter(object):\n    def __init__(self):\n        self.val = 0\n        self.sum = 0\n        \
         self.count = 0\n        self.avg = 0\n\n    def update(self, val, n=1):\n        self.val = val\n        \
         self.sum += val * n\n        self.count += n\n        self.avg = self.sum / self.count\n",
    );
    write_in(
        d,
        "train.py",
        "import torch\n\nfrom utils import *\n\n\ndef train_epoch(model, loader, criterion, optimizer):\n    \
         losses = AverageMeter()\n    for inputs, targets in loader:\n        inputs, targets = inputs.cuda(), \
         targets.cuda()\n        loss = criterion(model(inputs), targets)\n        losses.update(loss.data, \
         inputs.size(0))\n        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n        \
         print(losses.val.item())\n",
    );
    write_in(
        d,
        "mylib/ops.py",
        "import torch\n\n\ndef _squares(n):\n    table = {}\n    for i in range(n):\n        table[i] = i * i\n    \
         return table\n\n\nSQUARES = _squares(16)\n\n\ndef scale(x, w):\n    return x.to(torch.device(\"cuda\", 1)) * w\n\n\n\
         def pick():\n    return torch.device(\"mps\" if torch.backends.mps.is_available() else \"cpu\")\n",
    );
    write_in(d, "mylib/__init__.py", "");
    // A meter that is a module (a buffer-like state of a model) is not a plain meter: not
    // followed, as in its own file.
    write_in(
        d,
        "smooth.py",
        "import torch.nn as nn\n\n\nclass Smoothed(nn.Module):\n    def update(self, val):\n        self.val = val\n",
    );
    write_in(
        d,
        "train_smooth.py",
        "import torch\n\nfrom smooth import Smoothed\n\n\ndef train(model, loader, optimizer):\n    s = Smoothed()\n    \
         for x in loader:\n        loss = model(x.cuda()).sum()\n        optimizer.zero_grad()\n        loss.backward()\n        \
         optimizer.step()\n        s.update(loss.detach())\n        print(s.val.item())\n",
    );
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["train.py:15:15"], "{report}");
    assert_eq!(places(&report, "D002"), ["mylib/ops.py:15:30"], "{report}");
}

/// A method a model of the project inherits from a base class of another file
/// (`RNN_VAE(VAE_Baseline)`, `VAE_Baseline.compute_all_losses`) runs at every step when the
/// training loop calls it on an instance, whether the class comes through `from lib.rnn import *`
/// or a factory that returns it moved (`LatentODE(..).to(device)`), in one branch of several. A
/// base from outside the project, which may define the method first, leaves it unknown; of several
/// definitions, the one Python's method resolution order puts first runs.
#[test]
fn methods_inherited_from_bases_of_other_files_are_followed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).expect("write");
    std::fs::create_dir_all(d.join("lib")).expect("mkdir");
    write("lib/__init__.py", "");
    write(
        "lib/base_models.py",
        "import torch\nfrom torch import nn\n\n\nclass VAE_Baseline(nn.Module):\n    def __init__(self, dim):\n        \
         super().__init__()\n        self.lin = nn.Linear(dim, dim)\n\n    def compute_all_losses(self, batch):\n        \
         loss = self.lin(batch).pow(2).mean()\n        return {\"loss\": loss, \"mse\": loss.item()}\n",
    );
    let rnn = "from lib.base_models import VAE_Baseline\n\n\nclass RNN_VAE(VAE_Baseline):\n    pass\n";
    write("lib/rnn_baselines.py", rnn);
    write(
        "lib/latent_ode.py",
        "from lib.base_models import VAE_Baseline\n\n\nclass LatentODE(VAE_Baseline):\n    pass\n",
    );
    write(
        "lib/create_latent_ode_model.py",
        "from lib.latent_ode import LatentODE\n\n\ndef create_LatentODE_model(dim, device):\n    \
         model = LatentODE(dim).to(device)\n    return model\n",
    );
    let script = "import argparse\n\nimport torch\n\nfrom lib.rnn_baselines import *\n\
                  from lib.create_latent_ode_model import create_LatentODE_model\n\n\
                  parser = argparse.ArgumentParser()\nparser.add_argument(\"--rnn-vae\", action=\"store_true\")\n\
                  args = parser.parse_args()\ndevice = torch.device(\"cuda:0\" if torch.cuda.is_available() else \"cpu\")\n\n\
                  if __name__ == \"__main__\":\n    if args.rnn_vae:\n        model = RNN_VAE(4).to(device)\n    else:\n        \
                  model = create_LatentODE_model(4, device)\n    optimizer = torch.optim.Adamax(model.parameters())\n    \
                  for itr in range(1, 1000):\n        optimizer.zero_grad()\n        batch = torch.randn(8, 4, device=device)\n        \
                  train_res = model.compute_all_losses(batch)\n        train_res[\"loss\"].backward()\n        optimizer.step()\n";
    let run = || {
        stdout(&devcheck(
            &["--color", "never", "lint", "--format", "concise", "--isolated", "--preview", "."],
            d,
        ))
    };
    let expected = "lib/base_models.py:12:38: D005 [warning] `.item()` in `compute_all_losses` waits for the device at every step: `VAE_Baseline.compute_all_losses` is called in a loop at run_models.py:";
    // The factory's class, in the branch the defaults take.
    write("run_models.py", script);
    assert!(run().contains(expected), "{}", run());
    // The star-imported class, alone.
    write(
        "run_models.py",
        &script.replace("    else:\n        model = create_LatentODE_model(4, device)\n", ""),
    );
    assert!(run().contains(expected), "{}", run());
    // A base from outside the project first in the bases: which `compute_all_losses` runs is not known.
    write(
        "lib/rnn_baselines.py",
        &rnn.replace(
            "class RNN_VAE(VAE_Baseline):",
            "from somelib import Mixin\n\n\nclass RNN_VAE(Mixin, VAE_Baseline):",
        ),
    );
    assert!(!run().contains("D005"), "{}", run());
    // Or further up, behind a base of the project.
    write(
        "lib/rnn_baselines.py",
        &rnn.replace(
            "class RNN_VAE(VAE_Baseline):",
            "from somelib import Mixin\n\n\nclass Wrapped(Mixin):\n    pass\n\n\nclass RNN_VAE(Wrapped, VAE_Baseline):",
        ),
    );
    assert!(!run().contains("D005"), "{}", run());
    // A diamond: Python's order runs the override of the second base, not the common base's.
    write(
        "lib/rnn_baselines.py",
        &rnn.replace(
            "class RNN_VAE(VAE_Baseline):",
            "class Logged(VAE_Baseline):\n    pass\n\n\nclass Quiet(VAE_Baseline):\n    def compute_all_losses(self, batch):\n        \
             return {\"loss\": self.lin(batch).pow(2).mean()}\n\n\nclass RNN_VAE(Logged, Quiet):",
        ),
    );
    assert!(!run().contains("D005"), "{}", run());
    // A class attribute of the name overrides the method: what it holds is not followed.
    write(
        "lib/rnn_baselines.py",
        &rnn.replace("    pass\n", "    compute_all_losses = VAE_Baseline.__call__\n"),
    );
    assert!(!run().contains("D005"), "{}", run());
    // Also with an annotation.
    write(
        "lib/rnn_baselines.py",
        &rnn.replace("    pass\n", "    compute_all_losses: object = VAE_Baseline.__call__\n"),
    );
    assert!(!run().contains("D005"), "{}", run());
}

/// A method of another file that takes one training step (`Agent.learn`: `.backward()` and an
/// optimizer's `.step()`) makes the loop that calls it a loop of training steps, however often a
/// counter lets it run (`if T % replay_frequency == 0: dqn.learn(mem)`), also where the loop puts
/// the agent in evaluation mode now and then; not under a flag that is off by default.
#[test]
fn methods_of_other_files_that_take_a_training_step_make_a_step_loop() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write_in(
        d,
        "agent.py",
        "import torch\nfrom torch import nn, optim\n\n\nclass Agent:\n    def __init__(self, device):\n        \
         self.net = nn.Linear(4, 8).to(device)\n        self.optimiser = optim.Adam(self.net.parameters())\n        \
         self.device = device\n\n    def learn(self, mem):\n        q = self.net(torch.randn(32, 4, device=self.device))\n        \
         b = torch.rand(32, 8, device=self.device) * 7\n        l = b.floor().long()\n        u = b.ceil().long()\n        \
         l[(u > 0) * (l == u)] -= 1\n        \
         loss = q.mean() + l.float().mean()\n        self.optimiser.zero_grad()\n        loss.backward()\n        \
         self.optimiser.step()\n\n    def train(self):\n        self.net.train()\n\n    def eval(self):\n        \
         self.net.eval()\n",
    );
    let main = "import argparse\n\nimport torch\nfrom tqdm import trange\n\nfrom agent import Agent\n\n\
                parser = argparse.ArgumentParser()\nparser.add_argument(\"--replay-frequency\", type=int, default=4)\n\
                parser.add_argument(\"--learn\", action=\"store_true\")\nargs = parser.parse_args()\n\
                device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\ndqn = Agent(device)\n\
                for T in trange(1, 10000):\n    if T % args.replay_frequency == 0:\n        dqn.learn(None)\n    \
                if T % 1000 == 0:\n        dqn.eval()\n        print(T)\n        dqn.train()\n";
    write_in(d, "main.py", main);
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["agent.py:16:9"], "{report}");
    // Behind a flag that is off by default, it is not a step of a run.
    write_in(d, "main.py", &main.replace("    if T % args.replay_frequency == 0:", "    if args.learn:"));
    let report = lint_preview(d);
    assert!(!report.contains("D005"), "{report}");
}

/// Evaluation code is not a training step: a helper without a loop of its own in a file named for
/// evaluation (`val.py`'s `process_batch`, once per image of a validation batch). The same helper
/// in a file named for training, or in one that trains too, is reported.
#[test]
fn helpers_of_evaluation_files_are_evaluation() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let val = "import numpy as np\nimport torch\n\n\ndef process_batch(detections, labels, iouv):\n    \
               thresholds = np.linspace(0.5, 0.95, 10).astype(np.float32)\n    \
               return detections[:, None] > torch.tensor(thresholds, device=iouv.device)\n\n\n\
               def run(model, loader, device):\n    model.eval()\n    iouv = torch.linspace(0.5, 0.95, 10, device=device)\n    \
               stats = []\n    for im, targets in loader:\n        preds = model(im.to(device))\n        \
               for si, pred in enumerate(preds):\n            stats.append(process_batch(pred, targets[si], iouv))\n    \
               return stats\n\n\nif __name__ == \"__main__\":\n    run(torch.load(\"model.pt\"), [], torch.device(\"cuda\"))\n";
    write_in(d, "val.py", val);
    let report = lint_preview(d);
    assert!(!report.contains("D005"), "{report}");
    // Controls: the helper in a file named for training.
    std::fs::remove_file(d.join("val.py")).expect("remove");
    write_in(d, "train_steps.py", val);
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["train_steps.py:7:34"], "{report}");
    // Or in a file named for testing that trains too (an agent's script for both).
    std::fs::remove_file(d.join("train_steps.py")).expect("remove");
    write_in(
        d,
        "test_agent.py",
        &val.replace(
            "    return stats\n",
            "    return stats\n\n\ndef update(loss, optimizer):\n    optimizer.zero_grad()\n    loss.backward()\n    \
             optimizer.step()\n",
        ),
    );
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["test_agent.py:7:34"], "{report}");
}

/// A read whose value is also handed to a call on a branch a run leaves off
/// (`if vis is not None: vis.vis_scalar(.., np_loss)` where `vis` is made only with
/// `--enable_vis`, off by default) is not needed by the run: it is reported. Handed to the call
/// on every run, it is taken as needed.
#[test]
fn uses_on_branches_a_run_leaves_off_do_not_make_a_read_needed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let script = "import argparse\n\nimport torch\n\nfrom visualizer import Visualizer\n\n\ndef main():\n    \
                  parser = argparse.ArgumentParser()\n    parser.add_argument(\"--enable_vis\", action=\"store_true\", default=False)\n    \
                  opts = parser.parse_args()\n    vis = Visualizer() if opts.enable_vis else None\n    \
                  device = torch.device(\"cuda\")\n    model = torch.nn.Linear(4, 2).to(device)\n    \
                  optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    interval_loss = 0\n    \
                  for i, (x, y) in enumerate(torch.load(\"data.pt\")):\n        \
                  loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))\n        \
                  optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n        \
                  np_loss = loss.detach().cpu().numpy()\n        interval_loss += np_loss\n        \
                  if vis is not None:\n            vis.vis_scalar(\"Loss\", i, np_loss)\n        \
                  if i % 10 == 0:\n            print(interval_loss / 10)\n            interval_loss = 0.0\n\n\n\
                  if __name__ == \"__main__\":\n    main()\n";
    write_in(d, "visualizer.py", "class Visualizer:\n    def vis_scalar(self, name, x, y):\n        pass\n");
    write_in(d, "main.py", script);
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["main.py:22:19"], "{report}");
    write_in(
        d,
        "main.py",
        &script.replace(
            "        if vis is not None:\n            vis.vis_scalar",
            "        if True:\n            vis.vis_scalar",
        ),
    );
    let report = lint_preview(d);
    assert!(!report.contains("D005"), "{report}");
}

/// A trainer of another file whose step methods hand the loss to a method their base class
/// defines (`EncDecTrainer.mt_step` → `self.optimize(loss)`, which calls `.backward()` and steps
/// each optimizer in a loop over them) takes a training step each time: the loops calling it
/// are step loops, and what it reads from the batch a helper of the project moved to the device
/// (`x, lengths = to_cuda(x, lengths)`) is read at every step. The package is reached both as
/// `xlm/` and through a link `src -> xlm`: it is linted under its own path, which its imports name.
#[cfg(unix)]
#[test]
fn step_methods_through_a_base_class_and_a_moving_helper_of_another_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write_in(d, "xlm/__init__.py", "");
    write_in(
        d,
        "xlm/utils.py",
        "def to_cuda(*args):\n    return [None if x is None else x.cuda() for x in args]\n",
    );
    write_in(
        d,
        "xlm/trainer.py",
        "import torch\n\nfrom .utils import to_cuda\n\n\nclass Trainer(object):\n    \
         def __init__(self, data, params):\n        self.data = data\n        self.stats = {\"words\": 0}\n        \
         self.optimizers = {}\n\n    def optimize(self, loss):\n        \
         optimizers = [self.optimizers[k] for k in self.optimizers]\n        for optimizer in optimizers:\n            \
         optimizer.zero_grad()\n        loss.backward()\n        for optimizer in optimizers:\n            \
         optimizer.step()\n\n\nclass EncDecTrainer(Trainer):\n    \
         def __init__(self, encoder, data, params):\n        super().__init__(data, params)\n        \
         self.encoder = encoder\n        self.optimizers = {\"encoder\": torch.optim.Adam(encoder.parameters())}\n\n    \
         def mt_step(self, lang):\n        x, lengths = self.data[lang]\n        \
         x, lengths = to_cuda(x, lengths)\n        loss = self.encoder(x, lengths).mean()\n        \
         self.optimize(loss)\n        self.stats[\"words\"] += (lengths - 1).sum().item()\n",
    );
    write_in(
        d,
        "train.py",
        "import torch\n\nfrom xlm.trainer import EncDecTrainer\n\n\ndef main(params, data):\n    \
         encoder = torch.nn.Linear(8, 8).cuda()\n    trainer = EncDecTrainer(encoder, data, params)\n    \
         for _ in range(params.max_epoch):\n        for lang in params.langs:\n            trainer.mt_step(lang)\n",
    );
    std::os::unix::fs::symlink("xlm", d.join("src")).expect("symlink");
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["xlm/trainer.py:32:32"], "{report}");
    // Controls: a helper that keeps the batch where it is; a base method that does not step.
    write_in(d, "xlm/utils.py", "def to_cuda(*args):\n    return [x for x in args]\n");
    let report = lint_preview(d);
    assert!(!report.contains("D005"), "{report}");
    write_in(
        d,
        "xlm/utils.py",
        "def to_cuda(*args):\n    return [None if x is None else x.cuda() for x in args]\n",
    );
    let trainer = std::fs::read_to_string(d.join("xlm/trainer.py")).expect("read");
    write_in(d, "xlm/trainer.py", &trainer.replace("            optimizer.step()\n", "            pass\n"));
    let report = lint_preview(d);
    assert!(!report.contains("D005"), "{report}");
}

/// A helper of another file that makes its result on the host at each call (RAFT's and GMFlow's
/// `coords_grid`: `torch.meshgrid(torch.arange(h), torch.arange(w))`, stacked and repeated, moved
/// only when it is given a device) and whose result the forward pass moves (`coords_grid(b, h,
/// w).to(x.device)`) copies it from the host at every pass; reported at the call, where the
/// device can be handed over. Given the device, or a helper of data (`torch.tensor(values)`), it
/// is not.
#[test]
fn helpers_that_make_their_result_on_the_host_are_copies_at_each_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write_in(
        d,
        "flow/geometry.py",
        "import torch\n\n\ndef coords_grid(b, h, w, homogeneous=False, device=None):\n    \
         y, x = torch.meshgrid(torch.arange(h), torch.arange(w))\n    stacks = [x, y]\n    if homogeneous:\n        \
         ones = torch.ones_like(x)\n        stacks.append(ones)\n    grid = torch.stack(stacks, dim=0).float()\n    \
         grid = grid[None].repeat(b, 1, 1, 1)\n    if device is not None:\n        grid = grid.to(device)\n    \
         return grid\n\n\ndef scales(values):\n    return torch.tensor(values).float()\n",
    );
    write_in(d, "flow/__init__.py", "");
    let model = "import torch\nfrom torch import nn\n\nfrom flow.geometry import coords_grid, scales\n\n\n\
                 class Flow(nn.Module):\n    def __init__(self):\n        super().__init__()\n        \
                 self.proj = nn.Conv2d(3, 2, 1)\n\n    def forward(self, x):\n        b, c, h, w = x.shape\n        \
                 grid = coords_grid(b, h, w).to(x.device)\n        \
                 s = scales([h, w]).to(x.device)\n        return self.proj(x) + grid * s[0]\n\n\n\
                 def main(loader):\n    model = Flow().cuda()\n    opt = torch.optim.Adam(model.parameters())\n    \
                 for x in loader:\n        loss = model(x.cuda()).mean()\n        opt.zero_grad()\n        \
                 loss.backward()\n        opt.step()\n\n\nif __name__ == \"__main__\":\n    main(torch.load(\"x.pt\"))\n";
    write_in(d, "train.py", model);
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["train.py:14:16"], "{report}");
    assert!(report.contains("`coords_grid(..).to(..)` makes a tensor on the host"), "{report}");
    write_in(
        d,
        "train.py",
        &model.replace("coords_grid(b, h, w).to(x.device)", "coords_grid(b, h, w, device=x.device)"),
    );
    let report = lint_preview(d);
    assert!(!report.contains("D005"), "{report}");
}

/// A package reached both through a link and directly is linted under the name the project's
/// imports give it: the link where the imports name the link (`mypkg -> mypkg_v2`, `from
/// mypkg.meter import count_words`), so the helper's callers are still found.
#[cfg(unix)]
#[test]
fn a_package_behind_a_link_is_linted_under_the_name_its_imports_use() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write_in(d, "mypkg_v2/__init__.py", "");
    write_in(
        d,
        "mypkg_v2/meter.py",
        "import torch\n\n\ndef count_words(lengths):\n    return lengths.sum().item()\n",
    );
    write_in(
        d,
        "train.py",
        "import torch\n\nfrom mypkg.meter import count_words\n\n\ndef main(loader):\n    \
         model = torch.nn.Linear(8, 8).cuda()\n    opt = torch.optim.Adam(model.parameters())\n    words = 0\n    \
         for x, lengths in loader:\n        x, lengths = x.cuda(), lengths.cuda()\n        loss = model(x).mean()\n        \
         opt.zero_grad()\n        loss.backward()\n        opt.step()\n        words += count_words(lengths)\n    \
         return words\n",
    );
    std::os::unix::fs::symlink("mypkg_v2", d.join("mypkg")).expect("symlink");
    let report = lint_preview(d);
    assert_eq!(places(&report, "D005"), ["mypkg/meter.py:5:12"], "{report}");
}
