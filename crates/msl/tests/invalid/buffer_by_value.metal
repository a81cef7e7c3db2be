// Invalid MSL (buffer by value): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 5.2.1 (locating buffer arguments).
// expect: 6: must be a device or constant pointer or reference
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], float scale [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  y[i] = scale;
}
