// Dtype conversions: `cast_<from>_<to>(numel, ndim, info, x, out)`; `info` = dims, x strides, or
// nullptr when x is contiguous. Floats to integers truncate toward zero, anything non-zero is
// `true`, and the half types round to nearest even, as PyTorch's `to(dtype)`.
#include "common.cuh"

template <typename From, typename To>
__device__ void cast(size_t numel, size_t ndim, const size_t *info, const From *x, To *out) {
    for_each_element(
        numel, info, [&](size_t i, const size_t *layout) { return x[operand_offset(i, ndim, layout, 0)]; },
        [&](size_t i, From v) { out[i] = narrow<To>(widen(v)); });
}

#define CAST(FROM, TO)                                                                           \
    extern "C" __global__ void cast_##FROM##_##TO(size_t numel, size_t ndim, const size_t *info, \
                                                  const FROM *x, TO *out) {                       \
        cast<FROM, TO>(numel, ndim, info, x, out);                                                \
    }

// The preprocessor does not expand FOR_ALL inside FOR_ALL, so the target list is spelled out.
#define CAST_FROM(FROM, _unused)                                                                 \
    CAST(FROM, f32) CAST(FROM, f64) CAST(FROM, f16) CAST(FROM, bf16)                             \
    CAST(FROM, i64) CAST(FROM, i32) CAST(FROM, u8) CAST(FROM, bool)

FOR_ALL(CAST_FROM, _)
