//! The device side of the CUDA backend. Without a driver every entry point must return a clear
//! error (checked here on any machine); with a GPU the kernels are compared with host results
//! (those tests print "skipped: no CUDA device" when there is none).

use crate::support::gpu;

use std::sync::{Arc, RwLockReadGuard};

use devcheck::cuda::{self, CudaDevice, CudaStorage, PinnedBuffer, ReduceOp};
use devcheck::shape::Layout;
use devcheck::{BinaryOp, CmpOp, DType, Device, UnaryOp};

/// cuda:0 with the GPU lock held shared, or `None` (and a skip note) without a GPU.
fn gpu(test: &str) -> Option<(RwLockReadGuard<'static, ()>, Arc<CudaDevice>)> {
    let guard = gpu::shared(test)?;
    Some((guard, cuda::cuda_device_for(&Device::Cuda(0)).expect("cuda:0 is available")))
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
        gpu::skip_note("skipped: a CUDA device is present (this test is for machines without one)");
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
    let Some((_gpu, dev)) = gpu("copies and elementwise") else { return };
    let xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) / 100.0).collect();
    let x = upload_f32(&dev, &xs);
    let l = Layout::contiguous(&[10, 100]);
    assert_eq!(download_f32(&x, &l), xs);
    let full = CudaStorage::full(&dev, DType::F32, 5, 2.5).unwrap();
    assert_eq!(download_f32(&full, &Layout::contiguous(&[5])), vec![2.5; 5]);
    for (op, f) in [
        (UnaryOp::Exp, f32::exp as fn(f32) -> f32),
        (UnaryOp::Tanh, f32::tanh),
        (UnaryOp::Relu, |v: f32| v.max(0.0)),
        (UnaryOp::Sigmoid, |v: f32| 1.0 / (1.0 + (-v).exp())),
        (UnaryOp::Neg, |v: f32| -v),
    ] {
        let y = x.unary(op, &l).unwrap();
        close(&download_f32(&y, &l), &xs.iter().map(|&v| f(v)).collect::<Vec<_>>(), 1e-5);
    }
    // A transposed view goes through the strided path.
    let t = Layout { shape: vec![100, 10], strides: vec![1, 100], offset: 0 };
    let y = x.unary(UnaryOp::Neg, &t).unwrap();
    let xs = &xs;
    let expected: Vec<f32> = (0..100).flat_map(|r| (0..10).map(move |c| -xs[c * 100 + r])).collect();
    assert_eq!(download_f32(&y, &Layout::contiguous(&[100, 10])), expected);
}

#[test]
fn broadcast_binary_ops_casts_and_reductions_match_the_host() {
    let Some((_gpu, dev)) = gpu("binary ops, casts, reductions") else { return };
    let a: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let b: Vec<f32> = vec![10.0, 20.0, 30.0, 40.0];
    let (sa, sb) = (upload_f32(&dev, &a), upload_f32(&dev, &b));
    let (la, lb) = (Layout::contiguous(&[3, 4]), Layout::contiguous(&[4]));
    let sum = sa.binary(BinaryOp::Add, &la, &sb, &lb, &[3, 4]).unwrap();
    let expected: Vec<f32> = (0..12).map(|i| a[i] + b[i % 4]).collect();
    assert_eq!(download_f32(&sum, &la), expected);
    let lt = sa.compare_scalar(CmpOp::Lt, &la, 5.0).unwrap();
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
    let rows = sa.reduce(ReduceOp::Sum, &la, 1).unwrap();
    assert_eq!(download_f32(&rows, &Layout::contiguous(&[3])), vec![6.0, 22.0, 38.0]);
    let argmax = sa.reduce(ReduceOp::ArgMax, &la, 0).unwrap();
    assert_eq!(
        argmax
            .to_host_bytes(&Layout::contiguous(&[4]))
            .unwrap()
            .chunks_exact(8)
            .map(|c| c[0])
            .collect::<Vec<_>>(),
        vec![2; 4]
    );
    let var = sa.reduce(ReduceOp::Var(1), &la, 1).unwrap();
    close(&download_f32(&var, &Layout::contiguous(&[3])), &[5.0 / 3.0; 3], 1e-5);
    let sm = sa.softmax(&la, false).unwrap();
    let row: Vec<f32> = (0..4).map(|i| (i as f32).exp()).collect();
    let z: f32 = row.iter().sum();
    close(&download_f32(&sm, &la)[..4], &row.iter().map(|v| v / z).collect::<Vec<_>>(), 1e-6);
}

