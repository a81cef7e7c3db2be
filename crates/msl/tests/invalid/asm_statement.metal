// Invalid MSL (inline assembly): g++ with the emulator's macros accepts it.
// Cites: MSL specification section 1.5 (Metal and C++: MSL has no asm).
// expect: 8: inline assembly
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = 1.0f;
  asm volatile("" ::: "memory");
}
