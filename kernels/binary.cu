// Elementwise binary ops over strided, broadcast operands, and their scalar forms.
//
// `<op>_<dtype>(numel, ndim, info, lhs, rhs, out)`: `info` = dims, lhs strides, rhs strides (a
// broadcast dimension has stride 0), or nullptr when both are contiguous and of the same shape.
// `<op>_scalar_<dtype>(numel, ndim, info, x, scalar, out)`: `info` = dims, x strides; the scalar
// comes as f64 and is converted to the wide type of the dtype. The `r<op>` forms put the scalar
// on the left (`scalar - x`). Comparisons write bool.
#include "common.cuh"

struct Add { template <typename W> __device__ W operator()(W a, W b) const { return a + b; } };
struct Sub { template <typename W> __device__ W operator()(W a, W b) const { return a - b; } };
struct Mul { template <typename W> __device__ W operator()(W a, W b) const { return a * b; } };
struct Div { template <typename W> __device__ W operator()(W a, W b) const { return a / b; } };
struct Pow { template <typename W> __device__ W operator()(W a, W b) const { return pow(a, b); } };
// NaN wins, as in torch.maximum / torch.minimum.
struct Maximum {
    template <typename W> __device__ W operator()(W a, W b) const {
        return (is_nan(a) || a > b) ? a : b;
    }
};
struct Minimum {
    template <typename W> __device__ W operator()(W a, W b) const {
        return (is_nan(a) || a < b) ? a : b;
    }
};
struct Eq { template <typename W> __device__ bool operator()(W a, W b) const { return a == b; } };
struct Ne { template <typename W> __device__ bool operator()(W a, W b) const { return a != b; } };
struct Lt { template <typename W> __device__ bool operator()(W a, W b) const { return a < b; } };
struct Le { template <typename W> __device__ bool operator()(W a, W b) const { return a <= b; } };
struct Gt { template <typename W> __device__ bool operator()(W a, W b) const { return a > b; } };
struct Ge { template <typename W> __device__ bool operator()(W a, W b) const { return a >= b; } };
struct LogicalAnd { template <typename W> __device__ bool operator()(W a, W b) const { return a && b; } };
struct LogicalOr { template <typename W> __device__ bool operator()(W a, W b) const { return a || b; } };

template <typename Op, typename W> struct Flip {
    __device__ auto operator()(W a, W b) const { return Op()(b, a); }
};

template <typename T, typename Out, typename Op>
__device__ void binary(size_t numel, size_t ndim, const size_t *info, const T *lhs, const T *rhs,
                       Out *out) {
    Op op;
    for_each_element(
        numel, info,
        [&](size_t i, const size_t *layout) {
            return Pair<T, T>{lhs[operand_offset(i, ndim, layout, 0)],
                              rhs[operand_offset(i, ndim, layout, 1)]};
        },
        [&](size_t i, Pair<T, T> v) { out[i] = narrow<Out>(op(widen(v.first), widen(v.second))); });
}

template <typename T, typename Out, typename Op>
__device__ void binary_scalar(size_t numel, size_t ndim, const size_t *info, const T *x, double scalar,
                              Out *out) {
    typedef typename Wide<T>::type W;
    Op op;
    const W s = (W)scalar;
    for_each_element(
        numel, info, [&](size_t i, const size_t *layout) { return x[operand_offset(i, ndim, layout, 0)]; },
        [&](size_t i, T v) { out[i] = narrow<Out>(op(widen(v), s)); });
}

#define BINARY(T, NAME, OP, OUT)                                                                 \
    extern "C" __global__ void NAME##_##T(size_t numel, size_t ndim, const size_t *info,         \
                                          const T *lhs, const T *rhs, OUT *out) {                 \
        binary<T, OUT, OP>(numel, ndim, info, lhs, rhs, out);                                     \
    }                                                                                             \
    extern "C" __global__ void NAME##_scalar_##T(size_t numel, size_t ndim, const size_t *info,  \
                                                 const T *x, double scalar, OUT *out) {           \
        binary_scalar<T, OUT, OP>(numel, ndim, info, x, scalar, out);                             \
    }

// Same type in and out.
#define ARITH(T, NAME, OP) BINARY(T, NAME, OP, T)
// bool out.
#define CMP(T, NAME, OP) BINARY(T, NAME, OP, bool)
// Scalar on the left: `rsub_scalar_f32(x, s)` = s - x.
#define REVERSED(T, NAME, OP)                                                                    \
    extern "C" __global__ void NAME##_scalar_##T(size_t numel, size_t ndim, const size_t *info,  \
                                                 const T *x, double scalar, T *out) {             \
        binary_scalar<T, T, Flip<OP, typename Wide<T>::type>>(numel, ndim, info, x, scalar, out); \
    }

FOR_NUMERIC(ARITH, add, Add)
FOR_NUMERIC(ARITH, sub, Sub)
FOR_NUMERIC(ARITH, mul, Mul)
// Integer true division and pow promote to a float dtype before reaching the backend.
FOR_FLOATS(ARITH, div, Div)
FOR_FLOATS(ARITH, pow, Pow)
FOR_NUMERIC(ARITH, maximum, Maximum)
FOR_NUMERIC(ARITH, minimum, Minimum)
FOR_ALL(CMP, eq, Eq)
FOR_ALL(CMP, ne, Ne)
FOR_NUMERIC(CMP, lt, Lt)
FOR_NUMERIC(CMP, le, Le)
FOR_NUMERIC(CMP, gt, Gt)
FOR_NUMERIC(CMP, ge, Ge)
CMP(bool, logical_and, LogicalAnd)
CMP(bool, logical_or, LogicalOr)
FOR_NUMERIC(REVERSED, rsub, Sub)
FOR_FLOATS(REVERSED, rdiv, Div)
FOR_FLOATS(REVERSED, rpow, Pow)
