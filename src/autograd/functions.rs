//! The backward function of every differentiable op, written with tensor ops so it runs on every
//! device (fake ones included); the few hot ones use fused kernels from [`super::fused`].

use crate::backend::WindowGeometry;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::{BinaryOp, Tensor, UnaryOp};

use super::{fused, window};

/// What an op saved for its backward pass. Saved outputs are detached copies of the handle (same
/// storage, no graph), so a node never keeps its own output's node alive.
pub(crate) enum GradFn {
    /// `lhs ± rhs`; a shape is kept only when that operand was broadcast.
    AddSub {
        sub: bool,
        lhs_shape: Option<Vec<usize>>,
        rhs_shape: Option<Vec<usize>>,
    },
    /// `mul`, `div`, `pow`, `maximum`, `minimum`.
    Binary {
        op: BinaryOp,
        lhs: Tensor,
        rhs: Tensor,
    },
    /// An op with a Rust scalar (`x * 2`, `1 - x`, `x.pow_scalar(3)`, `clamp`).
    Scalar {
        op: BinaryOp,
        value: f64,
        reversed: bool,
        input: Tensor,
    },
    /// `out` is kept for the functions whose derivative is cheapest from their result. For ReLU,
    /// `input` is its result (positive exactly where the input is), so the input can be freed.
    Unary {
        op: UnaryOp,
        input: Tensor,
        out: Option<Tensor>,
    },
    Matmul {
        lhs: Tensor,
        rhs: Tensor,
    },
    /// `sum`/`mean` over `dims` of an input of `shape` (`scale` = 1 / count for the mean).
    SumMean {
        shape: Vec<usize>,
        dims: Vec<usize>,
        keepdim: bool,
        scale: Option<f64>,
    },
    /// `max`/`min`: the gradient is shared evenly among the elements equal to the result.
    MaxMin {
        input: Tensor,
        out: Tensor,
        dims: Vec<usize>,
        keepdim: bool,
    },
    Var {
        input: Tensor,
        dims: Vec<usize>,
        keepdim: bool,
        correction: usize,
    },
    Softmax {
        out: Tensor,
        dim: usize,
        log: bool,
    },
    Where {
        condition: Tensor,
        true_shape: Vec<usize>,
        false_shape: Vec<usize>,
    },
    /// `where` with a Rust scalar in place of one side: the tensor side's gradient only.
    MaskedFill {
        mask: Tensor,
    },
    Triangle {
        diagonal: i64,
        upper: bool,
    },
    Reshape {
        shape: Vec<usize>,
    },
    Transpose {
        dim0: usize,
        dim1: usize,
    },
    Permute {
        dims: Vec<usize>,
    },
    Narrow {
        shape: Vec<usize>,
        dim: usize,
        start: usize,
    },
    Squeeze {
        dim: usize,
    },
    Unsqueeze {
        dim: usize,
    },
    Expand {
        shape: Vec<usize>,
    },
    Cat {
        dim: usize,
        sizes: Vec<usize>,
    },
    IndexSelect {
        shape: Vec<usize>,
        dim: usize,
        index: Tensor,
    },
    Gather {
        shape: Vec<usize>,
        dim: usize,
        index: Tensor,
    },
    /// A convolution on the host; the edges are the input, the weight, then the bias where given.
    Conv2d(window::Conv2dSaved),
    MaxPool2d {
        input: Tensor,
        out: Tensor,
        geometry: WindowGeometry,
    },
    ToDType {
        dtype: DType,
    },
    ToDevice {
        device: Device,
    },
    /// `contiguous` copies: the gradient passes through.
    Identity,
    /// Layer norm run as one fused kernel on the host (other devices compose it from the ops
    /// above); the edges are the input, then the weight and the bias where given.
    LayerNorm(fused::LayerNormSaved),
}

type Grads = Vec<Option<Tensor>>;

