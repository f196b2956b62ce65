//! Sizes no machine holds, dims a tensor does not have, indices out of range: each is an error
//! that says so, never a panic or an abort.

use devcheck::{DType, Device, Error, Tensor};

const CPU: Device = Device::Cpu;

/// Elements of f32 that no machine has the memory for (64 TiB) but whose size is addressable.
const BEYOND_ANY_MACHINE: usize = 1 << 44;

fn render(e: &Error) -> String {
    e.render(100)
}

/// The rendered error, with the line numbers of this file and the machine's memory (which
/// differ between runs) replaced.
fn snapshot(name: &str, err: &Error) {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"tests/tensor_limits\.rs:\d+:\d+", "tests/tensor_limits.rs:[LINE]");
    settings.add_filter(r"this machine: [^\n]*", "this machine: [MEMORY]");
    settings.bind(|| insta::assert_snapshot!(name, render(err)));
}

fn is_unaddressable(result: devcheck::Result<Tensor>) -> bool {
    matches!(result, Err(Error::InvalidArgument { ref detail, .. }) if detail.contains("beyond what any process can address"))
}

fn is_out_of_memory<T>(result: devcheck::Result<T>) -> bool {
    matches!(result, Err(Error::HostOutOfMemory { .. }))
}

#[test]
fn sizes_that_overflow_are_errors_at_creation() {
    assert!(is_unaddressable(Tensor::zeros([1 << 62], &CPU)));
    assert!(is_unaddressable(Tensor::zeros([1 << 61], &CPU)));
    assert!(is_unaddressable(Tensor::ones([1 << 40, 1 << 40], &CPU)));
    assert!(is_unaddressable(Tensor::randn([usize::MAX], &CPU)));
    assert!(is_unaddressable(Tensor::linspace(0.0, 1.0, usize::MAX, &CPU)));
    assert!(is_unaddressable(Tensor::eye(1 << 32, &CPU)));
    assert!(is_unaddressable(Tensor::fake([1 << 40, 1 << 40], DType::F32, &Device::Cuda(0))));
    // Empty, but its strides would overflow: still no shape a tensor can have.
    assert!(is_unaddressable(Tensor::zeros([0, 1 << 62, 1 << 62], &CPU)));
    let arange = Tensor::arange(0.0, 1e30, 1.0, &CPU);
    assert!(
        matches!(&arange, Err(Error::InvalidArgument { detail, .. }) if detail.contains("1.000e30 values"))
    );
    snapshot("zeros_1_shl_62", &Tensor::zeros([1 << 62], &CPU).unwrap_err());
}

#[test]
fn tensors_larger_than_the_machine_are_out_of_memory_errors() {
    let err = Tensor::zeros([BEYOND_ANY_MACHINE], &CPU).unwrap_err();
    let Error::HostOutOfMemory { op, requested, .. } = &err else { panic!("{err:?}") };
    assert_eq!((*op, *requested), ("zeros", BEYOND_ANY_MACHINE * 4));
    snapshot("zeros_beyond_the_machine", &err);
    assert!(is_out_of_memory(Tensor::ones([BEYOND_ANY_MACHINE], &CPU)));
    assert!(is_out_of_memory(Tensor::randn([BEYOND_ANY_MACHINE], &CPU)));
    assert!(is_out_of_memory(Tensor::rand([1 << 30, 1 << 14], (DType::F64, &CPU))));
    assert!(is_out_of_memory(Tensor::arange(0.0, BEYOND_ANY_MACHINE as f64, 1.0, &CPU)));
    // A dry run makes no data: the same shape is fine there.
    let _fake = devcheck::fake::enter();
    assert_eq!(Tensor::zeros([BEYOND_ANY_MACHINE], &CPU).unwrap().numel(), BEYOND_ANY_MACHINE);
}

#[test]
fn an_expanded_view_is_free_but_its_copies_are_out_of_memory_errors() -> devcheck::Result<()> {
    let one = Tensor::ones([1, 1], &CPU)?;
    let tall = one.expand([BEYOND_ANY_MACHINE, 1])?;
    let wide = one.expand([1, BEYOND_ANY_MACHINE])?;
    assert_eq!(tall.numel(), BEYOND_ANY_MACHINE);
    // Broadcasting the two would be 2^88 elements: not a shape at all.
    assert!(is_unaddressable(tall.add(&wide)));
    assert!(is_unaddressable(one.expand([1 << 40, 1 << 40])));
    // Results, and copies of the view, that exceed the machine.
    assert!(is_out_of_memory(tall.add(&tall)));
    assert!(is_out_of_memory(tall.mul_scalar(2.0)));
    assert!(is_out_of_memory(tall.contiguous()));
    assert!(is_out_of_memory(tall.sum_all()), "reducing an expanded view copies it first");
    assert!(is_out_of_memory(tall.to_vec::<f32>()));
    assert!(is_out_of_memory(tall.to_raw_bytes()));
    assert!(is_out_of_memory(Tensor::cat(&[&tall, &tall], 0)));
    let column = Tensor::ones([1 << 22, 1], &CPU)?;
    let row = Tensor::ones([1, 1 << 22], &CPU)?;
    let err = column.matmul(&row).unwrap_err();
    assert!(matches!(err, Error::HostOutOfMemory { op: "matmul", requested, .. } if requested == 1 << 46));
    assert!(render(&err).contains("tests/tensor_limits.rs:"), "the error names the user's line");
    // Nothing was lost on the way: the small tensors still work.
    assert_eq!(column.sum_all()?.to_scalar::<f32>()?, (1 << 22) as f32);
    Ok(())
}

