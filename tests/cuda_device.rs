//! The device side of the CUDA backend. Without a driver every entry point must return a clear
//! error (checked here on any machine); with a GPU the kernels are compared with host results
//! (those tests print "skipped: no CUDA device" when there is none).

use std::sync::Arc;

/// Written to stderr directly, past the test harness's output capture, so a skip is always seen.
macro_rules! skip_note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use devcheck::cuda::{self, CudaDevice, CudaStorage, PinnedBuffer};
use devcheck::shape::Layout;
use devcheck::{DType, Device};

fn gpu() -> Option<Arc<CudaDevice>> {
    if !cuda::is_available() {
        skip_note!("skipped: no CUDA device");
        return None;
    }
    Some(cuda::cuda_device_for(&Device::Cuda(0)).expect("cuda:0 is available"))
}

fn upload_f32(dev: &Arc<CudaDevice>, values: &[f32]) -> CudaStorage {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    CudaStorage::from_host_bytes(dev, DType::F32, &bytes).unwrap()
}

fn download_f32(s: &CudaStorage, layout: &Layout) -> Vec<f32> {
    let bytes = s.to_host_bytes(layout).unwrap();
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
    }
}

#[test]
fn without_a_driver_every_entry_point_is_a_clear_error() {
    if cuda::is_available() {
        skip_note!("skipped: a CUDA device is present (this test is for machines without one)");
        return;
    }
    let cuda0 = Device::Cuda(0);
    let errors = [
        cuda::synchronize(&cuda0).unwrap_err(),
        cuda::Event::new(&cuda0).unwrap_err(),
        cuda::memory_allocated(&cuda0).unwrap_err(),
        cuda::empty_cache(&cuda0).unwrap_err(),
        cuda::cuda_device_for(&cuda0).unwrap_err(),
        cuda::time(&cuda0, || ()).unwrap_err(),
    ];
    for e in errors {
        let text = e.render(100);
        assert!(text.contains("device cuda:0 is not available"), "{text}");
        assert!(text.contains("Device::best_available()"), "the help offers the fix: {text}");
    }
}

#[test]
fn memory_functions_want_a_cuda_device() {
    let err = cuda::memory_allocated(&Device::Cpu).unwrap_err();
    insta::assert_snapshot!("memory_stats_of_cpu", err.render(100));
    assert!(cuda::memory_summary(&Device::Mps).is_err());
}

#[test]
fn synchronize_and_time_on_cpu_need_no_driver() {
    cuda::synchronize(&Device::Cpu).unwrap();
    let (value, elapsed) = cuda::time(&Device::Cpu, || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        7
    })
    .unwrap();
    assert_eq!(value, 7);
    assert!(elapsed >= std::time::Duration::from_millis(20));
}

#[test]
fn nvrtc_report_says_whether_nvrtc_was_found() {
    let report = cuda::nvrtc_report();
    let info = cuda::nvrtc_info();
    if info.found {
        assert!(report.starts_with("NVRTC: 12.") || report.starts_with("NVRTC: "), "{report}");
        assert!(info.version.is_some());
    } else {
        assert!(report.contains("not found (looked for libnvrtc.so"), "{report}");
    }
    assert!(report.contains("CUDA headers:"), "{report}");
}

#[test]
fn copies_fill_and_elementwise_kernels_match_the_host() {
    let Some(dev) = gpu() else { return };
    let xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) / 100.0).collect();
    let x = upload_f32(&dev, &xs);
    let l = Layout::contiguous(&[10, 100]);
    assert_eq!(download_f32(&x, &l), xs);
    let full = CudaStorage::full(&dev, DType::F32, 5, 2.5).unwrap();
    assert_eq!(download_f32(&full, &Layout::contiguous(&[5])), vec![2.5; 5]);
    for (op, f) in [
        ("exp", f32::exp as fn(f32) -> f32),
        ("tanh", f32::tanh),
        ("relu", |v: f32| v.max(0.0)),
        ("sigmoid", |v: f32| 1.0 / (1.0 + (-v).exp())),
        ("neg", |v: f32| -v),
    ] {
        let y = x.unary(op, &l).unwrap();
        close(&download_f32(&y, &l), &xs.iter().map(|&v| f(v)).collect::<Vec<_>>(), 1e-5);
    }
    // A transposed view goes through the strided path.
    let t = Layout { shape: vec![100, 10], strides: vec![1, 100], offset: 0 };
    let y = x.unary("neg", &t).unwrap();
    let xs = &xs;
    let expected: Vec<f32> = (0..100).flat_map(|r| (0..10).map(move |c| -xs[c * 100 + r])).collect();
    assert_eq!(download_f32(&y, &Layout::contiguous(&[100, 10])), expected);
}