impl GradFn {
    /// The op's name, as PyTorch's `grad_fn` prints it (`MulBackward`).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            GradFn::AddSub { sub: false, .. } => "AddBackward",
            GradFn::AddSub { sub: true, .. } => "SubBackward",
            GradFn::Binary { op, .. } | GradFn::Scalar { op, .. } => match op {
                BinaryOp::Add => "AddBackward",
                BinaryOp::Sub => "SubBackward",
                BinaryOp::Mul => "MulBackward",
                BinaryOp::Div => "DivBackward",
                BinaryOp::Pow => "PowBackward",
                BinaryOp::Maximum => "MaximumBackward",
                BinaryOp::Minimum => "MinimumBackward",
            },
            GradFn::Unary { op, .. } => match op {
                UnaryOp::Neg => "NegBackward",
                UnaryOp::Abs => "AbsBackward",
                UnaryOp::Relu => "ReluBackward",
                UnaryOp::Exp => "ExpBackward",
                UnaryOp::Log => "LogBackward",
                UnaryOp::Sqrt => "SqrtBackward",
                UnaryOp::Rsqrt => "RsqrtBackward",
                UnaryOp::Tanh => "TanhBackward",
                UnaryOp::Sigmoid => "SigmoidBackward",
                UnaryOp::Gelu | UnaryOp::GeluTanh => "GeluBackward",
                UnaryOp::Silu => "SiluBackward",
                UnaryOp::Sin => "SinBackward",
                UnaryOp::Cos => "CosBackward",
            },
            GradFn::Matmul { .. } => "MatmulBackward",
            GradFn::SumMean { scale: None, .. } => "SumBackward",
            GradFn::SumMean { scale: Some(_), .. } => "MeanBackward",
            GradFn::MaxMin { .. } => "MaxBackward",
            GradFn::Var { .. } => "VarBackward",
            GradFn::Softmax { log: false, .. } => "SoftmaxBackward",
            GradFn::Softmax { log: true, .. } => "LogSoftmaxBackward",
            GradFn::Where { .. } => "WhereBackward",
            GradFn::MaskedFill { .. } => "MaskedFillBackward",
            GradFn::Triangle { upper: true, .. } => "TriuBackward",
            GradFn::Triangle { upper: false, .. } => "TrilBackward",
            GradFn::Reshape { .. } => "ReshapeBackward",
            GradFn::Transpose { .. } => "TransposeBackward",
            GradFn::Permute { .. } => "PermuteBackward",
            GradFn::Narrow { .. } => "NarrowBackward",
            GradFn::Squeeze { .. } => "SqueezeBackward",
            GradFn::Unsqueeze { .. } => "UnsqueezeBackward",
            GradFn::Expand { .. } => "ExpandBackward",
            GradFn::Cat { .. } => "CatBackward",
            GradFn::IndexSelect { .. } => "IndexSelectBackward",
            GradFn::Gather { .. } => "GatherBackward",
            GradFn::Conv2d(_) => "ConvolutionBackward",
            GradFn::MaxPool2d { .. } => "MaxPool2dBackward",
            GradFn::ToDType { .. } => "ToDTypeBackward",
            GradFn::ToDevice { .. } => "ToDeviceBackward",
            GradFn::Identity => "CloneBackward",
            GradFn::LayerNorm(_) => "LayerNormBackward",
        }
    }

    /// Gradients of the inputs from the gradient of the output, which the engine hands over (a
    /// kernel may write its result over it: see [`fused::relu_backward`]); only those flagged
    /// in `needed` are computed.
    pub(crate) fn backward(&self, grad: Tensor, needed: &[bool]) -> Result<Grads> {
        let want = |i: usize| needed.get(i).copied().unwrap_or(false);
        let g = &grad;
        Ok(match self {
            GradFn::AddSub { sub, lhs_shape, rhs_shape } => {
                let ga = if want(0) { Some(sum_to_opt(g, lhs_shape.as_deref())?) } else { None };
                let gb = if want(1) {
                    let gb = sum_to_opt(g, rhs_shape.as_deref())?;
                    Some(if *sub { gb.neg()? } else { gb })
                } else {
                    None
                };
                vec![ga, gb]
            }
            GradFn::Binary { op, lhs, rhs } => binary(*op, lhs, rhs, g, want(0), want(1))?,
            GradFn::Scalar { op, value, reversed, input } => {
                vec![Some(scalar(*op, *value, *reversed, input, g)?)]
            }
            GradFn::Unary { op, input, out } => vec![Some(unary(*op, input, out.as_ref(), grad)?)],
            GradFn::Matmul { lhs, rhs } => matmul(lhs, rhs, g, want(0), want(1))?,
            GradFn::SumMean { shape, dims, keepdim, scale } => {
                let g = match scale {
                    Some(s) => g.mul_scalar(*s)?,
                    None => g.clone(),
                };
                vec![Some(keep_dims(&g, dims, *keepdim)?.expand(shape)?)]
            }
            GradFn::MaxMin { input, out, dims, keepdim } => {
                let out = keep_dims(out, dims, *keepdim)?;
                let hits = input.eq(&out)?.to_dtype(input.dtype())?;
                let count = hits.sum(to_isize(dims), true)?;
                let g = keep_dims(g, dims, *keepdim)?;
                vec![Some(hits.mul(&g.div(&count)?)?)]
            }
            GradFn::Var { input, dims, keepdim, correction } => {
                let n: usize = dims.iter().map(|&d| input.shape()[d]).product();
                let mean = input.mean(to_isize(dims), true)?;
                let g = keep_dims(g, dims, *keepdim)?;
                let scale = 2.0 / (n as f64 - *correction as f64);
                vec![Some(input.sub(&mean)?.mul(&g)?.mul_scalar(scale)?)]
            }
            GradFn::Softmax { out, dim, log } => vec![Some(fused::softmax_backward(out, g, *dim, *log)?)],
            GradFn::Where { condition, true_shape, false_shape } => {
                let zero = g.new_zeros([])?;
                let gt =
                    if want(0) { Some(sum_to(&condition.where_cond(g, &zero)?, true_shape)?) } else { None };
                let gf =
                    if want(1) { Some(sum_to(&condition.where_cond(&zero, g)?, false_shape)?) } else { None };
                vec![gt, gf]
            }
            GradFn::MaskedFill { mask } => vec![Some(g.masked_fill(mask, 0.0)?)],
            GradFn::Triangle { diagonal, upper } => {
                vec![Some(if *upper { g.triu(*diagonal)? } else { g.tril(*diagonal)? })]
            }
            GradFn::Reshape { shape } => vec![Some(g.reshape(shape)?)],
            GradFn::Transpose { dim0, dim1 } => vec![Some(g.transpose(*dim0 as isize, *dim1 as isize)?)],
            GradFn::Permute { dims } => {
                let mut inverse = vec![0; dims.len()];
                for (i, &d) in dims.iter().enumerate() {
                    inverse[d] = i;
                }
                vec![Some(g.permute(inverse)?)]
            }
            GradFn::Narrow { shape, dim, start } => {
                vec![Some(fused::narrow_backward(shape, *dim, *start, g)?)]
            }
            GradFn::Squeeze { dim } => vec![Some(g.unsqueeze(*dim as isize)?)],
            GradFn::Unsqueeze { dim } => vec![Some(g.squeeze(*dim as isize)?)],
            GradFn::Expand { shape } => vec![Some(sum_to(g, shape)?)],
            GradFn::Cat { dim, sizes } => {
                let mut start = 0;
                let mut grads = Vec::with_capacity(sizes.len());
                for (i, &n) in sizes.iter().enumerate() {
                    grads.push(if want(i) { Some(g.narrow(*dim as isize, start, n)?) } else { None });
                    start += n;
                }
                grads
            }
            GradFn::IndexSelect { shape, dim, index } => {
                vec![Some(fused::index_add(shape, *dim, index, g)?)]
            }
            GradFn::Gather { shape, dim, index } => vec![Some(fused::scatter_add(shape, *dim, index, g)?)],
            GradFn::Conv2d(saved) => window::conv2d_backward(saved, g, want)?,
            GradFn::MaxPool2d { input, out, geometry } => {
                vec![Some(window::max_pool2d_backward(input, out, g, geometry)?)]
            }
            GradFn::ToDType { dtype } => vec![Some(g.to_dtype(*dtype)?)],
            GradFn::ToDevice { device } => vec![Some(g.to(device)?)],
            GradFn::Identity => vec![Some(g.clone())],
            GradFn::LayerNorm(saved) => fused::layer_norm_backward(saved, g, want)?,
        })
    }
}

