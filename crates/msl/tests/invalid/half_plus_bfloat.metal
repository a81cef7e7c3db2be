// Invalid MSL (half + bfloat): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 2.1 and 2.22 (no implicit conversion between half and bfloat, so no common type).
// expect: 7: implicit conversion
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], device const half* a [[buffer(1)]], device const bfloat* b [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  y[i] = float(a[i] + b[i]);
}
