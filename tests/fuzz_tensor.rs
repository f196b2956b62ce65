//! Creation, shape and reduction ops over random shapes and dims, huge ones included: never a
//! panic or an abort; a shape no process can address is an invalid-argument error, one the
//! machine cannot hold an out-of-memory error, a dim a tensor does not have an error, and
//! everything else works with the shape PyTorch gives.
//!
//! CI runs a few dozen cases per property; `scripts/fuzz.sh` runs the same properties with many
//! more (`PROPTEST_CASES`).

use devcheck::shape::checked_nbytes;
use devcheck::{DType, Device, Error, Tensor};
use proptest::prelude::*;

const CPU: Device = Device::Cpu;

/// Results at least this large (16 TiB) exceed any machine these tests run on, so they must be
/// out-of-memory errors; smaller ones are kept tiny by the strategies.
const BEYOND_MACHINES: usize = 1 << 44;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    // Failures print their case; fuzz runs write no regression files into the source tree.
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// A dim: mostly small (0 included), sometimes huge (2^45 and up, past any machine's memory even
/// alone), sometimes the largest values there are.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0usize..4,
        2 => (45u32..64).prop_map(|bits| 1usize << bits),
        1 => Just(usize::MAX),
        1 => usize::MAX - 16..=usize::MAX,
    ]
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim(), 0..5)
}

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(devcheck::dtype::ALL_DTYPES.to_vec())
}

/// What making a tensor of `shape` and `dtype` must give.
#[derive(Debug, PartialEq)]
enum Expect {
    Made,
    Unaddressable,
    OutOfMemory,
}

fn expect(shape: &[usize], dtype: DType) -> Expect {
    match checked_nbytes(shape, dtype.size_in_bytes()) {
        None => Expect::Unaddressable,
        Some(bytes) if bytes >= BEYOND_MACHINES => Expect::OutOfMemory,
        Some(_) => Expect::Made,
    }
}

fn outcome(result: &devcheck::Result<Tensor>) -> Result<Expect, TestCaseError> {
    match result {
        Ok(_) => Ok(Expect::Made),
        Err(Error::InvalidArgument { detail, .. })
            if detail.contains("beyond what any process can address") =>
        {
            Ok(Expect::Unaddressable)
        }
        Err(Error::HostOutOfMemory { .. }) => Ok(Expect::OutOfMemory),
        Err(other) => Err(TestCaseError::fail(format!("unexpected error: {other:?}"))),
    }
}

/// The creation ops that take a shape.
#[derive(Clone, Copy, Debug)]
enum Make {
    Zeros,
    Ones,
    Full,
    Rand,
    Randn,
    Fake,
}

fn make(op: Make, shape: &[usize], dtype: DType) -> devcheck::Result<Tensor> {
    match op {
        Make::Zeros => Tensor::zeros(shape, (dtype, &CPU)),
        Make::Ones => Tensor::ones(shape, (dtype, &CPU)),
        Make::Full => Tensor::full(shape, 3.0, (dtype, &CPU)),
        Make::Rand => Tensor::rand(shape, (dtype, &CPU)),
        Make::Randn => Tensor::randn(shape, (dtype, &CPU)),
        Make::Fake => Tensor::fake(shape, dtype, &Device::Cuda(3)),
    }
}

fn make_op() -> impl Strategy<Value = Make> {
    prop::sample::select(vec![Make::Zeros, Make::Ones, Make::Full, Make::Rand, Make::Randn, Make::Fake])
}

/// A small real tensor of rank 0 to 4 (dims 0 to 3) with distinct values.
fn small_tensor() -> impl Strategy<Value = Tensor> {
    prop::collection::vec(0usize..4, 0..5).prop_map(|shape| {
        let n: usize = shape.iter().product();
        Tensor::arange(0.0, n as f64, 1.0, &CPU).and_then(|t| t.reshape(&shape)).expect("small tensor")
    })
}

