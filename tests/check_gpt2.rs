//! A GPT-2-small-shaped model dry-runs on a fake `cuda:0` without allocating element data. (Its
//! speed is measured by `cargo run --release --example bench_check`, not here.)

use crate::culprits;

use culprits::gpt2::{GPT2_SMALL, GPT2_SMALL_PARAMETERS, Gpt2};
use devcheck::check::Input;
use devcheck::{DType, Device, Module, Result};

/// Built inside a fake scope on the CPU: shapes and dtypes, no data (500 MB otherwise).
fn gpt2_on_cpu() -> Result<Gpt2> {
    let _fake = devcheck::fake::enter();
    Gpt2::new(GPT2_SMALL, &Device::Cpu)
}

#[test]
fn gpt2_small_dry_runs_clean_on_a_fake_gpu_without_data() -> Result<()> {
    let mut model = gpt2_on_cpu()?;
    assert_eq!(model.num_parameters(), GPT2_SMALL_PARAMETERS);
    let ids = [Input::new("ids", [8, 1024], DType::I64)];
    let (report, trace) = devcheck::trace(|| {
        devcheck::check_forward(&mut model, &ids, &Device::Cuda(0), |m, x| m.forward(&x[0]))
    });
    let report = report?;
    assert!(report.completed());
    assert!(report.is_clean(), "{}", report.render(100));
    assert_eq!(report.data_bytes(), 0);
    // The outer trace sees nothing: the dry run suspends it, and building the fake copy of the
    // model allocates nothing either.
    assert!(trace.allocations().values().all(|a| a.bytes == 0), "{trace}");

    // What a real forward would allocate on the GPU: logits alone are 8 x 1024 x 50257 f32.
    let on_gpu = report.allocations()[&Device::Cuda(0)];
    assert!(on_gpu.fake_bytes > 8 * 1024 * 50257 * 4, "{on_gpu:?}");
    assert!(report.allocations().keys().all(|d| *d == Device::Cuda(0)));
    // The caller's model did not move.
    assert_eq!(model.device()?, Device::Cpu);
    Ok(())
}

#[test]
fn gpt2_small_inventory_counts_the_tied_head_once() {
    let model = gpt2_on_cpu().unwrap();
    let inventory = devcheck::inspect(&model);
    let totals = inventory.totals();
    assert_eq!(totals.len(), 1);
    assert_eq!(totals[0].parameter_elements, GPT2_SMALL_PARAMETERS);
    let head = inventory.rows().iter().find(|r| r.path == "lm_head").unwrap();
    assert_eq!(head.tied_to.as_deref(), Some("wte"));
    // 12 skipped `heads: usize` fields are plain data: nothing to report.
    assert!(inventory.is_clean(), "{inventory}");
    assert!(inventory.findings().is_empty(), "{inventory}");
}
