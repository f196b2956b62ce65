//! What the command-line tests share: running the built `devcheck` as a user's shell would (no
//! `NO_COLOR` from the test's environment, a 100-column terminal), reading its output, and the
//! workspace root the fixtures are under. Each test file uses what it needs.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs the built command with `args` in `cwd`.
pub fn run(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_devcheck"))
        .args(args)
        .current_dir(cwd)
        .env_remove("NO_COLOR")
        .env("COLUMNS", "100")
        .output()
        .expect("the devcheck binary runs")
}

/// The workspace root: `fixtures/` is under it.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
