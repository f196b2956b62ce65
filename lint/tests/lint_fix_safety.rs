//! A D001 fix names the function's input (`xs.device()`): it is safe only where nothing before
//! the line has bound that name again.

use devcheck_lint::{Applicability, Settings, lint_source};

/// The applicability of the fix of a forward pass's D001 with `body` before its line and
/// `after` after it.
fn applicability_around(body: &str, after: &str) -> Applicability {
    let text = format!(
        "use candle_core::{{Device, Tensor}};\n\
         pub fn forward(xs: &Tensor) -> candle_core::Result<Tensor> {{\n{body}\n\
         \x20   let t = Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu)?;\n{after}\n    t.add(xs)\n}}\n"
    );
    let report = lint_source("src/model.rs", &text, &Settings::with_preview());
    let fixes: Vec<_> =
        report.diagnostics.iter().filter(|d| d.code == "D001").filter_map(|d| d.fix.as_ref()).collect();
    assert_eq!(fixes.len(), 1, "{body}: {:?}", report.diagnostics);
    fixes[0].applicability
}

fn applicability(body: &str) -> Applicability {
    applicability_around(body, "")
}

#[test]
fn the_input_untouched_keeps_the_fix_safe() {
    for body in [
        "",
        "    let ys = xs.sqr()?;",
        "    println!(\"{:?}\", xs.dims());",
        "    let n = xs.dims().len();",
        "    let ys = xs.clone();",
    ] {
        assert_eq!(applicability(body), Applicability::Safe, "{body}");
    }
    // A binding after the line does not reach back to it.
    assert_eq!(applicability_around("", "    let xs = 1;"), Applicability::Safe);
}

#[test]
fn any_rebinding_before_the_line_makes_it_unsafe() {
    for body in [
        "    let xs = xs.to_vec1::<f32>()?;",
        "    let (xs, _) = (1, 2);",
        "    if let Some(xs) = Some(1) { let _ = xs; }",
        "    for xs in 0..3 { let _ = xs; }",
        "    match 1 { xs => { let _ = xs; } }",
        "    let f = |xs: u8| xs;",
        "    rebind!(xs);",
        "    const xs: u8 = 1;",
    ] {
        assert_eq!(applicability(body), Applicability::Unsafe, "{body}");
    }
}
