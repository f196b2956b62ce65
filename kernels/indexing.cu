// Moving elements by index or by layout.
//
// index_select_<index>_<dtype>(n_out, outer, src_dim, n_ids, inner, ids, x, out, bad): x is a
//   contiguous [outer, src_dim, inner], out a contiguous [outer, n_ids, inner].
// gather_<index>_<dtype>(numel, ndim, info, dim, src_dim, ids, x, out, bad): out has the shape of
//   ids; `info` (required) = dims (of ids and out), x strides, ids strides; along `dim` the index comes from
//   ids, elsewhere the coordinate is the output's.
//   Both write 0 where an index is out of range and record the first such index in `*bad`
//   (initialised to 0 by the caller: 0 is in range, the front end launches no kernel over a dim
//   of size 0), so the launcher can report it instead of the device reading out of bounds.
// copy_<width>(numel, ndim, info, src, dst): strided to strided copy by element width in bits
//   (u8/u16/u32/u64), `info` = dims, src strides, dst strides; serves contiguous(), cat and
//   writes into views without one kernel per dtype.
// fill_<width>(numel, out, bits): every element of a contiguous buffer set to the same bits.
#include "common.cuh"

template <typename I>
__device__ __forceinline__ bool checked_index(I raw, size_t size, unsigned long long *bad, size_t *out) {
    // A negative index is out of range, as in PyTorch's index_select and gather (only Python
    // indexing counts from the end).
    const long long v = (long long)raw;
    if (v < 0 || v >= (long long)size) {
        atomicCAS(bad, 0ULL, (unsigned long long)(long long)raw);
        return false;
    }
    *out = (size_t)v;
    return true;
}

template <typename I, typename T>
__device__ void index_select(size_t n_out, size_t outer, size_t src_dim, size_t n_ids, size_t inner,
                             const I *ids, const T *x, T *out, unsigned long long *bad) {
    GRID_STRIDE_LOOP(i, n_out) {
        const size_t k = i % inner;
        const size_t j = (i / inner) % n_ids;
        const size_t o = i / (inner * n_ids);
        size_t src;
        out[i] = (o < outer && checked_index(ids[j], src_dim, bad, &src)) ? x[(o * src_dim + src) * inner + k]
                                                                          : narrow<T>(0);
    }
}

template <typename I, typename T>
__device__ void gather(size_t numel, size_t ndim, const size_t *info, size_t dim, size_t src_dim,
                       const I *ids, const T *x, T *out, unsigned long long *bad) {
    const size_t *dims = info;
    const size_t *x_strides = info + ndim;
    const size_t *id_strides = info + 2 * ndim;
    GRID_STRIDE_LOOP(i, numel) {
        size_t rest = i, x_off = 0, id_off = 0;
        for (size_t d = ndim; d-- > 0;) {
            const size_t c = rest % dims[d];
            rest /= dims[d];
            id_off += c * id_strides[d];
            if (d != dim) {
                x_off += c * x_strides[d];
            }
        }
        size_t src;
        out[i] = checked_index(ids[id_off], src_dim, bad, &src) ? x[x_off + src * x_strides[dim]] : narrow<T>(0);
    }
}

template <typename T>
__device__ void copy_strided(size_t numel, size_t ndim, const size_t *info, const T *src, T *dst) {
    GRID_STRIDE_LOOP(i, numel) {
        dst[operand_offset(i, ndim, info, 1)] = src[operand_offset(i, ndim, info, 0)];
    }
}

#define INDEX(T, I)                                                                              \
    extern "C" __global__ void index_select_##I##_##T(size_t n_out, size_t outer, size_t src_dim, \
                                                      size_t n_ids, size_t inner, const I *ids,   \
                                                      const T *x, T *out,                         \
                                                      unsigned long long *bad) {                  \
        index_select<I, T>(n_out, outer, src_dim, n_ids, inner, ids, x, out, bad);                \
    }                                                                                             \
    extern "C" __global__ void gather_##I##_##T(size_t numel, size_t ndim, const size_t *info,   \
                                                size_t dim, size_t src_dim, const I *ids,         \
                                                const T *x, T *out, unsigned long long *bad) {    \
        gather<I, T>(numel, ndim, info, dim, src_dim, ids, x, out, bad);                          \
    }

#define BY_WIDTH(W, _unused)                                                                     \
    extern "C" __global__ void copy_##W(size_t numel, size_t ndim, const size_t *info,           \
                                        const W *src, W *dst) {                                   \
        copy_strided<W>(numel, ndim, info, src, dst);                                             \
    }                                                                                             \
    extern "C" __global__ void fill_##W(size_t numel, W *out, W bits) {                          \
        GRID_STRIDE_LOOP(i, numel) { out[i] = bits; }                                             \
    }

FOR_ALL(INDEX, i64)
FOR_ALL(INDEX, i32)
BY_WIDTH(u8, _)
BY_WIDTH(u16, _)
BY_WIDTH(u32, _)
BY_WIDTH(u64, _)
