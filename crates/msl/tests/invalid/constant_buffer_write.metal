// Invalid MSL (constant buffer write): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 4.2 (constant address space).
// expect: 7: read-only
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(constant float* c [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  c[i] = 2.0f;
  y[i] = c[0];
}
