// Reductions over one dimension, in one or two passes.
//
// `<op>_<dtype>(n_out, reduce_size, reduce_stride, ndim, info, x, splits, partials, out, correction)`:
// `info` = the dims and x strides of the kept dimensions (ndim of them, possibly 0), laid out as
// for elementwise ops; output element `o` reduces x[offset(o) + r * reduce_stride] for r in
// 0..reduce_size. `out` is contiguous over the kept dimensions.
//
// A block is blockDim.x outputs by blockDim.y threads along the reduced dimension (blockDim.y a
// power of two, blockDim.x * blockDim.y at most 1024). The launcher picks the shape: one output
// per block with the threads along the row when the reduced dimension is the contiguous one
// (`blockDim.x` = 1), or 32 neighbouring outputs per block when it is not, so a warp reads 32
// neighbouring elements either way. Each row is cut into `splits` pieces of
// ceil(reduce_size / splits) elements, one per blockIdx.y, so a few long rows (`sum_all` of 2^24
// elements) still fill the GPU: with one split the block writes the result, with more it writes
// its piece's state to `partials[o * splits + split]` and `<op>_finish_<dtype>(n_out, splits,
// reduce_size, partials, out, correction)` combines the pieces, one block per output. The launch
// plan is fixed by the sizes alone (never by the device), so a result does not depend on the GPU.
//
// sum: floats accumulate in f32 (f64 for f64) and write their own dtype; integers and bool write
// i64. mean and var (with `correction`, 1 = unbiased; Welford per thread, Chan's formula to
// combine): floats. max/min: NaN wins. argmax/argmin write i64, the first index on ties, NaN
// counts as the extreme. `correction` is read by var only.
#include "common.cuh"

#define MAX_THREADS 1024

// ---- the ops: a state, its identity, adding one element, combining two states, the result ----

// `Value` is what an element is widened to before it is added.
template <typename A> struct SumOp {
    typedef A Value;
    typedef A State;
    __device__ static State identity() { return (A)0; }
    __device__ static State add(State s, A v, i64) { return s + v; }
    __device__ static State combine(State a, State b) { return a + b; }
    template <typename Out> __device__ static Out finish(State s, size_t, double) { return narrow<Out>(s); }
};

template <typename A> struct MeanOp : SumOp<A> {
    template <typename Out> __device__ static Out finish(A s, size_t n, double) {
        return narrow<Out>(s / (A)n);
    }
};

template <typename A> struct MaxOp {
    typedef A Value;
    typedef A State;
    __device__ static State identity() { return lowest<A>(); }
    __device__ static State add(State s, A v, i64) { return combine(s, v); }
    __device__ static State combine(State a, State b) { return (is_nan(a) || a > b) ? a : b; }
    template <typename Out> __device__ static Out finish(State s, size_t, double) { return narrow<Out>(s); }
};

template <typename A> struct MinOp {
    typedef A Value;
    typedef A State;
    __device__ static State identity() { return highest<A>(); }
    __device__ static State add(State s, A v, i64) { return combine(s, v); }
    __device__ static State combine(State a, State b) { return (is_nan(a) || a < b) ? a : b; }
    template <typename Out> __device__ static Out finish(State s, size_t, double) { return narrow<Out>(s); }
};

// The best value so far and its index along the reduced dimension (-1: none yet).
template <typename A> struct ArgState {
    A value;
    i64 index;
};

template <typename A, bool Greater> struct ArgOp {
    typedef A Value;
    typedef ArgState<A> State;
    // Does (va, ia) beat (vb, ib)? NaN beats everything, ties go to the lower index.
    __device__ static bool beats(A va, i64 ia, A vb, i64 ib) {
        if (ia < 0) return false;
        if (ib < 0) return true;
        const bool na = is_nan(va), nb = is_nan(vb);
        if (na || nb) return na && (!nb || ia < ib);
        if (va == vb) return ia < ib;
        return Greater ? va > vb : va < vb;
    }
    __device__ static State identity() {
        State s;
        s.value = (A)0;
        s.index = -1;
        return s;
    }
    __device__ static State add(State s, A v, i64 r) {
        if (beats(v, r, s.value, s.index)) {
            s.value = v;
            s.index = r;
        }
        return s;
    }
    __device__ static State combine(State a, State b) { return beats(b.value, b.index, a.value, a.index) ? b : a; }
    template <typename Out> __device__ static Out finish(State s, size_t, double) { return s.index; }
};

