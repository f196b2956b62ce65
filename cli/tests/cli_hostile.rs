//! `devcheck lint` on hostile input: odd file names, files it may not write, a full disk, a kill
//! mid-write, files nested deep enough to overflow a stack, lines past column 65,535, symbolic
//! link loops, paths longer than the system allows, and control bytes meant for the terminal.
//! Every case gives a clear result, every other file is still reported, and the files on disk
//! are asserted byte for byte afterwards.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;
use common::{stderr, stdout};

/// A forward pass with one D001 finding whose fix is safe.
const MODEL: &str = "use candle_core::{Device, Tensor};\n\n\
    pub fn forward(xs: &Tensor) -> candle_core::Result<Tensor> {\n\
    \x20   Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu)?.add(xs)\n}\n";

/// `MODEL` after `--fix`.
const FIXED: &str = "use candle_core::{Device, Tensor};\n\n\
    pub fn forward(xs: &Tensor) -> candle_core::Result<Tensor> {\n\
    \x20   Tensor::zeros(3, candle_core::DType::F32, xs.device())?.add(xs)\n}\n";

/// Runs the command; `lint` runs with `--preview`: these tests are about input, not rule status.
fn devcheck(args: &[&str], cwd: &Path) -> Output {
    let mut args = args.to_vec();
    if args.first() == Some(&"lint") && !args.contains(&"--preview") {
        args.insert(1, "--preview");
    }
    args.splice(0..0, ["--color", "never"]);
    common::run(&args, cwd)
}

fn lint(args: &[&str], cwd: &Path) -> Output {
    let mut all = vec!["lint", "--isolated"];
    all.extend_from_slice(args);
    devcheck(&all, cwd)
}

fn write(path: impl AsRef<Path>, text: impl AsRef<[u8]>) {
    let path = path.as_ref();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
}

fn read(path: impl AsRef<Path>) -> Vec<u8> {
    std::fs::read(path).expect("read back")
}

/// The names in a folder, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the folder")
        .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[cfg(unix)]
#[test]
fn fix_writes_the_file_it_read_not_the_name_it_shows() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src");
    // `a\b.rs` is one file; `a/b.rs` another, which its fix once overwrote.
    write(src.join("a\\b.rs"), MODEL);
    write(src.join("a/b.rs"), "fn unrelated() {}\n");
    // A name that is not UTF-8 once had its fix written to a new `caf\u{FFFD}.rs`.
    let latin1 = src.join(std::ffi::OsStr::from_bytes(b"caf\xe9.rs"));
    write(&latin1, MODEL);
    let out = lint(&["--format", "concise", "--fix", "src"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(read(src.join("a\\b.rs")), FIXED.as_bytes());
    assert_eq!(read(src.join("a/b.rs")), b"fn unrelated() {}\n");
    assert_eq!(read(&latin1), FIXED.as_bytes());
    assert_eq!(names(&src), ["a", "a\\b.rs", "caf\u{FFFD}.rs"], "a file appeared or vanished");
    assert_eq!(
        stderr(&out),
        "devcheck: src/a\\b.rs: fixed 1 finding\ndevcheck: src/caf\\xE9.rs: fixed 1 finding\n\
         devcheck: fixed 2 findings in 2 files, 1 file with nothing to fix\n"
    );
}

#[test]
fn a_file_that_cannot_be_written_fails_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src");
    for name in ["a.rs", "b.rs", "c.rs"] {
        write(src.join(name), MODEL);
    }
    let mut read_only = std::fs::metadata(src.join("b.rs")).expect("stat").permissions();
    read_only.set_readonly(true);
    std::fs::set_permissions(src.join("b.rs"), read_only).expect("chmod");
    let out = lint(&["--format", "concise", "--fix", "src"], dir.path());
    // The files before and after it are fixed, it is left whole, and the run says so.
    assert_eq!(read(src.join("a.rs")), FIXED.as_bytes());
    assert_eq!(read(src.join("b.rs")), MODEL.as_bytes());
    assert_eq!(read(src.join("c.rs")), FIXED.as_bytes());
    assert_eq!(names(&src), ["a.rs", "b.rs", "c.rs"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "devcheck: src/a.rs: fixed 1 finding\n\
         devcheck: src/b.rs: not fixed: could not write it: the file is read-only; the file is unchanged\n\
         devcheck: src/c.rs: fixed 1 finding\n\
         devcheck: fixed 2 findings in 2 files, 1 file not fixed\n"
    );
    // Its finding is still reported, as it still is in the file.
    assert!(
        stdout(&out).starts_with("src/b.rs:4:5: D001 [error] [*] `Tensor::zeros` in `forward`"),
        "{}",
        stdout(&out)
    );
}

/// Runs devcheck under `strace` with a fault injected, or `None` where strace cannot trace here.
fn under_strace(injection: &str, args: &[&str], cwd: &Path) -> Option<Output> {
    let probe = Command::new("strace").args(["-f", "-qq", "-o", "/dev/null", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: strace is not installed or may not trace here");
        return None;
    }
    let output = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", injection, env!("CARGO_BIN_EXE_devcheck")])
        .args(["--color", "never", "lint", "--preview", "--isolated", "--format", "concise"])
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("strace runs");
    Some(output)
}

fn one_model() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("src/model.rs");
    write(&path, MODEL);
    (dir, path)
}

#[test]
fn a_full_disk_leaves_the_file_whole() {
    let (dir, path) = one_model();
    // The first `write` of the run is the fixed text going to its temporary file.
    // strace counts calls per thread: the first `write` of the thread fixing the file is its
    // temporary file's, the first of the main thread the outcome lines on stderr (lost, without
    // a panic; the library's own test reads that message), then the findings on stdout.
    let Some(out) = under_strace("inject=write:error=ENOSPC:when=1", &["--fix", "src"], dir.path()) else {
        return;
    };
    assert_eq!(read(&path), MODEL.as_bytes());
    assert_eq!(names(&dir.path().join("src")), ["model.rs"], "the temporary file was left behind");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("src/model.rs:4:5: D001 [error]"), "{}", stdout(&out));
}

