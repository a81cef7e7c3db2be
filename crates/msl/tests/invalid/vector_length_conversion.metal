// Invalid MSL (vector length conversion): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 2.2.3 (vector constructors: a vector converts only to a vector
// of as many elements; shorter ones need a swizzle).
// expect: 8: a vector converts only to a vector of as many elements
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device const float4* x [[buffer(0)]], device float3* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  y[i] = float3(x[i]);
}