// Count, mean and sum of squared deviations from the mean (Welford).
template <typename A> struct VarState {
    A mean;
    A m2;
    i64 count;
};

template <typename A> struct VarOp {
    typedef A Value;
    typedef VarState<A> State;
    __device__ static State identity() {
        State s;
        s.mean = (A)0;
        s.m2 = (A)0;
        s.count = 0;
        return s;
    }
    __device__ static State add(State s, A v, i64) {
        s.count += 1;
        const A d = v - s.mean;
        s.mean += d / (A)s.count;
        s.m2 += d * (v - s.mean);
        return s;
    }
    // Chan et al.'s pairwise update: exact for any split of the elements.
    __device__ static State combine(State a, State b) {
        if (a.count == 0) return b;
        if (b.count == 0) return a;
        State s;
        s.count = a.count + b.count;
        const A d = b.mean - a.mean;
        const A wb = (A)b.count / (A)s.count;
        s.mean = a.mean + d * wb;
        s.m2 = a.m2 + b.m2 + d * d * (A)a.count * wb;
        return s;
    }
    template <typename Out> __device__ static Out finish(State s, size_t, double correction) {
        const A denom = (A)s.count - (A)correction;
        // PyTorch clamps the divisor at 0, giving NaN (or inf) for too few elements.
        return narrow<Out>(s.m2 / (denom > (A)0 ? denom : (A)0));
    }
};

// The partial-state sizes the launcher allocates for (src/backend/cuda/reduce.rs,
// `partial_state_bytes`): keep both sides in step.
static_assert(sizeof(ArgState<float>) == 16 && sizeof(ArgState<double>) == 16, "arg state size");
static_assert(sizeof(ArgState<u8>) == 16 && sizeof(ArgState<i64>) == 16, "arg state size");
static_assert(sizeof(VarState<float>) == 16 && sizeof(VarState<double>) == 24, "var state size");

// ---- the kernels ----

// Combines the blockDim.y states of each column of `shared` (laid out [y][x]) into row 0.
template <typename Op>
__device__ void combine_columns(typename Op::State *shared) {
    const unsigned tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x;
    for (unsigned h = blockDim.y / 2; h > 0; h >>= 1) {
        if (ty < h) {
            shared[ty * bx + tx] = Op::combine(shared[ty * bx + tx], shared[(ty + h) * bx + tx]);
        }
        __syncthreads();
    }
}

__device__ __forceinline__ size_t base_offset(size_t o, size_t ndim, const size_t *info) {
    return ndim == 0 ? 0 : strided_offset(o, ndim, info, info + ndim);
}

template <typename T, typename Op, typename Out>
__device__ void reduce(size_t n_out, size_t reduce_size, size_t reduce_stride, size_t ndim, const size_t *info,
                       const T *x, size_t splits, typename Op::State *partials, Out *out, double correction) {
    typedef typename Op::State S;
    typedef typename Op::Value V;
    __shared__ S shared[MAX_THREADS];
    const unsigned tx = threadIdx.x, ty = threadIdx.y;
    const size_t chunk = (reduce_size + splits - 1) / splits;
    const size_t split = blockIdx.y;
    const size_t begin = split * chunk;
    const size_t end = begin + chunk < reduce_size ? begin + chunk : reduce_size;
    // Every thread of the block runs the same number of iterations (the barriers need it).
    for (size_t first = (size_t)blockIdx.x * blockDim.x; first < n_out; first += (size_t)gridDim.x * blockDim.x) {
        const size_t o = first + tx;
        S acc = Op::identity();
        if (o < n_out) {
            const T *row = x + base_offset(o, ndim, info);
            const size_t step = blockDim.y;
            size_t r = begin + ty;
            // Four reads in flight before they are added, in the same order as one at a time (so
            // the result is the same): one read at a time leaves most of the bandwidth unused.
            for (; r + 3 * step < end; r += 4 * step) {
                const T v0 = row[r * reduce_stride], v1 = row[(r + step) * reduce_stride];
                const T v2 = row[(r + 2 * step) * reduce_stride], v3 = row[(r + 3 * step) * reduce_stride];
                acc = Op::add(acc, (V)widen(v0), (i64)r);
                acc = Op::add(acc, (V)widen(v1), (i64)(r + step));
                acc = Op::add(acc, (V)widen(v2), (i64)(r + 2 * step));
                acc = Op::add(acc, (V)widen(v3), (i64)(r + 3 * step));
            }
            for (; r < end; r += step) {
                acc = Op::add(acc, (V)widen(row[r * reduce_stride]), (i64)r);
            }
        }
        shared[ty * blockDim.x + tx] = acc;
        __syncthreads();
        combine_columns<Op>(shared);
        if (ty == 0 && o < n_out) {
            if (splits == 1) {
                out[o] = Op::template finish<Out>(shared[tx], reduce_size, correction);
            } else {
                partials[o * splits + split] = shared[tx];
            }
        }
        __syncthreads();
    }
}

