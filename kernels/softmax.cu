// softmax and log_softmax over the last dimension of a contiguous [rows, cols] input, one thread
// block per row (blockDim a power of two from 32 to 1024; the launcher gives a thread about four
// elements). Half types compute in f32.
// `<op>_<dtype>(rows, cols, x, out)`.
#include "common.cuh"

// A block reduction: each warp combines its 32 values with shuffles, then the first warp
// combines the warps' results (blockDim.x is a power of two from 32 to 1,024, so at most 32 warps).
template <typename A, typename Combine>
__device__ A block_reduce(A v, A identity, Combine combine, A *shared) {
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int offset = 16; offset > 0; offset /= 2) {
        v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    if (lane == 0) {
        shared[warp] = v;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? shared[lane] : identity;
        for (int offset = 16; offset > 0; offset /= 2) {
            v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
        }
        if (lane == 0) {
            shared[0] = v;
        }
    }
    __syncthreads();
    const A r = shared[0];
    // `shared` is used again by the next reduction.
    __syncthreads();
    return r;
}

template <typename T, bool Log> __device__ void softmax(size_t rows, size_t cols, const T *x, T *out) {
    typedef typename Wide<T>::type A;
    __shared__ A shared[32];
    // NaN wins, as in torch.max.
    const auto max = [](A a, A b) { return (is_nan(a) || a > b) ? a : b; };
    const auto add = [](A a, A b) { return a + b; };
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *in = x + row * cols;
        T *o = out + row * cols;
        // Subtracting the row maximum keeps exp() from overflowing.
        A m = lowest<A>();
        for (size_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const A v = widen(in[c]);
            m = (is_nan(v) || v > m) ? v : m;
        }
        m = block_reduce<A>(m, lowest<A>(), max, shared);
        A s = (A)0;
        for (size_t c = threadIdx.x; c < cols; c += blockDim.x) {
            s += exp((A)widen(in[c]) - m);
        }
        s = block_reduce<A>(s, (A)0, add, shared);
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
