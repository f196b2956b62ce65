//! The CPU backend: element data in `Vec`s, kernels over strided views. Matmul goes through the
//! `gemm` crate; large element-wise work is split across threads with rayon.
//!
//! Every op's CPU kernel is a method of [`CpuStorage`], in the file for its kind: `elementwise.rs`
//! (arithmetic, comparisons, unary functions, selection), `reduce.rs` (reductions, softmax),
//! `copy.rs` (views, `cat`, indexing), `matmul.rs`, `conv.rs` and `window.rs` (convolution,
//! pooling), `norm.rs` (layer norm), `grad.rs` (fused backward passes) and `optim.rs` (optimizer
//! updates). The loops they share are in `kernels.rs` (strided maps, reductions over groups,
//! softmax rows), `simd.rs` (run-time choice of vector extension) and `threads.rs`. The layers
//! above reach this folder only through `src/backend/mod.rs`.

mod alloc;
mod conv;
mod copy;
mod elementwise;
mod grad;
mod kernels;
mod matmul;
mod norm;
mod optim;
mod reduce;
mod simd;
mod threads;
mod vmath;
mod window;

use std::any::Any;
use std::borrow::Cow;

use half::{bf16, f16};

use crate::dtype::{DType, WithDType};
use crate::shape::Layout;

pub(crate) use alloc::{as_uninit, ensure_room, filled, recycle, room_for, try_vec};
pub(crate) use conv::{ConvShape, conv2d, conv2d_input_grad, conv2d_output_grad, conv2d_weight_grad};
pub(crate) use copy::embed;
pub(crate) use kernels::*;
pub(crate) use matmul::matmul;
pub(crate) use optim::{AdamStep, SgdStep};
pub(crate) use threads::begin_kernel;
pub(crate) use window::WindowGeometry;

/// Work below this many elements stays on the calling thread: spawning costs more than it saves.
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 15;

/// Element data of a CPU tensor, one variant per dtype.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CpuStorage {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
}

/// Runs `$body` with `$v` bound to the typed `Vec`/slice of `$s`, for every dtype.
macro_rules! with_storage {
    ($s:expr, $v:ident => $body:expr) => {
        match $s {
            $crate::backend::CpuStorage::F32($v) => $body,
            $crate::backend::CpuStorage::F64($v) => $body,
            $crate::backend::CpuStorage::F16($v) => $body,
            $crate::backend::CpuStorage::BF16($v) => $body,
            $crate::backend::CpuStorage::I64($v) => $body,
            $crate::backend::CpuStorage::I32($v) => $body,
            $crate::backend::CpuStorage::U8($v) => $body,
            $crate::backend::CpuStorage::Bool($v) => $body,
        }
    };
}

/// Like `with_storage!`, for the floating dtypes only; `$other` runs for the rest.
macro_rules! with_float_storage {
    ($s:expr, $v:ident => $body:expr, _ => $other:expr) => {
        match $s {
            $crate::backend::CpuStorage::F32($v) => $body,
            $crate::backend::CpuStorage::F64($v) => $body,
            $crate::backend::CpuStorage::F16($v) => $body,
            $crate::backend::CpuStorage::BF16($v) => $body,
            _ => $other,
        }
    };
}

pub(crate) use {with_float_storage, with_storage};