// The second pass: one block per output, its threads over the output's `splits` partial states.
template <typename Op, typename Out>
__device__ void finish(size_t n_out, size_t splits, size_t reduce_size, const typename Op::State *partials,
                       Out *out, double correction) {
    typedef typename Op::State S;
    __shared__ S shared[MAX_THREADS];
    const unsigned ty = threadIdx.y;
    for (size_t o = blockIdx.x; o < n_out; o += gridDim.x) {
        S acc = Op::identity();
        for (size_t s = ty; s < splits; s += blockDim.y) {
            acc = Op::combine(acc, partials[o * splits + s]);
        }
        shared[ty] = acc;
        __syncthreads();
        combine_columns<Op>(shared);
        if (ty == 0) {
            out[o] = Op::template finish<Out>(shared[0], reduce_size, correction);
        }
        __syncthreads();
    }
}

#define REDUCE_ARGS size_t n_out, size_t reduce_size, size_t reduce_stride, size_t ndim, const size_t *info
#define REDUCE_PASS n_out, reduce_size, reduce_stride, ndim, info
#define FINISH_ARGS size_t n_out, size_t splits, size_t reduce_size

// One reduction `name` of input T with op OP (state type OP::State) writing OUT.
#define REDUCTION(name, T, OP, OUT)                                                                 \
    extern "C" __global__ void name##_##T(REDUCE_ARGS, const T *x, size_t splits,                   \
                                          OP::State *partials, OUT *out, double correction) {       \
        reduce<T, OP, OUT>(REDUCE_PASS, x, splits, partials, out, correction);                      \
    }                                                                                               \
    extern "C" __global__ void name##_finish_##T(FINISH_ARGS, const OP::State *partials, OUT *out,  \
                                                 double correction) {                               \
        finish<OP, OUT>(n_out, splits, reduce_size, partials, out, correction);                     \
    }

// Each op over the wide type of T (sums of integers and bool in i64).
template <typename T> using Sum = SumOp<typename Wide<T>::type>;
template <typename T> using Mean = MeanOp<typename Wide<T>::type>;
template <typename T> using Var = VarOp<typename Wide<T>::type>;
template <typename T> using Max = MaxOp<typename Wide<T>::type>;
template <typename T> using Min = MinOp<typename Wide<T>::type>;
template <typename T> using ArgMax = ArgOp<typename Wide<T>::type, true>;
template <typename T> using ArgMin = ArgOp<typename Wide<T>::type, false>;

#define SUM_MEAN_VAR_FLOAT(T, _unused)                                                             \
    REDUCTION(sum, T, Sum<T>, T)                                                                    \
    REDUCTION(mean, T, Mean<T>, T)                                                                  \
    REDUCTION(var, T, Var<T>, T)

#define SUM_INT(T, _unused) REDUCTION(sum, T, SumOp<i64>, i64)

#define MAX_MIN_ARG(T, _unused)                                                                    \
    REDUCTION(max, T, Max<T>, T)                                                                    \
    REDUCTION(min, T, Min<T>, T)                                                                    \
    REDUCTION(argmax, T, ArgMax<T>, i64)                                                            \
    REDUCTION(argmin, T, ArgMin<T>, i64)

FOR_FLOATS(SUM_MEAN_VAR_FLOAT, _)
FOR_INTS(SUM_INT, _)
SUM_INT(bool, _)
FOR_NUMERIC(MAX_MIN_ARG, _)