#[test]
fn a_kill_during_the_write_or_before_the_rename_leaves_the_file_whole() {
    for injection in ["inject=write:signal=KILL:when=1", "inject=rename,renameat,renameat2:signal=KILL"] {
        let (dir, path) = one_model();
        let Some(out) = under_strace(injection, &["--fix", "src"], dir.path()) else { return };
        assert_eq!(out.status.code(), None, "{injection}: the run was not killed");
        assert_eq!(read(&path), MODEL.as_bytes(), "{injection}");
        // What a kill leaves is at most the temporary file beside the original.
        for name in names(&dir.path().join("src")) {
            assert!(
                name == "model.rs" || (name.starts_with(".model.rs.devcheck-") && name.ends_with(".tmp")),
                "{injection}: {name}"
            );
        }
    }
}

#[test]
fn deep_files_are_reported_and_every_other_file_linted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src");
    let forward =
        |body: String| format!("fn forward(xs: &Tensor) -> Tensor {{\n    let y = {body};\n    y\n}}\n");
    let deep = [
        ("method", forward(format!("x{}", ".a()".repeat(400_000)))),
        ("add", forward(["1"; 300_000].join(" + "))),
        ("not", forward(format!("{}x", "!".repeat(50_000)))),
        ("generics", forward(format!("0 as {}T{}", "Box<".repeat(9_000), ">".repeat(9_000)))),
        ("refs", forward(format!("{}x", "&".repeat(50_000)))),
        ("closures", forward(format!("{}x", "|x| ".repeat(50_000)))),
        ("returns", forward(format!("{}x", "return ".repeat(50_000)))),
        ("tries", forward(format!("x{}", "?".repeat(100_000)))),
        ("awaits", forward(format!("x{}", ".await".repeat(100_000)))),
        ("casts", forward(format!("x{}", " as T".repeat(50_000)))),
        ("indexes", forward(format!("x{}", "[0]".repeat(100_000)))),
        // A nested block comment once ended at its first `*/` for the guard, and the quote after
        // it hid the real brackets until the next quote.
        (
            "comment",
            format!(
                "/* /* */ \" */\n{}\nconst S: &str = \"\";\n",
                forward(format!("{}x{}", "(".repeat(20_000), ")".repeat(20_000)))
            ),
        ),
    ];
    for (name, text) in &deep {
        write(src.join(format!("{name}.rs")), text);
    }
    write(src.join("model.rs"), MODEL);
    let out = lint(&["--format", "concise", "src"], dir.path());
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    for (name, _) in &deep {
        let line = text.lines().find(|l| l.starts_with(&format!("src/{name}.rs:"))).unwrap_or_default();
        assert!(
            line.contains(
                ": D000 [error] file not linted: it is too deeply nested to analyse (more than 4000 levels"
            ),
            "{name}: {line}"
        );
    }
    assert!(text.contains("src/model.rs:4:5: D001 [error]"), "{text}");
    assert!(
        text.ends_with(
            "Found 13 findings (13 errors, 0 warnings) in 13 of 13 files. 1 fixable with `--fix`.\n"
        ),
        "{text}"
    );
}

