//! `devcheck` against this round's red team: `--fix` on Python (fixes that must compile and keep
//! working code working), concurrent edits while `--fix` writes, hard and symbolic links, special
//! files where a configuration or a checkpoint is expected, Python files built to take the parser's
//! time or memory, control bytes in every error path, and the smaller cases (old Mac line
//! endings, odd names, huge SARIF). Every case runs the binary under a time bound (a hang fails
//! the test) and, where memory is the point, an address-space limit; the files on disk are
//! asserted byte for byte afterwards.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common;
use common::{stderr, stdout};
use std::time::{Duration, Instant};

/// Runs `devcheck` with `args` in `cwd`; fails the test if it runs longer than `seconds`, and
/// limits its address space to `memory` bytes when given. `lint` runs with `--preview`: these
/// tests are about hostile input, not about which rules are on by default.
fn run_bounded(args: &[&str], cwd: &Path, seconds: u64, memory: Option<u64>, env: &[(&str, &str)]) -> Output {
    let mut args = args.to_vec();
    if args.first() == Some(&"lint") && !args.contains(&"--preview") {
        args.insert(1, "--preview");
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_devcheck"));
    command
        .args(["--color", "never"])
        .args(&args)
        .current_dir(cwd)
        .env("COLUMNS", "100")
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    if let Some(bytes) = memory {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: setrlimit is async-signal-safe and touches only the child's limits.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = command.spawn().expect("the devcheck binary runs");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("devcheck {args:?} ran longer than {seconds} s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    }
}

fn devcheck(args: &[&str], cwd: &Path) -> Output {
    run_bounded(args, cwd, 120, None, &[])
}

fn write(path: impl AsRef<Path>, text: impl AsRef<[u8]>) {
    let path = path.as_ref();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
}

fn read(path: impl AsRef<Path>) -> String {
    String::from_utf8(std::fs::read(path).expect("read back")).expect("UTF-8")
}

fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().to_path_buf();
    (dir, path)
}

/// A pinned DataLoader's batches moved blocking, `non_blocking` written out as `False`.
const PINNED: &str = "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(ds, dev):\n    \
    loader = DataLoader(ds, batch_size=4, pin_memory=True)\n    for xb, yb in loader:\n        \
    a = xb.to(dev, non_blocking=False)\n        \
    b = yb.to(dev, torch.float16, False)\n        \
    c = xb.cuda(0, False)\n        \
    d = yb.to(dev)\n";

#[test]
fn the_non_blocking_fix_sets_what_is_there_and_never_repeats_it() {
    let (_dir, root) = temp();
    write(root.join("train.py"), PINNED);
    let fix = ["lint", "--isolated", "--preview", "--select", "D009", "--fix", "--format", "concise", "."];
    let out = devcheck(&fix, &root);
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    let fixed = PINNED
        .replace("non_blocking=False", "non_blocking=True")
        .replace("torch.float16, False", "torch.float16, True")
        .replace("cuda(0, False)", "cuda(0, True)")
        .replace("yb.to(dev)", "yb.to(dev, non_blocking=True)");
    assert_eq!(read(root.join("train.py")), fixed);
    // `yb` moved blocking twice in one function is one finding with two places.
    assert_eq!(stderr(&out), "devcheck: train.py: fixed 3 findings\ndevcheck: fixed 3 findings in 1 file\n");
    // A second run has nothing to do and changes nothing.
    let again = devcheck(&fix, &root);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(stderr(&again), "devcheck: fixed 0 findings in 0 files, 1 file with nothing to fix\n");
    assert_eq!(read(root.join("train.py")), fixed);
}

/// The file that once got `non_blocking=False, non_blocking=True, non_blocking=True`, fixed with
/// `D000` turned off in every way a user can: the result compiles (a clean re-lint, `D000` on).
#[test]
fn no_way_of_ignoring_d000_lets_a_broken_fix_through() {
    let ways: [(&str, &[&str], Option<&str>); 4] = [
        ("flag", &["--ignore", "D000"], None),
        ("config", &["--config", "devcheck.toml"], Some("[lint]\nignore = [\"D000\"]\npreview = true\n")),
        (
            "per-file",
            &["--config", "devcheck.toml"],
            Some("[lint]\npreview = true\n[lint.per-file-ignores]\n\"*.py\" = [\"D000\"]\n"),
        ),
        ("comment", &[], None),
    ];
    for (name, flags, config) in ways {
        let (_dir, root) = temp();
        let text = if name == "comment" {
            format!("# devcheck: ignore-file[D000]\n{PINNED}")
        } else {
            PINNED.to_string()
        };
        write(root.join("train.py"), &text);
        if let Some(config) = config {
            write(root.join("devcheck.toml"), config);
        }
        let mut args = vec!["lint", "--preview", "--select", "D000,D009", "--fix"];
        if config.is_none() {
            args.insert(1, "--isolated");
        }
        args.extend_from_slice(flags);
        args.push("train.py");
        let out = devcheck(&args, &root);
        assert_eq!(out.status.code(), Some(0), "{name}: {}{}", stdout(&out), stderr(&out));
        let fixed = read(root.join("train.py"));
        assert_eq!(fixed.matches("non_blocking").count(), 2, "{name}: {fixed}");
        let check = devcheck(&["lint", "--isolated", "--select", "D000", "train.py"], &root);
        assert_eq!(check.status.code(), Some(0), "{name}: {}", stdout(&check));
    }
}

#[test]
fn fixes_keep_working_code_working() {
    let (_dir, root) = temp();
    let model = "import numpy as np\nimport torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    \
        def __init__(self):\n        super().__init__()\n        self.__scale = torch.ones(3)\n\n    \
        def forward(self, x: torch.Tensor):\n        a = np.zeros(3)\n        t = torch.from_numpy(a)\n        \
        return x * t * self.__scale\n";
    write(root.join("model.py"), model);
    let train = "import torch\n\n\ndef train(model, loader):\n    for x in loader:\n        model(x).backward()\n        \
        if x is None:\n            torch.cuda.empty_cache()\n        with torch.no_grad():\n            \
        torch.cuda.empty_cache()\n        while True: torch.cuda.empty_cache(); torch.cuda.empty_cache()\n";
    write(root.join("train.py"), train);
    let out = devcheck(
        &["lint", "--isolated", "--preview", "--fix", "--unsafe-fixes", "--format", "concise", "."],
        &root,
    );
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    // The buffer has the name Python stores `self.__scale` under; `from_numpy` takes no device.
    assert_eq!(
        read(root.join("model.py")),
        model
            .replace(
                "self.__scale = torch.ones(3)",
                "self.register_buffer(\"_M__scale\", torch.ones(3), persistent=False)"
            )
            .replace("torch.from_numpy(a)", "torch.from_numpy(a).to(x.device)")
    );
    // A block the fix empties keeps a `pass`.
    assert_eq!(
        read(root.join("train.py")),
        "import torch\n\n\ndef train(model, loader):\n    for x in loader:\n        model(x).backward()\n        \
         if x is None:\n            pass\n        with torch.no_grad():\n            pass\n        \
         while True: pass; pass\n"
    );
    assert!(!stderr(&out).contains("bug in a fix"), "{}", stderr(&out));
}

/// A Rust forward pass with one D001 finding whose fix is safe, and the file after `--fix`.
const RUST_MODEL: &str = "use candle_core::{Device, Tensor};\n\n\
    pub fn forward(xs: &Tensor) -> candle_core::Result<Tensor> {\n\
    \x20   Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu)?.add(xs)\n}\n";
const RUST_FIXED: &str = "use candle_core::{Device, Tensor};\n\n\
    pub fn forward(xs: &Tensor) -> candle_core::Result<Tensor> {\n\
    \x20   Tensor::zeros(3, candle_core::DType::F32, xs.device())?.add(xs)\n}\n";

/// Another program appends lines (open, write, close: what `echo >> file` does) while `--fix`
/// rewrites the file, 200 times: no appended byte is ever lost, and they stay in order.
#[test]
fn appends_made_while_fix_writes_are_never_lost() {
    let (_dir, root) = temp();
    let path = root.join("model.rs");
    let (mut fixed_runs, mut refused_runs) = (0, 0);
    for run in 0..200 {
        write(&path, RUST_MODEL);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let appender = {
            let (stop, path) = (stop.clone(), path.clone());
            std::thread::spawn(move || {
                let mut lines = Vec::new();
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 3 {
                    let line = format!("// appended {run}.{n}\n");
                    let mut f = std::fs::OpenOptions::new().append(true).open(&path).expect("open to append");
                    f.write_all(line.as_bytes()).expect("append");
                    drop(f);
                    lines.push(line);
                    n += 1;
                    // Now and then, at varying gaps: some runs find the file still as they
                    // read it and swap, with appends arriving around the swap.
                    std::thread::sleep(Duration::from_micros(((run * 7919 + n * 104_729) % 6_000) as u64));
                }
                lines
            })
        };
        let out = devcheck(&["lint", "--isolated", "--fix", "--format", "concise", "model.rs"], &root);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let appended: String = appender.join().expect("appender").concat();
        let now = read(&path);
        if now == format!("{RUST_FIXED}{appended}") {
            fixed_runs += 1;
        } else {
            assert_eq!(now, format!("{RUST_MODEL}{appended}"), "run {run}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("the file changed on disk since it was read")
                    || stderr(&out).contains("another program has the file open"),
                "run {run}: {}",
                stderr(&out)
            );
            refused_runs += 1;
        }
    }
    eprintln!("{fixed_runs} runs fixed the file, {refused_runs} left it to the other program");
    // Both outcomes happen: the swap itself is raced, not only the read.
    assert!(fixed_runs > 0 && refused_runs > 0, "{fixed_runs} fixed, {refused_runs} refused");
}

#[cfg(unix)]
#[test]
fn a_hard_linked_file_is_not_split() {
    let (_dir, root) = temp();
    write(root.join("src/model.rs"), RUST_MODEL);
    std::fs::hard_link(root.join("src/model.rs"), root.join("other-name.rs")).expect("link");
    let out = devcheck(&["lint", "--isolated", "--fix", "--format", "concise", "src"], &root);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(read(root.join("src/model.rs")), RUST_MODEL);
    assert_eq!(read(root.join("other-name.rs")), RUST_MODEL);
    assert!(
        stderr(&out).starts_with(
            "devcheck: src/model.rs: not fixed: could not write it: it has 2 hard links: a new file would split \
             them (the other names would keep the old text); the file is unchanged\n"
        ),
        "{}",
        stderr(&out)
    );
}

#[cfg(unix)]
#[test]
fn a_link_out_of_the_named_paths_is_linted_not_written() {
    let (_dir, root) = temp();
    write(root.join("outside/model.rs"), RUST_MODEL);
    write(root.join("project/src/own.rs"), RUST_MODEL);
    std::os::unix::fs::symlink("../../outside/model.rs", root.join("project/src/linked.rs"))
        .expect("symlink");
    let out = devcheck(&["lint", "--isolated", "--fix", "--format", "concise", "project"], &root.clone());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(read(root.join("outside/model.rs")), RUST_MODEL);
    assert_eq!(read(root.join("project/src/own.rs")), RUST_FIXED);
    assert!(stderr(&out).contains("project/src/linked.rs: not fixed: it is a link to `"), "{}", stderr(&out));
    assert!(stderr(&out).contains("outside/model.rs`, outside the paths given; name that file to fix it"));
    // Named, it is fixed (through the link, which stays a link).
    let named = devcheck(&["lint", "--isolated", "--fix", "project/src/linked.rs"], &root);
    assert_eq!(named.status.code(), Some(0), "{}", stderr(&named));
    assert_eq!(read(root.join("outside/model.rs")), RUST_FIXED);
    assert!(
        std::fs::symlink_metadata(root.join("project/src/linked.rs"))
            .expect("lstat")
            .file_type()
            .is_symlink()
    );
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().expect("UTF-8 path")).expect("no NUL");
    // SAFETY: a valid NUL-terminated path; mkfifo only reads it.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

#[cfg(unix)]
#[test]
fn special_files_where_a_file_is_expected_do_not_hang() {
    let (_dir, root) = temp();
    write(root.join("m.py"), "import torch\n");
    mkfifo(&root.join("fifo.toml"));
    mkfifo(&root.join("weights.safetensors"));
    let cases: [(&[&str], &str); 3] = [
        (&["lint", "--config", "fifo.toml", "m.py"], "could not read `fifo.toml`: it is not a regular file"),
        (&["lint", "--config", "/dev/zero", "m.py"], "could not read `/dev/zero`: it is not a regular file"),
        (&["inspect", "weights.safetensors"], "it is not a regular file (a FIFO, a device or a socket)"),
    ];
    for (args, message) in cases {
        let out = run_bounded(args, &root, 20, None, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
}

/// Files built to take the parser's time (nested f-strings: quadratic in ruff's parser) or memory
/// (unary minus, open brackets: a stack segment per level): refused as too deep, at their
/// place, within a second or two and 1 GiB of address space.
#[cfg(unix)]
#[test]
fn deep_python_is_refused_in_bounded_time_and_memory() {
    let (_dir, root) = temp();
    let cases = [
        ("fstrings.py", format!("import torch\nx = {}1{}\n", "f\"{".repeat(250_000), "}\"".repeat(250_000))),
        ("minus.py", format!("import torch\nx = {}1\n", "-".repeat(8_000_000))),
        ("brackets.py", format!("import torch\nx = {}1{}\n", "(".repeat(4_000_000), ")".repeat(4_000_000))),
        ("small.py", format!("import torch\nx = {}1{}\n", "f\"{".repeat(12_000), "}\"".repeat(12_000))),
    ];
    for (name, text) in &cases {
        write(root.join(name), text);
        let out =
            run_bounded(&["lint", "--isolated", "--format", "concise", name], &root, 30, Some(1 << 30), &[]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        assert!(
            stdout(&out).starts_with(&format!("{name}:2:"))
                && stdout(&out).contains("D000 [error] file not linted: it is too deeply nested"),
            "{name}: {}",
            stdout(&out)
        );
        assert_eq!(stderr(&out), "", "{name}");
    }
}

/// The semantic model and the depth limit agree: a hazard 400 to 499 levels deep (past the
/// model's old limit, below the refusal) is found, not silently skipped.
#[test]
fn a_hazard_nested_hundreds_deep_is_found() {
    let (_dir, root) = temp();
    for n in [399, 450, 499] {
        let text = format!(
            "import torch\n\n\ndef train(model, loader, opt):\n    total = 0\n    for x, y in loader:\n        \
             loss = model(x.to(\"cuda\"))\n        loss.backward()\n        opt.step()\n        total += {}loss.item()\n",
            "-".repeat(n)
        );
        write(root.join("train.py"), &text);
        let out =
            devcheck(&["lint", "--isolated", "--select", "D005", "--format", "concise", "train.py"], &root);
        assert!(
            stdout(&out).starts_with(&format!("train.py:10:{}: D005", 18 + n)),
            "{n} levels: {}",
            stdout(&out)
        );
    }
}

/// What took time quadratic in the input now takes linear time: `inspect` and D004 over many
/// module classes, and `--fix` with many fixes in one file.
/// A method left to subclasses, called in many places of a training loop, with tens of thousands
/// of overrides in other files (and files that import those): each override's file learns of the
/// calls once, within the bound.
#[test]
fn many_overrides_of_a_method_called_in_many_places_do_not_take_quadratic_time() {
    let (_dir, root) = temp();
    std::fs::create_dir_all(root.join("pkg")).expect("a package folder");
    let mut base = String::from(
        "from abc import abstractmethod\nimport torch\n\n\nclass Base:\n    @abstractmethod\n    def loss(self, b):\n        pass\n\n    def learn(self, loader, opt):\n        for b in loader:\n            b = b.to(\"cuda\")\n",
    );
    for _ in 0..2_000 {
        base.push_str("            self.loss(b).backward()\n");
    }
    base.push_str("            opt.step()\n");
    write(root.join("pkg/base.py"), &base);
    let mut subs = String::from("from pkg.base import Base\n\n");
    for i in 0..20_000 {
        subs.push_str(&format!("class S{i}(Base):\n    def loss(self, b):\n        return (b * 2).sum()\n"));
    }
    write(root.join("pkg/subs.py"), &subs);
    // (A script of its own: a file nothing imports that cannot run by itself is not reached.)
    let mut more = String::from("from pkg.subs import S0\n\nif __name__ == \"__main__\":\n    pass\n\n");
    for i in 0..3_000 {
        more.push_str(&format!(
            "class T{i}(S0):\n    def loss(self, b):\n        print(b.sum().item())\n        return b.sum()\n"
        ));
    }
    write(root.join("pkg/more.py"), &more);
    let out =
        run_bounded(&["lint", "--isolated", "--preview", "--format", "concise", "."], &root, 60, None, &[]);
    assert_eq!(stdout(&out).matches(": D005 ").count(), 3_000, "{}", stderr(&out));
}

/// The bound on each command of the test below: a debug build takes about 25 s for the whole
/// test alone and more on a loaded machine (a CI run beside another build took over 60 s), while
/// a walk quadratic in 40,000 classes or fixes would take hours.
const QUADRATIC_GUARD: u64 = 180;

#[test]
fn many_classes_and_many_fixes_do_not_take_quadratic_time() {
    let (_dir, root) = temp();
    let mut classes = String::from("import torch\nfrom torch import nn\n");
    for i in 0..40_000 {
        classes.push_str(&format!(
            "class M{i}(nn.Module):\n    def __init__(self):\n        super().__init__()\n        \
             self.w = torch.ones(3)\n    def forward(self, x):\n        return x * self.w\n"
        ));
    }
    write(root.join("classes.py"), &classes);
    let out = run_bounded(&["inspect", "--isolated", "classes.py"], &root, QUADRATIC_GUARD, None, &[]);
    // Every class leaves its tensor behind: D004 errors, so the run fails.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out)
            .ends_with("Inspected 40000 classes in 1 file: 40000 fields left behind by a device move.\n"),
        "{}",
        &stdout(&out)[stdout(&out).len().saturating_sub(300)..]
    );
    let out = run_bounded(
        &["lint", "--isolated", "--preview", "--select", "D004", "--format", "concise", "classes.py"],
        &root,
        QUADRATIC_GUARD,
        None,
        &[],
    );
    assert_eq!(stdout(&out).matches(": D004 ").count(), 40_000);
    let mut fixes = String::from(PINNED);
    for _ in 0..40_000 {
        fixes.push_str("        d = yb.to(dev)\n");
    }
    write(root.join("fixes.py"), &fixes);
    let out = run_bounded(
        &["lint", "--isolated", "--preview", "--select", "D009", "--fix", "fixes.py"],
        &root,
        QUADRATIC_GUARD,
        None,
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(root.join("fixes.py")).matches("non_blocking=True").count(), 40_002);
}

/// Control bytes from files, flags and configuration are escaped wherever they are printed.
#[test]
fn control_bytes_never_reach_the_terminal() {
    let (_dir, root) = temp();
    write(root.join("m.py"), "import torch\n");
    write(root.join("devcheck.toml"), "[lint]\nignore = [\"D9\u{1b}]0;owned\u{7}\"]\n");
    write(root.join("bad/devcheck.toml"), "[lint]\nselect = \u{1b}[31m\n");
    let dir_esc = root.join("conf\u{1b}[2J");
    write(dir_esc.join("devcheck.toml"), "[lint]\n");
    let checkpoint = safetensors_with_name("w\u{1b}]0;title\u{7}", "F32");
    std::fs::write(root.join("names.safetensors"), &checkpoint).expect("write");
    std::fs::write(root.join("dtype.safetensors"), safetensors_with_name("w", "\u{1b}[5m")).expect("write");
    let cases: [&[&str]; 8] = [
        &["lint", "m.py"],
        &["lint", "--isolated", "--select", "D1\u{1b}[2J", "m.py"],
        &["explain", "\u{1b}]52;c;ZXZpbA==\u{7}"],
        &["lint", "--config", "bad/devcheck.toml", "m.py"],
        &["lint", "--config", "conf\u{1b}[2J/missing.toml", "m.py"],
        &["lint", "--isolated", "no\u{1b}[2Jsuch.py"],
        &["inspect", "names.safetensors"],
        &["inspect", "dtype.safetensors"],
    ];
    for args in cases {
        let out = devcheck(args, &root);
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !bytes.contains(&0x1b) && !bytes.contains(&0x07),
                "{args:?} {stream}: {}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert!(
            stdout(&out).contains("\\u{1b}") || stderr(&out).contains("\\u{1b}"),
            "{args:?}: {}{}",
            stdout(&out),
            stderr(&out)
        );
    }
}

/// A safetensors file with one 4-byte tensor of this name and dtype.
fn safetensors_with_name(name: &str, dtype: &str) -> Vec<u8> {
    let header =
        serde_json::json!({ name: { "dtype": dtype, "shape": [1], "data_offsets": [0, 4] } }).to_string();
    let mut header = header.into_bytes();
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(&[0; 4]);
    out
}

/// A `libcuda.so` on the library path that lacks the driver's functions (a stub, another
/// vendor's): `devcheck env` says so instead of panicking.
#[cfg(target_os = "linux")]
#[test]
fn env_survives_a_driver_library_without_its_functions() {
    let (_dir, root) = temp();
    write(root.join("stub.c"), "int cuDriverGetVersion(int *v) { *v = 12000; return 0; }\n");
    for lib in ["libcuda.so", "libcuda.so.1", "libnvrtc.so", "libnvrtc.so.12"] {
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-o", lib, "stub.c"])
            .current_dir(&root)
            .status()
            .expect("a C compiler (cc) builds the stub library");
        assert!(built.success());
    }
    let path = root.to_str().expect("UTF-8 path");
    let out = run_bounded(&["env"], &root, 30, None, &[("LD_LIBRARY_PATH", path)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("not available: the NVIDIA driver library that was found (libcuda.so) is not usable: it has no `cuInit`"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("the library that was found is not usable: it has no `nvrtcVersion`"),
        "{}",
        stdout(&out)
    );
    assert_eq!(stderr(&out), "");
}

/// Old Mac line endings (a lone `\r`): findings and suppressions on their own lines.
#[test]
fn carriage_return_line_endings_count_lines() {
    let (_dir, root) = temp();
    let text = "import torch\r\r\rdef f(x):\r    return x.cuda()\r\rdef g(x):\r    return x.cuda()  # devcheck: ignore[D002]\r\rDEVICES = (\"cuda\", \"mps\")\r";
    write(root.join("m.py"), text);
    let out = devcheck(&["lint", "--isolated", "--format", "concise", "m.py"], &root);
    assert_eq!(
        stdout(&out),
        "m.py:5:12: D002 [warning] `x.cuda()` hard-codes the current CUDA device in library code: the project also runs on other accelerators (MPS, XLA, ..), where this fails\nFound 1 finding (0 errors, 1 warning) in 1 of 1 file.\n"
    );
}

#[test]
fn a_fix_that_would_grow_the_file_past_the_limit_says_so() {
    let (_dir, root) = temp();
    let limit = 8 << 20;
    let mut text = String::from(PINNED);
    let pad = limit - text.len() - 1;
    text.push_str(&format!("#{}\n", "x".repeat(pad - 1)));
    assert_eq!(text.len(), limit);
    write(root.join("big.py"), &text);
    let out = devcheck(&["lint", "--isolated", "--preview", "--select", "D009", "--fix", "big.py"], &root);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("devcheck: big.py: not fixed: the fixed text would be 8388624 bytes, more than the limit of 8388608 bytes; the file is unchanged\n"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(root.join("big.py")), text);
}

#[test]
fn an_empty_suppression_names_nothing_and_all_names_everything() {
    let (_dir, root) = temp();
    let text = "import torch\n\n\ndef f(x):\n    return x.cuda()  # devcheck: ignore[]\n\n\ndef g(x):\n    \
                return x.cuda()  # devcheck: ignore[ALL]\n\n\nDEVICES = (\"cuda\", \"mps\")\n";
    write(root.join("m.py"), text);
    let out = devcheck(&["lint", "--isolated", "--format", "concise", "m.py"], &root);
    assert!(stdout(&out).starts_with("m.py:5:12: D002"), "{}", stdout(&out));
    assert!(stdout(&out).contains("Found 1 finding"), "{}", stdout(&out));
}

#[test]
fn an_unknown_rule_is_blamed_where_it_was_written() {
    let (_dir, root) = temp();
    write(root.join("m.py"), "import torch\n");
    write(root.join("devcheck.toml"), "[lint]\nignore = [\"D007\"]\n");
    let out = devcheck(&["lint", "--select", "D077", "m.py"], &root);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown rule `D077` in `--select`"), "{}", stderr(&out));
    let out = devcheck(&["lint", "--ignore", "D078", "m.py"], &root);
    assert!(stderr(&out).contains("unknown rule `D078` in `--ignore`"), "{}", stderr(&out));
    write(root.join("devcheck.toml"), "[lint]\nignore = [\"D079\"]\n");
    let out = devcheck(&["lint", "m.py"], &root);
    assert!(stderr(&out).contains("unknown rule `D079` in devcheck.toml"), "{}", stderr(&out));
}

/// Names that are not UTF-8, and a UTF-8 name that reads like one of them: each shown its own
/// way, and SARIF's URIs are the names' own bytes.
#[cfg(unix)]
#[test]
fn odd_names_are_shown_apart_and_sarif_uses_their_bytes() {
    use std::os::unix::ffi::OsStrExt as _;
    let (_dir, root) = temp();
    let model = "import torch\nx = torch.zeros(3).cuda()\nDEVICES = (\"cuda\", \"mps\")\n";
    for name in [&b"caf\xe9.py"[..], b"caf\xe8.py", b"caf\\xE9.py"] {
        write(root.join(std::ffi::OsStr::from_bytes(name)), model);
    }
    let out = devcheck(&["lint", "--isolated", "--format", "concise", "."], &root);
    let text = stdout(&out);
    let shown: Vec<&str> = text.lines().take(3).map(|l| l.split(':').next().unwrap_or("")).collect();
    assert_eq!(shown, ["caf\\\\xE9.py", "caf\\xE8.py", "caf\\xE9.py"]);
    let sarif = devcheck(&["lint", "--isolated", "--format", "sarif", "."], &root);
    let sarif: serde_json::Value = serde_json::from_slice(&sarif.stdout).expect("valid JSON");
    let uris: Vec<&str> = sarif["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str().expect("a uri"))
        .collect();
    assert_eq!(uris, ["caf%5CxE9.py", "caf%E8.py", "caf%E9.py"]);
}

/// SARIF for 80,000 findings is written as it goes: within 512 MiB of address space.
#[cfg(unix)]
#[test]
fn sarif_for_many_findings_stays_within_a_memory_bound() {
    let (_dir, root) = temp();
    // In 80,000 functions: a finding repeated in one function would be reported once.
    let mut text = String::from("import torch\nDEVICES = (\"cuda\", \"mps\")\n");
    for i in 0..80_000 {
        text.push_str(&format!("def f{i}(x):\n    x.cuda()\n"));
    }
    write(root.join("m.py"), &text);
    let out =
        run_bounded(&["lint", "--isolated", "--format", "sarif", "m.py"], &root, 120, Some(768 << 20), &[]);
    // Warnings (D002) do not fail the run by default.
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let sarif: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(sarif["runs"][0]["results"].as_array().map(Vec::len), Some(80_000));
}

/// Every text the command writes to stderr goes through one function, and it escapes control
/// characters: no error path can write raw bytes from a file, a flag or a checkpoint.
#[test]
fn every_error_goes_out_through_the_one_escaping_function() {
    let source =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/main.rs")).expect("main.rs");
    assert!(!source.contains("eprint"), "`eprint!`/`eprintln!` bypass the escaping");
    let writers: Vec<&str> = source.lines().filter(|l| l.contains("std::io::stderr()")).collect();
    assert_eq!(writers, ["    let _ = std::io::stderr().lock().write_all(printable(text).as_bytes());"]);
    // Errors are rendered, then printed through it.
    let report = source.split("fn report_error").nth(1).expect("report_error");
    let body = &report[..report.find("\n}\n").expect("its end")];
    assert!(body.contains("print_err(&out)") && !body.contains("print(&"), "{body}");
    assert!(body.contains("unicode_nocolor"), "a coloured report would escape its own codes: {body}");
}

/// A ring of 300 modules that star-import a hub which star-imports them all (every module then
/// binds every name): the run ends, bounded, and the names still resolve.
#[test]
fn a_ring_of_star_imports_ends() {
    let (_dir, root) = temp();
    std::fs::create_dir_all(root.join("pkg")).expect("mkdir");
    write(root.join("pkg/__init__.py"), "from .hub import *\n");
    write(root.join("pkg/hub.py"), (0..300).map(|i| format!("from .m{i} import *\n")).collect::<String>());
    for i in 0..300 {
        let defs: String = (0..20).map(|k| format!("def g{i}_{k}(x):\n    return x\n\n\n")).collect();
        write(root.join(format!("pkg/m{i}.py")), format!("from .hub import *\n\n\n{defs}"));
    }
    write(
        root.join("train.py"),
        "import torch\n\nfrom pkg import g0_1\n\nDEVICE = torch.device(\"cuda\")\n\n\n\
         def train(model, loader, optimizer):\n    for x, y in loader:\n        \
         loss = model(x.to(DEVICE)).sum()\n        loss.backward()\n        optimizer.step()\n        \
         print(g0_1(loss).item())\n",
    );
    let out =
        run_bounded(&["lint", "--isolated", "--preview", "--format", "concise", "."], &root, 60, None, &[]);
    assert!(
        stdout(&out).contains(
            "train.py:13:15: D005 [warning] `.item()` in a loop waits for the device at every step"
        ),
        "{}",
        stdout(&out)
    );
}

/// Forty files of classes, each deriving from both classes of the file before it (a lattice of
/// bases), and a training loop calling a thousand methods none of them defines: looking each
/// one up through the bases visits every class once, not every path through the lattice (2^16 of
/// them as far as the index follows bases), and a method a base defines is still found.
#[test]
fn a_lattice_of_bases_across_files_is_walked_once_per_lookup() {
    let (_dir, root) = temp();
    write(root.join("pkg/__init__.py"), "");
    write(
        root.join("pkg/l0.py"),
        "import torch\nfrom torch import nn\n\n\nclass A0(nn.Module):\n    def run(self, x):\n        \
         return torch.ones(3).to(x.device)\n\n\nclass B0(nn.Module):\n    pass\n",
    );
    for layer in 1..40 {
        let above = layer - 1;
        write(
            root.join(format!("pkg/l{layer}.py")),
            format!(
                "from pkg.l{above} import A{above}, B{above}\n\n\nclass A{layer}(B{above}, A{above}):\n    pass\n\n\n\
                 class B{layer}(B{above}, A{above}):\n    pass\n"
            ),
        );
    }
    let calls: String = (0..1000).map(|i| format!("        m.missing{i}(x)\n")).collect();
    write(
        root.join("train.py"),
        format!(
            "from pkg.l39 import A39\nfrom pkg.l8 import A8\n\n\ndef main(loader, opt):\n    m = A39().cuda()\n    \
             near = A8().cuda()\n    for x in loader:\n{calls}        near.run(x)\n        loss = m(x).sum()\n        \
             loss.backward()\n        opt.step()\n\n\nmain([], None)\n"
        ),
    );
    // (The bound is a hang guard, far above the run's time: the walk by paths took 27 s for 300.)
    let out = run_bounded(&["lint", "--isolated", "--format", "concise", "."], &root, 40, None, &[]);
    let text = stdout(&out);
    assert!(
        text.contains("pkg/l0.py:7:16: D005 [warning] `torch.ones(..).to(..)` makes a tensor on the host"),
        "{text}"
    );
}

/// NumPy arrays bound to lists of names of lists of names, each copied to the device at every
/// forward pass, are judged within a budget of nodes per copy (the walk would otherwise visit
/// 64 × 64 names for each of thousands of copies): past it, the array is not taken for a constant.
#[test]
fn numpy_constants_built_from_lists_of_names_are_judged_within_a_budget() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_path_buf();
    let names = |name: &str| (0..64).map(|_| name.to_string()).collect::<Vec<_>>().join(", ");
    let body = format!(
        "        a0 = np.eye(3)\n        a1 = np.array([{}])\n        a2 = np.array([{}])\n",
        names("a0"),
        names("a1")
    );
    let uploads: String =
        (0..5000).map(|_| "        x = x + torch.tensor(a2, device=x.device).sum()\n").collect();
    write(
        root.join("model.py"),
        format!(
            "import numpy as np\nimport torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n\
             {body}{uploads}        return x\n"
        ),
    );
    let out = run_bounded(&["lint", "--isolated", "--format", "concise", "."], &root, 40, None, &[]);
    assert_eq!(stdout(&out).trim(), "No findings in 1 file.");
}
