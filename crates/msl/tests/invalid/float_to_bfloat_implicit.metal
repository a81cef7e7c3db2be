// Invalid MSL (implicit float to bfloat): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 2.1 and 2.22 (bfloat converts to and from other types only explicitly, except to float).
// expect: 7: implicit conversion
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device bfloat* y [[buffer(0)]], device const float* x [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  bfloat b = x[i];
  y[i] = b;
}
