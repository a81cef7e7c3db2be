// MLX-style source: a header with helper templates, then a templated kernel and its
// explicit host_name instantiations (as mx.fast.metal_kernel assembles them).
#include <metal_stdlib>
using namespace metal;

// header: a helper over any pointer type, taking threadgroup memory
template <typename T, int N>
inline float row_dot(const device T* w, const threadgroup float* xs) {
  float acc = 0.0f;
  #pragma clang loop unroll_count(1)
  for (int k = 0; k < N; ++k) {
    acc = metal::fma(float(w[k]), xs[k], acc);
  }
  return acc;
}

template <int N, typename T>
[[kernel]] void custom_kernel_rowdot(
  const device T* w [[buffer(0)]],
  const device float* x [[buffer(1)]],
  const constant float& scale [[buffer(2)]],
  device T* y [[buffer(3)]],
  uint3 thread_position_in_grid [[thread_position_in_grid]],
  uint3 thread_position_in_threadgroup [[thread_position_in_threadgroup]],
  uint3 threads_per_threadgroup [[threads_per_threadgroup]]) {
  threadgroup float xs[N];
  for (uint i = thread_position_in_threadgroup.x; i < uint(N); i += threads_per_threadgroup.x) {
    xs[i] = x[i];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  auto row = thread_position_in_grid.x;
  constexpr int n = N;
  y[row] = static_cast<T>(row_dot<T, n>(w + row * N, xs) * scale);
}

template [[host_name("custom_kernel_rowdot_16_float")]] [[kernel]] decltype(custom_kernel_rowdot<16, float>) custom_kernel_rowdot<16, float>;
template [[host_name("custom_kernel_rowdot_24_bfloat16_t")]] [[kernel]] decltype(custom_kernel_rowdot<24, bfloat16_t>) custom_kernel_rowdot<24, bfloat16_t>;
