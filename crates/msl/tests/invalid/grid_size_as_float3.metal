// Invalid MSL ([[threads_per_grid]] as float3): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.3.6 (sizes are uint, uint2, uint3, ushort, ushort2 or ushort3).
// expect: 6: threads_per_grid
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], float3 n [[threads_per_grid]]) {
  y[0] = n.x;
}
