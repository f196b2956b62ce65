//! `ndarray` views of CPU tensors are zero-copy; accelerator tensors say to call `.cpu()` first.
#![cfg(feature = "ndarray")]

use devcheck::{DType, Device, Error, Tensor};

#[test]
fn views_follow_strides_without_copying() {
    let x = Tensor::arange(0.0, 6.0, 1.0, &Device::Cpu).unwrap().reshape([2, 3]).unwrap();
    let t = x.t().unwrap();
    let (sum, first_col, ptr) = t
        .with_ndarray::<f32, _>(|v| {
            (v.sum(), v.index_axis(ndarray::Axis(1), 0).iter().copied().collect::<Vec<f32>>(), v.as_ptr())
        })
        .unwrap();
    assert_eq!(sum, 15.0);
    assert_eq!(first_col, vec![0.0, 1.0, 2.0]);
    let base_ptr = x.with_ndarray::<f32, _>(|v| v.as_ptr()).unwrap();
    assert_eq!(ptr, base_ptr, "the view points into the tensor's own storage");
    let owned = t.to_ndarray::<f64>().unwrap();
    assert_eq!(owned.shape(), &[3, 2]);
    assert_eq!(owned[[2, 1]], 5.0);
    let back = Tensor::from_ndarray(owned.view(), &Device::Cpu).unwrap();
    assert_eq!(back.to_vec::<f64>().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert!(x.with_ndarray::<f64, _>(|_| ()).is_err(), "dtype must match for a view");
}

#[test]
fn accelerator_tensors_must_come_to_the_host_first() {
    let g = Tensor::fake([2], DType::F32, &Device::Cuda(0)).unwrap();
    let err = g.with_ndarray::<f32, _>(|_| ()).unwrap_err();
    assert!(matches!(err, Error::NotOnHost { .. }));
    let text = err.render(100);
    assert!(text.contains(".cpu()"), "{text}");
}
