// Invalid MSL ([[thread_position_in_grid]] as ushort4): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.3.6 (positions are uint, uint2, uint3, ushort, ushort2 or ushort3).
// expect: 6: thread_position_in_grid
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], ushort4 i [[thread_position_in_grid]]) {
  y[i.x] = 1.0f;
}