#[test]
fn inspect_and_fix_take_the_deep_files_lint_takes() {
    // 1,500 nested generics in a struct field: within the limit, so parsed and visited, which
    // inspect and fix once did again on the main thread's small stack.
    let dir = tempfile::tempdir().expect("temp dir");
    let ty = format!("{}Tensor{}", "Box<".repeat(1500), ">".repeat(1500));
    let text = format!(
        "use candle_core::{{Device, Tensor}};\n\npub struct Net {{\n    w: {ty},\n}}\n\n{}",
        &MODEL[36..]
    );
    write(dir.path().join("src/net.rs"), &text);
    let out = devcheck(&["inspect", "--isolated", "src"], dir.path());
    assert!(out.status.code().is_some(), "inspect was killed: {}", stderr(&out));
    assert!(
        stdout(&out).contains("src/net.rs:3:12: struct Net (candle)"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let out = lint(&["--format", "concise", "--fix", "src"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        String::from_utf8(read(dir.path().join("src/net.rs"))).expect("UTF-8"),
        text.replace("&Device::Cpu", "xs.device()")
    );
}

#[test]
fn a_finding_past_column_65535_is_reported_in_every_format() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path().join("src/model.rs"),
        MODEL.replace("    Tensor::zeros", &format!("{}Tensor::zeros", " ".repeat(70_000))),
    );
    let expected = [
        ("human", "[src/model.rs:4:70001]"),
        ("concise", "src/model.rs:4:70001: D001"),
        ("json", "\"column\": 70001"),
        ("sarif", "\"startColumn\":70001"),
        ("github", "::error file=src/model.rs,line=4,col=70001,"),
    ];
    for (format, needle) in expected {
        let out = lint(&["--format", format, "src"], dir.path());
        assert_eq!(out.status.code(), Some(1), "{format}: {}", stderr(&out));
        assert!(stdout(&out).contains(needle), "{format}: {}", stdout(&out));
        if format == "human" {
            assert!(stdout(&out).lines().all(|l| l.len() < 1000), "a source line was not cut");
        }
    }
}

#[test]
fn control_bytes_of_a_file_never_reach_the_terminal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let evil = MODEL.replace(
        "    Tensor::zeros",
        "    // \u{1b}]0;owned\u{7}\u{1b}[2J\u{0}\u{9b}31m\u{202e}\n    Tensor::zeros",
    );
    write(dir.path().join("src/model.rs"), &evil);
    #[cfg(unix)]
    write(dir.path().join("src/\u{1b}[31mred.rs"), MODEL);
    for format in ["human", "concise", "json", "sarif", "github"] {
        let out = lint(&["--format", format, "src"], dir.path());
        assert_eq!(out.status.code(), Some(1), "{format}: {}", stderr(&out));
        let text = stdout(&out);
        for raw in ['\u{1b}', '\u{7}', '\u{0}', '\u{9b}', '\u{202e}'] {
            assert!(!text.contains(raw), "{format} printed {raw:?}:\n{text}");
        }
        #[cfg(unix)]
        assert!(
            text.contains("\\u{1b}[31mred.rs")
                || text.contains("\\u001b[31mred.rs")
                || text.contains("%1B%5B31mred.rs"),
            "{format}:\n{text}"
        );
    }
    let human = stdout(&lint(&["src/model.rs"], dir.path()));
    assert!(human.contains("// \\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{0}\\u{9b}31m\\u{202e}"), "{human}");
}