/// PyTorch's rule: a dim lies in -rank..rank, where a 0-dim tensor counts as rank 1.
fn normalise(dim: isize, rank: usize) -> Option<usize> {
    let r = rank.max(1) as isize;
    let d = if dim < 0 { dim + r } else { dim };
    (0..r).contains(&d).then_some(d as usize)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn creation_makes_the_shape_or_says_why_not(op in make_op(), shape in shape(), dtype in dtype()) {
        let float_only = matches!(op, Make::Rand | Make::Randn) && !dtype.is_float();
        let result = make(op, &shape, dtype);
        if float_only {
            prop_assert!(matches!(result, Err(Error::InvalidArgument { .. })), "{:?}", result);
            return Ok(());
        }
        let mut want = expect(&shape, dtype);
        if matches!(op, Make::Fake) && want == Expect::OutOfMemory {
            want = Expect::Made; // a fake tensor has no data to allocate
        }
        prop_assert_eq!(outcome(&result)?, want, "{:?} {:?}", shape, dtype);
        if let Ok(t) = result {
            prop_assert_eq!(t.shape(), shape.as_slice());
            prop_assert_eq!(t.numel(), shape.iter().product::<usize>());
        }
    }

    #[test]
    fn expand_reshape_and_broadcasting_check_sizes(lhs in shape(), rhs in shape()) {
        // A [1, ..] tensor expanded to `lhs` takes no memory whatever its size.
        let one = Tensor::ones(vec![1; lhs.len()], &CPU).expect("tiny");
        let expanded = one.expand(&lhs);
        prop_assert_eq!(outcome(&expanded)?, match expect(&lhs, DType::F32) {
            Expect::OutOfMemory => Expect::Made,
            other => other,
        });
        let Ok(a) = expanded else { return Ok(()) };
        let b = Tensor::ones(vec![1; rhs.len()], &CPU).and_then(|t| t.expand(&rhs));
        let Ok(b) = b else { return Ok(()) };
        match devcheck::shape::broadcast_shapes(&lhs, &rhs) {
            None => prop_assert!(matches!(a.add(&b), Err(Error::ShapeMismatch { .. })), "{:?} + {:?}", lhs, rhs),
            Some(out) => {
                // The result, and a copy of each strided input (as much as a kernel may gather).
                let gathered = [&a, &b].into_iter().filter(|t| !t.is_contiguous()).map(Tensor::nbytes);
                let want = match checked_nbytes(&out, 4) {
                    None => Expect::Unaddressable,
                    Some(bytes) if gathered.fold(bytes, usize::saturating_add) >= BEYOND_MACHINES => Expect::OutOfMemory,
                    Some(_) => Expect::Made,
                };
                prop_assert_eq!(outcome(&a.add(&b))?, want, "{:?}", out);
            }
        }
        // An empty tensor reshapes to any shape with a 0 in it, if that shape is valid.
        if lhs.contains(&0) {
            let empty = Tensor::zeros([0], &CPU).expect("empty");
            prop_assert_eq!(outcome(&empty.reshape(&lhs))?, expect(&lhs, DType::F32));
        }
    }

    #[test]
    fn reductions_take_the_dims_pytorch_takes(
        x in small_tensor(),
        dims in prop::collection::vec(-6isize..6, 0..4),
        keepdim in any::<bool>(),
        op in 0usize..6,
    ) {
        let rank = x.rank();
        // argmax takes one dim: the first.
        let dims = if op == 5 { dims.into_iter().take(1).collect() } else { dims };
        if op == 5 && dims.is_empty() {
            return Ok(());
        }
        let normalised: Option<Vec<usize>> = dims.iter().map(|&d| normalise(d, rank)).collect();
        let distinct = normalised.as_ref().is_some_and(|n| {
            let mut sorted = n.clone();
            sorted.sort_unstable();
            sorted.windows(2).all(|w| w[0] != w[1])
        });
        let reduced: Vec<usize> = if rank == 0 { vec![] } else { normalised.clone().unwrap_or_default() };
        let empty_group = reduced.iter().any(|&d| x.shape()[d] == 0);
        let result = match op {
            0 => x.sum(dims.clone(), keepdim),
            1 => x.mean(dims.clone(), keepdim),
            2 => x.max(dims.clone(), keepdim),
            3 => x.min(dims.clone(), keepdim),
            4 => x.var(dims.clone(), keepdim),
            _ => x.argmax(dims[0], keepdim),
        };
        let needs_elements = matches!(op, 2 | 3 | 5);
        if !distinct || (needs_elements && empty_group) {
            prop_assert!(matches!(result, Err(Error::InvalidArgument { .. })), "{:?}", result);
            return Ok(());
        }
        let out = result.map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let mut want = Vec::new();
        for (d, &n) in x.shape().iter().enumerate() {
            if !reduced.contains(&d) {
                want.push(n);
            } else if keepdim {
                want.push(1);
            }
        }
        prop_assert_eq!(out.shape(), want.as_slice());
        if op == 0 {
            // The sum over every dim is the same whichever dims go first.
            let all = out.sum_all().and_then(|t| t.to_scalar::<f64>()).expect("sum");
            let n = x.numel() as f64;
            prop_assert_eq!(all, n * (n - 1.0) / 2.0);
        }
    }

    #[test]
    fn dim_taking_ops_never_panic(x in small_tensor(), d in -6isize..6, e in -6isize..6, start in 0usize..4, len in 0usize..4) {
        let rank = x.rank();
        let real_dim = (rank > 0).then(|| normalise(d, rank)).flatten();
        let index = Tensor::from_slice(&[0i64], [1], &CPU).expect("index");
        let results = [
            ("size", x.size(d).map(|_| x.clone())),
            ("narrow", x.narrow(d, start, len)),
            ("squeeze", x.squeeze(d)),
            ("unsqueeze", x.unsqueeze(d)),
            ("transpose", x.transpose(d, e)),
            ("flatten", x.flatten_from(d)),
            ("softmax", x.softmax(d)),
            ("cat", Tensor::cat(&[&x, &x], d)),
            ("stack", Tensor::stack(&[&x, &x], d)),
            ("index_select", x.index_select(d, &index)),
        ];
        for (op, result) in results {
            let valid = match op {
                "size" | "cat" => real_dim.is_some(),
                "narrow" => real_dim.is_some_and(|k| start + len <= x.shape()[k]),
                "index_select" => real_dim.is_some_and(|k| x.shape()[k] > 0),
                "unsqueeze" | "stack" => normalise(d, rank + 1).is_some(),
                "transpose" => normalise(d, rank).is_some() && normalise(e, rank).is_some(),
                _ => normalise(d, rank).is_some(),
            };
            prop_assert_eq!(result.is_ok(), valid, "{} on {:?} at {}: {:?}", op, x.shape(), d, result.err());
        }
    }
}
