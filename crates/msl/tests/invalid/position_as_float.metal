// Invalid MSL (position as float): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.3.6 (kernel function input attributes).
// expect: 6: has type 'float3'
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], float3 gid [[thread_position_in_grid]]) {
  y[uint(gid.x)] = 1.0f;
}
