//! `devcheck::trace`: the transfer ledger. Real runs here are CPU-only; moves between devices are
//! exercised inside a fake scope, where they are recorded as on a real GPU (without data).

use crate::culprits;

/// Snapshots with this file's own line numbers masked, so that editing the tests does not churn
/// the snapshots (the fixtures in `tests/culprits/` keep real, fixed locations).
macro_rules! snapshot {
    ($name:expr, $text:expr) => {{
        let mut settings = insta::Settings::clone_current();
        settings.add_filter(r"tests/check_trace\.rs:\d+:\d+", "tests/check_trace.rs:[LINE]");
        settings.bind(|| insta::assert_snapshot!($name, $text));
    }};
}

use culprits::loops;
use devcheck::{Device, Result, Tensor};

const GPU: Device = Device::Cuda(0);

fn codes(report: &devcheck::check::TraceReport) -> Vec<&'static str> {
    report.findings().iter().map(|f| f.code()).collect()
}

#[test]
fn a_real_cpu_run_counts_allocations_and_reads() -> Result<()> {
    let (sum, report) = devcheck::trace(|| -> Result<f32> {
        let x = Tensor::ones([4, 8], &Device::Cpu)?;
        let y = x.mul_scalar(2.0)?.sum_all()?;
        y.to_scalar::<f32>()
    });
    assert_eq!(sum?, 64.0);
    let cpu = report.allocations()[&Device::Cpu];
    // ones [4, 8], the product [4, 8], the sum [] (f32 each).
    assert_eq!((cpu.tensors, cpu.bytes, cpu.fake_tensors), (3, 4 * (32 + 32 + 1), 0));
    assert!(report.transfers().is_empty());
    let reads = report.host_reads();
    assert_eq!(reads.len(), 1);
    assert_eq!(
        (reads[0].op, reads[0].device, reads[0].count, reads[0].bytes),
        ("to_scalar", Device::Cpu, 1, 4)
    );
    // A host read of a host tensor waits for nothing.
    assert!(!reads[0].is_sync() && report.syncs().count() == 0);
    assert!(report.is_clean(), "{report}");
    Ok(())
}

#[test]
fn round_trips_are_found_per_pair_of_lines() -> Result<()> {
    let _fake = devcheck::fake::enter();
    let (result, report) = devcheck::trace(|| loops::round_trip(5, &GPU));
    result?;
    assert_eq!(codes(&report), ["round-trip"], "{report}");
    let finding = &report.findings()[0];
    assert_eq!(finding.count(), 5);
    assert_eq!(finding.location_string().as_deref(), Some("tests/culprits/loops.rs:12:21"));
    let directions: Vec<(String, usize, usize)> =
        report.transfers().iter().map(|t| (t.direction(), t.count, t.bytes)).collect();
    assert_eq!(
        directions,
        [
            ("cpu -> cuda:0".into(), 1, 64),
            ("cuda:0 -> cpu".into(), 5, 5 * 32),
            ("cpu -> cuda:0".into(), 5, 5 * 32)
        ]
    );
    assert_eq!(report.bytes_transferred(), 64 + 2 * 5 * 32);
    snapshot!("round_trip", report.render(100));
    Ok(())
}

#[test]
fn the_same_constant_uploaded_every_step_is_found() -> Result<()> {
    let _fake = devcheck::fake::enter();
    let (result, report) = devcheck::trace(|| loops::repeated_upload(4, &GPU));
    result?;
    assert_eq!(codes(&report), ["repeated-upload"], "{report}");
    let finding = &report.findings()[0];
    assert_eq!(finding.count(), 4);
    assert!(finding.details().iter().any(|d| d == "48 B in total"), "{:?}", finding.details());
    snapshot!("repeated_upload", report.render(100));
    Ok(())
}

#[test]
fn a_read_at_every_step_is_a_sync_in_a_loop() -> Result<()> {
    let _fake = devcheck::fake::enter();
    let (total, report) = devcheck::trace(|| loops::sync_every_step(10, &GPU));
    // Fake tensors have no values: inside a trace their reads are answered with zeros.
    assert_eq!(total?, 0.0);
    assert_eq!(codes(&report), ["sync-in-loop"], "{report}");
    let syncs: Vec<_> = report.syncs().collect();
    assert_eq!((syncs.len(), syncs[0].count, syncs[0].without_data), (1, 10, 10));
    snapshot!("sync_in_loop", report.render(100));
    snapshot!("sync_in_loop_table", report.to_string());
    Ok(())
}

