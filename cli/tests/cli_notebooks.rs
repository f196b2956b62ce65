//! Jupyter notebooks: code cells linted as one file, findings placed by cell and line, `--fix`,
//! `--diff` and `--add-ignore` writing back into the JSON with every other byte kept, a broken
//! notebook reported as `D000`.

use std::path::Path;
use std::process::Output;

use crate::common;
use common::{stderr, stdout};

fn devcheck(args: &[&str], cwd: &Path) -> Output {
    let mut all = vec!["--color", "never"];
    all.extend_from_slice(args);
    common::run(&all, cwd)
}

/// A notebook with a markdown cell, IPython magic, and a model whose `forward` makes its mask on
/// the CPU (cell 3, line 7).
const NOTEBOOK: &str = include_str!("../../fixtures/notebooks/cpu_mask.ipynb");

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("model.ipynb"), NOTEBOOK).expect("write");
    dir
}

fn read(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("model.ipynb")).expect("read")
}

#[test]
fn a_cpu_mask_in_a_notebook_is_reported_at_its_cell_and_line() {
    let dir = setup();
    // A directory walk finds notebooks.
    let out = devcheck(&["lint", "--isolated", "--preview", "--format", "concise", "."], dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "model.ipynb:cell 3:7:16: D001 [error] [*] `torch.ones` in `forward` makes a tensor on the default \
         device (no `device=`), not on the device of its inputs\n\
         Found 1 finding (1 error, 0 warnings) in 1 of 1 file. 1 fixable with `--fix`.\n"
    );
    let json = devcheck(&["lint", "--isolated", "--preview", "--format", "json", "."], dir.path());
    let found: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!((found[0]["cell"].as_u64(), found[0]["line"].as_u64()), (Some(3), Some(7)));
    let human = devcheck(&["lint", "--isolated", "--preview", "model.ipynb"], dir.path());
    assert!(stdout(&human).contains("╭─[model.ipynb:cell 3:7:16]"), "{}", stdout(&human));
    assert!(!stdout(&human).contains("devcheck: notebook cell"), "the joined text shows: {}", stdout(&human));
}

#[test]
fn fix_and_add_ignore_keep_the_json_and_every_other_byte() {
    let dir = setup();
    let diff = devcheck(&["lint", "--isolated", "--preview", "--diff", "model.ipynb"], dir.path());
    assert_eq!(diff.status.code(), Some(1));
    let fix = devcheck(&["lint", "--isolated", "--preview", "--fix", "model.ipynb"], dir.path());
    assert_eq!(fix.status.code(), Some(0), "{}", stderr(&fix));
    let fixed = read(dir.path());
    assert_eq!(
        fixed,
        NOTEBOOK.replace(
            "\"        mask = torch.ones(8)\\n\"",
            "\"        mask = torch.ones(8, device=x.device)\\n\""
        )
    );
    // `--diff` showed exactly that change to the JSON.
    let expected = similar::TextDiff::from_lines(NOTEBOOK, &fixed)
        .unified_diff()
        .context_radius(3)
        .header("a/model.ipynb", "b/model.ipynb")
        .to_string();
    assert_eq!(stdout(&diff), expected);

    let dir = setup();
    let add = devcheck(&["lint", "--isolated", "--preview", "--add-ignore", "."], dir.path());
    assert_eq!(add.status.code(), Some(0), "{}", stderr(&add));
    assert_eq!(
        read(dir.path()),
        NOTEBOOK.replace(
            "\"        mask = torch.ones(8)\\n\"",
            "\"        mask = torch.ones(8)  # devcheck: ignore[D001]\\n\""
        )
    );
    let after = devcheck(&["lint", "--isolated", "--preview", "--format", "concise", "."], dir.path());
    assert_eq!(stdout(&after), "No findings in 1 file.\n");
    let _: serde_json::Value = serde_json::from_str(&read(dir.path())).expect("still a notebook");
}

#[test]
fn a_broken_notebook_is_a_parse_error_and_the_run_goes_on() {
    let dir = setup();
    std::fs::write(dir.path().join("broken.ipynb"), "{\"cells\": [").expect("write");
    let out = devcheck(&["lint", "--isolated", "--preview", "--format", "concise", "."], dir.path());
    let text = stdout(&out);
    assert!(text.starts_with("broken.ipynb:1:1: D000 [error] not a valid notebook: "), "{text}");
    assert!(text.contains("model.ipynb:cell 3:7:16: D001"), "{text}");
}