fn to_isize(dims: &[usize]) -> Vec<isize> {
    dims.iter().map(|&d| d as isize).collect()
}

/// `g` with the reduced `dims` put back as size-1 dims (when the reduction dropped them), so it
/// broadcasts against the input.
fn keep_dims(g: &Tensor, dims: &[usize], keepdim: bool) -> Result<Tensor> {
    if keepdim {
        return Ok(g.clone());
    }
    let mut sorted = dims.to_vec();
    sorted.sort_unstable();
    let mut shape = g.shape().to_vec();
    for d in sorted {
        shape.insert(d, 1);
    }
    g.reshape(shape)
}

/// Sums `g` down to `shape`, undoing a broadcast: leading dims and stretched 1-dims are summed.
pub(crate) fn sum_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let extra = g.rank() - shape.len();
    let mut dims: Vec<isize> = (0..extra as isize).collect();
    for (i, &n) in shape.iter().enumerate() {
        if n == 1 && g.shape()[extra + i] != 1 {
            dims.push((extra + i) as isize);
        }
    }
    let summed = if dims.is_empty() { g.clone() } else { fused::sum_keepdim(g, &dims)? };
    summed.reshape(shape)
}

fn sum_to_opt(g: &Tensor, shape: Option<&[usize]>) -> Result<Tensor> {
    match shape {
        Some(shape) => sum_to(g, shape),
        None => Ok(g.clone()),
    }
}

