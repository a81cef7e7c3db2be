// Invalid MSL (threadgroup outside kernel): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 4.4 (threadgroup address space).
// expect: 7: threadgroup variable 'scratch' declared outside a kernel function
#include <metal_stdlib>
using namespace metal;
inline float helper(float x) {
  threadgroup float scratch[32];
  scratch[0] = x;
  return scratch[0];
}
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = helper(y[i]);
}
