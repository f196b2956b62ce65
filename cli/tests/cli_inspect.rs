//! `devcheck inspect`: what a device move carries, per struct, with the derive's classification.

use std::process::{Command, Output};

fn devcheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_devcheck"))
        .args(["--color", "never", "inspect", "--isolated"])
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("the devcheck binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("UTF-8")
}

#[test]
fn inspect_devcheck_modules_with_the_derive_classification() {
    let out = devcheck(&["fixtures/lint/inspect/model.rs"]);
    // The skipped `Vec<Tensor>` is a D004 error, and `HashMap<String, Tensor>` is rejected.
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("inspect_devcheck", stdout(&out));
}

#[test]
fn inspect_every_framework() {
    let out = devcheck(&["fixtures/lint/d004"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("inspect_frameworks", stdout(&out));
}

#[test]
fn inspect_json() {
    let out = devcheck(&["--format", "json", "fixtures/lint/inspect/model.rs"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let structs = json.as_array().expect("an array of structs");
    assert_eq!(structs.len(), 2);
    let t = &structs[1];
    assert_eq!(t["name"], "Transformer");
    assert_eq!(t["api"], "devcheck");
    let field = |name: &str| {
        t["fields"].as_array().and_then(|f| f.iter().find(|x| x["name"] == name)).cloned().unwrap_or_default()
    };
    assert_eq!(field("scale")["class"], "parameter");
    assert_eq!(field("positions")["class"], "buffer");
    assert_eq!(field("positions")["saved"], true);
    assert_eq!(field("blocks")["class"], "vec of submodules");
    assert_eq!(field("rotary_cache")["fate"], "left behind");
    assert_eq!(field("config")["fate"], "-");
    assert_eq!(field("by_name")["fate"], "rejected");
    assert_eq!(t["findings"][0]["code"], "D004");
    assert_eq!(t["errors"].as_array().map(Vec::len), Some(1));
}

#[test]
fn inspect_clean_module_exits_zero_and_reports_unparsable_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("block.rs"),
        "use devcheck::{Module, Param, Tensor};\n#[derive(Module)]\nstruct Block {\n    w: Param,\n    mask: Tensor,\n}\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("broken.rs"), "fn f( {\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_devcheck"))
        .args(["--color", "never", "inspect", "--isolated", "block.rs"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("2 of 2 fields move"), "{}", stdout(&out));
    let out = Command::new(env!("CARGO_BIN_EXE_devcheck"))
        .args(["--color", "never", "inspect", "--isolated", "."])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("broken.rs:1:"), "{}", stdout(&out));
    assert!(stdout(&out).contains("not inspected:"), "{}", stdout(&out));
}
