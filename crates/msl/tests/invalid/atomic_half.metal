// Invalid MSL (atomic<half>): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 2.6 (atomic types: int, uint, bool, ulong, float).
// expect: 6: atomic
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device atomic<half>* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  atomic_store_explicit(y, half(1.0f), memory_order_relaxed);
}
