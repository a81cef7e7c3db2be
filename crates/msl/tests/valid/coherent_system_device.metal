// repro T9 (MLX fence.metal:16, built by MLX from Metal 3.2): `volatile coherent(system) device uint*`.
// metal-version: 320
#include <metal_stdlib>
[[kernel]] void fence_update(volatile coherent(system) device uint* timestamp [[buffer(0)]], constant uint& value [[buffer(1)]]) {
  timestamp[0] = value;
  metal::atomic_thread_fence(metal::mem_flags::mem_device, metal::memory_order_relaxed, metal::thread_scope_device);
}
