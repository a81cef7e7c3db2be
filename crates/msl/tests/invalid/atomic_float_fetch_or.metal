// Invalid MSL (fetch_or on atomic_float): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 6.15 (the bitwise atomic functions take integers).
// expect: 7: integers only
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device atomic_float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  atomic_fetch_or_explicit(y, 1.0f, memory_order_relaxed);
}
