// Selection by condition or position.
//
// where_<dtype>(numel, ndim, info, cond, a, b, out): out = cond ? a : b, `info` = dims, cond, a
//   and b strides (broadcast = stride 0), or nullptr when all are contiguous.
// masked_fill_<dtype>(numel, ndim, info, x, mask, value, out): out = mask ? value : x, `info` =
//   dims, x and mask strides; the value comes as f64.
// triu_<dtype> / tril_<dtype>(numel, ndim, info, diagonal, x, out): keep the elements on and above
//   (triu) or on and below (tril) the given diagonal of the last two dimensions (ndim >= 2), zero
//   elsewhere; `info` (required) = dims, x strides.
#include "common.cuh"

template <typename T>
__device__ void where(size_t numel, size_t ndim, const size_t *info, const bool *cond, const T *a,
                      const T *b, T *out) {
    // Only the chosen operand is read, as before the loads were batched.
    for_each_element(
        numel, info,
        [&](size_t i, const size_t *layout) {
            return cond[operand_offset(i, ndim, layout, 0)] ? a[operand_offset(i, ndim, layout, 1)]
                                                          : b[operand_offset(i, ndim, layout, 2)];
        },
        [&](size_t i, T v) { out[i] = v; });
}

template <typename T>
__device__ void masked_fill(size_t numel, size_t ndim, const size_t *info, const T *x, const bool *mask,
                            double value, T *out) {
    const T v = narrow<T>(value);
    for_each_element(
        numel, info,
        [&](size_t i, const size_t *layout) {
            return mask[operand_offset(i, ndim, layout, 1)] ? v : x[operand_offset(i, ndim, layout, 0)];
        },
        [&](size_t i, T w) { out[i] = w; });
}

template <typename T, bool Upper>
__device__ void triangle(size_t numel, size_t ndim, const size_t *info, long long diagonal, const T *x,
                         T *out) {
    const size_t cols = info[ndim - 1];
    const size_t rows = info[ndim - 2];
    GRID_STRIDE_LOOP(i, numel) {
        const long long col = (long long)(i % cols);
        const long long row = (long long)((i / cols) % rows);
        const bool keep = Upper ? col - row >= diagonal : col - row <= diagonal;
        out[i] = keep ? x[strided_offset(i, ndim, info, info + ndim)] : narrow<T>(0);
    }
}

#define SELECT(T, _unused)                                                                       \
    extern "C" __global__ void where_##T(size_t numel, size_t ndim, const size_t *info,          \
                                         const bool *cond, const T *a, const T *b, T *out) {     \
        where<T>(numel, ndim, info, cond, a, b, out);                                             \
    }                                                                                             \
    extern "C" __global__ void masked_fill_##T(size_t numel, size_t ndim, const size_t *info,    \
                                               const T *x, const bool *mask, double value,        \
                                               T *out) {                                          \
        masked_fill<T>(numel, ndim, info, x, mask, value, out);                                   \
    }                                                                                             \
    extern "C" __global__ void triu_##T(size_t numel, size_t ndim, const size_t *info,           \
                                        long long diagonal, const T *x, T *out) {                 \
        triangle<T, true>(numel, ndim, info, diagonal, x, out);                                   \
    }                                                                                             \
    extern "C" __global__ void tril_##T(size_t numel, size_t ndim, const size_t *info,           \
                                        long long diagonal, const T *x, T *out) {                 \
        triangle<T, false>(numel, ndim, info, diagonal, x, out);                                  \
    }

FOR_ALL(SELECT, _)