#[test]
fn a_loop_that_uploads_each_batch_once_and_reads_once_is_clean() -> Result<()> {
    let _fake = devcheck::fake::enter();
    let (result, report) = devcheck::trace(|| loops::clean(20, &GPU));
    result?;
    assert!(report.is_clean(), "{}", report.render(100));
    // 20 fresh batches and the weight: uploads, none repeated.
    let uploads: usize = report.transfers().iter().map(|t| t.count).sum();
    assert_eq!(uploads, 21);
    assert_eq!(report.syncs().map(|r| r.count).sum::<usize>(), 1);
    let json = report.to_json();
    assert_eq!(json["transfers"].as_array().map(Vec::len), Some(2));
    assert_eq!(json["transfers"][1]["count"], 20);
    assert_eq!(json["transfers"][1]["from"], "cpu");
    assert_eq!(json["host_reads"][0]["sync"], true);
    assert_eq!(json["allocations"]["cuda:0"]["bytes"], 0);
    Ok(())
}

#[test]
fn traces_nest_and_record_nothing_outside() -> Result<()> {
    let _fake = devcheck::fake::enter();
    let ((inner, inner_report), outer_report) = devcheck::trace(|| {
        let before = Tensor::ones([2], &Device::Cpu).map(|t| t.to(&GPU));
        let inner = devcheck::trace(|| loops::round_trip(2, &GPU));
        let _ = before;
        inner
    });
    inner?;
    assert_eq!(codes(&inner_report), ["round-trip"]);
    // The outer trace saw only its own move, not the inner one's.
    assert_eq!(outer_report.transfers().len(), 1);
    assert!(outer_report.is_clean());
    let (_, after) = devcheck::trace(|| ());
    assert!(after.transfers().is_empty() && after.allocations().is_empty());
    Ok(())
}

#[test]
fn outside_a_fake_scope_reading_a_fake_tensor_stays_an_error() {
    let fake = Tensor::fake([2], devcheck::DType::F32, &GPU).unwrap();
    let (read, report) = devcheck::trace(|| fake.to_vec::<f32>());
    assert!(matches!(read, Err(devcheck::Error::NoData { .. })), "{read:?}");
    // The attempt is still in the ledger.
    assert_eq!(report.host_reads()[0].without_data, 1);
}

#[test]
fn long_runs_stay_exact_when_freed_storages_are_swept() -> Result<()> {
    // Enough moves to sweep the ledger's tables of freed storages several times: fresh batches
    // (freed every step, their addresses reused) must never look like the same data.
    let _fake = devcheck::fake::enter();
    let steps = 10_000;
    let (result, report) = devcheck::trace(|| -> Result<()> {
        let constant = Tensor::ones([3], &Device::Cpu)?;
        for _ in 0..steps {
            let _batch = Tensor::ones([2], &Device::Cpu)?.to(&GPU)?;
            let _constant = constant.to(&GPU)?;
        }
        Ok(())
    });
    result?;
    assert_eq!(codes(&report), ["repeated-upload"], "{report}");
    assert_eq!(report.findings()[0].count(), steps);
    assert!(report.findings()[0].details().iter().any(|d| d.contains("117.2 KiB in total")), "{report}");
    Ok(())
}

#[test]
fn a_model_move_is_recorded_at_the_callers_line() -> Result<()> {
    use devcheck::Module;
    let mut model = devcheck::nn::Linear::new(3, 2, &Device::Cpu)?;
    let _fake = devcheck::fake::enter();
    let here = line!() + 1;
    let (moved, report) = devcheck::trace(|| model.to(&GPU));
    moved?;
    let transfers = report.transfers();
    assert!(!transfers.is_empty());
    for t in transfers {
        // The user's `model.to(..)` line, not the library's loop over parameters.
        assert_eq!(t.call_site.file(), file!(), "{report}");
        assert_eq!(t.call_site.line(), here, "{report}");
    }
    Ok(())
}
