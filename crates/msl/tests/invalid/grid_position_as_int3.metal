// Invalid MSL (grid position as int3): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.3.6 (kernel function input attributes).
// expect: 6: Metal allows uint, uint2, uint3, ushort, ushort2 or ushort3
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], int3 gid [[thread_position_in_grid]]) {
  y[gid.x] = 1.0f;
}
