// Shared helpers for every devcheck kernel module: element types, conversions, strided indexing.
//
// Conventions (the Rust launchers in src/backend/cuda rely on them):
// - every kernel is `extern "C"` and named `<op>_<dtype>` (`add_f32`, `cast_f16_i64`), so the
//   registry can list names without C++ mangling;
// - loops are grid-stride loops, so any grid size covers any element count;
// - `info` points at device memory holding `dims[ndim]` followed by one `strides[ndim]` array per
//   strided operand, in the order of the kernel's parameters; strides are in elements and a
//   broadcast dimension has stride 0. `info == nullptr` means every operand is contiguous;
// - outputs are always contiguous.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef float f32;
typedef double f64;
typedef __half f16;
typedef __nv_bfloat16 bf16;
typedef long long i64;
typedef int i32;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define GRID_STRIDE_LOOP(i, n)                                                          \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);             \
         i += (size_t)blockDim.x * gridDim.x)

// Element-wise kernels launched through `CudaStorage::elementwise`: `store(i, load(i, info))` for
// every i < numel, where `load` reads element i of its operands through `info` (null when all
// are contiguous). The launcher gives each thread ELEMENTS_PER_THREAD elements
// (`elementwise_unrolled_config`). With contiguous operands a thread takes its elements a grid
// stride apart, so a warp still reads neighbouring elements, and issues all their loads before
// any store, so that several reads are in flight per thread (one read at a time leaves most of
// the memory bandwidth unused); `load` is called with a literal null there, so its offset
// arithmetic folds away. Strided operands take the plain loop (unrolling their offset arithmetic
// would make the modules several times larger to compile). Any grid is correct.
#define ELEMENTS_PER_THREAD 4

template <typename Load, typename Store>
__device__ __forceinline__ void for_each_element(size_t numel, const size_t *info, Load load, Store store) {
    const size_t stride = (size_t)blockDim.x * gridDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (info != nullptr) {
        for (; i < numel; i += stride) {
            store(i, load(i, info));
        }
        return;
    }
    const size_t *contiguous = nullptr;
    typedef decltype(load((size_t)0, contiguous)) V;
    for (; i + (ELEMENTS_PER_THREAD - 1) * stride < numel; i += ELEMENTS_PER_THREAD * stride) {
        V v[ELEMENTS_PER_THREAD];
#pragma unroll
        for (int u = 0; u < ELEMENTS_PER_THREAD; u++) {
            v[u] = load(i + u * stride, contiguous);
        }
#pragma unroll
        for (int u = 0; u < ELEMENTS_PER_THREAD; u++) {
            store(i + u * stride, v[u]);
        }
    }
    for (; i < numel; i += stride) {
        store(i, load(i, contiguous));
    }
}

// Two loaded operands, for `for_each_element`.
template <typename A, typename B> struct Pair {
    A first;
    B second;
};

// The offset of the `i`-th element (in row-major order over `dims`) of an operand laid out with
// `strides`.
__device__ __forceinline__ size_t strided_offset(size_t i, size_t ndim, const size_t *dims,
                                                 const size_t *strides) {
    size_t offset = 0;
    for (size_t d = ndim; d-- > 0;) {
        offset += (i % dims[d]) * strides[d];
        i /= dims[d];
    }
    return offset;
}

// The offset of operand `k` (0-based, in parameter order) for element `i`, honouring the
// contiguous shortcut.
__device__ __forceinline__ size_t operand_offset(size_t i, size_t ndim, const size_t *info, size_t k) {
    if (info == nullptr) {
        return i;
    }
    return strided_offset(i, ndim, info, info + ndim * (k + 1));
}

// Arithmetic happens in a wide type: half precision in f32, everything else in itself.
__device__ __forceinline__ float widen(f16 x) { return __half2float(x); }
__device__ __forceinline__ float widen(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ f32 widen(f32 x) { return x; }
__device__ __forceinline__ f64 widen(f64 x) { return x; }
__device__ __forceinline__ i64 widen(i64 x) { return x; }
__device__ __forceinline__ i32 widen(i32 x) { return x; }
__device__ __forceinline__ u8 widen(u8 x) { return x; }
__device__ __forceinline__ bool widen(bool x) { return x; }

// The wide type of T.
template <typename T> struct Wide { typedef T type; };
template <> struct Wide<f16> { typedef float type; };
template <> struct Wide<bf16> { typedef float type; };

// Converts a wide value to T, rounding to nearest for the half types and with C semantics
// (truncation toward zero) for integers; anything non-zero is `true`.
template <typename T> struct Narrow {
    template <typename W> __device__ __forceinline__ static T from(W w) { return (T)w; }
};
template <> struct Narrow<bool> {
    template <typename W> __device__ __forceinline__ static bool from(W w) { return w != (W)0; }
};
template <> struct Narrow<f16> {
    template <typename W> __device__ __forceinline__ static f16 from(W w) { return __float2half((float)w); }
    __device__ __forceinline__ static f16 from(double w) { return __double2half(w); }
};
template <> struct Narrow<bf16> {
    template <typename W> __device__ __forceinline__ static bf16 from(W w) { return __float2bfloat16((float)w); }
    __device__ __forceinline__ static bf16 from(double w) { return __double2bfloat16(w); }
};

template <typename T, typename W> __device__ __forceinline__ T narrow(W w) { return Narrow<T>::from(w); }

// The identities of max and min in the wide types (infinities for floats).
template <typename W> __device__ W lowest();
template <typename W> __device__ W highest();
template <> __device__ __forceinline__ float lowest<float>() { return -__int_as_float(0x7f800000); }
template <> __device__ __forceinline__ float highest<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double lowest<double>() { return -__longlong_as_double(0x7ff0000000000000LL); }
template <> __device__ __forceinline__ double highest<double>() { return __longlong_as_double(0x7ff0000000000000LL); }
template <> __device__ __forceinline__ i64 lowest<i64>() { return (i64)0x8000000000000000ULL; }
template <> __device__ __forceinline__ i64 highest<i64>() { return 0x7fffffffffffffffLL; }
template <> __device__ __forceinline__ i32 lowest<i32>() { return (i32)0x80000000U; }
template <> __device__ __forceinline__ i32 highest<i32>() { return 0x7fffffff; }
template <> __device__ __forceinline__ u8 lowest<u8>() { return 0; }
template <> __device__ __forceinline__ u8 highest<u8>() { return 255; }

// NaN test that is also valid (and always false) for integers.
template <typename W> __device__ __forceinline__ bool is_nan(W w) { return w != w; }

// Instantiation helpers: one macro call per dtype family.
#define FOR_FLOATS(M, ...) M(f32, __VA_ARGS__) M(f64, __VA_ARGS__) M(f16, __VA_ARGS__) M(bf16, __VA_ARGS__)
#define FOR_INTS(M, ...) M(i64, __VA_ARGS__) M(i32, __VA_ARGS__) M(u8, __VA_ARGS__)
#define FOR_SIGNED_INTS(M, ...) M(i64, __VA_ARGS__) M(i32, __VA_ARGS__)
#define FOR_NUMERIC(M, ...) FOR_FLOATS(M, __VA_ARGS__) FOR_INTS(M, __VA_ARGS__)
#define FOR_ALL(M, ...) FOR_NUMERIC(M, __VA_ARGS__) M(bool, __VA_ARGS__)
