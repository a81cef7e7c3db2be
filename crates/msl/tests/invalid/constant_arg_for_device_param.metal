// Invalid MSL (constant arg for device param): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification chapter 4 (address spaces: no conversion between them).
// expect: 8: no matching function
#include <metal_stdlib>
using namespace metal;
inline void put(device float* v, float x) { v[0] = x; }
[[kernel]] void k(constant float* c [[buffer(0)]], device float* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  put(c, 1.0f);
  y[i] = c[0];
}
