// Reductions over one dimension. Each output element is reduced by one thread block (blockDim a
// power of two, at most 1024), so the result does not depend on the grid size.
//
// `<op>_<dtype>(n_out, reduce_size, reduce_stride, ndim, info, x, out)`: `info` = the dims and x
// strides of the kept dimensions (ndim of them, possibly 0), laid out as for elementwise ops;
// output element `o` reduces x[offset(o) + r * reduce_stride] for r in 0..reduce_size. `out` is
// contiguous over the kept dimensions.
//
// sum: floats accumulate in f32 (f64 for f64) and write their own dtype; integers and bool write
// i64. mean and var (with `correction`, 1 = unbiased): floats. max/min: NaN wins. argmax/argmin
// write i64, the first index on ties, NaN counts as the extreme.
#include "common.cuh"

#define MAX_THREADS 1024

template <typename A> struct SumOp {
    __device__ A init() const { return (A)0; }
    __device__ A operator()(A a, A b) const { return a + b; }
};
template <typename A> struct MaxOp {
    __device__ A init() const { return lowest<A>(); }
    __device__ A operator()(A a, A b) const { return (is_nan(a) || a > b) ? a : b; }
};
template <typename A> struct MinOp {
    __device__ A init() const { return highest<A>(); }
    __device__ A operator()(A a, A b) const { return (is_nan(a) || a < b) ? a : b; }
};

// Block-wide reduction of one value per thread; the result is valid in every thread.
template <typename A, typename Op> __device__ A block_reduce(A v, Op op, A *shared) {
    const unsigned t = threadIdx.x;
    shared[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            shared[t] = op(shared[t], shared[t + s]);
        }
        __syncthreads();
    }
    const A result = shared[0];
    __syncthreads();
    return result;
}

__device__ __forceinline__ size_t base_offset(size_t o, size_t ndim, const size_t *info) {
    return ndim == 0 ? 0 : strided_offset(o, ndim, info, info + ndim);
}

// Accumulates reduce_size elements starting at `x + base` with op, thread-strided.
template <typename T, typename A, typename Op>
__device__ A reduce_row(const T *x, size_t base, size_t reduce_size, size_t reduce_stride, Op op, A *shared) {
    A acc = op.init();
    for (size_t r = threadIdx.x; r < reduce_size; r += blockDim.x) {
        acc = op(acc, (A)widen(x[base + r * reduce_stride]));
    }
    return block_reduce<A, Op>(acc, op, shared);
}

template <typename T, typename A, typename Out, template <typename> class Op>
__device__ void reduce(size_t n_out, size_t reduce_size, size_t reduce_stride, size_t ndim,
                       const size_t *info, const T *x, Out *out, bool mean) {
    __shared__ A shared[MAX_THREADS];
    Op<A> op;
    for (size_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        A acc = reduce_row<T, A>(x, base_offset(o, ndim, info), reduce_size, reduce_stride, op, shared);
        if (threadIdx.x == 0) {
            out[o] = narrow<Out>(mean ? acc / (A)reduce_size : acc);
        }
    }
}

template <typename T, typename A>
__device__ void variance(size_t n_out, size_t reduce_size, size_t reduce_stride, size_t ndim,
                         const size_t *info, const T *x, T *out, double correction) {
    __shared__ A shared[MAX_THREADS];
    SumOp<A> sum;
    for (size_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        const size_t base = base_offset(o, ndim, info);
        // Two passes over the row: the mean first, then squared deviations from it, which keeps
        // the result accurate when the mean is large compared with the spread.
        const A mean = reduce_row<T, A>(x, base, reduce_size, reduce_stride, sum, shared) / (A)reduce_size;
        A acc = (A)0;
        for (size_t r = threadIdx.x; r < reduce_size; r += blockDim.x) {
            const A d = (A)widen(x[base + r * reduce_stride]) - mean;
            acc += d * d;
        }
        acc = block_reduce<A>(acc, sum, shared);
        if (threadIdx.x == 0) {
            const A denom = (A)reduce_size - (A)correction;
            // PyTorch clamps the divisor at 0, giving NaN (or inf) for too few elements.
            out[o] = narrow<T>(acc / (denom > (A)0 ? denom : (A)0));
        }
    }
}

