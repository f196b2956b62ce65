// softmax and log_softmax over the last dimension of a contiguous [rows, cols] input, one thread
// block per row (blockDim a power of two, at most 1024). Half types compute in f32.
// `<op>_<dtype>(rows, cols, x, out)`.
#include "common.cuh"

#define MAX_THREADS 1024

template <typename A> __device__ A block_max(A v, A *shared) {
    const unsigned t = threadIdx.x;
    shared[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            const A a = shared[t], b = shared[t + s];
            shared[t] = (is_nan(a) || a > b) ? a : b;
        }
        __syncthreads();
    }
    const A r = shared[0];
    __syncthreads();
    return r;
}

template <typename A> __device__ A block_sum(A v, A *shared) {
    const unsigned t = threadIdx.x;
    shared[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            shared[t] += shared[t + s];
        }
        __syncthreads();
    }
    const A r = shared[0];
    __syncthreads();
    return r;
}

template <typename T, bool Log> __device__ void softmax(size_t rows, size_t cols, const T *x, T *out) {
    typedef typename Wide<T>::type A;
    __shared__ A shared[MAX_THREADS];
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *in = x + row * cols;
        T *o = out + row * cols;
        // Subtracting the row maximum keeps exp() from overflowing.
        A m = lowest<A>();
        for (size_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const A v = widen(in[c]);
            m = (is_nan(v) || v > m) ? v : m;
        }
        m = block_max<A>(m, shared);
        A s = (A)0;
        for (size_t c = threadIdx.x; c < cols; c += blockDim.x) {
            s += exp((A)widen(in[c]) - m);
        }
        s = block_sum<A>(s, shared);
        const A log_s = log(s);
        for (size_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const A shifted = (A)widen(in[c]) - m;
            o[c] = narrow<T>(Log ? shifted - log_s : exp(shifted) / s);
        }
    }
}

#define SOFTMAX(T, _unused)                                                                      \
    extern "C" __global__ void softmax_##T(size_t rows, size_t cols, const T *x, T *out) {        \
        softmax<T, false>(rows, cols, x, out);                                                    \
    }                                                                                             \
    extern "C" __global__ void log_softmax_##T(size_t rows, size_t cols, const T *x, T *out) {    \
        softmax<T, true>(rows, cols, x, out);                                                     \
    }

FOR_FLOATS(SOFTMAX, _)