#[test]
fn index_errors_name_the_bad_index() {
    let Some((_gpu, dev)) = gpu("index errors") else { return };
    let x = upload_f32(&dev, &[1.0, 2.0, 3.0]);
    let ids =
        CudaStorage::from_host_bytes(&dev, DType::I64, &[7i64.to_le_bytes(), 0i64.to_le_bytes()].concat())
            .unwrap();
    let err = x.index_select(&Layout::contiguous(&[3]), 0, &ids, &Layout::contiguous(&[2])).unwrap_err();
    assert!(err.render(100).contains("index 7 is out of range for a dimension of size 3"));
}

#[test]
fn matmul_uses_cublas_for_plain_and_transposed_operands() {
    let Some((_gpu, dev)) = gpu("matmul") else { return };
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
    // Asserts exact allocator statistics: no other GPU test of this binary runs meanwhile.
    let Some(_alone) = gpu::exclusive("allocator stats") else { return };
    let dev = cuda::cuda_device_for(&Device::Cuda(0)).unwrap();
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
    let Some((_gpu, dev)) = gpu("out of memory") else { return };
    let err = CudaStorage::alloc(&dev, DType::F32, 1 << 40).unwrap_err();
    assert!(err.is_out_of_memory(), "{err:?}");
    assert!(err.render(100).contains("lower the batch size first"));
}

fn upload<T: Copy>(
    dev: &Arc<CudaDevice>,
    dtype: DType,
    values: &[T],
    to_bytes: fn(T) -> Vec<u8>,
) -> CudaStorage {
    let bytes: Vec<u8> = values.iter().flat_map(|&v| to_bytes(v)).collect();
    CudaStorage::from_host_bytes(dev, dtype, &bytes).unwrap()
}

fn download_f64(s: &CudaStorage, n: usize) -> Vec<f64> {
    let bytes = s.to_host_bytes(&Layout::contiguous(&[n])).unwrap();
    bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}

