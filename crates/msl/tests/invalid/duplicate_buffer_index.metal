// Invalid MSL (duplicate buffer index): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.1 (locating buffer arguments).
// expect: 6: buffer index 0 is used twice
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* x [[buffer(0)]], device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = x[i];
}
