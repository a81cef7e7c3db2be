// Kernels for the parallel-threadgroup tests.
#include <metal_stdlib>
using namespace metal;

// Every thread adds to counters shared by the whole grid, many times: device atomics
// must be atomic across the worker threads.
[[kernel]] void hammer(device atomic_uint* count [[buffer(0)]], device atomic<float>* facc [[buffer(1)]],
                       device atomic_int* lo [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  for (uint k = 0; k < 64u; ++k) {
    atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
    atomic_fetch_add_explicit(facc, 1.0f, memory_order_relaxed);
    atomic_fetch_min_explicit(lo, -(int)(i * 64u + k), memory_order_relaxed);
    atomic_fetch_sub_explicit(count + 1, 1u, memory_order_relaxed);
  }
}

// Threads at and past `x`'s end fault: every threadgroup from some point on faults.
[[kernel]] void fault_from(const device float* x [[buffer(0)]], device float* y [[buffer(1)]],
                           uint i [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  const float s = simd_sum(1.0f);
  y[i] = x[i] + s + float(lane);  // @fault-from
}

// A threadgroup-order-sensitive but race-free kernel: each threadgroup reduces its slice
// with a barrier and collectives, output written once per threadgroup.
[[kernel]] void reduce_slices(const device float* x [[buffer(0)]], device float* out [[buffer(1)]],
                              uint i [[thread_position_in_grid]], uint tg [[threadgroup_position_in_grid]],
                              uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float part[8];
  const float s = simd_sum(x[i] * 1.0009765625f);
  if (lane == 0u) part[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0u) {
    const float t = simd_sum(lane < 8u ? part[lane] : 0.0f);
    if (lane == 0u) out[tg] = t;
  }
}
