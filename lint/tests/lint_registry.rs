//! The linter never panics on real code: lint every `.rs` file of the local cargo registry (all
//! the dependencies of this workspace, thousands of files) and require that no rule failed.

use std::path::PathBuf;
use std::time::Instant;

use devcheck_lint::{Settings, lint_paths, registry};

fn registry_src() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = home.join("registry/src");
    src.is_dir().then_some(src)
}

#[test]
fn lints_the_whole_cargo_registry_without_a_single_panic() {
    let src = registry_src().expect("a cargo registry with sources (building this workspace fills it)");
    let start = Instant::now();
    let run =
        lint_paths(std::slice::from_ref(&src), &Settings::default()).expect("the registry can be walked");
    let elapsed = start.elapsed();
    let files = run.files.len();
    assert!(files > 500, "only {files} files under {}: expected the workspace's dependencies", src.display());
    let internal: Vec<String> = run
        .diagnostics()
        .filter(|d| d.code == registry::INTERNAL_ERROR.code)
        .map(|d| format!("{}: {}", d.path, d.message))
        .collect();
    assert!(
        internal.is_empty(),
        "{} of {files} files made a rule fail:\n{}",
        internal.len(),
        internal.join("\n")
    );
    let parse_errors = run.diagnostics().filter(|d| d.code == registry::PARSE_ERROR.code).count();
    let findings = run.diagnostics().count() - parse_errors;
    eprintln!(
        "linted {files} files under {} in {:.1}s: {findings} findings, {parse_errors} files not parsed, 0 panics",
        src.display(),
        elapsed.as_secs_f64()
    );
}
