// Invalid MSL (function pointer): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features). Valid from a later version (function pointers are Metal 2.3): checked at 2.2.
// metal-version: 220
// expect: 10: function pointers are not supported
#include <metal_stdlib>
using namespace metal;
typedef float (*unary_fn)(float);
inline float neg(float x) { return -x; }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  unary_fn f = neg;
  y[i] = f(y[i]);
}
