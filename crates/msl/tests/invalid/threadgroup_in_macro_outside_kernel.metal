// Invalid MSL (threadgroup declared in a macro's body, expanded outside a kernel): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 4.4 (threadgroup address space: variables declared in a kernel function only).
// expect: 15: threadgroup variable 'scratch' declared outside a kernel function
// expect: 19: threadgroup variable 's' declared outside a kernel function
#include <metal_stdlib>
using namespace metal;
#define SCRATCH(N) threadgroup float scratch[N];
#define HELPER(NAME)                 \
inline float NAME(float x) {         \
  threadgroup float s[4];            \
  s[0] = x;                          \
  return s[0];                       \
}
inline float helper(float x) {
  SCRATCH(32)
  scratch[0] = x;
  return scratch[0];
}
HELPER(helper2)
#define KERNEL(NAME)                                                                       \
kernel void NAME(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {      \
  y[i] = helper(y[i]) + helper2(y[i]);                                                     \
}
KERNEL(k)
