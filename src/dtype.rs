//! Element types: [`DType`] and the Rust types that carry them ([`WithDType`]).

use std::fmt;
use std::str::FromStr;

use half::{bf16, f16};

use crate::error::{Error, Result};

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I64,
    I32,
    U8,
    Bool,
}

/// Every dtype, in declaration order.
pub const ALL_DTYPES: [DType; 8] =
    [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool];

impl DType {
    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 | DType::Bool => 1,
        }
    }

    /// f32, f64, f16 or bf16.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// i64, i32 or u8.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I64 | DType::I32 | DType::U8)
    }

    /// The short name used in errors and reports (`f32`), also accepted by `FromStr`.
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    /// The name safetensors uses in its header (`F32`, `BF16`, `I64`, `BOOL`, ...).
    pub fn safetensors_name(self) -> &'static str {
        match self {
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::I64 => "I64",
            DType::I32 => "I32",
            DType::U8 => "U8",
            DType::Bool => "BOOL",
        }
    }

    /// The dtype two operands of different dtypes compute in, following PyTorch's promotion for
    /// tensors of the same category: bool < u8 < i32 < i64 < f16/bf16 < f32 < f64, and f16 with
    /// bf16 gives f32.
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        if self == other {
            return self;
        }
        let rank = |d: DType| match d {
            Bool => 0,
            U8 => 1,
            I32 => 2,
            I64 => 3,
            F16 | BF16 => 4,
            F32 => 5,
            F64 => 6,
        };
        match (self, other) {
            (F16, BF16) | (BF16, F16) => F32,
            _ if rank(self) >= rank(other) => self,
            _ => other,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DType {
    type Err = Error;

    /// Accepts the short names (`f32`) and PyTorch's (`float32`, `float`, `half`, `bfloat16`,
    /// `long`, `int`, `uint8`, `bool`).
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().trim_start_matches("torch.") {
            "f32" | "float32" | "float" => DType::F32,
            "f64" | "float64" | "double" => DType::F64,
            "f16" | "float16" | "half" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "i64" | "int64" | "long" => DType::I64,
            "i32" | "int32" | "int" => DType::I32,
            "u8" | "uint8" => DType::U8,
            "bool" => DType::Bool,
            _ => return Err(Error::InvalidDType { input: s.to_string() }),
        })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the element type of some [`DType`]: `f32`, `f64`, `f16`, `bf16`, `i64`,
/// `i32`, `u8`, `bool`. Conversions go through `f64`, which holds every value of every other type
/// except the largest `i64`s, which lose low bits exactly as PyTorch's casts do.
pub trait WithDType:
    Copy + Default + Send + Sync + PartialOrd + PartialEq + fmt::Debug + fmt::Display + 'static + sealed::Sealed
{
    const DTYPE: DType;
    const ZERO: Self;
    const ONE: Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

macro_rules! with_dtype {
    ($t:ty, $dt:ident, $zero:expr, $one:expr, |$a:ident| $to:expr, |$b:ident| $from:expr) => {
        impl sealed::Sealed for $t {}
        impl WithDType for $t {
            const DTYPE: DType = DType::$dt;
            const ZERO: Self = $zero;
            const ONE: Self = $one;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                let $a = self;
                $to
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                let $b = v;
                $from
            }
        }
    };
}

with_dtype!(f32, F32, 0.0, 1.0, |x| x as f64, |v| v as f32);
with_dtype!(f64, F64, 0.0, 1.0, |x| x, |v| v);
with_dtype!(f16, F16, f16::ZERO, f16::ONE, |x| x.to_f64(), |v| f16::from_f64(v));
with_dtype!(bf16, BF16, bf16::ZERO, bf16::ONE, |x| x.to_f64(), |v| bf16::from_f64(v));
with_dtype!(i64, I64, 0, 1, |x| x as f64, |v| v as i64);
with_dtype!(i32, I32, 0, 1, |x| x as f64, |v| v as i32);
with_dtype!(u8, U8, 0, 1, |x| x as f64, |v| v as u8);
with_dtype!(bool, Bool, false, true, |x| if x { 1.0 } else { 0.0 }, |v| v != 0.0);