// For argmax (Greater = true) and argmin: does (va, ia) beat (vb, ib)?
template <bool Greater, typename A> __device__ __forceinline__ bool beats(A va, i64 ia, A vb, i64 ib) {
    if (ia < 0) return false;
    if (ib < 0) return true;
    const bool na = is_nan(va), nb = is_nan(vb);
    if (na || nb) return na && (!nb || ia < ib);
    if (va == vb) return ia < ib;
    return Greater ? va > vb : va < vb;
}

template <typename T, typename A, bool Greater>
__device__ void arg_reduce(size_t n_out, size_t reduce_size, size_t reduce_stride, size_t ndim,
                           const size_t *info, const T *x, i64 *out) {
    __shared__ A values[MAX_THREADS];
    __shared__ i64 indices[MAX_THREADS];
    const unsigned t = threadIdx.x;
    for (size_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        const size_t base = base_offset(o, ndim, info);
        A best = (A)0;
        i64 best_i = -1;
        for (size_t r = t; r < reduce_size; r += blockDim.x) {
            const A v = (A)widen(x[base + r * reduce_stride]);
            if (beats<Greater>(v, (i64)r, best, best_i)) {
                best = v;
                best_i = (i64)r;
            }
        }
        values[t] = best;
        indices[t] = best_i;
        __syncthreads();
        for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
            if (t < s && beats<Greater>(values[t + s], indices[t + s], values[t], indices[t])) {
                values[t] = values[t + s];
                indices[t] = indices[t + s];
            }
            __syncthreads();
        }
        if (t == 0) {
            out[o] = indices[0];
        }
        __syncthreads();
    }
}

#define REDUCE_ARGS size_t n_out, size_t reduce_size, size_t reduce_stride, size_t ndim, const size_t *info
#define REDUCE_PASS n_out, reduce_size, reduce_stride, ndim, info

#define SUM_MEAN_FLOAT(T, _unused)                                                               \
    extern "C" __global__ void sum_##T(REDUCE_ARGS, const T *x, T *out) {                        \
        reduce<T, Wide<T>::type, T, SumOp>(REDUCE_PASS, x, out, false);                           \
    }                                                                                             \
    extern "C" __global__ void mean_##T(REDUCE_ARGS, const T *x, T *out) {                       \
        reduce<T, Wide<T>::type, T, SumOp>(REDUCE_PASS, x, out, true);                            \
    }                                                                                             \
    extern "C" __global__ void var_##T(REDUCE_ARGS, const T *x, T *out, double correction) {     \
        variance<T, Wide<T>::type>(REDUCE_PASS, x, out, correction);                              \
    }

#define SUM_INT(T, _unused)                                                                      \
    extern "C" __global__ void sum_##T(REDUCE_ARGS, const T *x, i64 *out) {                      \
        reduce<T, i64, i64, SumOp>(REDUCE_PASS, x, out, false);                                   \
    }

#define MAX_MIN(T, _unused)                                                                      \
    extern "C" __global__ void max_##T(REDUCE_ARGS, const T *x, T *out) {                        \
        reduce<T, Wide<T>::type, T, MaxOp>(REDUCE_PASS, x, out, false);                           \
    }                                                                                             \
    extern "C" __global__ void min_##T(REDUCE_ARGS, const T *x, T *out) {                        \
        reduce<T, Wide<T>::type, T, MinOp>(REDUCE_PASS, x, out, false);                           \
    }                                                                                             \
    extern "C" __global__ void argmax_##T(REDUCE_ARGS, const T *x, i64 *out) {                   \
        arg_reduce<T, Wide<T>::type, true>(REDUCE_PASS, x, out);                                  \
    }                                                                                             \
    extern "C" __global__ void argmin_##T(REDUCE_ARGS, const T *x, i64 *out) {                   \
        arg_reduce<T, Wide<T>::type, false>(REDUCE_PASS, x, out);                                 \
    }

FOR_FLOATS(SUM_MEAN_FLOAT, _)
FOR_INTS(SUM_INT, _)
SUM_INT(bool, _)
FOR_NUMERIC(MAX_MIN, _)
