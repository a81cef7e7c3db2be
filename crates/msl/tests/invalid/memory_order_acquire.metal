// Invalid MSL (memory_order_acquire in an atomic function): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 6.15.1 (atomic functions take memory_order_relaxed).
// expect: 7: memory_order_relaxed
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device atomic_uint* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  uint v = atomic_load_explicit(y, memory_order_acquire);
  atomic_store_explicit(y, v + 1, memory_order_relaxed);
}