#[test]
fn reductions_over_dim_0_of_a_scalar_leave_it_as_pytorch_does() -> devcheck::Result<()> {
    let s = Tensor::scalar(2.5f32, &CPU)?;
    for dim in [0, -1] {
        for keepdim in [false, true] {
            for r in [s.mean(dim, keepdim)?, s.sum(dim, keepdim)?, s.max(dim, keepdim)?, s.min(dim, keepdim)?]
            {
                assert_eq!((r.shape(), r.to_scalar::<f32>()?), (&[][..], 2.5));
            }
            assert_eq!(s.argmax(dim, keepdim)?.to_scalar::<i64>()?, 0);
            assert_eq!(s.argmin(dim, keepdim)?.to_scalar::<i64>()?, 0);
            // torch.tensor(2.5).var(0) is nan: one value, correction 1.
            assert!(s.var(dim, keepdim)?.to_scalar::<f32>()?.is_nan());
            assert_eq!(s.var_with_correction(dim, 0, keepdim)?.to_scalar::<f32>()?, 0.0);
        }
    }
    for bad in [1, -2, 5] {
        assert!(matches!(s.mean(bad, false), Err(Error::InvalidArgument { .. })), "dim {bad}");
    }
    assert!(matches!(s.sum([0, -1], false), Err(Error::InvalidArgument { .. })), "dim 0 twice");
    // The gradient of the identity it is.
    let x = Tensor::scalar(3.0f32, &CPU)?.with_requires_grad()?;
    x.mean(0, false)?.mul_scalar(4.0)?.backward()?;
    assert_eq!(x.grad().expect("a gradient").to_scalar::<f32>()?, 4.0);
    Ok(())
}

#[test]
fn other_dim_ops_on_a_scalar_are_errors_or_pytorch_s_identity() -> devcheck::Result<()> {
    let s = Tensor::scalar(2.0f32, &CPU)?;
    let index = Tensor::from_slice(&[0i64], [1], &CPU)?;
    assert!(matches!(s.size(0), Err(Error::InvalidArgument { .. })));
    assert!(matches!(s.narrow(0, 0, 1), Err(Error::InvalidArgument { .. })));
    assert!(matches!(Tensor::cat(&[&s, &s], 0), Err(Error::InvalidArgument { .. })));
    assert!(matches!(s.index_select(0, &index), Err(Error::InvalidArgument { .. })));
    assert!(matches!(s.gather(0, &Tensor::scalar(0i64, &CPU)?), Err(Error::InvalidArgument { .. })));
    snapshot("size_of_a_scalar", &s.size(0).unwrap_err());
    // As in PyTorch: transposing, squeezing or flattening a scalar at dim 0/-1, softmax over it,
    // and stacking scalars work.
    assert_eq!(s.transpose(0, -1)?.shape(), &[] as &[usize]);
    assert_eq!(s.squeeze(-1)?.shape(), &[] as &[usize]);
    assert_eq!(s.flatten_from(0)?.shape(), &[1]);
    assert_eq!(s.softmax(-1)?.to_scalar::<f32>()?, 1.0);
    assert_eq!(Tensor::stack(&[&s, &s], 0)?.to_vec::<f32>()?, [2.0, 2.0]);
    // ... but not at a dim it does not have.
    assert!(matches!(s.softmax(1), Err(Error::InvalidArgument { .. })));
    assert!(matches!(s.flatten_from(2), Err(Error::InvalidArgument { .. })));
    assert!(matches!(s.transpose(0, 1), Err(Error::InvalidArgument { .. })));
    Ok(())
}

#[test]
fn negative_indices_are_out_of_range_as_in_pytorch() -> devcheck::Result<()> {
    let x = Tensor::arange(0.0, 6.0, 1.0, &CPU)?.reshape([2, 3])?;
    let last = Tensor::from_slice(&[0i64, -1], [2], &CPU)?;
    let err = x.index_select(1, &last).unwrap_err();
    snapshot("index_select_negative", &err);
    let gather_index = Tensor::from_slice(&[0i64, -1, 2, 1], [2, 2], &CPU)?;
    let err = x.gather(1, &gather_index).unwrap_err();
    assert!(render(&err).contains("index[1] = -1 is out of range for dim 1 of size 3"), "{}", render(&err));
    // In range, the same calls work.
    let ok = Tensor::from_slice(&[0i64, 2], [2], &CPU)?;
    assert_eq!(x.index_select(1, &ok)?.to_vec::<f32>()?, [0.0, 2.0, 3.0, 5.0]);
    // A dry run does not know index values: nothing to check until real data runs.
    let _fake = devcheck::fake::enter();
    let fake_index = Tensor::from_slice(&[0i64, -1], [2], &CPU)?;
    assert_eq!(x.index_select(1, &fake_index)?.shape(), &[2, 2]);
    Ok(())
}

#[test]
fn an_index_into_an_empty_dim_is_an_error_even_without_values() -> devcheck::Result<()> {
    let empty = Tensor::zeros([2, 0], &CPU)?;
    let index = Tensor::from_slice(&[0i64], [1], &CPU)?;
    assert!(matches!(empty.index_select(1, &index), Err(Error::InvalidArgument { .. })));
    // No index, no problem.
    let none = Tensor::zeros([0], (DType::I64, &CPU))?;
    assert_eq!(empty.index_select(1, &none)?.shape(), &[2, 0]);
    // The dry run knows the shapes, so it reports it too.
    let _fake = devcheck::fake::enter();
    let fake_index = Tensor::zeros([3], (DType::I64, &CPU))?;
    assert!(matches!(empty.index_select(1, &fake_index), Err(Error::InvalidArgument { .. })));
    Ok(())
}