fn download_i64(s: &CudaStorage, n: usize) -> Vec<i64> {
    let bytes = s.to_host_bytes(&Layout::contiguous(&[n])).unwrap();
    bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn copies_kernels_and_cublas_work_on_a_thread_that_did_not_create_the_device() {
    let Some((_gpu, dev)) = gpu("another thread") else { return };
    // Blocks freed here stay in the cache: the uploads below are served from it, without the
    // allocator ever touching the driver on the new thread.
    drop(upload_f32(&dev, &[0.0; 4096]));
    let worker = std::thread::spawn(move || {
        let xs: Vec<f32> = (0..4096).map(|i| i as f32 / 64.0).collect();
        let x = upload_f32(&dev, &xs);
        let l = Layout::contiguous(&[64, 64]);
        assert_eq!(download_f32(&x, &l), xs, "upload and download");
        let y = x.unary(UnaryOp::Neg, &l).unwrap();
        assert_eq!(download_f32(&y, &l), xs.iter().map(|v| -v).collect::<Vec<_>>());
        let c = x.matmul(&l, &y, &l, (1, 64, 64, 64)).unwrap();
        let expected: Vec<f32> = (0..64 * 64)
            .map(|ij| (0..64).map(|p| xs[ij / 64 * 64 + p] * -xs[p * 64 + ij % 64]).sum())
            .collect();
        close(&download_f32(&c, &l), &expected, 1e-4);
        let pinned = PinnedBuffer::new(&dev, 16, Some(&[7u8; 16])).unwrap();
        let p = CudaStorage::from_pinned(&dev, DType::U8, &pinned, true).unwrap();
        assert_eq!(p.to_host_bytes(&Layout::contiguous(&[16])).unwrap(), vec![7u8; 16]);
    });
    worker.join().expect("the worker thread's GPU calls succeed");
}

#[test]
fn long_rows_are_reduced_in_pieces_and_combined_exactly() {
    let Some((_gpu, dev)) = gpu("multi-pass reductions") else { return };
    // Past 2^24 elements: every piece and the combined total are exact in i64 and f64.
    let n = (1 << 24) + 7;
    let ones = upload(&dev, DType::I32, &vec![1i32; n], |v| v.to_le_bytes().to_vec());
    let total = ones.reduce(ReduceOp::Sum, &Layout::contiguous(&[n]), 0).unwrap();
    assert_eq!(download_i64(&total, 1), vec![n as i64]);
    let ramp: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let x = upload(&dev, DType::F64, &ramp, |v| v.to_le_bytes().to_vec());
    let l = Layout::contiguous(&[n]);
    let sum = x.reduce(ReduceOp::Sum, &l, 0).unwrap();
    assert_eq!(download_f64(&sum, 1), vec![(n as f64) * (n as f64 - 1.0) / 2.0]);
    let max = x.reduce(ReduceOp::Max, &l, 0).unwrap();
    assert_eq!(download_f64(&max, 1), vec![(n - 1) as f64]);
    // Variance of 0..n (population): (n^2 - 1) / 12, through Welford and Chan's combination.
    let var = x.reduce(ReduceOp::Var(0), &l, 0).unwrap();
    let expected = ((n as f64).powi(2) - 1.0) / 12.0;
    let got = download_f64(&var, 1)[0];
    assert!((got - expected).abs() <= 1e-7 * expected, "var {got} vs {expected}");
    // The first of two equal maxima, one in an early piece and one in a late one.
    let mut peaks = vec![0.0f64; n];
    peaks[n - 3] = 5.0;
    peaks[70_000] = 5.0;
    let p = upload(&dev, DType::F64, &peaks, |v| v.to_le_bytes().to_vec());
    assert_eq!(download_i64(&p.reduce(ReduceOp::ArgMax, &l, 0).unwrap(), 1), vec![70_000]);
    let mut dip = vec![0.0f64; n];
    dip[n - 2] = f64::NAN;
    let d = upload(&dev, DType::F64, &dip, |v| v.to_le_bytes().to_vec());
    assert!(download_f64(&d.reduce(ReduceOp::Max, &l, 0).unwrap(), 1)[0].is_nan(), "NaN wins max");
    assert_eq!(download_i64(&d.reduce(ReduceOp::ArgMin, &l, 0).unwrap(), 1), vec![(n - 2) as i64]);
}

#[test]
fn reductions_over_a_leading_dim_read_columns_and_match_the_host() {
    let Some((_gpu, dev)) = gpu("column reductions") else { return };
    let (rows, cols) = (5000, 37);
    let xs: Vec<f64> = (0..rows * cols).map(|i| ((i * 7919) % 1009) as f64 - 500.0).collect();
    let x = upload(&dev, DType::F64, &xs, |v| v.to_le_bytes().to_vec());
    let l = Layout::contiguous(&[rows, cols]);
    let xs = &xs;
    let column = |c: usize| (0..rows).map(move |r| xs[r * cols + c]);
    let sums = download_f64(&x.reduce(ReduceOp::Sum, &l, 0).unwrap(), cols);
    let expected: Vec<f64> = (0..cols).map(|c| column(c).sum()).collect();
    assert_eq!(sums, expected, "integers in f64 sum exactly in any order");
    let argmins = download_i64(&x.reduce(ReduceOp::ArgMin, &l, 0).unwrap(), cols);
    for (c, &got) in argmins.iter().enumerate() {
        let min = column(c).fold(f64::INFINITY, f64::min);
        let first = column(c).position(|v| v == min).unwrap();
        assert_eq!(got, first as i64, "column {c}");
    }
    // The same columns seen through a transposed view: rows of the view, 37 apart in memory.
    let t = Layout { shape: vec![cols, rows], strides: vec![1, cols], offset: 0 };
    assert_eq!(download_f64(&x.reduce(ReduceOp::Sum, &t, 1).unwrap(), cols), expected);
}

#[test]
fn a_pinned_buffer_waits_for_the_copy_filling_it_before_it_is_read_or_uploaded() {
    let Some((_gpu, dev)) = gpu("pinned hazards") else { return };
    let n = 1 << 22;
    let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = upload_f32(&dev, &xs);
    let l = Layout::contiguous(&[n]);
    for _ in 0..3 {
        let pinned = PinnedBuffer::new(&dev, n * 4, None).unwrap();
        // Queued, not waited for: the reads below must wait for it themselves.
        x.unary(UnaryOp::Neg, &l).unwrap().copy_to_pinned(&l, &pinned).unwrap();
        let again = CudaStorage::from_pinned(&dev, DType::F32, &pinned, true).unwrap();
        let host = pinned.to_vec().unwrap();
        let host: Vec<f32> =
            host.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(host, xs.iter().map(|v| -v).collect::<Vec<_>>());
        assert_eq!(download_f32(&again, &l), host);
    }
}