fn binary(op: BinaryOp, a: &Tensor, b: &Tensor, g: &Tensor, want_a: bool, want_b: bool) -> Result<Grads> {
    let (ga, gb) = match op {
        BinaryOp::Add | BinaryOp::Sub => {
            let gb = if op == BinaryOp::Sub { g.neg()? } else { g.clone() };
            (Some(g.clone()), Some(gb))
        }
        BinaryOp::Mul => {
            (if want_a { Some(g.mul(b)?) } else { None }, if want_b { Some(g.mul(a)?) } else { None })
        }
        BinaryOp::Div => (
            if want_a { Some(g.div(b)?) } else { None },
            // d/db a / b = -a / b^2
            if want_b { Some(g.mul(a)?.div(&b.mul(b)?)?.neg()?) } else { None },
        ),
        BinaryOp::Pow => {
            let ga = if want_a { Some(g.mul(b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?)?) } else { None };
            // d/db a^b = a^b ln a, taken as 0 where a = 0 and b >= 0 (PyTorch's convention).
            let gb = if want_b {
                let raw = g.mul(&a.pow(b)?)?.mul(&a.log()?)?;
                let zero = a.eq(&a.new_zeros([])?)?.logical_and(&b.ge(&b.new_zeros([])?)?)?;
                Some(raw.masked_fill(&zero, 0.0)?)
            } else {
                None
            };
            (ga, gb)
        }
        BinaryOp::Maximum | BinaryOp::Minimum => {
            // The selected side gets the gradient; ties split it evenly.
            let dtype = g.dtype();
            let wins = if op == BinaryOp::Maximum { a.gt(b)? } else { a.lt(b)? };
            let ties = a.eq(b)?.to_dtype(dtype)?.mul_scalar(0.5)?;
            let share_a = wins.to_dtype(dtype)?.add(&ties)?;
            let share_b = share_a.rsub_scalar(1.0)?;
            (
                if want_a { Some(g.mul(&share_a)?) } else { None },
                if want_b { Some(g.mul(&share_b)?) } else { None },
            )
        }
    };
    Ok(vec![
        if want_a { ga.map(|t| sum_to(&t, a.shape())).transpose()? } else { None },
        if want_b { gb.map(|t| sum_to(&t, b.shape())).transpose()? } else { None },
    ])
}

