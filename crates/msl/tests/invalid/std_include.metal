// Invalid MSL (std include): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features).
// expect: 6: the C++ standard library is not available
#include <metal_stdlib>
using namespace metal;
#include <cmath>
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = 1.0f;
}
