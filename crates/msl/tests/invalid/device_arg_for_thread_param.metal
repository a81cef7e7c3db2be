// Invalid MSL (device arg for thread param): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification chapter 4 (address spaces: no conversion between them).
// expect: 8: changes the address space
#include <metal_stdlib>
using namespace metal;
inline float first(thread const float* v) { return v[0]; }
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] = first(y);
}