fn scalar(op: BinaryOp, c: f64, reversed: bool, x: &Tensor, g: &Tensor) -> Result<Tensor> {
    let dtype = g.dtype();
    match (op, reversed) {
        (BinaryOp::Add, _) | (BinaryOp::Sub, false) => Ok(g.clone()),
        (BinaryOp::Sub, true) => g.neg(),
        (BinaryOp::Mul, _) => g.mul_scalar(c),
        (BinaryOp::Div, false) => g.div_scalar(c),
        // d/dx c / x = -c / x^2
        (BinaryOp::Div, true) => g.div(&x.mul(x)?)?.mul_scalar(-c),
        (BinaryOp::Pow, false) => g.mul(&x.pow_scalar(c - 1.0)?)?.mul_scalar(c),
        // d/dx c^x = c^x ln c
        (BinaryOp::Pow, true) => g.mul(&Tensor::full_like(x, c)?.pow(x)?)?.mul_scalar(c.ln()),
        // `clamp` semantics: the gradient passes where the bound did not bite (ties included).
        (BinaryOp::Maximum, _) => g.mul(&x.cmp_scalar(crate::tensor::CmpOp::Ge, c)?.to_dtype(dtype)?),
        (BinaryOp::Minimum, _) => g.mul(&x.cmp_scalar(crate::tensor::CmpOp::Le, c)?.to_dtype(dtype)?),
    }
}

/// The result of the op on `x`: the saved one, or recomputed if it was not kept.
fn result_of(op: UnaryOp, x: &Tensor, out: Option<&Tensor>) -> Result<Tensor> {
    match out {
        Some(out) => Ok(out.clone()),
        None => x.unary_op(op),
    }
}

/// Which unary ops keep their result for the backward pass.
pub(crate) fn unary_keeps_output(op: UnaryOp) -> bool {
    matches!(
        op,
        UnaryOp::Exp | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Gelu
    )
}

/// The gradient of a unary op from the output's gradient, which the engine hands over.
fn unary(op: UnaryOp, x: &Tensor, out: Option<&Tensor>, grad: Tensor) -> Result<Tensor> {
    let g = &grad;
    let y = || result_of(op, x, out);
    match op {
        UnaryOp::Neg => g.neg(),
        UnaryOp::Relu => fused::relu_backward(x, grad),
        UnaryOp::Abs => {
            let dtype = g.dtype();
            let pos = x.cmp_scalar(crate::tensor::CmpOp::Gt, 0.0)?.to_dtype(dtype)?;
            let neg = x.cmp_scalar(crate::tensor::CmpOp::Lt, 0.0)?.to_dtype(dtype)?;
            g.mul(&pos.sub(&neg)?)
        }
        UnaryOp::Exp => g.mul(&y()?),
        UnaryOp::Log => g.div(x),
        // d sqrt(x) = 1 / (2 sqrt(x))
        UnaryOp::Sqrt => g.div(&y()?)?.mul_scalar(0.5),
        // d x^-1/2 = -1/2 x^-3/2 = -1/2 out^3
        UnaryOp::Rsqrt => g.mul(&y()?.pow_scalar(3.0)?)?.mul_scalar(-0.5),
        UnaryOp::Tanh => {
            let y = y()?;
            g.mul(&y.mul(&y)?.rsub_scalar(1.0)?)
        }
        UnaryOp::Sigmoid => {
            let y = y()?;
            g.mul(&y.mul(&y.rsub_scalar(1.0)?)?)
        }
        UnaryOp::Gelu | UnaryOp::GeluTanh
            if let Some(fused) = fused::gelu_backward(x, g, op == UnaryOp::GeluTanh) =>
        {
            fused
        }
        UnaryOp::Gelu => {
            // d/dx x Φ(x) = Φ(x) + x φ(x)
            let cdf = y()?.div(x)?;
            let cdf = x.cmp_scalar(crate::tensor::CmpOp::Eq, 0.0)?.where_cond(&x.new_full([], 0.5)?, &cdf)?;
            let pdf =
                x.mul(x)?.mul_scalar(-0.5)?.exp()?.mul_scalar(1.0 / (2.0 * std::f64::consts::PI).sqrt())?;
            g.mul(&cdf.add(&x.mul(&pdf)?)?)
        }
        UnaryOp::GeluTanh => {
            // y = x s(2u) with s the sigmoid and u = k (x + c x³):
            // dy/dx = s + 2 x s (1 - s) k (1 + 3 c x²)
            let k = (2.0 / std::f64::consts::PI).sqrt();
            let c = crate::backend::op::GELU_TANH_CUBIC;
            let x2 = x.mul(x)?;
            let u = x2.mul_scalar(c)?.add_scalar(1.0)?.mul(x)?.mul_scalar(k)?;
            let s = u.mul_scalar(2.0)?.sigmoid()?;
            let du = x2.mul_scalar(3.0 * c)?.add_scalar(1.0)?.mul_scalar(2.0 * k)?;
            let slope = x.mul(&s)?.mul(&s.rsub_scalar(1.0)?)?.mul(&du)?;
            g.mul(&s.add(&slope)?)
        }
        UnaryOp::Silu => {
            // d/dx x s(x) = s + x s (1 - s)
            let s = x.sigmoid()?;
            g.mul(&s.add(&x.mul(&s)?.mul(&s.rsub_scalar(1.0)?)?)?)
        }
        UnaryOp::Sin => g.mul(&x.cos()?),
        UnaryOp::Cos => g.mul(&x.sin()?)?.neg(),
    }
}