#[test]
fn broadcast_binary_ops_casts_and_reductions_match_the_host() {
    let Some(dev) = gpu() else { return };
    let a: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let b: Vec<f32> = vec![10.0, 20.0, 30.0, 40.0];
    let (sa, sb) = (upload_f32(&dev, &a), upload_f32(&dev, &b));
    let (la, lb) = (Layout::contiguous(&[3, 4]), Layout::contiguous(&[4]));
    let sum = sa.binary("add", &la, &sb, &lb, &[3, 4]).unwrap();
    let expected: Vec<f32> = (0..12).map(|i| a[i] + b[i % 4]).collect();
    assert_eq!(download_f32(&sum, &la), expected);
    let lt = sa.binary_scalar("lt", &la, 5.0, false).unwrap();
    assert_eq!(lt.dtype(), DType::Bool);
    let bools = lt.to_host_bytes(&la).unwrap();
    assert_eq!(bools, (0..12).map(|i| u8::from(i < 5)).collect::<Vec<_>>());
    let as_i64 = sa.cast(&la, DType::I64).unwrap();
    let ints: Vec<i64> = as_i64
        .to_host_bytes(&la)
        .unwrap()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(ints, (0..12).collect::<Vec<i64>>());
    let rows = sa.reduce("sum", &la, 1, 0.0).unwrap();
    assert_eq!(download_f32(&rows, &Layout::contiguous(&[3])), vec![6.0, 22.0, 38.0]);
    let argmax = sa.reduce("argmax", &la, 0, 0.0).unwrap();
    assert_eq!(
        argmax
            .to_host_bytes(&Layout::contiguous(&[4]))
            .unwrap()
            .chunks_exact(8)
            .map(|c| c[0])
            .collect::<Vec<_>>(),
        vec![2; 4]
    );
    let var = sa.reduce("var", &la, 1, 1.0).unwrap();
    close(&download_f32(&var, &Layout::contiguous(&[3])), &[5.0 / 3.0; 3], 1e-5);
    let sm = sa.softmax(&la, false).unwrap();
    let row: Vec<f32> = (0..4).map(|i| (i as f32).exp()).collect();
    let z: f32 = row.iter().sum();
    close(&download_f32(&sm, &la)[..4], &row.iter().map(|v| v / z).collect::<Vec<_>>(), 1e-6);
}

#[test]
fn index_errors_name_the_bad_index() {
    let Some(dev) = gpu() else { return };
    let x = upload_f32(&dev, &[1.0, 2.0, 3.0]);
    let ids =
        CudaStorage::from_host_bytes(&dev, DType::I64, &[7i64.to_le_bytes(), 0i64.to_le_bytes()].concat())
            .unwrap();
    let err = x.index_select(&Layout::contiguous(&[3]), 0, &ids, &Layout::contiguous(&[2])).unwrap_err();
    assert!(err.render(100).contains("index 7 is out of range for a dimension of size 3"));
}

#[test]
fn matmul_uses_cublas_for_plain_and_transposed_operands() {
    let Some(dev) = gpu() else { return };
    let (m, k, n) = (3, 4, 2);
    let a: Vec<f32> = (0..m * k).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..k * n).map(|i| 1.0 - i as f32 * 0.25).collect();
    let mut expected = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            expected[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    let (sa, sb) = (upload_f32(&dev, &a), upload_f32(&dev, &b));
    let c = sa.matmul(&Layout::contiguous(&[m, k]), &sb, &Layout::contiguous(&[k, n]), (1, m, n, k)).unwrap();
    close(&download_f32(&c, &Layout::contiguous(&[m, n])), &expected, 1e-5);
    // bᵀ stored as [n, k] and viewed transposed.
    let bt: Vec<f32> = (0..n).flat_map(|j| (0..k).map(move |p| (p, j))).map(|(p, j)| b[p * n + j]).collect();
    let sbt = upload_f32(&dev, &bt);
    let view = Layout { shape: vec![k, n], strides: vec![1, k], offset: 0 };
    let c2 = sa.matmul(&Layout::contiguous(&[m, k]), &sbt, &view, (1, m, n, k)).unwrap();
    close(&download_f32(&c2, &Layout::contiguous(&[m, n])), &expected, 1e-5);
}

#[test]
fn pinned_copies_events_and_allocator_stats() {
    let Some(dev) = gpu() else { return };
    let device = Device::Cuda(0);
    let before = cuda::memory_allocated(&device).unwrap();
    let values: Vec<u8> = (0..4096u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let pinned = PinnedBuffer::new(&dev, values.len(), Some(&values)).unwrap();
    let start = cuda::Event::new(&device).unwrap();
    let end = cuda::Event::new(&device).unwrap();
    start.record().unwrap();
    let x = CudaStorage::from_pinned(&dev, DType::F32, &pinned, true).unwrap();
    end.record().unwrap();
    end.synchronize().unwrap();
    assert!(end.query());
    assert!(start.elapsed_time(&end).unwrap() >= 0.0);
    assert_eq!(x.to_host_bytes(&Layout::contiguous(&[4096])).unwrap(), values);
    assert_eq!(cuda::memory_allocated(&device).unwrap(), before + 4096 * 4);
    drop(x);
    assert_eq!(cuda::memory_allocated(&device).unwrap(), before);
    assert!(cuda::memory_reserved(&device).unwrap() >= 4096 * 4);
    assert!(cuda::memory_summary(&device).unwrap().contains("Reserved memory"));
}

#[test]
fn a_request_larger_than_the_device_is_out_of_memory() {
    let Some(dev) = gpu() else { return };
    let err = CudaStorage::alloc(&dev, DType::F32, 1 << 40).unwrap_err();
    assert!(err.is_out_of_memory(), "{err:?}");
    assert!(err.render(100).contains("lower the batch size first"));
}