impl CpuStorage {
    pub(crate) fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F64(_) => DType::F64,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::I64(_) => DType::I64,
            CpuStorage::I32(_) => DType::I32,
            CpuStorage::U8(_) => DType::U8,
            CpuStorage::Bool(_) => DType::Bool,
        }
    }

    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        with_storage!(self, v => v.len())
    }

    /// Gives the elements' buffer back to the pool for the next result of its size, leaving this
    /// storage empty.
    pub(crate) fn recycle(&mut self) {
        with_storage!(self, v => recycle(std::mem::take(v)));
    }

    /// Wraps a typed vector.
    pub(crate) fn from_vec<T: WithDType>(data: Vec<T>) -> CpuStorage {
        let any: Box<dyn Any> = Box::new(data);
        // `WithDType` is sealed and each type names its own DTYPE, so the downcast matches.
        macro_rules! arm {
            ($variant:ident, $t:ty) => {
                match any.downcast::<Vec<$t>>() {
                    Ok(v) => CpuStorage::$variant(*v),
                    Err(_) => unreachable!("WithDType::DTYPE disagrees with its type"),
                }
            };
        }
        match T::DTYPE {
            DType::F32 => arm!(F32, f32),
            DType::F64 => arm!(F64, f64),
            DType::F16 => arm!(F16, f16),
            DType::BF16 => arm!(BF16, bf16),
            DType::I64 => arm!(I64, i64),
            DType::I32 => arm!(I32, i32),
            DType::U8 => arm!(U8, u8),
            DType::Bool => arm!(Bool, bool),
        }
    }

    /// The typed slice, when `T` is this storage's element type.
    pub(crate) fn as_slice<T: WithDType>(&self) -> Option<&[T]> {
        with_storage!(self, v => (v as &dyn Any).downcast_ref::<Vec<T>>().map(|v| v.as_slice()))
    }

    /// A storage of `len` copies of `value` (converted to `dtype`).
    pub(crate) fn full(value: f64, len: usize, dtype: DType) -> CpuStorage {
        fn fill<T: WithDType>(value: f64, len: usize) -> CpuStorage {
            let mut v = room_for(len);
            v.resize(len, T::from_f64(value));
            CpuStorage::from_vec(v)
        }
        dispatch_dtype!(dtype, T => fill::<T>(value, len))
    }

    /// `values` converted to `dtype`.
    pub(crate) fn from_f64s(values: impl ExactSizeIterator<Item = f64>, dtype: DType) -> CpuStorage {
        dispatch_dtype!(dtype, T => {
            let mut v = room_for::<T>(values.len());
            v.extend(values.map(T::from_f64));
            CpuStorage::from_vec(v)
        })
    }

    /// The elements of the view in row-major order, converted to `T`.
    pub(crate) fn to_vec<T: WithDType>(&self, layout: &Layout) -> Vec<T> {
        match self.as_slice::<T>() {
            // One copy when the dtype already matches.
            Some(v) => contiguous(v, layout).into_owned(),
            None => self.cast(layout, T::DTYPE).as_slice::<T>().map(<[T]>::to_vec).unwrap_or_default(),
        }
    }

    /// The first element, converted to `T`.
    pub(crate) fn first<T: WithDType>(&self) -> T {
        with_storage!(self, v => T::from_f64(v[0].to_f64()))
    }

    /// The first `limit` elements of the view in row-major order, as `Display` writes them.
    pub(crate) fn element_strings(&self, layout: &Layout, limit: usize) -> Vec<String> {
        with_storage!(self, v => {
            layout.offsets().take(limit).map(|o| format!("{}", v[o])).collect::<Vec<String>>()
        })
    }

    /// The elements of the view `layout`, in row-major order, as a new contiguous storage.
    pub(crate) fn gather(&self, layout: &Layout) -> CpuStorage {
        if layout.is_contiguous() {
            return with_storage!(self, v => CpuStorage::from_vec(v[layout.offset..layout.offset + layout.numel()].to_vec()));
        }
        with_storage!(self, v => CpuStorage::from_vec(copy::gather(v, layout)))
    }

    /// The elements of the view converted to `dtype`, contiguous.
    pub(crate) fn cast(&self, layout: &Layout, dtype: DType) -> CpuStorage {
        if dtype == self.dtype() {
            return self.gather(layout);
        }
        fn convert<S: WithDType, D: WithDType>(src: &[S], layout: &Layout) -> CpuStorage {
            CpuStorage::from_vec(unary_map(src, layout, |x: S| D::from_f64(x.to_f64())))
        }
        with_storage!(self, v => dispatch_dtype!(dtype, D => convert::<_, D>(v, layout)))
    }

    /// Little-endian bytes of the view, contiguous.
    pub(crate) fn to_le_bytes(&self, layout: &Layout) -> Vec<u8> {
        macro_rules! bytes {
            ($v:expr, |$x:ident| $conv:expr) => {
                contiguous($v, layout).iter().flat_map(|&$x| $conv).collect()
            };
        }
        match self {
            CpuStorage::F32(v) => bytes!(v, |x| x.to_le_bytes()),
            CpuStorage::F64(v) => bytes!(v, |x| x.to_le_bytes()),
            CpuStorage::F16(v) => bytes!(v, |x| x.to_le_bytes()),
            CpuStorage::BF16(v) => bytes!(v, |x| x.to_le_bytes()),
            CpuStorage::I64(v) => bytes!(v, |x| x.to_le_bytes()),
            CpuStorage::I32(v) => bytes!(v, |x| x.to_le_bytes()),
            CpuStorage::U8(v) => contiguous(v, layout).into_owned(),
            CpuStorage::Bool(v) => contiguous(v, layout).iter().map(|&b| b as u8).collect(),
        }
    }

    /// Reads little-endian bytes; the caller has checked that the length is a multiple of the
    /// element size. Bool bytes other than 0 read as true.
    pub(crate) fn from_le_bytes(bytes: &[u8], dtype: DType) -> CpuStorage {
        macro_rules! read {
            ($t:ty, $n:literal) => {
                CpuStorage::from_vec::<$t>(
                    bytes
                        .chunks_exact($n)
                        .map(|c| {
                            let mut a = [0u8; $n];
                            a.copy_from_slice(c);
                            <$t>::from_le_bytes(a)
                        })
                        .collect(),
                )
            };
        }
        match dtype {
            DType::F32 => read!(f32, 4),
            DType::F64 => read!(f64, 8),
            DType::F16 => read!(f16, 2),
            DType::BF16 => read!(bf16, 2),
            DType::I64 => read!(i64, 8),
            DType::I32 => read!(i32, 4),
            DType::U8 => CpuStorage::U8(bytes.to_vec()),
            DType::Bool => CpuStorage::Bool(bytes.iter().map(|&b| b != 0).collect()),
        }
    }
}

/// Binds the type `$t` to the Rust element type of `$dtype` and runs `$body`.
macro_rules! dispatch_dtype {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::dtype::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::dtype::DType::F64 => {
                type $t = f64;
                $body
            }
            $crate::dtype::DType::F16 => {
                type $t = half::f16;
                $body
            }
            $crate::dtype::DType::BF16 => {
                type $t = half::bf16;
                $body
            }
            $crate::dtype::DType::I64 => {
                type $t = i64;
                $body
            }
            $crate::dtype::DType::I32 => {
                type $t = i32;
                $body
            }
            $crate::dtype::DType::U8 => {
                type $t = u8;
                $body
            }
            $crate::dtype::DType::Bool => {
                type $t = bool;
                $body
            }
        }
    };
}
pub(crate) use dispatch_dtype;

/// The view's elements in row-major order: borrowed when already contiguous, gathered otherwise.
pub(crate) fn contiguous<'a, T: Copy>(data: &'a [T], layout: &Layout) -> Cow<'a, [T]> {
    if layout.is_contiguous() {
        Cow::Borrowed(&data[layout.offset..layout.offset + layout.numel()])
    } else {
        Cow::Owned(copy::gather_here(data, layout))
    }
}
