// Invalid MSL (overloaded kernels): g++ with the emulator's macros accepts it, Metal does not.
// Cites: MSL specification section 1.5 (overloading: graphics and kernel functions cannot be overloaded).
// expect: 9: overloaded
#include <metal_stdlib>
using namespace metal;
[[kernel]] void k(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] *= 2.0f;
}
[[kernel]] void k(device half* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  y[i] *= half(2.0f);
}
