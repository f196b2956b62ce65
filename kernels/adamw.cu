// The fused AdamW step (PyTorch's `torch.optim.AdamW`, amsgrad off), one pass over a parameter:
//   param *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * grad
//   v = beta2 * v + (1 - beta2) * grad^2
//   param -= lr / bias_correction1 * m / (sqrt(v) / sqrt(bias_correction2) + eps)
// with bias_correction_k = 1 - beta_k^step computed by the caller. All buffers contiguous, of the
// parameter's dtype; half types compute in f32.
// adamw_<dtype>(n, param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay,
//               bias_correction1, bias_correction2)
#include "common.cuh"

template <typename T>
__device__ void adamw(size_t n, T *param, const T *grad, T *exp_avg, T *exp_avg_sq, double lr,
                      double beta1, double beta2, double eps, double weight_decay, double bc1, double bc2) {
    typedef typename Wide<T>::type A;
    const A step_size = (A)(lr / bc1);
    const A bc2_sqrt = (A)sqrt(bc2);
    const A decay = (A)(1.0 - lr * weight_decay);
    const A b1 = (A)beta1, b2 = (A)beta2, e = (A)eps;
    GRID_STRIDE_LOOP(i, n) {
        const A g = widen(grad[i]);
        const A m = b1 * (A)widen(exp_avg[i]) + ((A)1 - b1) * g;
        const A v = b2 * (A)widen(exp_avg_sq[i]) + ((A)1 - b2) * g * g;
        const A p = (A)widen(param[i]) * decay - step_size * m / (sqrt(v) / bc2_sqrt + e);
        exp_avg[i] = narrow<T>(m);
        exp_avg_sq[i] = narrow<T>(v);
        param[i] = narrow<T>(p);
    }
}

#define ADAMW(T, _unused)                                                                        \
    extern "C" __global__ void adamw_##T(size_t n, T *param, const T *grad, T *exp_avg,          \
                                         T *exp_avg_sq, double lr, double beta1, double beta2,    \
                                         double eps, double weight_decay, double bc1,             \
                                         double bc2) {                                            \
        adamw<T>(n, param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, bc1,   \
                 bc2);                                                                            \
    }

FOR_FLOATS(ADAMW, _)
