//! A user of the tensor runtime compiles no linter: the `devcheck` library's dependency tree holds
//! none of the linter's or the command line's crates.

use std::process::Command;

#[test]
fn the_runtime_pulls_in_no_linter_or_cli_dependency() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "devcheck",
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains(&"devcheck-macros"), "unexpected tree:\n{tree}");
    for banned in ["devcheck-lint", "devcheck-cli", "clap", "ignore", "globset", "toml", "ruff_python_parser"]
    {
        assert!(!names.contains(&banned), "the runtime depends on `{banned}`:\n{tree}");
    }
}