#[cfg(unix)]
#[test]
fn symbolic_links_are_followed_and_what_cannot_be_read_is_reported() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    write(d.join("outside/model.rs"), MODEL);
    std::fs::create_dir_all(d.join("tree/sub")).expect("mkdir");
    symlink("../outside/model.rs", d.join("tree/linked.rs")).expect("symlink");
    symlink("..", d.join("tree/sub/up")).expect("symlink");
    symlink("nowhere.rs", d.join("tree/dangling.rs")).expect("symlink");
    symlink("loop2.rs", d.join("tree/loop1.rs")).expect("symlink");
    symlink("loop1.rs", d.join("tree/loop2.rs")).expect("symlink");
    // A broken link to something that is not Rust source is nothing the linter would read.
    symlink("nothing", d.join("tree/readme")).expect("symlink");
    let out = lint(&["--format", "concise", "tree"], d);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "tree/dangling.rs:1:1: D000 [error] not linted: a symbolic link to `nowhere.rs`, which does not exist\n\
         tree/linked.rs:4:5: D001 [error] [*] `Tensor::zeros` in `forward` makes a tensor on the CPU (`Device::Cpu`), not on the device of its inputs\n\
         tree/loop1.rs:1:1: D000 [error] not linted: a symbolic link to `loop2.rs` that cannot be followed (Too many levels of symbolic links (os error 40))\n\
         tree/loop2.rs:1:1: D000 [error] not linted: a symbolic link to `loop1.rs` that cannot be followed (Too many levels of symbolic links (os error 40))\n\
         tree/sub/up:1:1: D000 [error] not linted: a symbolic link loop (`tree/sub/up` leads back to `tree`)\n\
         Found 5 findings (5 errors, 0 warnings) in 5 of 5 files. 1 fixable with `--fix`.\n"
    );
    // Fixing through the link rewrites its target and keeps the link.
    let out = lint(&["--format", "concise", "--fix", "tree/linked.rs"], d);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(read(d.join("outside/model.rs")), FIXED.as_bytes());
    assert!(std::fs::symlink_metadata(d.join("tree/linked.rs")).expect("lstat").file_type().is_symlink());
    // A link named on the command line says what it is.
    let out = lint(&["tree/loop1.rs"], d);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`tree/loop1.rs` is a symbolic link to `loop2.rs` that cannot be followed"),
        "{}",
        stderr(&out)
    );
    let out = lint(&["tree/dangling.rs"], d);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`tree/dangling.rs` is a symbolic link to `nowhere.rs`, which does not exist"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_file_reached_twice_is_linted_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path().join("src/model.rs"), MODEL);
    let out = lint(&["--format", "concise", "src", "src/model.rs", "./src"], dir.path());
    assert!(stdout(&out).ends_with("in 1 of 1 file. 1 fixable with `--fix`.\n"), "{}", stdout(&out));
}

#[cfg(unix)]
#[test]
fn a_path_longer_than_the_system_allows_is_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path().join("model.rs"), MODEL);
    // Relative steps reach what no absolute path may name (PATH_MAX is 4096 on Linux).
    let name = "d".repeat(200);
    let script = format!(
        "mkdir deep && cd deep && for i in $(seq 1 25); do mkdir {name} && cd -P {name} || exit 1; done && echo 'fn main() {{}}' > x.rs"
    );
    let made = Command::new("sh").args(["-c", &script]).current_dir(dir.path()).status().expect("sh runs");
    assert!(made.success());
    let out = lint(&["--format", "concise", "."], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l.starts_with("deep/ddd")
            && l.ends_with(": D000 [error] could not be read: File name too long (os error 36)")),
        "{text}"
    );
    assert!(text.contains("model.rs:4:5: D001 [error]"), "{text}");
}
