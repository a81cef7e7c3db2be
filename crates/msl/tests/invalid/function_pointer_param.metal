// Invalid MSL (function pointer param): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (Metal and C++: unsupported C++ features). Valid from a later version (function pointers are Metal 2.3): checked at 2.2.
// metal-version: 220
// expect: 7: function pointers are not supported
#include <metal_stdlib>
using namespace metal;
inline float apply(float (*f)(float), float x) { return f(x); }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = y[i];
}
