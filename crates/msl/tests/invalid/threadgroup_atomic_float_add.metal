// Invalid MSL (atomic_fetch_add on a threadgroup atomic_float): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 6.15 (atomic_float's read-modify-write functions are device memory's).
// expect: 8: threadgroup
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_threadgroup]]) {
  threadgroup atomic_float sum;
  atomic_fetch_add_explicit(&sum, 1.0f, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[i] = atomic_load_explicit(&sum, memory_order_relaxed);
}
