//! `devcheck::inspect`: the table, the JSON, and findings for stragglers and skipped fields.

use crate::culprits;

/// Snapshots with this file's own line numbers masked, so that editing the tests does not churn
/// the snapshots (the fixtures in `tests/culprits/` keep real, fixed locations).
macro_rules! snapshot {
    ($name:expr, $text:expr) => {{
        let mut settings = insta::Settings::clone_current();
        settings.add_filter(r"tests/check_inventory\.rs:\d+:\d+", "tests/check_inventory.rs:[LINE]");
        settings.bind(|| insta::assert_snapshot!($name, $text));
    }};
}

use culprits::inventory::{encoder, half_moved};
use devcheck::module::EntryKind;
use devcheck::{Device, Error, Result};

#[test]
fn the_table_lists_every_field_with_its_device() -> Result<()> {
    let model = encoder(&Device::Cpu)?;
    let inventory = devcheck::inspect(&model);
    let paths: Vec<(&str, EntryKind)> = inventory.rows().iter().map(|r| (r.path.as_str(), r.kind)).collect();
    assert_eq!(
        paths,
        [
            ("embed", EntryKind::Parameter),
            ("blocks.0.weight", EntryKind::Parameter),
            ("blocks.0.norm_scale", EntryKind::Buffer),
            ("blocks.1.weight", EntryKind::Parameter),
            ("blocks.1.norm_scale", EntryKind::Buffer),
            ("causal_mask", EntryKind::NonPersistentBuffer),
            ("pos_cache", EntryKind::Skipped),
            ("config", EntryKind::Skipped),
            ("head", EntryKind::Parameter),
        ]
    );
    // The tied head counts once: 40 + 2 * 16 parameter elements; 7 tensors (the skipped one included), 4 bytes an element.
    let totals = inventory.totals();
    assert_eq!(totals.len(), 1);
    assert_eq!((totals[0].device, totals[0].tensors), (Device::Cpu, 7));
    assert_eq!(totals[0].parameter_elements, 40 + 2 * 16);
    assert_eq!(totals[0].bytes, 4 * (40 + 2 * 16 + 2 * 4 + 9 + 12));
    assert_eq!(inventory.main_device(), Some(Device::Cpu));

    let codes: Vec<&str> = inventory.findings().iter().map(|f| f.code()).collect();
    assert_eq!(codes, ["skipped-tensor", "skipped-opaque"]);
    // A skipped tensor is a warning (it will not move); an opaque skipped field only a note.
    assert!(!inventory.is_clean());
    snapshot!("table", inventory.to_string());
    Ok(())
}

#[test]
fn json_for_tools() -> Result<()> {
    let json = devcheck::inspect(&encoder(&Device::Cpu)?).to_json();
    assert_eq!(json["module"], "Encoder");
    let tensors = json["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 9);
    assert_eq!(tensors[0]["path"], "embed");
    assert_eq!(tensors[0]["device"], "cpu");
    assert_eq!(tensors[0]["shape"], serde_json::json!([10, 4]));
    assert_eq!(tensors[0]["bytes"], 160);
    assert!(tensors[0]["origin"].as_str().unwrap().starts_with("tests/culprits/inventory.rs:"));
    assert_eq!(tensors[7]["type"], "Config");
    assert!(tensors[7]["device"].is_null());
    assert_eq!(tensors[8]["tied_to"], "embed");
    assert_eq!(json["totals"][0]["parameter_elements"], 72);
    assert_eq!(json["findings"][0]["code"], "skipped-tensor");
    assert_eq!(json["findings"][0]["path"], "tests/culprits/inventory.rs");
    Ok(())
}

#[test]
fn a_straggler_assigned_after_the_move_is_named_with_its_line() -> Result<()> {
    let inventory = devcheck::inspect(&half_moved()?);
    assert_eq!(inventory.main_device(), Some(Device::Cuda(1)));
    let codes: Vec<&str> = inventory.findings().iter().map(|f| f.code()).collect();
    assert_eq!(codes, ["mixed-devices", "skipped-tensor", "skipped-opaque"], "{inventory}");
    let text = inventory.render(100);
    assert!(text.contains("tests/culprits/inventory.rs:55:34"), "{text}");
    assert!(text.contains("`blocks.1.norm_scale` (buffer) on cpu"), "{text}");
    snapshot!("half_moved", text);
    snapshot!("half_moved_table", inventory.to_string());
    Ok(())
}

fn clean_or_fail() -> Result<()> {
    devcheck::inspect(&half_moved()?).ensure_clean()?;
    Ok(())
}

#[test]
fn a_failing_check_through_question_mark_prints_the_full_report() {
    let error = clean_or_fail().unwrap_err();
    assert!(matches!(error, Error::Check(_)));
    // `fn t() -> devcheck::Result<()>` prints the error's Debug: the whole rendered report.
    let debug = format!("{error:?}");
    assert!(debug.contains("× `Encoder` has 2 errors, 1 note"), "{debug}");
    assert!(debug.contains("tests/culprits/inventory.rs:55:34"), "{debug}");
    assert!(debug.contains("help: call `model.to(&Device::Cuda(1))`"), "{debug}");
    assert_eq!(debug, format!("\n{}", error.render(100)));
}
