//! The element-wise ops and reductions, declared once for the front end and both backends. The
//! op front end (`src/tensor/ops/`) picks a variant and checks its operands, the CPU backend
//! matches on it, and the CUDA backend launches the kernel the variant names (`kernel`), defined
//! in `kernels/<module>.cu`: an op has no name spelled anywhere else. A test in
//! `cuda/registry.rs` reads the `.cu` files and fails when a variant's kernel is missing.

use crate::dtype::DType;

/// Declares an op enum with its variants' names (in errors, in reports, and as the stem of their
/// CUDA kernels) and [`ALL`](UnaryOp::ALL) of its variants, from one list.
macro_rules! ops {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident => $op:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)*
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The op's name in errors and reports, and the stem of its CUDA kernels.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $op,)*
                }
            }
        }
    };
}

ops! {
    /// Element-wise binary arithmetic.
    pub enum BinaryOp {
        Add => "add",
        Sub => "sub",
        Mul => "mul",
        Div => "div",
        Pow => "pow",
        Maximum => "maximum",
        Minimum => "minimum",
    }
}

ops! {
    /// Element-wise comparisons; results are bool.
    pub enum CmpOp {
        Eq => "eq",
        Ne => "ne",
        Lt => "lt",
        Le => "le",
        Gt => "gt",
        Ge => "ge",
    }
}

ops! {
    /// Element-wise logic of two bool tensors.
    pub enum LogicalOp {
        And => "logical_and",
        Or => "logical_or",
    }
}

ops! {
    /// Element-wise unary functions.
    pub enum UnaryOp {
        Neg => "neg",
        Abs => "abs",
        Relu => "relu",
        Exp => "exp",
        Log => "log",
        Sqrt => "sqrt",
        Rsqrt => "rsqrt",
        Tanh => "tanh",
        Sigmoid => "sigmoid",
        /// The exact (erf) GELU, PyTorch's default (`approximate='none'`).
        Gelu => "gelu",
        /// GELU's tanh approximation (PyTorch's `approximate='tanh'`).
        GeluTanh => "gelu_tanh",
        Silu => "silu",
        Sin => "sin",
        Cos => "cos",
    }
}

/// The cubic coefficient of GELU's tanh approximation ([`UnaryOp::GeluTanh`]), shared by its
/// CPU kernel, its gradient and the gradient's composite form.
pub(crate) const GELU_TANH_CUBIC: f64 = 0.044715;

/// The CUDA kernel `<stem>_<dtype>`: every kernel in `kernels/` is named so.
pub fn kernel_name(stem: &str, dtype: DType) -> String {
    format!("{stem}_{}", dtype.as_str())
}

impl BinaryOp {
    /// Its CUDA kernel for two tensors of `dtype` (`add_f32`, in `kernels/binary.cu`).
    pub fn kernel(self, dtype: DType) -> String {
        kernel_name(self.name(), dtype)
    }

    /// Its CUDA kernel with a scalar: `op(x, scalar)` (`sub_scalar_f32`), or `op(scalar, x)`
    /// when `reversed` (`rsub_scalar_f32`).
    pub fn scalar_kernel(self, dtype: DType, reversed: bool) -> String {
        let r = if reversed { "r" } else { "" };
        kernel_name(&format!("{r}{}_scalar", self.name()), dtype)
    }
}

impl CmpOp {
    /// Its CUDA kernel for two tensors of `dtype` (`lt_f32`, in `kernels/binary.cu`).
    pub fn kernel(self, dtype: DType) -> String {
        kernel_name(self.name(), dtype)
    }

    /// Its CUDA kernel comparing with a scalar (`lt_scalar_f32`).
    pub fn scalar_kernel(self, dtype: DType) -> String {
        kernel_name(&format!("{}_scalar", self.name()), dtype)
    }
}

impl LogicalOp {
    /// Its CUDA kernel (`logical_and_bool`, in `kernels/binary.cu`).
    pub fn kernel(self) -> String {
        kernel_name(self.name(), DType::Bool)
    }
}

impl UnaryOp {
    /// Neg, abs and relu also work on integers; the rest need a floating dtype.
    pub(crate) fn takes_integers(self) -> bool {
        matches!(self, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu)
    }

    /// Its CUDA kernel for `dtype` (`gelu_tanh_f32`, in `kernels/unary.cu`).
    pub fn kernel(self, dtype: DType) -> String {
        kernel_name(self.name(), dtype)
    }
}

/// Reductions over some dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    /// The index (i64) of the first maximum.
    ArgMax,
    ArgMin,
    /// The variance with this correction (1 = unbiased, PyTorch's default).
    Var(usize),
}

impl ReduceOp {
    /// Every kind of reduction (the variance with correction 1).
    pub const ALL: &'static [ReduceOp] = &[
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::ArgMax,
        ReduceOp::ArgMin,
        ReduceOp::Var(1),
    ];

    /// The op's name in errors and reports, and the stem of its CUDA kernels.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
            ReduceOp::Var(_) => "var",
        }
    }

    /// Its CUDA kernel for an input of `dtype` (`sum_f32`, in `kernels/reduce.cu`): one pass, or
    /// the first of two.
    pub fn kernel(self, dtype: DType) -> String {
        kernel_name(self.name(), dtype)
    }

    /// Its second pass, which combines the first pass's partial results (`sum_finish_f32`).
    pub fn finish_kernel(self, dtype: DType) -> String {
        kernel_name(&format!("{}_finish", self.name()), dtype)
    }
}
