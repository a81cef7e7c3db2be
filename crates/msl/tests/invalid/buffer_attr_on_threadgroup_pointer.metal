// Invalid MSL ([[buffer(n)]] on a threadgroup pointer): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.1 (buffers are device or constant).
// expect: 6: buffer
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], threadgroup float* t [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  y[i] = t[i];
}
