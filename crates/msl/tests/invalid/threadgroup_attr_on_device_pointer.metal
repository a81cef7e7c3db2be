// Invalid MSL ([[threadgroup(0)]] on a device pointer): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.1 ([[threadgroup(n)]] is an attribute of threadgroup pointers and references).
// expect: 6: threadgroup
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], device float* scratch [[threadgroup(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = scratch[i];
}
