// Random numbers generated on the device: `uniform_<dtype>(n, seed, out)` fills `out` with
// samples in [0, 1), `normal_<dtype>(n, seed, out)` with standard normal samples. Every element
// is a hash of (seed, index) (splitmix64), so the numbers depend on neither the grid nor the
// device, and a new seed per call (drawn from the host's seeded generator) gives a new stream.
#include "common.cuh"

__device__ __forceinline__ u64 mix(u64 x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// Significand bits of T: a uniform sample with that many random bits is exact in T and below 1,
// so rounding can never produce 1.0.
template <typename T> struct Digits { static const int value = 24; };
template <> struct Digits<f64> { static const int value = 53; };
template <> struct Digits<f16> { static const int value = 11; };
template <> struct Digits<bf16> { static const int value = 8; };

// A sample in [0, 1) with `D` random bits, in the wide type W.
template <typename W, int D> __device__ __forceinline__ W unit(u64 seed, u64 counter) {
    return (W)(mix(seed ^ mix(counter)) >> (64 - D)) * ((W)1 / (W)(1ULL << D));
}

template <typename T> __device__ void uniform(size_t n, u64 seed, T *out) {
    typedef typename Wide<T>::type W;
    GRID_STRIDE_LOOP(i, n) { out[i] = narrow<T>(unit<W, Digits<T>::value>(seed, i)); }
}

// Box-Muller on two samples per element, computed in the wide type.
template <typename T> __device__ void normal(size_t n, u64 seed, T *out) {
    typedef typename Wide<T>::type W;
    const int d = Digits<W>::value;
    GRID_STRIDE_LOOP(i, n) {
        W u1 = (W)1 - unit<W, d>(seed, 2 * (u64)i); // in (0, 1]: log(u1) is finite
        W u2 = unit<W, d>(seed, 2 * (u64)i + 1);
        out[i] = narrow<T>(sqrt((W)-2 * log(u1)) * cospi((W)2 * u2));
    }
}

#define RANDOM(T, _unused)                                                                       \
    extern "C" __global__ void uniform_##T(size_t n, u64 seed, T *out) { uniform<T>(n, seed, out); } \
    extern "C" __global__ void normal_##T(size_t n, u64 seed, T *out) { normal<T>(n, seed, out); }

FOR_FLOATS(RANDOM, _)
