// Kernels that never end, and one that does.
#include <metal_stdlib>
using namespace metal;

[[kernel]] void forever(device uint* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  while (true) {}
}

// Thread 0 of each threadgroup waits for thread 1, without a barrier: on the CPU thread 1
// never runs while thread 0 spins (a GPU thread is a fiber that runs until it waits).
[[kernel]] void spin(device uint* x [[buffer(0)]], uint i [[thread_position_in_grid]],
                     uint t [[thread_index_in_threadgroup]]) {
  threadgroup metal::atomic_uint flag;
  if (t == 0) {
    atomic_store_explicit(&flag, 0u, memory_order_relaxed);
    while (atomic_load_explicit(&flag, memory_order_relaxed) == 0u) {}
  } else if (t == 1) {
    atomic_store_explicit(&flag, 1u, memory_order_relaxed);
  }
  x[i] = 1u;
}

// Never ends in threadgroup (1, 0, 0) only, after a collective, writing as it loops.
[[kernel]] void forever_in_one(device uint* x [[buffer(0)]], uint i [[thread_position_in_grid]],
                               uint g [[threadgroup_position_in_grid]]) {
  uint s = simd_sum(1u);
  while (g == 1u) { x[i] += s; }
  x[i] = s;
}

[[kernel]] void ends(device uint* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = i;
}
