//! `devcheck explain`, `devcheck lint --list-rules`, `devcheck env`.

use std::process::{Command, Output};

use crate::common;
use common::stdout;

fn devcheck(args: &[&str]) -> Output {
    common::run(args, common::root())
}

#[test]
fn explain_prints_the_rule_docs() {
    let out = devcheck(&["explain", "D001"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert_eq!(text.trim_end(), devcheck_lint::explain("D001").unwrap_or_default().trim_end());
    insta::assert_snapshot!("explain_d001", text);
}

#[test]
fn explain_accepts_names_and_any_case() {
    let by_name = stdout(&devcheck(&["explain", "host-round-trip-in-loop"]));
    let by_code = stdout(&devcheck(&["explain", "d005"]));
    assert_eq!(by_name, by_code);
    assert!(by_code.starts_with("D005 (host-round-trip-in-loop): "));
}

#[test]
fn explain_unknown_code_is_an_error() {
    let out = devcheck(&["--color", "never", "explain", "D042"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("explain_unknown", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn list_rules() {
    let out = devcheck(&["lint", "--list-rules"]);
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("list_rules", stdout(&out));
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&devcheck(&["lint", "--list-rules", "--format", "json"])))
            .expect("JSON");
    let rules = json.as_array().expect("an array of rules");
    assert_eq!(rules.len(), 12);
    // Each rule says which languages it checks, with its status in each.
    let d002 = rules.iter().find(|r| r["code"] == "D002").expect("D002");
    assert_eq!(d002["languages"]["rust"], "stable");
    assert_eq!(d002["languages"]["python"], "preview");
    let d008 = rules.iter().find(|r| r["code"] == "D008").expect("D008");
    assert!(d008["languages"].get("rust").is_none());
}

#[test]
fn env_reports_version_cuda_and_default_device() {
    let out = devcheck(&["env"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.starts_with(&format!("devcheck        {}\n", env!("CARGO_PKG_VERSION"))), "{text}");
    let count = devcheck::cuda::device_count();
    if count == 0 {
        assert!(text.contains("cuda            not available: "), "{text}");
    } else {
        assert!(text.contains(&format!("cuda            available, {count} device")), "{text}");
        assert_eq!(text.matches("cuda device").count(), count);
    }
    assert!(text.contains(&format!("default device  {}\n", devcheck::default_device())), "{text}");
    assert!(text.contains(&format!("best available  {}\n", devcheck::Device::best_available())), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&devcheck(&["env", "--format", "json"]))).expect("JSON");
    assert_eq!(json[0]["key"], "devcheck");
}

/// `devcheck check` runs in the user's Python; one that cannot run it is a usage error that
/// says which Python and how to fix it, never a traceback.
#[test]
fn check_without_a_usable_python_says_which_and_how_to_fix_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_devcheck"))
        .args(["check", "--python", "/nonexistent/python3", "model.py:Net", "--input", "x:float32[2,8]"])
        .output()
        .expect("the devcheck binary runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: could not run `/nonexistent/python3`: "), "{stderr}");
    assert!(
        stderr.contains("help: name a Python with PyTorch and the devcheck package with `--python`"),
        "{stderr}"
    );
}
