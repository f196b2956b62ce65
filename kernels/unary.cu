// Elementwise unary ops over a strided input: `<op>_<dtype>(numel, ndim, info, x, out)`.
// `info` = dims, x strides (or nullptr when x is contiguous); `out` is contiguous.
#include "common.cuh"

struct Neg { template <typename W> __device__ W operator()(W a) const { return -a; } };
struct Abs { template <typename W> __device__ W operator()(W a) const { return a < (W)0 ? -a : a; } };
// `a <= 0` is false for NaN, so NaN passes through as PyTorch's relu does.
struct Relu { template <typename W> __device__ W operator()(W a) const { return a <= (W)0 ? (W)0 : a; } };
struct Square { template <typename W> __device__ W operator()(W a) const { return a * a; } };
struct Exp { template <typename W> __device__ W operator()(W a) const { return exp(a); } };
struct Log { template <typename W> __device__ W operator()(W a) const { return log(a); } };
struct Log1p { template <typename W> __device__ W operator()(W a) const { return log1p(a); } };
struct Expm1 { template <typename W> __device__ W operator()(W a) const { return expm1(a); } };
struct Sqrt { template <typename W> __device__ W operator()(W a) const { return sqrt(a); } };
struct Rsqrt { template <typename W> __device__ W operator()(W a) const { return rsqrt(a); } };
struct Recip { template <typename W> __device__ W operator()(W a) const { return (W)1 / a; } };
struct Tanh { template <typename W> __device__ W operator()(W a) const { return tanh(a); } };
struct Sin { template <typename W> __device__ W operator()(W a) const { return sin(a); } };
struct Cos { template <typename W> __device__ W operator()(W a) const { return cos(a); } };
struct Erf { template <typename W> __device__ W operator()(W a) const { return erf(a); } };
struct Floor { template <typename W> __device__ W operator()(W a) const { return floor(a); } };
struct Ceil { template <typename W> __device__ W operator()(W a) const { return ceil(a); } };
// Half-to-even, as torch.round.
struct Round { template <typename W> __device__ W operator()(W a) const { return rint(a); } };
struct Sigmoid {
    template <typename W> __device__ W operator()(W a) const { return (W)1 / ((W)1 + exp(-a)); }
};
struct Silu {
    template <typename W> __device__ W operator()(W a) const { return a / ((W)1 + exp(-a)); }
};
// The exact (erf) form, PyTorch's default `gelu`.
struct Gelu {
    template <typename W> __device__ W operator()(W a) const {
        return (W)0.5 * a * ((W)1 + erf(a * (W)0.70710678118654752440));
    }
};
// PyTorch's `gelu(approximate="tanh")`.
struct GeluTanh {
    template <typename W> __device__ W operator()(W a) const {
        const W k = (W)0.79788456080286535588; // sqrt(2 / pi)
        return (W)0.5 * a * ((W)1 + tanh(k * (a + (W)0.044715 * a * a * a)));
    }
};
struct Sign {
    template <typename W> __device__ W operator()(W a) const {
        return is_nan(a) ? a : (W)((a > (W)0) - (a < (W)0));
    }
};

template <typename T, typename Op>
__device__ void unary(size_t numel, size_t ndim, const size_t *info, const T *x, T *out) {
    Op op;
    for_each_element(
        numel, info, [&](size_t i, const size_t *layout) { return x[operand_offset(i, ndim, layout, 0)]; },
        [&](size_t i, T v) { out[i] = narrow<T>(op(widen(v))); });
}

#define UNARY(T, NAME, OP)                                                                       \
    extern "C" __global__ void NAME##_##T(size_t numel, size_t ndim, const size_t *info,         \
                                          const T *x, T *out) {                                   \
        unary<T, OP>(numel, ndim, info, x, out);                                                  \
    }

FOR_FLOATS(UNARY, neg, Neg)
FOR_SIGNED_INTS(UNARY, neg, Neg)
FOR_FLOATS(UNARY, abs, Abs)
FOR_SIGNED_INTS(UNARY, abs, Abs)
FOR_FLOATS(UNARY, relu, Relu)
FOR_SIGNED_INTS(UNARY, relu, Relu)
FOR_FLOATS(UNARY, sign, Sign)
FOR_SIGNED_INTS(UNARY, sign, Sign)
FOR_NUMERIC(UNARY, square, Square)
FOR_FLOATS(UNARY, exp, Exp)
FOR_FLOATS(UNARY, log, Log)
FOR_FLOATS(UNARY, log1p, Log1p)
FOR_FLOATS(UNARY, expm1, Expm1)
FOR_FLOATS(UNARY, sqrt, Sqrt)
FOR_FLOATS(UNARY, rsqrt, Rsqrt)
FOR_FLOATS(UNARY, recip, Recip)
FOR_FLOATS(UNARY, tanh, Tanh)
FOR_FLOATS(UNARY, sigmoid, Sigmoid)
FOR_FLOATS(UNARY, silu, Silu)
FOR_FLOATS(UNARY, gelu, Gelu)
FOR_FLOATS(UNARY, gelu_tanh, GeluTanh)
FOR_FLOATS(UNARY, sin, Sin)
FOR_FLOATS(UNARY, cos, Cos)
FOR_FLOATS(UNARY, erf, Erf)
FOR_FLOATS(UNARY, floor, Floor)
FOR_FLOATS(UNARY, ceil, Ceil)
FOR_FLOATS(UNARY, round, Round)