/// `out = a @ b` with PyTorch's promotion of 1-D operands and broadcast batch dims.
fn matmul(a: &Tensor, b: &Tensor, g: &Tensor, want_a: bool, want_b: bool) -> Result<Grads> {
    // Undo the 1-D promotions so every operand is a (batched) matrix.
    let a2 = if a.rank() == 1 { a.unsqueeze(0)? } else { a.clone() };
    let b2 = if b.rank() == 1 { b.unsqueeze(-1)? } else { b.clone() };
    let mut g2 = g.clone();
    if a.rank() == 1 {
        g2 = g2.unsqueeze(if b.rank() == 1 { 0 } else { -2 })?;
    }
    if b.rank() == 1 {
        g2 = g2.unsqueeze(-1)?;
    }
    let ga = if want_a {
        let ga = matmul_like(&g2, &b2.transpose(-2, -1)?, &a2)?;
        Some(reshape_to(sum_to(&ga, a2.shape())?, a.shape())?)
    } else {
        None
    };
    let gb = if want_b {
        let gb = if b2.rank() == 2 && a2.rank() > 2 {
            // A shared weight: fold the batch into the rows rather than summing per-batch products.
            let k = a2.shape()[a2.rank() - 1];
            let n = g2.shape()[g2.rank() - 1];
            let rows = a2.numel() / k.max(1);
            matmul_like(&a2.reshape([rows, k])?.t()?, &g2.reshape([rows, n])?, &b2)?
        } else {
            sum_to(&matmul_like(&a2.transpose(-2, -1)?, &g2, &b2)?, b2.shape())?
        };
        Some(reshape_to(gb, b.shape())?)
    } else {
        None
    };
    Ok(vec![ga, gb])
}

/// `t` with `shape`; as it is when it has it already (a reshape of a strided view would copy).
fn reshape_to(t: Tensor, shape: &[usize]) -> Result<Tensor> {
    if t.shape() == shape { Ok(t) } else { t.reshape(shape) }
}

/// `x @ y`, laid out like `like` when `like` is a transposed matrix (a weight used as `w.t()`),
/// so the gradient reaching the weight is contiguous in the weight's own order.
fn matmul_like(x: &Tensor, y: &Tensor, like: &Tensor) -> Result<Tensor> {
    let r = like.rank();
    let transposed = r == 2 && !like.is_contiguous() && like.t()?.is_contiguous();
    if transposed { y.t()?.matmul(&x.t()?)?.t() } else { x.matmul(y) }
}
